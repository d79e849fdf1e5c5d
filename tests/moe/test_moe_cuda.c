/*
 * test_moe_cuda.c - plugins/moe-cuda's router, dispatch, expert MLPs and
 * combine (built on the SIMT harness by tests/simt) against the CPU path
 * they replace: router.so's plain "ling-ref" router and moe.so's MoE and
 * dense layers, opened through the test host on fp32 weights.
 *
 * Inputs are fresh random values; rows 1, 3 and 17 (the dense MLP also 4,
 * 5, 8 and 9: each side of the kernel's 4-row passes); 16 to 512 experts,
 * top-k 1 to 8, with and without groups; device outputs poisoned (NaN)
 * before each launch.  Expert ids must equal the CPU's exactly (random
 * scores have no near ties; the tie cases make exact ties on purpose);
 * weights and outputs are held to relative bounds (max |err| / max |ref|).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_buf.h"
#include "ffn_so.h"
#include "moe_cuda.h"
#include "support/testhost.h"
#include "tf/ffn.h"
#include "tf/router.h"

#define PREFIX "model.layers.1.mlp"
#define LAYER 1
/* The gate's fp32 sums run in another order than the CPU's. */
#define ROUTE_W_BOUND 1e-5
/* A whole block: gate, up, down and the router's weights, each re-ordered. */
#define BLOCK_BOUND 2e-5

static const int rows_cases[] = { 1, 3, 17 };
/* The dense MLP is one expert over all the rows: each side of mlp.cu's
 * 4-row passes (MLP_ROWS) too. */
static const int dense_rows[] = { 1, 3, 4, 5, 8, 9, 17 };

static tf_model_config moe_config(int hidden, int E, int k, int G, int TG)
{
	return (tf_model_config){
		.hidden_size = hidden, .num_experts = E, .num_experts_per_tok = k,
		.n_group = G, .topk_group = TG, .routed_scaling_factor = 2.5f,
		.norm_topk_prob = true, .score_sigmoid = true,
		.moe_router_enable_expert_bias = true, .n_layers_total = 4,
		.num_shared_experts = 1,
	};
}

/* ---- router ---- */

/* The router's tensors (host copies), stored in a test host as fp32. */
typedef struct gate_set {
	float *gate, *bias;
} gate_set;

static void gate_set_add(tf_testhost *th, const tf_model_config *c, const gate_set *g)
{
	tf_testhost_add_f32(th, PREFIX ".gate.weight", TF_DTYPE_F32, 2,
			    (int64_t[]){ c->num_experts, c->hidden_size }, g->gate);
	if (c->moe_router_enable_expert_bias)
		tf_testhost_add_f32(th, PREFIX ".gate.expert_bias", TF_DTYPE_F32, 1,
				    (int64_t[]){ c->num_experts }, g->bias);
}

static tf_moe_cuda_router dev_router(const tf_model_config *c, const gate_set *g)
{
	size_t E = (size_t)c->num_experts;
	return (tf_moe_cuda_router){
		.gate = dev_put(g->gate, E * c->hidden_size * sizeof(float)),
		.bias = c->moe_router_enable_expert_bias ? dev_put(g->bias, E * sizeof(float)) : NULL,
		.hidden = c->hidden_size, .n_experts = c->num_experts,
		.top_k = c->num_experts_per_tok, .n_group = c->n_group > 1 ? c->n_group : 1,
		.topk_group = c->n_group > 1 ? c->topk_group : 1, .norm_topk = c->norm_topk_prob,
		.scaling = c->routed_scaling_factor,
	};
}

static void dev_router_free(tf_moe_cuda_router *r)
{
	cudaFree((void *)r->gate);
	cudaFree((void *)r->bias);
}

/* Route n rows of x on the CPU ("ling-ref") and on the device; the same
 * ids, weights within ROUTE_W_BOUND. */
