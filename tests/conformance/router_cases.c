/*
 * router_cases.c - every router on random gates and tokens, against the
 * plain reference router ling-ref: the same experts in the same order,
 * weights within 1e-5, and an answer tf_router_check accepts.  The cases
 * cover sigmoid and softmax scoring, with and without expert bias and
 * groups, renormalised or not, bf16 and f32 gates, one token and many.
 */
#include <stdio.h>
#include <stdlib.h>

#include "conformance.h"
#include "tf/router.h"

#define PREFIX "model.layers.1.mlp"

static const struct rt_case {
	int hidden, experts, top_k, groups, topk_groups;
	bool sigmoid, bias, norm;
	tf_dtype dtype;
	int tokens;
} cases[] = {
	{ 64, 32, 4, 4, 2, true, true, true, TF_DTYPE_BF16, 1 },
	{ 64, 32, 4, 4, 2, true, true, true, TF_DTYPE_BF16, 37 },
	{ 48, 64, 8, 8, 4, true, true, true, TF_DTYPE_F32, 20 },
	{ 40, 24, 6, 1, 1, true, false, false, TF_DTYPE_F32, 17 },
	{ 64, 16, 3, 4, 3, false, false, true, TF_DTYPE_BF16, 13 },
	{ 32, 8, 1, 8, 3, true, true, true, TF_DTYPE_F32, 9 },
	{ 48, 32, 4, 8, 3, true, false, true, TF_DTYPE_BF16, 21 },
};

static tf_model_config case_config(const struct rt_case *c)
{
	return (tf_model_config){
		.hidden_size = c->hidden, .num_experts = c->experts,
		.num_experts_per_tok = c->top_k, .n_group = c->groups,
		.topk_group = c->topk_groups, .routed_scaling_factor = 2.5f,
		.norm_topk_prob = c->norm, .score_sigmoid = c->sigmoid,
		.moe_router_enable_expert_bias = c->bias, .n_layers_total = 4,
	};
}

/* Route the case's tokens through `ops`; TF_OK and idx/w, or a status. */
static int route(const tf_plugin_router *ops, const tf_host *h, const struct rt_case *c,
		 const float *x, int32_t *idx, float *w)
{
	void *inst = NULL;
	int rc = ops->layer_init(h, 1, PREFIX, &inst);
	if (!rc)
		rc = ops->route(inst, x, c->tokens, idx, w);
	if (inst)
		ops->layer_fini(inst);
	return rc;
}

static void check_router(const tf_plugin_router *impl, const tf_plugin_router *ref,
			 cf_tally *t)
{
	const char *name = impl->hdr.name;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rt_case *c = &cases[i];
		tf_model_config cfg = case_config(c);
		tf_testhost *th = tf_testhost_new(&cfg, 2);
		const tf_host *h = tf_testhost_host(th);
		size_t nw = (size_t)c->experts * c->hidden, nk = (size_t)c->tokens * c->top_k;
		float *gate = malloc(nw * sizeof(float)), *bias = malloc(c->experts * sizeof(float));
		float *x = malloc((size_t)c->tokens * c->hidden * sizeof(float));
		float *w = malloc(nk * sizeof(float)), *rw = malloc(nk * sizeof(float));
		int32_t *idx = malloc(nk * sizeof(int32_t)), *ridx = malloc(nk * sizeof(int32_t));
		uint64_t seed = 500 + i;

		tf_test_fill_uniform(gate, nw, 0.3f, &seed);
		tf_test_fill_uniform(bias, (size_t)c->experts, 0.1f, &seed);
		tf_test_fill_uniform(x, (size_t)c->tokens * c->hidden, 1.0f, &seed);
		tf_testhost_add_f32(th, PREFIX ".gate.weight", c->dtype, 2,
				    (int64_t[]){ c->experts, c->hidden }, gate);
		if (c->bias)
			tf_testhost_add_f32(th, PREFIX ".gate.expert_bias", TF_DTYPE_F32, 1,
					    (int64_t[]){ c->experts }, bias);
		int rc = route(impl, h, c, x, idx, w), rr = route(ref, h, c, x, ridx, rw);
		if (cf_case(t, !rc && !rr, name, "case %zu: status %d (reference %d): %s", i, rc,
			    rr, tf_testhost_last_error(th))) {
			tf_router r = { .n_experts = c->experts, .top_k = c->top_k };
			int64_t tok;
			int slot;
			bool sound = !tf_router_check(&r, idx, w, c->tokens, &tok, &slot);
			bool same = true;
			for (size_t j = 0; j < nk; j++)
				same = same && idx[j] == ridx[j];
			cf_case(t, sound, name, "case %zu: unsound answer", i);
			cf_case(t, same, name, "case %zu: other experts than ling-ref", i);
			cf_case(t, cf_rel_err(w, rw, nk) <= 1e-5, name,
				"case %zu: weights off by %.3g", i, cf_rel_err(w, rw, nk));
		}
		free(gate);
		free(bias);
		free(x);
		free(w);
		free(rw);
		free(idx);
		free(ridx);
		tf_testhost_free(th);
	}
}

/* A placement that puts every expert on rank `tp_size - 1 + bad_rank`:
 * out of range when bad_rank is 1, else every other rank left empty. */
