/*
 * tf/engine.h - the library API: a model, its sequences, batched steps.
 *
 * A face (tfrun, the server, a test) opens a model description once and
 * runs any number of sequences on it:
 *
 *     tf_engine *e;
 *     if (tf_engine_open("conf/ling-nano.ini", NULL, 0, &e) != TF_OK)
 *         die(tf_engine_errmsg());
 *
 *     tf_seq_id a, b;
 *     tf_seq_new(e, &a);
 *     tf_seq_new(e, &b);
 *
 *     // prefill a's prompt; the logits of its last token come back
 *     tf_batch p = { .n = n_prompt, .token = prompt, .seq = NULL, .one_seq = a };
 *     tf_engine_forward(e, &p, logits, NULL);
 *
 *     // decode a and b together: one token each, one step
 *     int32_t tok[2] = { ta, tb };
 *     tf_seq_id who[2] = { a, b };
 *     tf_batch d = { .n = 2, .token = tok, .seq = who };
 *     tf_engine_forward(e, &d, logits, NULL);   // logits [2, vocab]
 *
 *     tf_seq_free(e, a);
 *     tf_seq_free(e, b);
 *     tf_engine_close(e);
 *
 * A step reads every weight once for all its rows: linears run as one
 * matmul over the rows of every sequence, the MoE groups rows by expert
 * across sequences, and attention applies each sequence's own state.  A
 * sequence's logits do not depend on which other sequences share its step.
 *
 * Sequences are small integers, never pointers: one that was freed, or
 * never made, is refused by name instead of read after free.  At most
 * [runtime] sequences are alive at once, each of at most [runtime] context
 * tokens; the memory plan checked at open that all of them fit.
 *
 * Errors: every call returns a tf_status (tf/error.h); the detail, naming
 * the sequence, position, file or key, is tf_engine_errmsg() on the same
 * thread.  A refused call (a bad id, position, token, a full context or
 * sequence table) leaves every sequence as it was.  An engine is not
 * thread-safe: one thread steps it at a time.
 *
 * What else a face needs sits beside this header: the INI's own keys
 * (tf/conf.h), tokens and text (tf/tokenizer.h, tf/detok.h, tf/text.h),
 * chat (tf/chat.h, tf/reply.h, tf/stopstr.h), checks without running
 * (tf/check.h) and failure messages (tf/diag.h).
 */
#ifndef TF_ENGINE_H
#define TF_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tf/conf.h"
#include "tf/error.h"
#include "tf/model.h"
#include "tf/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_engine tf_engine;

/* A sequence of one engine; negative is never a valid id. */
typedef int32_t tf_seq_id;

/* --- the engine --- */

/*
 * Read the INI (overrides: "section.key=value" strings over it), the
 * checkpoint and the plugins, check the memory plan, open every layer and
 * page the weights in.  On failure nothing stays open.
 */
int tf_engine_open(const char *ini_path, const char *const *overrides, int n_overrides,
		   tf_engine **out);
void tf_engine_close(tf_engine *e);

/* The detail of this thread's last failure ("" when none). */
const char *tf_engine_errmsg(void);

const tf_model_config *tf_engine_model(const tf_engine *e);
int tf_engine_vocab(const tf_engine *e);
int tf_engine_hidden_size(const tf_engine *e);
int64_t tf_engine_context(const tf_engine *e);  /* tokens per sequence */
/* Weight bytes a decoded token reads on this rank (the memory plan's
 * active bytes: every non-expert weight, the routed experts' top-k share):
 * over the memory's read bandwidth, decode's roofline. */
uint64_t tf_engine_active_bytes(const tf_engine *e);
/* Tokens a forward runs per step ([runtime] prefill_chunk): a face that
 * prefills in pieces of this size to show progress loses nothing. */
int64_t tf_engine_prefill_chunk(const tf_engine *e);
int tf_engine_max_seqs(const tf_engine *e);     /* alive at once */
/* The description it opened, overrides applied (tf/conf.h): a face reads
 * its own keys there ([sampling], [chat], [server]).  Valid until close. */
const tf_conf *tf_engine_conf(const tf_engine *e);

/* --- sequences --- */

/* A new, empty sequence.  TF_ERR_RANGE when [runtime] sequences are alive. */
int tf_seq_new(tf_engine *e, tf_seq_id *out);
/* Forget it; its id is refused from then on. */
int tf_seq_free(tf_engine *e, tf_seq_id s);
/* Tokens it holds, or -1 for an id that is not alive. */
int64_t tf_seq_len(const tf_engine *e, tf_seq_id s);
/* The tokens it holds (tf_seq_len of them), or NULL. */
const int32_t *tf_seq_tokens(const tf_engine *e, tf_seq_id s);

