/*
 * plugin.c - the drafter "ngram": prompt lookup (lookup.h), as llama.cpp's
 * lookup decoding and vLLM's ngram proposer draft.  No model: it reads
 * the sequence's own tokens and nothing else, so it works with any
 * checkpoint, and the verify keeps the output exact.  Every step with a
 * match drafts, or with [ngram] adaptive the depth that measured the most
 * tokens per second (plugins/draft-policy, as [mtp] adaptive).
 */
#include <stdlib.h>

#include "lookup.h"
#include "policy.h"
#include "tf/drafter.h"

struct ngram {
	int max, min_n, max_n;
	bool adaptive;
	double budget;
};

static const tf_plugin_key ngram_keys[] = {
	{ .section = "ngram", .name = "max_depth", .type = TF_KEY_INT, .min = 1,
	  .max = TF_DRAFT_MAX_DEPTH, .def = "4",
	  .help = "Most tokens drafted per step: the match's continuation is cut here." },
	{ .section = "ngram", .name = "min_n", .type = TF_KEY_INT, .min = 1, .max = 64,
	  .def = "2",
	  .help = "Shortest suffix of the sequence looked for earlier in it; no match this "
		  "long: a plain step." },
	{ .section = "ngram", .name = "max_n", .type = TF_KEY_INT, .min = 1, .max = 64,
	  .def = "4",
	  .help = "Longest suffix looked for (tried first, then shorter ones down to `min_n`)." },
	{ .section = "ngram", .name = "adaptive", .type = TF_KEY_BOOL, .def = "false",
	  .help = "Pick each sequence's depth by its measured tokens per second, as [mtp] "
		  "adaptive; false: every step with a match drafts." },
	{ .section = "ngram", .name = "budget", .type = TF_KEY_FLOAT, .min = 0, .max = 1,
	  .def = "0.02",
	  .help = "With `adaptive`: the share of decoding time drafting may cost beyond plain "
		  "decoding, as [mtp] budget." },
	{ .section = NULL },
};

static int ngram_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, conf_float)) {
		*reason = "host too old: needs conf_float (ABI 1.12)";
		return 0;
	}
	return 10;
}

static int ngram_init(const tf_host *h, void **inst)
{
	struct ngram *g = calloc(1, sizeof(*g));
	int64_t max, lo, hi;
	int rc;
	if (!g)
		return h->error(h, TF_ERR_NOMEM, "ngram: out of memory");
	if ((rc = h->conf_int(h, "ngram", "max_depth", 4, &max)) != TF_OK ||
	    (rc = h->conf_int(h, "ngram", "min_n", 2, &lo)) != TF_OK ||
	    (rc = h->conf_int(h, "ngram", "max_n", 4, &hi)) != TF_OK ||
	    (rc = h->conf_bool(h, "ngram", "adaptive", false, &g->adaptive)) != TF_OK ||
	    (rc = h->conf_float(h, "ngram", "budget", TF_DRAFT_BUDGET, &g->budget)) != TF_OK) {
		free(g);
		return rc;
	}
	if (lo > hi) {
		free(g);
		return h->error(h, TF_ERR_INVALID, "[ngram] min_n %lld is above [ngram] max_n %lld",
				(long long)lo, (long long)hi);
	}
	g->max = (int)max;
	g->min_n = (int)lo;
	g->max_n = (int)hi;
	*inst = g;
	return TF_OK;
}

static void ngram_fini(void *inst) { free(inst); }

static int ngram_max_depth(void *inst) { return ((struct ngram *)inst)->max; }

/* With adaptive, each sequence's policy. */
static int ngram_seq_new(void *inst, void **seq)
{
	const struct ngram *g = inst;
	tf_draft_policy *p = NULL;
	if (g->adaptive && !(p = malloc(sizeof(*p))))
		return TF_ERR_NOMEM;
	if (p)
		tf_draft_policy_init(p, g->max, g->budget);
	*seq = p;
	return TF_OK;
}

static void ngram_seq_free(void *inst, void *seq)
{
	(void)inst;
	free(seq);
}

static int ngram_depth(void *inst, void *seq, tf_draft_plan *plan)
{
	int k = seq ? tf_draft_policy_depth(seq, 0) : ((struct ngram *)inst)->max;
	return k < plan->max ? k : plan->max;
}

static void ngram_observe(void *inst, void *seq, const tf_draft_outcome *o)
{
	(void)inst;
	if (seq)
		tf_draft_policy_update(seq, o->asked, o->accepted, o->seconds, 0, 0);
}

static int ngram_propose(void *inst, void *seq, const tf_draft_req *r, int32_t *draft, int *n)
{
	const struct ngram *g = inst;
	(void)seq;
	int got = tf_ngram_lookup(r->tokens, r->n_tokens, r->next, g->min_n, g->max_n, r->max,
				  draft);
	/* A prompt may hold ids the sampler never picks (special tokens past
	 * its vocabulary): the proposal stops before the first. */
	*n = 0;
	while (*n < got && draft[*n] < r->vocab)
		(*n)++;
	return TF_OK;
}

static const tf_plugin_drafter ngram_drafter = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_drafter, TF_KIND_DRAFTER, "ngram", "0.1.0",
				"prompt lookup: the latest earlier match's continuation",
				ngram_probe),
	.init = ngram_init,
	.fini = ngram_fini,
	.keys = ngram_keys,
	.max_depth = ngram_max_depth,
	.seq_new = ngram_seq_new,
	.seq_free = ngram_seq_free,
	.propose = ngram_propose,
	.depth = ngram_depth,
	.observe = ngram_observe,
};

TF_EXPORT const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index)
{
	return index == 0 ? &ngram_drafter : NULL;
}