static void check_route(const tf_model_config *c, const gate_set *g, const float *x, int n)
{
	int k = c->num_experts_per_tok, H = c->hidden_size;
	tf_testhost *th = tf_testhost_new(c, 1);
	const tf_host *h = tf_testhost_host(th);
	tf_router r = { 0 };
	int32_t *idx = malloc(sizeof(int32_t) * n * k), *d_idx_h = malloc(sizeof(int32_t) * n * k);
	float *w = malloc(sizeof(float) * n * k), *d_w_h = malloc(sizeof(float) * n * k);

	gate_set_add(th, c, g);
	tf_testhost_set_conf(th, "plugins", "router", "ling-ref");
	cr_assert_eq(h->router_open(h, LAYER, PREFIX, &r), TF_OK, "%s", tf_testhost_last_error(th));
	cr_assert_eq(h->router_route(h, &r, x, n, idx, w), TF_OK, "%s", tf_testhost_last_error(th));

	tf_moe_cuda_router dr = dev_router(c, g);
	float *d_x = dev_put(x, sizeof(float) * n * H), *d_w = dev_poisoned(sizeof(float) * n * k),
	      *d_logits = dev_poisoned(sizeof(float) * n * c->num_experts);
	int32_t *d_idx = dev_poisoned(sizeof(int32_t) * n * k);
	cr_assert_eq(tf_moe_cuda_route(0, &dr, d_x, n, d_logits, d_idx, d_w), cudaSuccess);
	dev_get(d_idx_h, d_idx, sizeof(int32_t) * n * k);
	dev_get(d_w_h, d_w, sizeof(float) * n * k);
	double worst = 0;
	for (int i = 0; i < n * k; i++)
		worst = fmax(worst, fabs((double)d_w_h[i] - w[i]) / fabs((double)w[i]));
	cr_log_info("route E %d k %d groups %d/%d n %d: weight rel err %.3g", c->num_experts, k,
		    c->n_group, c->topk_group, n, worst);
	for (int i = 0; i < n * k; i++) {
		cr_assert_eq(d_idx_h[i], idx[i], "E %d k %d: token %d slot %d: expert %d, CPU %d",
			     c->num_experts, k, i / k, i % k, d_idx_h[i], idx[i]);
		cr_assert(fabsf(d_w_h[i] - w[i]) <= ROUTE_W_BOUND * fabsf(w[i]),
			  "E %d: token %d slot %d: weight %.9g, CPU %.9g", c->num_experts, i / k,
			  i % k, (double)d_w_h[i], (double)w[i]);
	}
	h->router_close(h, &r);
	tf_testhost_free(th);
	dev_router_free(&dr);
	cudaFree(d_x);
	cudaFree(d_w);
	cudaFree(d_logits);
	cudaFree(d_idx);
	free(idx);
	free(d_idx_h);
	free(w);
	free(d_w_h);
}

static gate_set gate_random(const tf_model_config *c, uint64_t *seed)
{
	size_t E = (size_t)c->num_experts;
	gate_set g = { malloc(E * c->hidden_size * sizeof(float)), malloc(E * sizeof(float)) };
	tf_test_fill_uniform(g.gate, E * c->hidden_size, 0.3f, seed);
	tf_test_fill_uniform(g.bias, E, 0.1f, seed);
	return g;
}

static void check_route_random(const tf_model_config *c, uint64_t seed)
{
	gate_set g = gate_random(c, &seed);
	for (size_t i = 0; i < sizeof(rows_cases) / sizeof(rows_cases[0]); i++) {
		int n = rows_cases[i];
		float *x = malloc(sizeof(float) * n * c->hidden_size);
		tf_test_fill_uniform(x, (size_t)n * c->hidden_size, 1.0f, &seed);
		check_route(c, &g, x, n);
		free(x);
	}
	free(g.gate);
	free(g.bias);
}

Test(moe_cuda, route_ling_nano)
{
	tf_model_config c = moe_config(256, 16, 2, 4, 2);
	check_route_random(&c, 1);
}

Test(moe_cuda, route_ling_tiny)
{
	tf_model_config c = moe_config(256, 16, 4, 4, 2);
	check_route_random(&c, 2);
}

Test(moe_cuda, route_flash_512_experts_8_groups)
{
	tf_model_config c = moe_config(96, 512, 8, 8, 4);
	check_route_random(&c, 3);
}

Test(moe_cuda, route_ungrouped_no_bias_unnormalised)
{
	tf_model_config c = moe_config(40, 24, 6, 1, 1);
	c.moe_router_enable_expert_bias = false;
	c.norm_topk_prob = false;
	check_route_random(&c, 4);
}

