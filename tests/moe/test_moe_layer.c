/*
 * test_moe_layer.c - moe.so's "moe" and "dense" layers, loaded as the
 * runtime loads them, against the float64 reference on random bf16 weights.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffn_so.h"
#include "moe_ref.h"
#include "support/testhost.h"
#include "tf/ffn.h"

enum { H = 64, E = 16, TOPK = 4, I_E = 32, I_S = 48, I_D = 80, LAYERS = 4 };

/* One layer's weights, bf16-rounded so the reference sees the stored values. */
typedef struct model {
	tf_model_config cfg;
	float expert_limit[LAYERS], shared_limit[LAYERS];
	int layer;
	char prefix[64];
	float *router, *bias;
	float *proj[E + 1][3];          /* experts 0..E-1, then the shared (or dense) one */
	int inter[E + 1];
	tf_testhost *th;
	const tf_plugin_ffn *ffn;
	void *inst;
} model;

static const char *const proj_name[3] = { "gate_proj", "up_proj", "down_proj" };

static float *random_bf16(size_t n, float scale, uint64_t *seed)
{
	float *v = malloc(n * sizeof(float));
	tf_test_fill_uniform(v, n, scale, seed);
	for (size_t i = 0; i < n; i++)
		v[i] = tf_bf16_to_f32(tf_f32_to_bf16(v[i]));
	return v;
}

static tf_model_config base_config(void)
{
	return (tf_model_config){
		.hidden_size = H, .intermediate_size = I_D,
		.num_experts = E, .num_experts_per_tok = TOPK,
		.num_shared_experts = 1, .moe_intermediate_size = I_E,
		.moe_shared_expert_intermediate_size = I_S,
		.n_group = 4, .topk_group = 2, .routed_scaling_factor = 2.5f,
		.norm_topk_prob = true, .score_sigmoid = true,
		.moe_router_enable_expert_bias = true, .n_layers_total = LAYERS,
	};
}

/* Store one SwiGLU MLP's projections under `prefix`; slot E is the shared
 * or dense one.  skip names a projection to leave out; bad stores one
 * with an input feature missing. */
static void add_mlp(model *m, int slot, const char *prefix, int inter,
		    uint64_t *seed, const char *skip, const char *bad)
{
	char name[160];
	m->inter[slot] = inter;
	for (int p = 0; p < 3; p++) {
		int64_t out = p < 2 ? inter : H, in = p < 2 ? H : inter;
		m->proj[slot][p] = random_bf16((size_t)(out * in), p < 2 ? 0.2f : 0.15f, seed);
		snprintf(name, sizeof(name), "%s.%s", prefix, proj_name[p]);
		if (skip && !strcmp(name, skip))
			continue;
		if (bad && !strcmp(name, bad))
			in--;           /* the layout is wrong; the values do not matter */
		strcat(name, ".weight");
		tf_testhost_add_f32(m->th, name, TF_DTYPE_BF16, 2, (int64_t[]){ out, in },
				    m->proj[slot][p]);
	}
}

/* How to build a test layer. */
typedef struct build {
	int layer, dense, threads;
	uint64_t seed;
	const char *skip, *bad;         /* see add_mlp */
	int tp_rank, tp_size;           /* 0, 0: no tensor parallelism */
	const char *tp_moe;             /* [tp] moe, NULL: unset */
} build;

/* Build the layer and open it with the plugin; returns the init status
 * (the error text is in the test host). */
