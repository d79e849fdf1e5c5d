/*
 * plugin.c - the drafter "ngram": prompt lookup (lookup.h), as llama.cpp's
 * lookup decoding and vLLM's ngram proposer draft.  No model: it reads
 * the sequence's own tokens and nothing else, so it works with any
 * checkpoint, and the verify keeps the output exact.
 */
#include <stdlib.h>

#include "lookup.h"
#include "tf/drafter.h"

struct ngram {
	int max, min_n, max_n;
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
	{ .section = NULL },
};

static int ngram_probe(const tf_host *h, const char **reason)
{
	(void)h;
	(void)reason;
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
	    (rc = h->conf_int(h, "ngram", "max_n", 4, &hi)) != TF_OK) {
		free(g);
		return rc;
	}
	if (lo > hi) {
		free(g);
		return h->error(h, TF_ERR_INVALID, "[ngram] min_n %lld is above [ngram] max_n %lld",
				(long long)lo, (long long)hi);
	}
	*g = (struct ngram){ .max = (int)max, .min_n = (int)lo, .max_n = (int)hi };
	*inst = g;
	return TF_OK;
}

static void ngram_fini(void *inst) { free(inst); }

static int ngram_max_depth(void *inst) { return ((struct ngram *)inst)->max; }

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
	.propose = ngram_propose,
};

TF_EXPORT const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index)
{
	return index == 0 ? &ngram_drafter : NULL;
}
