/*
 * test_router.c - the router plugins of router.so ("ling" and the plain
 * "ling-ref"), each opened through the test host as the moe plugin opens
 * them, against the float64 reference: random routing, and hand-made
 * scores where the group rule, the expert bias or a tie decides the
 * outcome.  Every case runs against both routers.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_ref.h"
#include "support/testhost.h"
#include "tf/router.h"

#define PREFIX "model.layers.1.mlp"

static const char *const routers[] = { "ling", "ling-ref" };
#define N_ROUTERS (sizeof(routers) / sizeof(routers[0]))

typedef struct rt {
	tf_testhost *th;
	const tf_host *h;
	tf_router r;
	moe_ref_router ref;
	float *weight, *bias;
} rt;

static tf_model_config rt_config(int hidden, int E, int k, int G, int TG)
{
	return (tf_model_config){
		.hidden_size = hidden, .num_experts = E, .num_experts_per_tok = k,
		.n_group = G, .topk_group = TG, .routed_scaling_factor = 2.5f,
		.norm_topk_prob = true, .score_sigmoid = true,
		.moe_router_enable_expert_bias = true, .n_layers_total = 4,
	};
}

/* Router tensors, rounded to `dt` so the reference sees the same values:
 * random, or `gate` and `bias` when given; bias_name NULL stores no bias. */
static void rt_tensors_of(rt *t, const tf_model_config *c, tf_dtype dt,
			  const char *bias_name, uint64_t seed, const float *gate,
			  const float *bias)
{
	size_t nw = (size_t)c->num_experts * c->hidden_size;
	t->th = tf_testhost_new(c, 2);
	t->h = tf_testhost_host(t->th);
	t->r = (tf_router){ 0 };
	t->weight = malloc(nw * sizeof(float));
	t->bias = malloc((size_t)c->num_experts * sizeof(float));
	tf_test_fill_uniform(t->weight, nw, 0.3f, &seed);
	tf_test_fill_uniform(t->bias, (size_t)c->num_experts, 0.1f, &seed);
	if (gate)
		memcpy(t->weight, gate, nw * sizeof(float));
	if (bias)
		memcpy(t->bias, bias, (size_t)c->num_experts * sizeof(float));
	for (size_t i = 0; dt != TF_DTYPE_F32 && i < nw; i++)
		t->weight[i] = dt == TF_DTYPE_BF16 ? tf_bf16_to_f32(tf_f32_to_bf16(t->weight[i]))
						   : tf_f16_to_f32(tf_f32_to_f16(t->weight[i]));
	tf_testhost_add_f32(t->th, PREFIX ".gate.weight", dt, 2,
			    (int64_t[]){ c->num_experts, c->hidden_size }, t->weight);
	if (bias_name)
		tf_testhost_add_f32(t->th, bias_name, TF_DTYPE_F32, 1,
				    (int64_t[]){ c->num_experts }, t->bias);
	t->ref = (moe_ref_router){
		.hidden = c->hidden_size, .n_experts = c->num_experts,
		.top_k = c->num_experts_per_tok, .n_group = c->n_group,
		.topk_group = c->topk_group, .sigmoid = c->score_sigmoid,
		.norm_topk = c->norm_topk_prob, .scaling = c->routed_scaling_factor,
		.weight = t->weight,
		.bias = c->moe_router_enable_expert_bias ? t->bias : NULL,
	};
}

static void rt_tensors(rt *t, const tf_model_config *c, tf_dtype dt,
		       const char *bias_name, uint64_t seed)
{
	rt_tensors_of(t, c, dt, bias_name, seed, NULL, NULL);
}

/* Open the router named `name` as the moe plugin would. */
static int rt_router_open(rt *t, const char *name)
{
	tf_testhost_set_conf(t->th, "plugins", "router", name);
	return t->h->router_open(t->h, 1, PREFIX, &t->r);
}