static int model_open(model *m, const tf_model_config *cfg, const build *b)
{
	uint64_t seed = b->seed;
	char name[160];

	memset(m, 0, sizeof(*m));
	m->cfg = *cfg;
	m->layer = b->layer;
	if (!m->cfg.expert_swiglu_limit)
		m->cfg.expert_swiglu_limit = m->expert_limit;
	if (!m->cfg.shared_swiglu_limit)
		m->cfg.shared_swiglu_limit = m->shared_limit;
	snprintf(m->prefix, sizeof(m->prefix), "model.layers.%d.mlp", b->layer);
	m->th = tf_testhost_new(&m->cfg, b->threads);
	m->ffn = ffn_plugin(b->dense ? 1 : 0);
	/* The test owns its host, so it may play another rank. */
	tf_host *h = (tf_host *)tf_testhost_host(m->th);
	if (b->tp_size) {
		h->tp_rank = b->tp_rank;
		h->tp_size = b->tp_size;
	}
	if (b->tp_moe)
		tf_testhost_set_conf(m->th, "tp", "moe", b->tp_moe);

	if (b->dense) {
		add_mlp(m, E, m->prefix, cfg->intermediate_size, &seed, b->skip, b->bad);
	} else {
		m->router = random_bf16((size_t)E * H, 0.3f, &seed);
		m->bias = random_bf16(E, 0.05f, &seed);
		snprintf(name, sizeof(name), "%s.gate.weight", m->prefix);
		tf_testhost_add_f32(m->th, name, TF_DTYPE_BF16, 2, (int64_t[]){ E, H }, m->router);
		snprintf(name, sizeof(name), "%s.gate.expert_bias", m->prefix);
		tf_testhost_add_f32(m->th, name, TF_DTYPE_F32, 1, (int64_t[]){ E }, m->bias);
		for (int e = 0; e < E; e++) {
			snprintf(name, sizeof(name), "%s.experts.%d", m->prefix, e);
			add_mlp(m, e, name, cfg->moe_intermediate_size, &seed, b->skip, b->bad);
		}
		if (cfg->num_shared_experts) {
			snprintf(name, sizeof(name), "%s.shared_experts", m->prefix);
			add_mlp(m, E, name, cfg->moe_shared_expert_intermediate_size, &seed,
				b->skip, b->bad);
		}
	}
	return m->ffn->layer_init(h, b->layer, m->prefix, &m->inst);
}

static void model_open_ok(model *m, const tf_model_config *cfg, const build *b)
{
	int rc = model_open(m, cfg, b);
	cr_assert_eq(rc, TF_OK, "layer_init: %s", tf_testhost_last_error(m->th));
}

static void model_close(model *m)
{
	if (m->inst)
		m->ffn->layer_fini(m->inst);
	tf_testhost_free(m->th);
	free(m->router);
	free(m->bias);
	for (int s = 0; s <= E; s++)
		for (int p = 0; p < 3; p++)
			free(m->proj[s][p]);
}

static double mlp_limit(const float *list, int layer) { return list ? list[layer] : 0; }

/* The float64 block output for one token. */
static void model_ref(const model *m, const float *x, int dense, float *y)
{
	const tf_model_config *c = &m->cfg;
	double acc[H] = { 0 }, part[H];

	if (dense || c->num_shared_experts) {
		moe_ref_mlp(x, H, m->inter[E], m->proj[E][0], m->proj[E][1], m->proj[E][2],
			    dense ? 0 : mlp_limit(c->shared_swiglu_limit, m->layer), acc);
	}
	if (!dense) {
		moe_ref_router r = {
			.hidden = H, .n_experts = E, .top_k = c->num_experts_per_tok,
			.n_group = c->n_group, .topk_group = c->topk_group,
			.sigmoid = c->score_sigmoid, .norm_topk = c->norm_topk_prob,
			.scaling = c->routed_scaling_factor, .weight = m->router,
			.bias = c->moe_router_enable_expert_bias ? m->bias : NULL,
		};
		int32_t idx[E];
		double w[E];
		moe_ref_route(&r, x, idx, w);
		for (int j = 0; j < r.top_k; j++) {
			const int e = idx[j];
			moe_ref_mlp(x, H, m->inter[e], m->proj[e][0], m->proj[e][1],
				    m->proj[e][2], mlp_limit(c->expert_swiglu_limit, m->layer),
				    part);
			for (int k = 0; k < H; k++)
				acc[k] += w[j] * part[k];
		}
	}
	for (int k = 0; k < H; k++)
		y[k] = (float)acc[k];
}

static float *poisoned(int64_t n)
{
	float *v = malloc((size_t)n * sizeof(float));
	for (int64_t i = 0; i < n; i++)
		v[i] = NAN;
	return v;
}

/* Run n random tokens through the layer; compare with the reference and
 * return the plugin's output (free()). */
