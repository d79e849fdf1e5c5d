/*
 * plugin.c - the drafter "mtp": the checkpoint's MTP layer, run by the
 * host (tf_draft_req.mtp_row), drafts one token per row, each row fed the
 * one before; [mtp] p_min stops the chain where the head is unsure, and
 * [mtp] adaptive picks each sequence's depth (plugins/draft-policy).
 */
#include <math.h>
#include <stdlib.h>

#include "policy.h"
#include "tf/drafter.h"

struct mtp {
	int max;                        /* [mtp] max_depth */
	double p_min, budget;
	bool adaptive;
};

static const tf_plugin_key mtp_keys[] = {
	{ .section = "mtp", .name = "max_depth", .type = TF_KEY_INT, .min = 1,
	  .max = TF_DRAFT_MAX_DEPTH, .def = "2",
	  .help = "Most tokens drafted per step; every step drafts this many when `adaptive` "
		  "is false." },
	{ .section = "mtp", .name = "p_min", .type = TF_KEY_FLOAT, .min = 0, .max = 1,
	  .def = "0",
	  .help = "Stop drafting when the MTP head's top probability (softmax of its logits) "
		  "drops below this; a step whose first draft is cut is a plain step." },
	{ .section = "mtp", .name = "adaptive", .type = TF_KEY_BOOL, .def = "true",
	  .help = "Pick each sequence's depth, 0 (a plain step) to `max_depth`, by its "
		  "measured tokens per second (bench/mtp/README.md)." },
	{ .section = "mtp", .name = "budget", .type = TF_KEY_FLOAT, .min = 0, .max = 1,
	  .def = "0.02",
	  .help = "With `adaptive`: the share of a sequence's decoding time that drafting may "
		  "cost beyond plain decoding." },
	{ .section = NULL },
};

static int mtp_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, conf_float)) {
		*reason = "host too old: needs conf_float (ABI 1.12)";
		return 0;
	}
	return 10;
}

static int mtp_init(const tf_host *h, void **inst)
{
	struct mtp *m = calloc(1, sizeof(*m));
	int64_t max;
	int rc;
	if (!m)
		return h->error(h, TF_ERR_NOMEM, "mtp: out of memory");
	if ((rc = h->conf_int(h, "mtp", "max_depth", 2, &max)) != TF_OK ||
	    (rc = h->conf_float(h, "mtp", "p_min", 0, &m->p_min)) != TF_OK ||
	    (rc = h->conf_bool(h, "mtp", "adaptive", true, &m->adaptive)) != TF_OK ||
	    (rc = h->conf_float(h, "mtp", "budget", TF_DRAFT_BUDGET, &m->budget)) != TF_OK) {
		free(m);
		return rc;
	}
	m->max = (int)max;
	*inst = m;
	return TF_OK;
}

static void mtp_fini(void *inst) { free(inst); }

static int mtp_max_depth(void *inst) { return ((struct mtp *)inst)->max; }

static int mtp_seq_new(void *inst, void **seq)
{
	const struct mtp *m = inst;
	tf_draft_policy *p = malloc(sizeof(*p));
	if (!p)
		return TF_ERR_NOMEM;
	tf_draft_policy_init(p, m->max, m->budget);
	*seq = p;
	return TF_OK;
}

static void mtp_seq_free(void *inst, void *seq)
{
	(void)inst;
	free(seq);
}

/* The first of the n largest. */
static int32_t argmax(const float *x, int n)
{
	int32_t best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* The largest probability of softmax(x[0..n)): what p_min bounds. */
static double top_prob(const float *x, int n)
{
	float m = x[argmax(x, n)];
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += exp((double)x[i] - (double)m);
	return 1.0 / sum;
}

/* Row i of the MTP layer fed the token before: greedy, or drawn through
 * the sequence's sampler when the step judges drawn drafts. */
static int mtp_propose(void *inst, void *seq, const tf_draft_req *r, int32_t *draft, int *n)
{
	const struct mtp *m = inst;
	int32_t tok = r->next;
	(void)seq;
	*n = 0;
	if (!r->mtp_row)
		return TF_ERR_UNSUPPORTED;      /* the host opened no MTP layer */
	for (int i = 0; i < r->max; i++) {
		const float *row;
		int rc = r->mtp_row(r->ctx, i, tok, &row);
		if (rc != TF_OK)
			return rc;
		if (m->p_min > 0 && top_prob(row, r->vocab) < m->p_min)
			break;
		if (!r->sampled)
			tok = argmax(row, r->vocab);
		else if ((rc = r->draw(r->ctx, i, row, &tok)) != TF_OK)
			return rc;
		draft[(*n)++] = tok;
	}
	return TF_OK;
}

/* [mtp] adaptive's choice, or max_depth; idle while plain decoding is the
 * choice. */
static int mtp_depth(void *inst, void *seq, tf_draft_plan *plan)
{
	const struct mtp *m = inst;
	tf_draft_policy *p = seq;
	int k = m->adaptive ? tf_draft_policy_depth(p, plan->pending) : m->max;
	plan->idle = m->adaptive && p->best == 0;
	return k < plan->max ? k : plan->max;
}

static void mtp_observe(void *inst, void *seq, const tf_draft_outcome *o)
{
	(void)inst;
	tf_draft_policy_update(seq, o->asked, o->accepted, o->seconds, o->catch_seconds,
			     o->caught);
}

static const tf_plugin_drafter mtp_drafter = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_drafter, TF_KIND_DRAFTER, "mtp", "0.1.0",
				"the checkpoint's MTP layer, adaptive depth", mtp_probe),
	.init = mtp_init,
	.fini = mtp_fini,
	.keys = mtp_keys,
	.flags = TF_DRAFTER_MTP,
	.max_depth = mtp_max_depth,
	.seq_new = mtp_seq_new,
	.seq_free = mtp_seq_free,
	.propose = mtp_propose,
	.depth = mtp_depth,
	.observe = mtp_observe,
};

TF_EXPORT const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index)
{
	return index == 0 ? &mtp_drafter : NULL;
}