Test(moe_cuda, route_groups_without_bias_top1)
{
	/* Groups score by their largest value without a bias; top-1 is not
	 * renormalised; 96 experts: groups wider than a warp. */
	tf_model_config c = moe_config(48, 96, 1, 2, 1);
	c.moe_router_enable_expert_bias = false;
	check_route_random(&c, 5);
	c = moe_config(48, 8, 3, 8, 3);         /* groups of one expert */
	check_route_random(&c, 6);
}

Test(moe_cuda, route_exact_ties_go_to_the_lower_index)
{
	/* Groups 2 and 3 copy groups 0 and 1, and inside every group expert
	 * 2j+1 copies expert 2j: equal rows give equal fp32 scores on both
	 * sides, so groups and experts tie exactly and only the rule decides. */
	tf_model_config c = moe_config(64, 32, 4, 4, 2);
	uint64_t seed = 7;
	gate_set g = gate_random(&c, &seed);
	int H = c.hidden_size;
	for (int e = 0; e < 32; e++) {
		int src = e >= 16 ? e - 16 : e;
		src -= src & 1;
		memcpy(g.gate + (size_t)e * H, g.gate + (size_t)src * H, sizeof(float) * H);
		g.bias[e] = g.bias[src];
	}
	float *x = malloc(sizeof(float) * 17 * H);
	tf_test_fill_uniform(x, (size_t)17 * H, 1.0f, &seed);
	check_route(&c, &g, x, 17);
	free(x);
	free(g.gate);
	free(g.bias);
}

Test(moe_cuda, launchers_refuse_shapes_they_cannot_take)
{
	tf_moe_cuda_router r = { .gate = (const float *)16, .hidden = 8, .n_experts = 2048,
				 .top_k = 2, .n_group = 1, .topk_group = 1, .scaling = 1 };
	cr_expect_eq(tf_moe_cuda_router_check(&r), cudaErrorInvalidValue);
	r.n_experts = 30;
	r.n_group = 4;          /* not a divisor */
	cr_expect_eq(tf_moe_cuda_router_check(&r), cudaErrorInvalidValue);
	r.n_experts = 32;
	r.topk_group = 1;
	r.top_k = 9;            /* more than one group of 8 holds */
	cr_expect_eq(tf_moe_cuda_router_check(&r), cudaErrorInvalidValue);
	r.top_k = 8;
	cr_expect_eq(tf_moe_cuda_router_check(&r), cudaSuccess);

	tf_moe_cuda_plan p = { 0 };
	tf_moe_cuda_mlp_w m = { .hidden = 8, .inter = 8, .n_experts = 4, .limit = -1 };
	cr_expect_eq(tf_moe_cuda_dispatch(0, &p, NULL, NULL, 1, 0, 2), cudaErrorInvalidValue);
	cr_expect_eq(tf_moe_cuda_dispatch(0, &p, NULL, NULL, 1, 4, 33), cudaErrorInvalidValue);
	cr_expect_eq(tf_moe_cuda_mlp(0, &m, NULL, 0, NULL, 1, NULL, NULL), cudaErrorInvalidValue);
	cr_expect_eq(tf_moe_cuda_combine(0, &p, &m, NULL, NULL, 1, 0, NULL, NULL),
		     cudaErrorInvalidValue);
	tf_moe_cuda_exl3_w q = { .hidden = 8, .inter = 8, .n_experts = 4, .limit = -1 };
	cr_expect_eq(tf_moe_cuda_exl3_mlp(0, &q, NULL, 0, NULL, 1, NULL, NULL),
		     cudaErrorInvalidValue);
	q.limit = 0;
	cr_expect_eq(tf_moe_cuda_exl3_mlp(0, &q, &p, 0, NULL, 1, NULL, NULL),
		     cudaErrorInvalidValue);
	q.inter = 0;
	cr_expect_eq(tf_moe_cuda_exl3_mlp(0, &q, NULL, 1, NULL, 1, NULL, NULL),
		     cudaErrorInvalidValue);
}

/* ---- dispatch ---- */

/* moe_layer.c's bucketing, restated: counts, offsets, tokens ascending. */
static void plan_ref(const int32_t *idx, const float *w, int n, int E, int k, int32_t *off,
		     int32_t *tok, float *tok_w, int32_t *pos)
{
	memset(off, 0, sizeof(int32_t) * (E + 1));
	for (int i = 0; i < n * k; i++)
		off[idx[i] + 1]++;
	for (int e = 0; e < E; e++)
		off[e + 1] += off[e];
	int32_t *fill = malloc(sizeof(int32_t) * E);
	memcpy(fill, off, sizeof(int32_t) * E);
	for (int i = 0; i < n * k; i++) {
		int32_t at = fill[idx[i]]++;
		tok[at] = i / k;
		tok_w[at] = w[i];
		pos[i] = at;
	}
	free(fill);
}