static float *check_forward(model *m, int64_t n, int dense, uint64_t seed)
{
	float *x = malloc(sizeof(float) * n * H), *y = poisoned(n * H);
	float *ref = malloc(sizeof(float) * n * H);

	tf_test_fill_uniform(x, (size_t)(n * H), 1.0f, &seed);
	cr_assert_eq(m->ffn->forward(m->inst, x, n, y), TF_OK, "forward: %s",
		     tf_testhost_last_error(m->th));
	for (int64_t t = 0; t < n; t++)
		model_ref(m, x + t * H, dense, ref + t * H);
	double err = tf_test_rel_err(y, ref, (size_t)(n * H), 1e-3);
	cr_assert(err < 1e-4, "%s n=%lld: rel err %g", m->prefix, (long long)n, err);
	free(x);
	free(ref);
	return y;
}

Test(moe_layer, descriptors)
{
	const tf_plugin_ffn *moe = ffn_plugin(0), *dense = ffn_plugin(1);
	cr_assert_str_eq(moe->hdr.name, "moe");
	cr_assert_str_eq(moe->layer_type, "moe");
	cr_assert_str_eq(dense->hdr.name, "dense");
	cr_assert_str_eq(dense->layer_type, "dense");
	cr_assert_null(ffn_plugin(2));
	cr_assert_eq(moe->hdr.kind, TF_KIND_FFN);
	cr_assert_eq(moe->hdr.abi_major, TF_ABI_MAJOR);

	tf_testhost *th = tf_testhost_new(NULL, 1);
	const char *why = NULL;
	cr_assert_gt(moe->hdr.probe(tf_testhost_host(th), &why), 0);
	tf_testhost_free(th);
}

Test(moe_layer, decode_vs_reference)
{
	tf_model_config c = base_config();
	model m;
	model_open_ok(&m, &c, &(build){ .layer = 2, .threads = 2, .seed = 21 });
	for (uint64_t s = 1; s <= 3; s++)
		free(check_forward(&m, 1, 0, s));
	model_close(&m);
}

Test(moe_layer, prefill_vs_reference_and_decode)
{
	enum { N = 37 };
	tf_model_config c = base_config();
	model m;
	uint64_t seed = 99;
	model_open_ok(&m, &c, &(build){ .layer = 2, .threads = 2, .seed = 22 });
	float *y = check_forward(&m, N, 0, seed);

	/* The same tokens one at a time: batching must not change a row. */
	float *x = malloc(sizeof(float) * N * H), *y1 = poisoned(H);
	tf_test_fill_uniform(x, N * H, 1.0f, &seed);
	for (int t = 0; t < N; t++) {
		cr_assert_eq(m.ffn->forward(m.inst, x + t * H, 1, y1), TF_OK);
		double err = tf_test_rel_err(y1, y + t * H, H, 1e-3);
		cr_assert(err < 1e-6, "token %d: decode vs prefill rel err %g", t, err);
	}
	free(x);
	free(y1);
	free(y);
	model_close(&m);
}

/* Open `layer`, check it against the reference with its clamps, and return
 * how far its output is from the reference without any clamp. */
static double clamp_effect(const tf_model_config *c, int layer)
{
	model m;
	model_open_ok(&m, c, &(build){ .layer = layer, .threads = 2, .seed = 23 });
	float *y = check_forward(&m, 7, 0, 5);

	/* The reference with the lists cleared, for the effect size. */
	float *x = malloc(sizeof(float) * 7 * H), ref[H];
	uint64_t seed = 5;
	double diff = 0;
	tf_test_fill_uniform(x, 7 * H, 1.0f, &seed);
	m.cfg.expert_swiglu_limit = m.cfg.shared_swiglu_limit = NULL;
	for (int t = 0; t < 7; t++) {
		model_ref(&m, x + t * H, 0, ref);
		diff = fmax(diff, tf_test_rel_err(y + t * H, ref, H, 1e-3));
	}
	free(x);
	free(y);
	model_close(&m);
	return diff;
}