/* A new sequence holding a copy of src: its prefix need not be run again. */
int tf_seq_fork(tf_engine *e, tf_seq_id src, tf_seq_id *out);

/* Mark where s stands now; tf_seq_rollback returns it there.  One mark
 * per sequence: a later snapshot replaces it. */
int tf_seq_snapshot(tf_engine *e, tf_seq_id s);
int tf_seq_rollback(tf_engine *e, tf_seq_id s);

/*
 * Keep the first len tokens.  Recurrent state cannot be cut, so this goes
 * back to the mark when it lies at or before len (else to the start) and
 * runs the kept tokens after it again: cheap after a snapshot, a prefill
 * of len tokens without one.
 */
int tf_seq_truncate(tf_engine *e, tf_seq_id s, int64_t len);

/* --- sampling --- */

/*
 * s samples with p from now on (tf_sampler_params_default until set), over
 * token ids below n_vocab (0: all of them; a checkpoint may pad its
 * vocabulary past the tokenizer's ids).  A fork samples as its source.
 */
int tf_seq_set_sampling(tf_engine *e, tf_seq_id s, const tf_sampler_params *p, int n_vocab);

/*
 * A constraint on what a sequence may sample: sets the logits [vocab] of
 * every token that may not come next to -INFINITY; non-zero is an error
 * (its status).  A grammar is one (tf/grammar.h: tf_grammar_mask).
 */
typedef int (*tf_mask_fn)(void *ctx, float *logits);

/*
 * s's tokens from now on are drawn from those mask(ctx, ...) leaves (the
 * mask runs on the logits before the sampler); mask NULL lifts it.  ctx
 * stays the caller's, who advances it (tf_grammar_accept) with each token
 * s keeps.  A constrained sequence samples on the host and drafts nothing;
 * a fork is not constrained.
 */
int tf_seq_constrain(tf_engine *e, tf_seq_id s, tf_mask_fn mask, void *ctx);

/* The token to follow s, from the logits [vocab] of its last token: the
 * penalties see s's own tokens, the draw is the one for s's next position.
 * After a tf_seq_step that replaced a rejected draft ([draft] accept =
 * standard), the replacement, until s moves. */
int tf_seq_sample(tf_engine *e, tf_seq_id s, const float *logits, int32_t *token);

/*
 * Sampling where the logits are.  With deferral on, a forward (and
 * tf_seq_speculate, tf_seq_step) on a backend that samples (tf/backend.h's
 * sample slot; not under [tp]) leaves its logits in backend memory and
 * writes the caller's buffer only when needed: tf_seq_sample on one of
 * its rows picks there whenever the backend reproduces the sequence's
 * sampler exactly (on backend-cuda: greedy, or top_k 1..64 and below the
 * vocabulary, with no repetition or presence penalty), and downloads the
 * rows and picks on the host otherwise; so does a verify's check of its
 * drafts ([draft] accept = exact).  A later forward into another buffer,
 * or a draft, writes them first.  A caller that reads the logits itself calls
 * tf_engine_logits_wait before.  Off by default, and a no-op on a backend
 * that cannot sample.
 */
void tf_engine_defer_logits(tf_engine *e, bool on);
/* Write the logits a forward still owes its caller's buffer. */
int tf_engine_logits_wait(tf_engine *e);
/* Tokens picked by the backend's sampler since tf_engine_open. */
int64_t tf_engine_device_samples(const tf_engine *e);

/*
 * --- speculation ---
 *
 * With a drafter ([plugins] drafter, or [mtp] enabled for `mtp`; tf/drafter.h)
 * a step can verify drafts.  A drafter that runs the MTP layer opens it:
 * each sequence holds its state too (forks, snapshots and truncation
 * cover it), and every step keeps the rows it will need, so any sequence
 * can draft at once.
 */

/* The drafter's most drafts per step (its max_depth), or 0: no drafter. */
int tf_engine_draft_depth(const tf_engine *e);
/* The drafter's name, or "none". */
const char *tf_engine_drafter(const tf_engine *e);
/* Whether the MTP layer is open (the drafter runs it): tf_seq_draft. */
bool tf_engine_has_mtp(const tf_engine *e);