static int bad_rank;

static int bad_place(void *inst, int tp_size, int32_t *rank_of)
{
	const tf_router *r = inst;
	for (int e = 0; e < r->n_experts; e++)
		rank_of[e] = tp_size - 1 + bad_rank;
	return TF_OK;
}

/* tf_router_place's checks, on a router whose place slot answers wrongly. */
static void check_place_refusals(cf_tally *t)
{
	tf_plugin_router ops = { .hdr = TF_PLUGIN_HEADER(tf_plugin_router, TF_KIND_ROUTER, "bad",
							 "0", "", NULL),
				 .place = bad_place };
	tf_router r = { .ops = &ops, .n_experts = 8, .top_k = 2 };
	int32_t rank_of[8];

	r.impl = &r;
	bad_rank = 1;
	cf_case(t, tf_router_place(&r, 2, rank_of) == TF_ERR_INTERNAL, "tf_router_place",
		"a rank out of range is accepted");
	bad_rank = 0;
	cf_case(t, tf_router_place(&r, 2, rank_of) == TF_ERR_INTERNAL, "tf_router_place",
		"an empty rank is accepted");
	cf_case(t, tf_router_place(&r, 1, rank_of) == TF_OK, "tf_router_place",
		"one rank holding all refused");
}

/* ops's placement of case 0's layer on several rank counts. */
static void check_place(const tf_plugin_router *ops, bool is_ref, cf_tally *t)
{
	const struct rt_case *c = &cases[0];
	tf_model_config cfg = case_config(c);
	tf_testhost *th = tf_testhost_new(&cfg, 2);
	const tf_host *h = tf_testhost_host(th);
	size_t nw = (size_t)c->experts * c->hidden;
	float *gate = malloc(nw * sizeof(float)), *bias = malloc(c->experts * sizeof(float));
	int32_t *rank_of = malloc(c->experts * sizeof(int32_t));
	int32_t *again = malloc(c->experts * sizeof(int32_t));
	int32_t *list = malloc(c->experts * sizeof(int32_t));
	const char *name = ops->hdr.name;
	uint64_t seed = 900;
	tf_router r = { .ops = ops, .n_experts = c->experts, .top_k = c->top_k };

	tf_test_fill_uniform(gate, nw, 0.3f, &seed);
	tf_test_fill_uniform(bias, (size_t)c->experts, 0.1f, &seed);
	tf_testhost_add_f32(th, PREFIX ".gate.weight", c->dtype, 2,
			    (int64_t[]){ c->experts, c->hidden }, gate);
	tf_testhost_add_f32(th, PREFIX ".gate.expert_bias", TF_DTYPE_F32, 1,
			    (int64_t[]){ c->experts }, bias);
	if (!cf_case(t, !ops->layer_init(h, 1, PREFIX, &r.impl), name, "place: layer_init: %s",
		     tf_testhost_last_error(th)))
		goto out;
	const int tps[] = { 1, 2, 3, 5, 8, c->experts };
	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
		int tp = tps[i];
		for (int e = 0; e < c->experts; e++)
			rank_of[e] = again[e] = -7;
		int rc = tf_router_place(&r, tp, rank_of), rc2 = tf_router_place(&r, tp, again);
		if (!cf_case(t, !rc && !rc2, name, "place on %d ranks: status %d, %d", tp, rc, rc2))
			continue;
		bool same = true, blocks = true;
		int held = 0, most = 0, least = c->experts;
		for (int e = 0; e < c->experts; e++) {
			same = same && rank_of[e] == again[e];
			blocks = blocks && rank_of[e] == tf_router_block_rank(e, c->experts, tp);
		}
		for (int k = 0; k < tp; k++) {
			int n = tf_router_rank_experts(rank_of, c->experts, k, list);
			held += n;
			most = n > most ? n : most;
			least = n < least ? n : least;
			for (int j = 0; j < n; j++)
				blocks = blocks && rank_of[list[j]] == k && (!j || list[j] > list[j - 1]);
		}
		cf_case(t, same, name, "place on %d ranks: a second call differs", tp);
		cf_case(t, held == c->experts && least >= 1, name,
			"place on %d ranks: the rank lists hold %d of %d experts, smallest %d", tp,
			held, c->experts, least);
		if (is_ref)
			cf_case(t, blocks && most - least <= 1, name,
				"place on %d ranks: not contiguous balanced blocks (%d..%d)", tp,
				least, most);
	}
	cf_case(t, tf_router_place(&r, 0, rank_of) == TF_ERR_INVALID &&
		   tf_router_place(&r, c->experts + 1, rank_of) == TF_ERR_INVALID,
		name, "place on 0 or num_experts + 1 ranks accepted");
	ops->layer_fini(r.impl);
out:
	free(gate);
	free(bias);
	free(rank_of);
	free(again);
	free(list);
	tf_testhost_free(th);
}

void cf_check_router(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		     const tf_host *h, cf_tally *t)
{
	check_router((const tf_plugin_router *)impl->desc, (const tf_plugin_router *)ref->desc, t);
	check_place((const tf_plugin_router *)impl->desc, false, t);
	check_place((const tf_plugin_router *)ref->desc, true, t);
	check_place_refusals(t);
}
