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

void cf_check_router(const tf_candidate *impl, const tf_candidate *ref, const tf_host *h,
		     cf_tally *t)
{
	check_router((const tf_plugin_router *)impl->desc, (const tf_plugin_router *)ref->desc, t);
}