/* n tokens' k distinct experts, drawn from the first `span` experts. */
static void random_choices(int32_t *idx, float *w, int n, int E, int k, int span,
			   uint64_t *seed)
{
	float r[1];
	for (int t = 0; t < n; t++)
		for (int j = 0; j < k; j++) {
			int e, dup;
			do {
				tf_test_fill_uniform(r, 1, 1.0f, seed);
				e = (int)((r[0] + 1.0f) * 0.5f * span) % span;
				dup = 0;
				for (int i = 0; i < j; i++)
					dup |= idx[t * k + i] == e;
			} while (dup);
			idx[t * k + j] = e < E ? e : E - 1;
			tf_test_fill_uniform(&w[t * k + j], 1, 1.0f, seed);
		}
}

static void check_dispatch(int n, int E, int k, int span, uint64_t seed)
{
	size_t nk = (size_t)n * k;
	int32_t *idx = malloc(nk * 4), *off = malloc((E + 1) * 4), *tok = malloc(nk * 4),
		*pos = malloc(nk * 4), *got = malloc((nk + E + 1) * 4);
	float *w = malloc(nk * 4), *tok_w = malloc(nk * 4), *got_w = malloc(nk * 4);

	random_choices(idx, w, n, E, k, span, &seed);
	plan_ref(idx, w, n, E, k, off, tok, tok_w, pos);

	tf_moe_cuda_plan p;
	void *mem = dev_poisoned(tf_moe_cuda_plan_bytes(E, k, n));
	int32_t *d_idx = dev_put(idx, nk * 4);
	float *d_w = dev_put(w, nk * 4);
	tf_moe_cuda_plan_init(&p, mem, E, k, n);
	cr_assert_eq(tf_moe_cuda_dispatch(0, &p, d_idx, d_w, n, E, k), cudaSuccess);

	dev_get(got, p.off, (E + 1) * 4);
	cr_assert_arr_eq(got, off, (E + 1) * 4, "n %d E %d k %d: bucket offsets", n, E, k);
	dev_get(got, p.tok, nk * 4);
	cr_assert_arr_eq(got, tok, nk * 4, "n %d E %d k %d: tokens", n, E, k);
	dev_get(got, p.pos, nk * 4);
	cr_assert_arr_eq(got, pos, nk * 4, "n %d E %d k %d: rows", n, E, k);
	dev_get(got_w, p.tok_w, nk * 4);
	cr_assert_arr_eq(got_w, tok_w, nk * 4, "n %d E %d k %d: weights", n, E, k);
	int32_t n_active, m = 0;
	dev_get(&n_active, p.n_active, 4);
	dev_get(got, p.active, E * 4);
	for (int e = 0; e < E; e++)
		if (off[e + 1] > off[e]) {
			cr_assert(m < n_active && got[m] == e, "n %d E %d: active[%d] = %d, want %d",
				  n, E, m, m < n_active ? got[m] : -1, e);
			m++;
		}
	cr_assert_eq(n_active, m);
	cudaFree(mem);
	cudaFree(d_idx);
	cudaFree(d_w);
	free(idx);
	free(off);
	free(tok);
	free(pos);
	free(got);
	free(w);
	free(tok_w);
	free(got_w);
}

Test(moe_cuda, dispatch_matches_moe_layer_buckets)
{
	check_dispatch(1, 16, 2, 16, 11);
	check_dispatch(3, 16, 4, 16, 12);
	check_dispatch(17, 512, 8, 512, 13);
	check_dispatch(100, 64, 6, 64, 14);     /* several chunks */
	check_dispatch(77, 512, 8, 12, 15);     /* crowded: 12 experts take everything */
	check_dispatch(33, 1024, 1, 1024, 16);
}

/* ---- the whole block ---- */

/* One SwiGLU MLP per slot on both sides: host tensors under `prefix`,
 * device copies whose pointers fill the slot of the pointer arrays. */
typedef struct mlp_set {
	int n, hidden, inter;
	float limit;
	const float **dev[3];           /* host arrays of device pointers */
	tf_moe_cuda_mlp_w w;            /* .gate/.up/.down: device arrays */
} mlp_set;