Test(moe_layer, clamp_lists_per_layer_and_kind)
{
	static const float routed[LAYERS] = { 0, 0, 0.3f, 0 };
	static const float none[LAYERS] = { 0 };
	tf_model_config c = base_config();

	c.expert_swiglu_limit = routed;
	c.shared_swiglu_limit = none;
	cr_assert_gt(clamp_effect(&c, 2), 1e-2, "routed clamp on layer 2 had no effect");
	cr_assert_lt(clamp_effect(&c, 1), 1e-4, "layer 1 has no clamp in the list");

	/* The shared expert reads its own list. */
	c.expert_swiglu_limit = none;
	c.shared_swiglu_limit = routed;
	cr_assert_gt(clamp_effect(&c, 2), 1e-2, "shared clamp on layer 2 had no effect");
	cr_assert_lt(clamp_effect(&c, 3), 1e-4);
}

Test(moe_layer, without_shared_expert)
{
	tf_model_config c = base_config();
	c.num_shared_experts = 0;
	model m;
	model_open_ok(&m, &c, &(build){ .layer = 1, .threads = 2, .seed = 24 });
	free(check_forward(&m, 1, 0, 7));
	free(check_forward(&m, 11, 0, 8));
	model_close(&m);
}

Test(moe_layer, softmax_ungrouped_no_bias)
{
	tf_model_config c = base_config();
	c.score_sigmoid = false;
	c.n_group = 1;
	c.moe_router_enable_expert_bias = false;
	c.num_experts_per_tok = 3;
	model m;
	model_open_ok(&m, &c, &(build){ .layer = 3, .threads = 2, .seed = 25 });
	free(check_forward(&m, 9, 0, 9));
	model_close(&m);
}

Test(moe_layer, same_bits_for_any_thread_count)
{
	tf_model_config c = base_config();
	model a, b;
	model_open_ok(&a, &c, &(build){ .layer = 2, .threads = 1, .seed = 26 });
	model_open_ok(&b, &c, &(build){ .layer = 2, .threads = 3, .seed = 26 });
	float *ya = check_forward(&a, 19, 0, 10), *yb = check_forward(&b, 19, 0, 10);
	cr_assert_arr_eq(ya, yb, sizeof(float) * 19 * H);
	free(ya);
	free(yb);
	model_close(&a);
	model_close(&b);
}

/* Every rank's partial output, summed as the all-reduce does, against the
 * layer on one rank; [tp] moe = `mode`. */
static void check_shares(const char *mode, int ranks)
{
	enum { N = 5 };
	tf_model_config c = base_config();
	model whole, share;
	float *sum = calloc(N * H, sizeof(float)), *x = malloc(sizeof(float) * N * H);
	uint64_t seed = 11;

	model_open_ok(&whole, &c, &(build){ .layer = 2, .threads = 1, .seed = 27 });
	float *y = check_forward(&whole, N, 0, seed);
	tf_test_fill_uniform(x, N * H, 1.0f, &seed);
	for (int r = 0; r < ranks; r++) {
		float *part = poisoned(N * H);
		model_open_ok(&share, &c, &(build){ .layer = 2, .threads = 1, .seed = 27,
						    .tp_rank = r, .tp_size = ranks, .tp_moe = mode });
		cr_assert_eq(share.ffn->forward(share.inst, x, N, part), TF_OK);
		for (int i = 0; i < N * H; i++)
			sum[i] += part[i];
		free(part);
		model_close(&share);
	}
	double err = tf_test_rel_err(sum, y, N * H, 1e-3);
	cr_assert(err < 1e-6, "tp.moe=%s, %d ranks: rank sum vs whole: rel err %g", mode, ranks,
		  err);
	free(x);
	free(sum);
	free(y);
	model_close(&whole);
}

Test(moe_layer, tensor_parallel_shares_sum_to_whole)
{
	check_shares("split", 2);
	check_shares("experts", 2);
	check_shares("split", 4);
}

Test(moe_layer, tensor_parallel_uneven_split_is_refused)
{
	tf_model_config c = base_config();
	model m;
	int rc = model_open(&m, &c, &(build){ .layer = 2, .threads = 1, .seed = 27,
					      .tp_rank = 0, .tp_size = 3 });
	cr_assert_eq(rc, TF_ERR_UNSUPPORTED);
	const char *msg = tf_testhost_last_error(m.th);
	cr_assert(strstr(msg, "moe_intermediate_size") && strstr(msg, "[tp] size 3") &&
		  strstr(msg, "model.layers.2.mlp.experts.0"), "%s", msg);
	model_close(&m);
}