static void rt_open(rt *t, const char *name, const tf_model_config *c, tf_dtype dt,
		    const char *bias_name, uint64_t seed)
{
	rt_tensors(t, c, dt, bias_name, seed);
	int rc = rt_router_open(t, name);
	cr_assert_eq(rc, TF_OK, "%s init: %s", name, tf_testhost_last_error(t->th));
	cr_assert_str_eq(t->r.ops->hdr.name, name);
}

static void rt_free(rt *t)
{
	t->h->router_close(t->h, &t->r);
	tf_testhost_free(t->th);
	free(t->weight);
	free(t->bias);
}

/* Route n random tokens through each router and the reference and require
 * the same experts, in the same order, with weights within fp32 rounding. */
static void check_random_bias(const tf_model_config *c, tf_dtype dt, const char *bias_name,
			      int n, uint64_t seed)
{
	int k = c->num_experts_per_tok, H = c->hidden_size;
	float *x = malloc(sizeof(float) * n * H), *w = malloc(sizeof(float) * n * k);
	int32_t *idx = malloc(sizeof(int32_t) * n * k), ref_idx[64];
	double ref_w[64];

	for (size_t ri = 0; ri < N_ROUTERS; ri++) {
		rt t;
		uint64_t xs = seed + 1000;
		rt_open(&t, routers[ri], c, dt, bias_name, seed);
		tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &xs);
		for (int i = 0; i < n * k; i++) {
			idx[i] = -1;
			w[i] = NAN;
		}
		cr_assert_eq(t.h->router_route(t.h, &t.r, x, n, idx, w), TF_OK, "%s: %s",
			     routers[ri], tf_testhost_last_error(t.th));
		for (int i = 0; i < n; i++) {
			moe_ref_route(&t.ref, x + i * H, ref_idx, ref_w);
			for (int j = 0; j < k; j++) {
				cr_assert_eq(idx[i * k + j], ref_idx[j], "%s token %d choice %d: %d, ref %d",
					     routers[ri], i, j, idx[i * k + j], ref_idx[j]);
				cr_assert(fabs(w[i * k + j] - ref_w[j]) <= 1e-5 * fabs(ref_w[j]) + 1e-7,
					  "%s token %d weight %d: %g, ref %g", routers[ri], i, j,
					  w[i * k + j], ref_w[j]);
			}
		}
		rt_free(&t);
	}
	free(x);
	free(w);
	free(idx);
}

static void check_random(const tf_model_config *c, tf_dtype dt, int n, uint64_t seed)
{
	check_random_bias(c, dt, PREFIX ".gate.expert_bias", n, seed);
}

Test(router, sigmoid_grouped_bias_vs_reference)
{
	tf_model_config c = rt_config(52, 32, 4, 4, 2);
	check_random(&c, TF_DTYPE_BF16, 29, 11);
}

Test(router, ungrouped_unnormalised_vs_reference)
{
	tf_model_config c = rt_config(40, 24, 6, 1, 1);
	c.norm_topk_prob = false;
	c.moe_router_enable_expert_bias = false;
	check_random(&c, TF_DTYPE_F32, 17, 12);
}

Test(router, softmax_scoring_vs_reference)
{
	tf_model_config c = rt_config(64, 16, 3, 4, 3);
	c.score_sigmoid = false;
	check_random(&c, TF_DTYPE_F16, 13, 13);
}

Test(router, single_expert_groups_and_top1)
{
	/* Groups of one expert score by that one value; top-1 is not renormalised. */
	tf_model_config c = rt_config(24, 8, 1, 8, 3);
	check_random(&c, TF_DTYPE_BF16, 9, 14);
}

/*
 * Route one token from probabilities given directly (logit = log(p/(1-p)))
 * through router `name`: hidden = num_experts and an identity gate, so the
 * token is its own logits (exact in fp32), and the bias stored as given.
 */