static const char *const proj_leaf[3] = { "gate_proj.weight", "up_proj.weight",
					   "down_proj.weight" };

static void mlp_set_init(mlp_set *s, tf_testhost *th, const char *prefix, int n, int hidden,
			 int inter, float limit, uint64_t *seed)
{
	char name[160];
	*s = (mlp_set){ .n = n, .hidden = hidden, .inter = inter, .limit = limit };
	for (int p = 0; p < 3; p++)
		s->dev[p] = malloc(sizeof(float *) * n);
	for (int e = 0; e < n; e++)
		for (int p = 0; p < 3; p++) {
			size_t sz = (size_t)hidden * inter;
			float *v = malloc(sz * sizeof(float));
			tf_test_fill_uniform(v, sz, p < 2 ? 0.2f : 0.15f, seed);
			if (n > 1)
				snprintf(name, sizeof(name), "%s.experts.%d.%s", prefix, e, proj_leaf[p]);
			else
				snprintf(name, sizeof(name), "%s.%s", prefix, proj_leaf[p]);
			tf_testhost_add_f32(th, name, TF_DTYPE_F32, 2,
					    p < 2 ? (int64_t[]){ inter, hidden }
						  : (int64_t[]){ hidden, inter }, v);
			s->dev[p][e] = dev_put(v, sz * sizeof(float));
			free(v);
		}
	s->w = (tf_moe_cuda_mlp_w){
		.gate = dev_put(s->dev[0], sizeof(float *) * n),
		.up = dev_put(s->dev[1], sizeof(float *) * n),
		.down = dev_put(s->dev[2], sizeof(float *) * n),
		.hidden = hidden, .inter = inter, .n_experts = n, .limit = limit,
	};
}

/* Point the device arrays at features [lo, hi) of every MLP: gate and up
 * from row lo, down from column lo, its rows still the whole inter apart. */
static void mlp_set_share(mlp_set *s, int lo, int hi)
{
	const float **arr = malloc(sizeof(float *) * s->n);
	for (int p = 0; p < 3; p++) {
		for (int e = 0; e < s->n; e++)
			arr[e] = s->dev[p][e] + (p < 2 ? (size_t)lo * s->hidden : (size_t)lo);
		const float *const *d = p == 0 ? s->w.gate : p == 1 ? s->w.up : s->w.down;
		cudaMemcpy((void *)d, arr, sizeof(float *) * s->n, cudaMemcpyHostToDevice);
	}
	free(arr);
	s->w.inter = hi - lo;
	s->w.down_ld = s->inter;
}

static void mlp_set_free(mlp_set *s)
{
	for (int p = 0; p < 3; p++) {
		for (int e = 0; e < s->n; e++)
			cudaFree((void *)s->dev[p][e]);
		free(s->dev[p]);
	}
	cudaFree((void *)s->w.gate);
	cudaFree((void *)s->w.up);
	cudaFree((void *)s->w.down);
}

/* A MoE block: moe.so's "moe" layer on the CPU (one worker: the serial
 * expert path) against route, dispatch, both MLP launches and combine.
 * With tp_size > 1 both play rank tp_rank: of [tp] moe = experts (whole
 * experts where tf_router_place puts them, as moe.so does; the device
 * lacks the others: NULL gates) when `experts`, else of moe.so's default
 * split (every MLP's features dealt evenly over the ranks, the output a
 * partial sum). */