Test(moe_layer, dense_vs_reference)
{
	tf_model_config c = base_config();
	/* A clamp listed for layer 0 is for experts; the dense MLP ignores it. */
	static const float limit[LAYERS] = { 0.3f, 0, 0, 0 };
	c.expert_swiglu_limit = c.shared_swiglu_limit = limit;
	model m;
	model_open_ok(&m, &c, &(build){ .layer = 0, .dense = 1, .threads = 2, .seed = 28 });
	free(check_forward(&m, 1, 1, 12));
	free(check_forward(&m, 9, 1, 13));
	model_close(&m);
}

/* layer_init must fail with `status`, naming `needle`, and not leak an instance. */
static void expect_open_error(const tf_model_config *c, int layer, int dense,
			      const char *skip, const char *bad, int status,
			      const char *needle)
{
	model m;
	int rc = model_open(&m, c, &(build){ .layer = layer, .dense = dense, .threads = 1,
					     .seed = 30, .skip = skip, .bad = bad });
	const char *msg = tf_testhost_last_error(m.th);
	cr_assert_eq(rc, status, "status %d, error \"%s\"", rc, msg);
	cr_assert(strstr(msg, needle), "error \"%s\" lacks \"%s\"", msg, needle);
	m.inst = NULL;
	model_close(&m);
}

Test(moe_layer, missing_or_misshapen_tensors_named)
{
	tf_model_config c = base_config();
	expect_open_error(&c, 2, 0, "model.layers.2.mlp.experts.5.up_proj", NULL,
			  TF_ERR_NOT_FOUND, "experts.5.up_proj");
	expect_open_error(&c, 2, 0, NULL, "model.layers.2.mlp.experts.11.down_proj",
			  TF_ERR_FORMAT, "experts.11.down_proj");
	expect_open_error(&c, 2, 0, "model.layers.2.mlp.shared_experts.gate_proj", NULL,
			  TF_ERR_NOT_FOUND, "shared_experts.gate_proj");
	expect_open_error(&c, 0, 1, "model.layers.0.mlp.down_proj", NULL,
			  TF_ERR_NOT_FOUND, "layers.0.mlp.down_proj");
	c.moe_shared_expert_intermediate_size = 0;
	expect_open_error(&c, 2, 0, NULL, NULL, TF_ERR_INVALID,
			  "moe_shared_expert_intermediate_size");
	c = base_config();
	expect_open_error(&c, LAYERS, 0, NULL, NULL, TF_ERR_INVALID, "layer 4");
	static const float bad_limit[LAYERS] = { 0, NAN, -1, 0 };
	c.shared_swiglu_limit = bad_limit;
	expect_open_error(&c, 1, 0, NULL, NULL, TF_ERR_INVALID, "share_expert_swiglu_limit_list[1]");
	c.expert_swiglu_limit = bad_limit;
	expect_open_error(&c, 2, 0, NULL, NULL, TF_ERR_INVALID, "expert_swiglu_limit_list[2]");
}

Test(moe_layer, bad_forward_arguments)
{
	tf_model_config c = base_config();
	model m;
	float x[2 * H] = { 1 }, y[2 * H];
	model_open_ok(&m, &c, &(build){ .layer = 2, .threads = 1, .seed = 31 });
	cr_assert_eq(m.ffn->forward(m.inst, x, -1, y), TF_ERR_INVALID);
	cr_assert(strstr(tf_testhost_last_error(m.th), "model.layers.2.mlp"));
	cr_assert_eq(m.ffn->forward(m.inst, x, 2, x), TF_ERR_INVALID);
	cr_assert_eq(m.ffn->forward(m.inst, NULL, 1, y), TF_ERR_INVALID);
	cr_assert_eq(m.ffn->forward(m.inst, x, 0, y), TF_OK);
	model_close(&m);

	model_open_ok(&m, &c, &(build){ .layer = 0, .dense = 1, .threads = 1, .seed = 32 });
	cr_assert_eq(m.ffn->forward(m.inst, x, -3, y), TF_ERR_INVALID);
	cr_assert(strstr(tf_testhost_last_error(m.th), "model.layers.0.mlp"));
	cr_assert_eq(m.ffn->forward(m.inst, x, 1, x), TF_ERR_INVALID);
	cr_assert_eq(m.ffn->forward(m.inst, x, 0, y), TF_OK);
	model_close(&m);
}