static void select_from(const char *name, const tf_model_config *cfg, const float *p,
			const float *bias, int32_t *idx, float *w, int32_t *ref_idx,
			double *ref_w)
{
	tf_model_config c = *cfg;
	int E = c.num_experts;
	rt t;
	float *x = malloc(sizeof(float) * E), *eye = calloc((size_t)E * E, sizeof(float));
	double *dlogits = malloc(sizeof(double) * E);

	c.hidden_size = E;
	for (int e = 0; e < E; e++) {
		eye[e * (E + 1)] = 1;
		dlogits[e] = log((double)p[e] / (1.0 - p[e]));
		x[e] = (float)dlogits[e];
	}
	rt_tensors_of(&t, &c, TF_DTYPE_F32,
		      c.moe_router_enable_expert_bias ? PREFIX ".gate.expert_bias" : NULL, 1,
		      eye, bias);
	cr_assert_eq(rt_router_open(&t, name), TF_OK, "%s", tf_testhost_last_error(t.th));
	cr_assert_eq(t.h->router_route(t.h, &t.r, x, 1, idx, w), TF_OK, "%s: %s", name,
		     tf_testhost_last_error(t.th));
	moe_ref_select(&t.ref, dlogits, ref_idx, ref_w);
	free(x);
	free(eye);
	free(dlogits);
	rt_free(&t);
}

Test(router, group_rule_beats_plain_topk)
{
	for (size_t ri = 0; ri < N_ROUTERS; ri++) {
		const char *name = routers[ri];

		/* Group 0 holds the best expert (0.95) but the worst pair sum (1.0);
		 * groups 1 and 2 (1.2, 1.16) win, so expert 0 is out. */
		static const float p[8] = { 0.95f, 0.05f, 0.6f, 0.6f, 0.59f, 0.57f, 0.3f, 0.2f };
		static const float zero[8];
		int32_t idx[3], ref_idx[3];
		float w[3];
		double ref_w[3];
		tf_model_config c = rt_config(8, 8, 3, 4, 2);

		select_from(name, &c, p, zero, idx, w, ref_idx, ref_w);
		int32_t grouped[3] = { 2, 3, 4 };
		cr_assert_arr_eq(idx, grouped, sizeof(grouped));
		cr_assert_arr_eq(ref_idx, grouped, sizeof(grouped));
		double sum = 0.6 + 0.6 + 0.59;
		for (int j = 0; j < 3; j++)
			cr_assert_float_eq(w[j], 2.5 * p[grouped[j]] / sum, 1e-6);

		/* Without expert bias a group scores by its best expert (vLLM): groups
		 * 0 and 1 win, and so does expert 0. */
		int32_t by_max[3] = { 0, 2, 3 };
		c.moe_router_enable_expert_bias = false;
		select_from(name, &c, p, zero, idx, w, ref_idx, ref_w);
		cr_assert_arr_eq(idx, by_max, sizeof(by_max));
		cr_assert_arr_eq(ref_idx, by_max, sizeof(by_max));

		c.moe_router_enable_expert_bias = true;
		c.n_group = 1;
		select_from(name, &c, p, zero, idx, w, ref_idx, ref_w);
		int32_t plain[3] = { 0, 2, 3 };
		cr_assert_arr_eq(idx, plain, sizeof(plain));
		cr_assert_arr_eq(ref_idx, plain, sizeof(plain));
	}
}

Test(router, grouped_without_bias_vs_reference)
{
	tf_model_config c = rt_config(48, 32, 4, 8, 3);
	c.moe_router_enable_expert_bias = false;
	check_random(&c, TF_DTYPE_BF16, 21, 15);
}

Test(router, bias_moves_selection_not_weights)
{
	for (size_t ri = 0; ri < N_ROUTERS; ri++) {
		const char *name = routers[ri];

		static const float p[8] = { 0.9f, 0.8f, 0.7f, 0.1f, 0.2f, 0.15f, 0.3f, 0.25f };
		float bias[8] = { 0 };
		int32_t idx[2], ref_idx[2];
		float w[2];
		double ref_w[2];
		tf_model_config c = rt_config(8, 8, 2, 1, 1);

		select_from(name, &c, p, bias, idx, w, ref_idx, ref_w);
		cr_assert(idx[0] == 0 && idx[1] == 1);
		bias[5] = 1.0f;                 /* 0.15 + 1 now ranks first */
		select_from(name, &c, p, bias, idx, w, ref_idx, ref_w);
		cr_assert(idx[0] == 5 && idx[1] == 0, "picked %d %d", idx[0], idx[1]);
		cr_assert(ref_idx[0] == 5 && ref_idx[1] == 0);
		/* Weights come from the unbiased scores. */
		cr_assert_float_eq(w[0], 2.5 * 0.15 / (0.15 + 0.9), 1e-6);
		cr_assert_float_eq(w[1], 2.5 * 0.9 / (0.15 + 0.9), 1e-6);
	}
}