static void check_block(tf_model_config c, int inter, int shared_inter, float limit,
			float shared_limit, uint64_t seed, int tp_rank, int tp_size, bool experts)
{
	float elim[4] = { 0, limit, 0, 0 }, slim[4] = { 0, shared_limit, 0, 0 };
	int H = c.hidden_size, E = c.num_experts, k = c.num_experts_per_tok;
	c.moe_intermediate_size = inter;
	c.moe_shared_expert_intermediate_size = shared_inter;
	c.expert_swiglu_limit = elim;
	c.shared_swiglu_limit = slim;
	tf_testhost *th = tf_testhost_new(&c, 1);
	tf_host *h = (tf_host *)tf_testhost_host(th);  /* the test plays a rank */
	gate_set g = gate_random(&c, &seed);
	mlp_set routed, shared;

	if (tp_size > 1) {
		h->tp_rank = tp_rank;
		h->tp_size = tp_size;
		tf_testhost_set_conf(th, "tp", "moe", experts ? "experts" : "split");
	}

	gate_set_add(th, &c, &g);
	tf_testhost_set_conf(th, "plugins", "router", "ling-ref");
	mlp_set_init(&routed, th, PREFIX, E, H, inter, limit, &seed);
	mlp_set_init(&shared, th, PREFIX ".shared_experts", 1, H, shared_inter, shared_limit,
		     &seed);
	if (tp_size > 1 && !experts) {  /* moe.so's tf_tu_shard, restated */
		mlp_set_share(&routed, inter / tp_size * tp_rank, inter / tp_size * (tp_rank + 1));
		mlp_set_share(&shared, shared_inter / tp_size * tp_rank,
			      shared_inter / tp_size * (tp_rank + 1));
	}
	if (tp_size > 1 && experts) {   /* other ranks' experts: NULL gates */
		const float **gates = malloc(sizeof(float *) * E);
		int32_t *rank_of = malloc(sizeof(int32_t) * E);
		tf_router r = { 0 };
		cr_assert_eq(h->router_open(h, LAYER, PREFIX, &r), TF_OK);
		cr_assert_eq(tf_router_place(&r, tp_size, rank_of), TF_OK);
		h->router_close(h, &r);
		for (int e = 0; e < E; e++)
			gates[e] = rank_of[e] == tp_rank ? routed.dev[0][e] : NULL;
		free(rank_of);
		cudaMemcpy((void *)routed.w.gate, gates, sizeof(float *) * E,
			   cudaMemcpyHostToDevice);
		free(gates);
	}
	const tf_plugin_ffn *ffn = ffn_plugin(0);
	void *inst = NULL;
	cr_assert_eq(ffn->layer_init(h, LAYER, PREFIX, &inst), TF_OK, "%s",
		     tf_testhost_last_error(th));
	tf_moe_cuda_router dr = dev_router(&c, &g);

	for (size_t ci = 0; ci < sizeof(rows_cases) / sizeof(rows_cases[0]); ci++) {
		int n = rows_cases[ci];
		size_t nk = (size_t)n * k;
		float *x = malloc(sizeof(float) * n * H), *y = malloc(sizeof(float) * n * H),
		      *dy = malloc(sizeof(float) * n * H);
		tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);
		cr_assert_eq(ffn->forward(inst, x, n, y), TF_OK, "%s", tf_testhost_last_error(th));

		tf_moe_cuda_plan p;
		size_t hrows = nk > (size_t)n ? nk : (size_t)n;
		int hinter = inter > shared_inter ? inter : shared_inter;
		float *d_x = dev_put(x, sizeof(float) * n * H), *d_w = dev_poisoned(nk * 4),
		      *d_h = dev_poisoned(sizeof(float) * hrows * hinter),
		      *d_o = dev_poisoned(sizeof(float) * nk * H),
		      *d_y = dev_poisoned(sizeof(float) * n * H),
		      *d_logits = dev_poisoned(sizeof(float) * n * E);
		int32_t *d_idx = dev_poisoned(nk * 4);
		void *mem = dev_poisoned(tf_moe_cuda_plan_bytes(E, k, n));
		tf_moe_cuda_plan_init(&p, mem, E, k, n);
		cr_assert_eq(tf_moe_cuda_route(0, &dr, d_x, n, d_logits, d_idx, d_w), cudaSuccess);
		cr_assert_eq(tf_moe_cuda_dispatch(0, &p, d_idx, d_w, n, E, k), cudaSuccess);
		cr_assert_eq(tf_moe_cuda_mlp(0, &routed.w, &p, k, d_x, n, d_h, d_o), cudaSuccess);
		if (c.num_shared_experts)
			cr_assert_eq(tf_moe_cuda_mlp(0, &shared.w, NULL, 0, d_x, n, d_h, d_y),
				     cudaSuccess);
		else
			cudaMemset(d_y, 0, sizeof(float) * n * H);
		cr_assert_eq(tf_moe_cuda_combine(0, &p, &routed.w, NULL, d_idx, n, k, d_o, d_y),
			     cudaSuccess);
		dev_get(dy, d_y, sizeof(float) * n * H);
		double err = tf_test_rel_err(dy, y, (size_t)n * H, 1e-3);
		cr_log_info("block E %d k %d groups %d/%d rank %d/%d%s n %d: rel err %.3g", E, k,
			    c.n_group, c.topk_group, tp_rank, tp_size, experts ? " experts" : "", n,
			    err);
		cr_assert(err <= BLOCK_BOUND, "E %d k %d n %d: rel err %g > %g", E, k, n, err,
			  BLOCK_BOUND);
		cudaFree(d_x);
		cudaFree(d_w);
		cudaFree(d_h);
		cudaFree(d_o);
		cudaFree(d_y);
		cudaFree(d_logits);
		cudaFree(d_idx);
		cudaFree(mem);
		free(x);
		free(y);
		free(dy);
	}
	ffn->layer_fini(inst);
	tf_testhost_free(th);
	dev_router_free(&dr);
	mlp_set_free(&routed);
	mlp_set_free(&shared);
	free(g.gate);
	free(g.bias);
}