/* The dense float32 [out, in] weight of the linear the host opens at prefix. */
static float *dequant(const tf_host *h, const char *prefix, int64_t in, int64_t out)
{
	tf_lin lin = { 0 };
	float *w = malloc(sizeof(float) * in * out);
	cr_assert_eq(h->lin_open(h, prefix, in, out, &lin), TF_OK, "%s", prefix);
	cr_assert_not_null(lin.ops->dequant);
	cr_assert_eq(lin.ops->dequant(lin.impl, w), TF_OK);
	h->lin_close(h, &lin);
	return w;
}

/*
 * An EXL3 checkpoint: experts stored as trellises beside a plain router.
 * The layer reaches them through the same lin_open; the reference uses
 * their dequantized weights.  The forward's fused kernel skips one fp16
 * rounding of the weights (exl3 tests), hence the looser tolerance.
 */
Test(moe_layer, exl3_experts_vs_reference)
{
	enum { HX = 128, EX = 8, KX = 2, IX = 128, N = 6 };
	static const char *const fmt = "model.layers.1.mlp.experts.%d.%s";
	tf_model_config c = base_config();
	c.hidden_size = HX;
	c.num_experts = EX;
	c.num_experts_per_tok = KX;
	c.moe_intermediate_size = IX;
	c.num_shared_experts = 0;
	c.n_group = 1;
	c.moe_router_enable_expert_bias = false;
	tf_testhost *th = tf_testhost_new(&c, 2);
	const tf_host *h = tf_testhost_host(th);
	uint64_t seed = 41;
	char name[160];

	float *router = random_bf16((size_t)EX * HX, 0.3f, &seed);
	tf_testhost_add_f32(th, "model.layers.1.mlp.gate.weight", TF_DTYPE_BF16, 2,
			    (int64_t[]){ EX, HX }, router);
	for (int e = 0; e < EX; e++)
		for (int p = 0; p < 3; p++) {
			snprintf(name, sizeof(name), fmt, e, proj_name[p]);
			tf_testhost_add_exl3(th, name, p < 2 ? HX : IX, p < 2 ? IX : HX, &seed);
		}

	const tf_plugin_ffn *ffn = ffn_plugin(0);
	void *inst = NULL;
	cr_assert_eq(ffn->layer_init(h, 1, "model.layers.1.mlp", &inst), TF_OK, "%s",
		     tf_testhost_last_error(th));
	float *x = malloc(sizeof(float) * N * HX), *y = poisoned(N * HX), ref[HX];
	tf_test_fill_uniform(x, N * HX, 1.0f, &seed);
	cr_assert_eq(ffn->forward(inst, x, N, y), TF_OK, "%s", tf_testhost_last_error(th));

	moe_ref_router r = {
		.hidden = HX, .n_experts = EX, .top_k = KX, .n_group = 1, .sigmoid = true,
		.norm_topk = true, .scaling = c.routed_scaling_factor, .weight = router,
	};
	for (int t = 0; t < N; t++) {
		int32_t idx[KX];
		double w[KX], acc[HX] = { 0 }, part[HX];
		moe_ref_route(&r, x + t * HX, idx, w);
		for (int j = 0; j < KX; j++) {
			float *wt[3];
			for (int p = 0; p < 3; p++) {
				snprintf(name, sizeof(name), fmt, idx[j], proj_name[p]);
				wt[p] = dequant(h, name, p < 2 ? HX : IX, p < 2 ? IX : HX);
			}
			moe_ref_mlp(x + t * HX, HX, IX, wt[0], wt[1], wt[2], 0, part);
			for (int k = 0; k < HX; k++)
				acc[k] += w[j] * part[k];
			for (int p = 0; p < 3; p++)
				free(wt[p]);
		}
		for (int k = 0; k < HX; k++)
			ref[k] = (float)acc[k];
		double err = tf_test_rel_err(y + t * HX, ref, HX, 1e-3);
		cr_assert(err < 5e-3, "token %d: rel err %g", t, err);
	}
	ffn->layer_fini(inst);
	free(x);
	free(y);
	free(router);
	tf_testhost_free(th);
}