Test(router, ties_go_to_the_lower_index)
{
	for (size_t ri = 0; ri < N_ROUTERS; ri++) {
		const char *name = routers[ri];

		float p[16];
		static const float zero[16];
		int32_t idx[4], ref_idx[4];
		float w[4];
		double ref_w[4];
		tf_model_config c = rt_config(8, 16, 4, 4, 2);

		for (int e = 0; e < 16; e++)
			p[e] = 0.5f;
		select_from(name, &c, p, zero, idx, w, ref_idx, ref_w);
		for (int j = 0; j < 4; j++) {
			cr_assert_eq(idx[j], j);
			cr_assert_eq(ref_idx[j], j);
			cr_assert_float_eq(w[j], 2.5 / 4, 1e-6);
		}
		/* Group 3's pair sum (1.4) keeps it beside group 0, the lowest of the
		 * tied rest; the other picks tie at 0.5 and go to the lower indices. */
		p[15] = 0.9f;
		select_from(name, &c, p, zero, idx, w, ref_idx, ref_w);
		int32_t want[4] = { 15, 0, 1, 2 };
		cr_assert_arr_eq(idx, want, sizeof(want));
		cr_assert_arr_eq(ref_idx, want, sizeof(want));
	}
}

Test(router, nan_input_stays_in_range)
{
	/* NaN scores give NaN weights, which the host refuses; the router
	 * itself must still answer distinct experts in range. */
	tf_model_config c = rt_config(16, 16, 4, 4, 2);
	for (size_t ri = 0; ri < N_ROUTERS; ri++) {
		rt t;
		rt_open(&t, routers[ri], &c, TF_DTYPE_F32, PREFIX ".gate.expert_bias", 5);
		float x[16], w[4];
		int32_t idx[4];
		for (int i = 0; i < 16; i++)
			x[i] = NAN;
		cr_assert_eq(t.r.ops->route(t.r.impl, x, 1, idx, w), TF_OK);
		for (int j = 0; j < 4; j++) {
			cr_assert(idx[j] >= 0 && idx[j] < 16, "%s: %d", routers[ri], idx[j]);
			for (int i = 0; i < j; i++)
				cr_assert_neq(idx[i], idx[j], "%s", routers[ri]);
		}
		cr_assert_eq(t.h->router_route(t.h, &t.r, x, 1, idx, w), TF_ERR_INTERNAL);
		cr_assert(strstr(tf_testhost_last_error(t.th), routers[ri]));
		rt_free(&t);
	}
}

Test(router, ling_matches_ling_ref_bitwise)
{
	/* An identity gate passes logits on a coarse grid through, so scores
	 * tie often; the two top-k must still agree on every id and bit. */
	tf_model_config c = rt_config(64, 64, 6, 8, 3);
	int n = 200, k = c.num_experts_per_tok, E = c.num_experts;
	float *x = malloc(sizeof(float) * n * E), *eye = calloc((size_t)E * E, sizeof(float));
	float *w[2];
	int32_t *idx[2];
	uint64_t seed = 21;

	tf_test_fill_uniform(x, (size_t)n * E, 3.0f, &seed);
	for (int i = 0; i < n * E; i++)
		x[i] = roundf(x[i] * 2) / 2;
	for (int e = 0; e < E; e++)
		eye[e * (E + 1)] = 1;
	for (int ri = 0; ri < 2; ri++) {
		rt t;
		w[ri] = malloc(sizeof(float) * n * k);
		idx[ri] = malloc(sizeof(int32_t) * n * k);
		rt_tensors_of(&t, &c, TF_DTYPE_F32, PREFIX ".gate.expert_bias", 22, eye, NULL);
		cr_assert_eq(rt_router_open(&t, routers[ri]), TF_OK);
		cr_assert_eq(t.h->router_route(t.h, &t.r, x, n, idx[ri], w[ri]), TF_OK);
		rt_free(&t);
	}
	cr_assert_arr_eq(idx[0], idx[1], sizeof(int32_t) * n * k);
	cr_assert_arr_eq(w[0], w[1], sizeof(float) * n * k);
	for (int ri = 0; ri < 2; ri++) {
		free(w[ri]);
		free(idx[ri]);
	}
	free(x);
	free(eye);
}