/*
 * Draft depth tokens greedily with the MTP layer after s's last token and
 * next, the token to follow it: draft[0] guesses the token after next,
 * draft[i] the one after draft[i - 1], each MTP row fed the output of the
 * one before (spec 4.2).  logits, when not NULL, receives
 * the MTP head's [depth, vocab] rows the drafts were picked from; with
 * depth 1 and the true next token, row 0 is the teacher-forced MTP
 * prediction.  s is left as it was.  Needs the MTP layer open (a drafter
 * that runs it), not the drafter itself.
 */
int tf_seq_draft(tf_engine *e, tf_seq_id s, int32_t next, int depth, int32_t *draft,
		 float *logits);

/*
 * One speculative step of s, exact against tf_seq_sample: from the logits
 * [vocab] of s's last token, sample the next token, ask the drafter for
 * up to depth more (1..tf_engine_draft_depth) after it, run them all in
 * one batch and keep the drafts up to the first one tf_seq_sample would
 * not have chosen at its position.  tokens [depth + 1] receives the *n
 * tokens s now holds beyond what it held (the sampled one and the drafts
 * kept), logits the logits of the last of them: the state serial decoding
 * reaches after *n tokens.  The verify takes a snapshot of its own (s's
 * from tf_seq_snapshot stays where it was); the drafts not kept are
 * undone by going back to it and running the attention of the kept rows
 * again from the inputs the verify computed (the FFNs and the head hold
 * no state).  TF_ERR_RANGE when depth + 1 tokens do not fit the context.
 */
int tf_seq_speculate(tf_engine *e, tf_seq_id s, int depth, float *logits, int32_t *tokens,
		     int *n);

/*
 * One decode step of s, at most max_depth drafts (0..tf_engine_draft_depth):
 * like tf_seq_speculate, but the depth is the drafter's choice for s (the
 * mtp drafter's [mtp] adaptive: its measured tokens per second at each
 * depth; 0: a plain step), the drafter sees how the step went, and the
 * drafts are judged by [draft] accept.  exact: as tf_seq_speculate, the
 * tokens of serial decoding.  standard, with a temperature: drafts kept
 * with probability min(1, p/q) (q: the distribution the drafter drew from,
 * or all on the draft), a rejected one replaced by a draw from the
 * residual max(0, p - q) -- the tokens are distributed as serial
 * decoding's, not equal to them -- and the replacement is the next step's
 * first token (tf_seq_sample returns it).  *drafted: the drafts made, the
 * first *n - 1 of them kept.  A drafter's failure fails the step, naming
 * it; the sequence stays as it was, and no other sequence is touched.
 */
int tf_seq_step(tf_engine *e, tf_seq_id s, int max_depth, float *logits, int32_t *tokens,
		int *n, int *drafted);

/*
 * One decode step of several sequences in one batch: each samples its
 * next token from its logits and drafts up to max_depth more as the
 * drafter chooses (0, or no drafter: a plain step), then one forward of
 * the main model verifies every sequence's rows at once, and each keeps
 * or undoes its own drafts as tf_seq_step would alone.  A sequence's
 * tokens never depend on the others in the step: with [draft] accept =
 * exact they are serial decoding's.  The arrays are the caller's; each
 * step's logits is read first and written last, so a row of a shared
 * buffer is fine.  A sequence whose own part fails (its drafter, a
 * refusal) has its status and message set and is left as it was; the
 * others go on.  Returns TF_OK, or the shared forward's failure (every
 * sequence in it then has it as its status).
 *
 *     tf_spec_step st[2] = { { .seq = a, .max_depth = 3, .logits = la, .tokens = ta },
 *                            { .seq = b, .max_depth = 3, .logits = lb, .tokens = tb } };
 *     tf_engine_step(e, st, 2);   // st[0].n tokens ta[0..n) joined a, ...
 */
typedef struct tf_spec_step {
	tf_seq_id seq;                  /* in: each sequence at most once */
	int max_depth;                  /* in: 0..tf_engine_draft_depth */
	bool fixed;                     /* in: draft max_depth, not the drafter's choice
					 * (as tf_seq_speculate) */
	float *logits;                  /* in: [vocab], its last token's; out: its new last's */
	int32_t *tokens;                /* out: [max_depth + 1], the tokens it gained */
	int n;                          /* out: how many (0 when its status is not TF_OK) */
	int drafted;                    /* out: drafts made, the first n - 1 kept */
	int status;                     /* out: TF_OK, or why its step failed */
	char error[256];                /* out: the failure's message */
} tf_spec_step;

int tf_engine_step(tf_engine *e, tf_spec_step *steps, int n);

/* --- steps --- */