Test(moe_cuda, block_ling_nano)
{
	check_block(moe_config(256, 16, 2, 4, 2), 64, 128, 0, 0, 21, 0, 1, false);
}

Test(moe_cuda, block_ling_tiny_clamped)
{
	/* Limits low enough that the clamp cuts many activations. */
	check_block(moe_config(256, 16, 4, 4, 2), 128, 128, 0.3f, 0.4f, 22, 0, 1, false);
}

Test(moe_cuda, block_512_experts_8_groups)
{
	check_block(moe_config(64, 512, 8, 8, 4), 32, 48, 0.5f, 0, 23, 0, 1, false);
}

Test(moe_cuda, block_tensor_parallel_ranks)
{
	/* Whole experts: rank 1 of 2 and rank 0 of 3, without a shared expert. */
	tf_model_config c = moe_config(64, 32, 4, 4, 2);
	c.num_shared_experts = 0;
	check_block(c, 32, 48, 0, 0, 24, 1, 2, true);
	check_block(c, 32, 48, 0, 0, 25, 0, 3, true);
	/* Split features, the shared expert's too: rank 1 of 2, clamped. */
	check_block(moe_config(64, 32, 4, 4, 2), 32, 48, 0.3f, 0.4f, 26, 1, 2, false);
}

Test(moe_cuda, dense_mlp_as_one_expert)
{
	/* A dense layer is the shared-expert launch alone: moe.so's "dense",
	 * which never clamps. */
	tf_model_config c = moe_config(96, 16, 2, 1, 1);
	c.intermediate_size = 200;
	tf_testhost *th = tf_testhost_new(&c, 1);
	const tf_host *h = tf_testhost_host(th);
	uint64_t seed = 31;
	mlp_set d;
	mlp_set_init(&d, th, PREFIX, 1, 96, 200, 0, &seed);
	const tf_plugin_ffn *ffn = ffn_plugin(1);
	void *inst = NULL;
	cr_assert_eq(ffn->layer_init(h, LAYER, PREFIX, &inst), TF_OK, "%s",
		     tf_testhost_last_error(th));
	for (size_t ci = 0; ci < sizeof(dense_rows) / sizeof(dense_rows[0]); ci++) {
		int n = dense_rows[ci];
		float *x = malloc(sizeof(float) * n * 96), *y = malloc(sizeof(float) * n * 96),
		      *dy = malloc(sizeof(float) * n * 96);
		tf_test_fill_uniform(x, (size_t)n * 96, 1.0f, &seed);
		cr_assert_eq(ffn->forward(inst, x, n, y), TF_OK, "%s", tf_testhost_last_error(th));
		float *d_x = dev_put(x, sizeof(float) * n * 96),
		      *d_h = dev_poisoned(sizeof(float) * n * 200),
		      *d_y = dev_poisoned(sizeof(float) * n * 96);
		cr_assert_eq(tf_moe_cuda_mlp(0, &d.w, NULL, 0, d_x, n, d_h, d_y), cudaSuccess);
		dev_get(dy, d_y, sizeof(float) * n * 96);
		double err = tf_test_rel_err(dy, y, (size_t)n * 96, 1e-3);
		cr_assert(err <= BLOCK_BOUND, "dense n %d: rel err %g", n, err);
		cudaFree(d_x);
		cudaFree(d_h);
		cudaFree(d_y);
		free(x);
		free(y);
		free(dy);
	}
	ffn->layer_fini(inst);
	tf_testhost_free(th);
	mlp_set_free(&d);
}