Test(router, other_bias_name_accepted)
{
	tf_model_config c = rt_config(16, 8, 2, 1, 1);
	/* The reference applies the bias: a router ignoring it would differ. */
	check_random_bias(&c, TF_DTYPE_F32, PREFIX ".gate.e_score_correction_bias", 9, 3);
}

/* Opening each router must fail with `status` and an error mentioning
 * `needle`, leaving nothing open. */
static void expect_init_error(const tf_model_config *c, const char *bias_name,
			      int status, const char *needle)
{
	for (size_t ri = 0; ri < N_ROUTERS; ri++) {
		rt t;
		rt_tensors(&t, c, TF_DTYPE_BF16, bias_name, 4);
		int rc = rt_router_open(&t, routers[ri]);
		cr_assert_eq(rc, status, "%s: status %d for \"%s\"", routers[ri], rc,
			     tf_testhost_last_error(t.th));
		cr_assert(strstr(tf_testhost_last_error(t.th), needle), "error \"%s\" lacks \"%s\"",
			  tf_testhost_last_error(t.th), needle);
		cr_assert_null(t.r.impl);
		rt_free(&t);
	}
}

Test(router, bad_config_named)
{
	tf_model_config c = rt_config(16, 8, 9, 1, 1);
	expect_init_error(&c, NULL, TF_ERR_INVALID, "num_experts_per_tok");
	c = rt_config(16, 9, 2, 4, 2);
	expect_init_error(&c, NULL, TF_ERR_INVALID, "n_group");
	c = rt_config(16, 8, 5, 4, 2);  /* only 2 groups x 2 experts survive */
	expect_init_error(&c, NULL, TF_ERR_INVALID, "topk_group");
	c = rt_config(16, 8, 2, 4, 5);
	expect_init_error(&c, NULL, TF_ERR_INVALID, "topk_group");
	c = rt_config(16, 8, 2, 1, 1);
	c.routed_scaling_factor = NAN;
	expect_init_error(&c, NULL, TF_ERR_INVALID, "routed_scaling_factor");
}

Test(router, bad_tensors_named)
{
	tf_model_config c = rt_config(16, 8, 2, 1, 1);
	/* Enabled bias but none stored. */
	expect_init_error(&c, NULL, TF_ERR_NOT_FOUND, PREFIX ".gate.expert_bias");

	c.moe_router_enable_expert_bias = false;
	for (size_t ri = 0; ri < N_ROUTERS; ri++) {
		/* Router weight with the wrong width. */
		rt t = { .th = tf_testhost_new(&c, 1) };
		t.h = tf_testhost_host(t.th);
		float w[8 * 15] = { 1 };
		tf_testhost_add_f32(t.th, PREFIX ".gate.weight", TF_DTYPE_F32, 2,
				    (int64_t[]){ 8, 15 }, w);
		cr_assert_eq(rt_router_open(&t, routers[ri]), TF_ERR_FORMAT);
		cr_assert(strstr(tf_testhost_last_error(t.th), PREFIX ".gate.weight"));
		tf_testhost_free(t.th);

		/* No router weight at all. */
		t.th = tf_testhost_new(&c, 1);
		t.h = tf_testhost_host(t.th);
		cr_assert_eq(rt_router_open(&t, routers[ri]), TF_ERR_NOT_FOUND);
		cr_assert(strstr(tf_testhost_last_error(t.th), PREFIX ".gate"));
		tf_testhost_free(t.th);
	}
}