/*
 * n tokens, each continuing its sequence: seq[i] is token i's sequence, or
 * seq is NULL and all belong to one_seq.  A sequence's tokens keep their
 * order; sequences may interleave.  pos, when not NULL, states each
 * token's position, and a token whose position is not its sequence's next
 * is refused (a gap or an overlap), as is a sequence pushed past the
 * context or a token outside the vocabulary.
 *
 * out[i] nonzero asks for token i's logits (and hidden state); out NULL
 * asks for the last token of each sequence in the batch.
 */
typedef struct tf_batch {
	int64_t n;
	const int32_t *token;
	const tf_seq_id *seq;
	tf_seq_id one_seq;
	const int32_t *pos;
	const uint8_t *out;
} tf_batch;

/* Rows tf_engine_forward writes for b: how many tokens it asks for. */
int64_t tf_batch_outputs(const tf_batch *b);

/*
 * Run a batch.  logits, when not NULL, receives [outputs, vocab] float32
 * rows, in batch order of the tokens asked for; hidden, when not NULL,
 * their final-normed hidden states [outputs, hidden_size] (the MTP layer's
 * input).  A batch of more than [runtime] prefill_chunk tokens runs in
 * several steps.  A refused batch moves no sequence; a failure inside a
 * step (out of memory, a device error) leaves the sequences of that batch
 * unusable until truncated, the others as they were.
 */
int tf_engine_forward(tf_engine *e, const tf_batch *b, float *logits, float *hidden);

/* --- tensor parallel ([tp] size > 1) --- */

/*
 * Each rank opens the same INI with its own tp.rank (tf_engine_open
 * connects the ranks, refusing at the handshake ranks whose checkpoint or
 * settings differ, per-host keys aside: tf/tp.h).  Rank 0's engine is used
 * as any other; the rest call tf_engine_follow, which replays each call
 * rank 0 makes that changes a sequence (new, free, fork, snapshot,
 * rollback, truncate, forward, draft; a speculative step or tf_seq_step is
 * these, with the undoing of rejected drafts, which each rank does from
 * its own run of the verify) until rank 0 closes its engine: TF_OK then,
 * or the failure naming the peer and the step when a rank dies or stalls
 * past [tp] timeout.  Rank 0 alone samples: its tokens reach the others in
 * its next forward, and its drafter runs on it alone: the MTP rows the
 * drafter asks for run on every rank, rank 0 telling each row's token.
 * While rank 0 makes no call (a chat waiting for its user) a thread of its engine sends a heartbeat every third of [tp] timeout,
 * so the followers wait for as long as rank 0 lives.
 */
int tf_engine_tp_rank(const tf_engine *e);      /* 0 without tensor parallelism */
int tf_engine_follow(tf_engine *e);

/* --- what the time went to --- */

/* Stages of a step: embed, kda, mla, dense, moe, norm+residual, lm_head,
 * other (a layer type a plugin adds, the MTP layer's eh_proj), tp-comm
 * (tensor parallel: inside the all-reduces and all-gathers); the MTP
 * layer's attention and FFN count under their types. */
int tf_engine_stage_count(void);
const char *tf_engine_stage_name(int stage);
/* Seconds spent in a stage since open or the last reset. */
double tf_engine_stage_seconds(const tf_engine *e, int stage);

/*
 * MoE routing since open or the last reset, over every pass of a MoE layer
 * (the MTP layer's too): experts / passes is the mean union of experts a
 * pass's rows route to, the weights it reads; it grows as more sequences
 * share a step.  slots / passes is rows x experts per token.
 */
typedef struct tf_moe_stats {
	uint64_t passes, slots, experts;
} tf_moe_stats;
tf_moe_stats tf_engine_moe_stats(const tf_engine *e);

/*
 * Decode steps run as device graphs ([runtime] cuda_graph on a backend
 * with graph slots) since open or the last reset: `steps` (decode steps,
 * verifies, MTP drafts and their catch-ups) ran as graphs, `runs` graphs
 * ran for them (one a step, or a part between each two host waits: tensor
 * parallelism's all-reduces), `built` of those built a new executable
 * graph (a part's first time, and each time its nodes differ from the
 * graphs kept for its place in the step: a cache page taken, a state's
 * first use); the rest replayed a kept graph with their own parameters.
 */
typedef struct tf_graph_stats {
	uint64_t steps, runs, built;
} tf_graph_stats;
tf_graph_stats tf_engine_graph_stats(const tf_engine *e);

/* Zero the stage seconds, the MoE counts and the graph counts. */
void tf_engine_stats_reset(tf_engine *e);

#ifdef __cplusplus
}
#endif
#endif /* TF_ENGINE_H */
