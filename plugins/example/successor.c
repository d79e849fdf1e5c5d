/*
 * successor.c - an example drafter, "example-successor": it guesses that
 * a token is followed by whatever followed it last time in the sequence,
 * and chains those guesses (next, then the successor of next, ...).
 *
 * It shows every drafter slot (tf/drafter.h) in a few lines: a key of its
 * own ([example-successor] max_depth), per-sequence state (the successor
 * of each token id, learnt as the sequence grows), a proposal, and a depth
 * policy fed by `observe`: it drafts as deep as its drafts have recently
 * been kept, plus one.  Whatever it proposes, the engine's verify keeps
 * the output exact; the conformance suite checks it as any drafter.
 */
#include <stdlib.h>
#include <string.h>

#include "tf/drafter.h"

struct succ {
	int max;                        /* [example-successor] max_depth */
	int vocab;
};

/* One sequence: its tokens learnt so far and the successor of each id
 * (-1: none seen); kept, an average of the drafts kept per step. */
struct succ_seq {
	int64_t seen;
	int32_t *next;                  /* [vocab] */
	double kept;
};

static const tf_plugin_key succ_keys[] = {
	{ .section = "example-successor", .name = "max_depth", .type = TF_KEY_INT, .min = 1,
	  .max = TF_DRAFT_MAX_DEPTH, .def = "4", .help = "Most tokens drafted per step." },
	{ .section = NULL },
};

static int succ_probe(const tf_host *h, const char **reason)
{
	if (!h->model) {
		*reason = "needs a model (its vocabulary)";
		return 0;
	}
	return 1;               /* below the in-tree drafters: named, never picked */
}

static int succ_init(const tf_host *h, void **inst)
{
	struct succ *g = malloc(sizeof(*g));
	int64_t max;
	int rc;
	if (!g)
		return h->error(h, TF_ERR_NOMEM, "example-successor: out of memory");
	if ((rc = h->conf_int(h, "example-successor", "max_depth", 4, &max)) != TF_OK) {
		free(g);
		return rc;
	}
	*g = (struct succ){ .max = (int)max, .vocab = h->model->vocab_size };
	*inst = g;
	return TF_OK;
}

static void succ_fini(void *inst) { free(inst); }

static int succ_max_depth(void *inst) { return ((struct succ *)inst)->max; }

static int succ_seq_new(void *inst, void **seq)
{
	const struct succ *g = inst;
	struct succ_seq *q = calloc(1, sizeof(*q));
	if (q && !(q->next = malloc((size_t)g->vocab * sizeof(*q->next)))) {
		free(q);
		q = NULL;
	}
	if (!q)
		return TF_ERR_NOMEM;
	memset(q->next, 0xff, (size_t)g->vocab * sizeof(*q->next));
	*seq = q;
	return TF_OK;
}

static void succ_seq_free(void *inst, void *seq)
{
	struct succ_seq *q = seq;
	(void)inst;
	if (q)
		free(q->next);
	free(q);
}

/* Learn the pairs of tokens the sequence gained since the last call; a
 * sequence cut shorter (truncated, rolled back) is learnt again. */
static void learn(const struct succ *g, struct succ_seq *q, const int32_t *tok, int64_t n)
{
	if (n < q->seen) {
		memset(q->next, 0xff, (size_t)g->vocab * sizeof(*q->next));
		q->seen = 0;
	}
	for (int64_t i = q->seen ? q->seen : 1; i < n; i++)
		q->next[tok[i - 1]] = tok[i];
	q->seen = n;
}

static int succ_propose(void *inst, void *seq, const tf_draft_req *r, int32_t *draft, int *n)
{
	const struct succ *g = inst;
	struct succ_seq *q = seq;
	learn(g, q, r->tokens, r->n_tokens);
	if (r->n_tokens)                /* next follows the last token now */
		q->next[r->tokens[r->n_tokens - 1]] = r->next;
	*n = 0;
	for (int32_t t = q->next[r->next]; *n < r->max && t >= 0 && t < r->vocab; t = q->next[t])
		draft[(*n)++] = t;
	return TF_OK;
}

/* As deep as recent steps kept, plus one. */
static int succ_depth(void *inst, void *seq, tf_draft_plan *plan)
{
	const struct succ_seq *q = seq;
	(void)inst;
	int d = 1 + (int)q->kept;
	return d < plan->max ? d : plan->max;
}

static void succ_observe(void *inst, void *seq, const tf_draft_outcome *o)
{
	struct succ_seq *q = seq;
	(void)inst;
	q->kept += (o->accepted - q->kept) / 4;
}

static const tf_plugin_drafter succ_drafter = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_drafter, TF_KIND_DRAFTER, "example-successor", "0.1.0",
				"example: each token's last successor, chained", succ_probe),
	.init = succ_init,
	.fini = succ_fini,
	.keys = succ_keys,
	.max_depth = succ_max_depth,
	.seq_new = succ_seq_new,
	.seq_free = succ_seq_free,
	.propose = succ_propose,
	.depth = succ_depth,
	.observe = succ_observe,
};

TF_EXPORT const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index)
{
	return index == 0 ? &succ_drafter : NULL;
}
