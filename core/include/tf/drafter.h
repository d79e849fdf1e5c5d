/*
 * tf/drafter.h - the drafter kind: speculative token proposals.
 *
 * A speculative step of a sequence (tf_seq_step, tf/engine.h): the core
 * samples the sequence's next token, asks the drafter for up to k tokens
 * to follow it, runs all k + 1 in one verify batch of the main model,
 * keeps the drafts up to the first one the accept rule refuses ([draft]
 * accept) and undoes the rest.  The verify, the accept rules and the
 * undoing are the core's, so whatever a drafter proposes, the tokens are
 * serial decoding's (exact) or distributed as serial decoding's
 * (standard): a drafter decides only how many tokens a step gains.
 *
 * [plugins] drafter names it (`mtp`, `ngram`, a plugin's own name; `none`:
 * no drafting); with no name, [mtp] enabled = true means `mtp`.  Its own
 * INI keys it declares (tf_plugin_key); [draft] accept is the core's.
 *
 * Under tensor parallelism the drafter runs on rank 0 alone; the MTP rows
 * it asks for run on every rank (the host sends them), so a drafter never
 * sees more than one rank.
 */
#ifndef TF_DRAFTER_H
#define TF_DRAFTER_H

#include <stdbool.h>

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tf_plugin_drafter.flags: the drafter runs the checkpoint's MTP layer
 * (tf_draft_req.mtp_row); the core opens the layer and feeds it every
 * sequence's rows. */
#define TF_DRAFTER_MTP 1u

/* A step drafts at most this many tokens. */
#define TF_DRAFT_MAX_DEPTH 16

/*
 * One proposal: what the core gives a drafter for one step of one
 * sequence, and the host services it may call during the call.
 */
typedef struct tf_draft_req {
	/* The sequence's tokens so far, and the token the step feeds first
	 * (sampled already, not in tokens yet): drafts guess what follows
	 * next, draft[0] the token after next. */
	const int32_t *tokens;
	int64_t n_tokens;
	int32_t next;
	int vocab;                      /* drafts lie in [0, vocab) */
	int max;                        /* at most this many drafts, >= 1 */
	/* The step judges drafts by [draft] accept = standard at a
	 * temperature > 0: a drafter with a distribution should draw from it
	 * through `draw`, which tells the accept rule where the draft came
	 * from.  A draft not drawn counts as certain (kept with the
	 * probability the main model gives it), which keeps any proposal
	 * exact in distribution. */
	bool sampled;

	void *ctx;                      /* pass back to the services */
	/*
	 * TF_DRAFTER_MTP: row i of the MTP layer, fed token `tok` (row 0:
	 * `next`, after the main model's last row; row i: the token drafted
	 * at row i - 1, after row i - 1's output), and the head: *logits
	 * [vocab] until the next call.  Rows go 0, 1, 2 ... without gaps,
	 * at most `max`.  NULL for other drafters.
	 */
	int (*mtp_row)(void *ctx, int i, int32_t tok, const float **logits);
	/* Draft i drawn from the sequence's own sampler (its temperature,
	 * top-k/p, penalties) over `logits` [vocab], at a random stream of
	 * its own: what `sampled` asks for. */
	int (*draw)(void *ctx, int i, const float *logits, int32_t *tok);
} tf_draft_req;

/* How deep the next step drafts (the `depth` slot). */
typedef struct tf_draft_plan {
	int max;                        /* in: the most the step may draft */
	/* in: TF_DRAFTER_MTP: rows the MTP layer has to catch up with before
	 * its next draft (what drafting now costs beyond its rows). */
	int64_t pending;
	/* out: the drafter does not expect to draft soon: the MTP layer may
	 * skip the rows it would have to catch up with (a later draft feeds
	 * the recent ones; drafts stay proposals, the output exact). */
	bool idle;
} tf_draft_plan;

/* What a step did (the `observe` slot). */
typedef struct tf_draft_outcome {
	int asked;                      /* the depth `depth` gave */
	int drafted;                    /* drafts proposed */
	int accepted;                   /* of them kept, the first `accepted` */
	double seconds;                 /* the step's wall time: drafts, verify, undoing */
	/* TF_DRAFTER_MTP: of those seconds, feeding the MTP layer `caught`
	 * rows it had not seen. */
	double catch_seconds;
	int64_t caught;
} tf_draft_outcome;

typedef struct tf_plugin_drafter {
	tf_plugin_header hdr;
	int (*init)(const tf_host *h, void **inst);
	void (*fini)(void *inst);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;

	/* Since ABI 1.12; a drafter of an older minor cannot draft and is
	 * refused.  Required: max_depth, propose. */
	unsigned flags;                 /* TF_DRAFTER_* */
	/* The most drafts a step of this instance asks for, 1..
	 * TF_DRAFT_MAX_DEPTH: the core sizes the verify by it. */
	int (*max_depth)(void *inst);
	/* Optional: state of one sequence (its statistics), made when the
	 * sequence is, freed with it.  NULL *seq is allowed. */
	int (*seq_new)(void *inst, void **seq);
	void (*seq_free)(void *inst, void *seq);
	/* Up to req->max drafts into draft, *n of them (0: none; the step is
	 * a plain one).  An id outside [0, vocab) or more than max fails the
	 * step naming the plugin; an error it returns (h->error) fails the
	 * step, leaving the sequence as it was. */
	int (*propose)(void *inst, void *seq, const tf_draft_req *req, int32_t *draft, int *n);
	/* Optional: the depth of the sequence's next step, 0..plan->max (0:
	 * plain).  Without it every step asks for plan->max. */
	int (*depth)(void *inst, void *seq, tf_draft_plan *plan);
	/* Optional: what the step `depth` planned did. */
	void (*observe)(void *inst, void *seq, const tf_draft_outcome *o);
} tf_plugin_drafter;

const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_DRAFTER_H */
