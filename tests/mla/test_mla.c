/*
 * test_mla.c - the mla plugin through its ABI, with random bf16 weights in a
 * test host, against the float64 reference layer (mla_ref.c): the naive
 * form (prefill), the absorbed form (decode, short verify runs) and mixes
 * of both over one cache must all agree with it, with plain RoPE, YaRN, the
 * q_lora variant and the element-wise gate; snapshot/rollback, context
 * overflow and bad checkpoints.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kda/attn_fixture.h"
#include "mla_ref.h"

#define PREFIX "model.layers.3.attention"

static const tf_plugin_attention *mla_plugin(void)
{
	return attn_fixture_plugin("mla.so", "mla");
}

enum { YARN_NONE, YARN_FACTOR_ONLY, YARN_MSCALE };

struct mla_case {
	tf_model_config cfg;
	mla_ref_weights w;
	attn_bufs bufs;
};

/* Norm weights around 1, exact in bf16 (some are stored so). */
static float *case_norm(struct mla_case *c, int n, uint64_t *seed)
{
	float *p = attn_bufs_random(&c->bufs, (size_t)n, 0.3f, false, seed);
	for (int i = 0; i < n; i++)
		p[i] = tf_bf16_to_f32(tf_f32_to_bf16(p[i] + 1.0f));
	return p;
}

/* hidden 48, 3 heads, rope 8 (q rank 20), nope dn, v dv, kv rank r. */
static void case_init_dims(struct mla_case *c, bool q_lora, bool head_wise, int yarn,
			   int dn, int dv, int r, uint64_t seed)
{
	memset(c, 0, sizeof(*c));
	attn_bufs *b = &c->bufs;
	const int H = 48, nH = 3, dr = 8, rq = q_lora ? 20 : 0;
	const int dq = dn + dr, gw = head_wise ? nH : nH * dv;
	c->cfg = (tf_model_config){
		.hidden_size = H, .num_attention_heads = nH, .q_lora_rank = rq,
		.kv_lora_rank = r, .qk_nope_head_dim = dn, .qk_rope_head_dim = dr,
		.v_head_dim = dv, .rope_theta = 10000.0, .rope_interleave = true,
		.max_position_embeddings = 4096, .gate_head_wise = head_wise,
		.rms_norm_eps = 1e-6f,
	};
	mla_ref_weights *w = &c->w;
	*w = (mla_ref_weights){ .hidden = H, .heads = nH, .dn = dn, .dr = dr, .dv = dv,
				.r = r, .rq = rq, .gate_head_wise = head_wise,
				.interleave = true, .eps = 1e-6, .theta = 10000.0 };
	if (yarn != YARN_NONE) {
		/* orig 32 puts the ramp inside the 4 rope pairs: one pair keeps its
		 * frequency, the rest are interpolated */
		c->cfg.rope_scaling = (tf_rope_scaling){
			.kind = TF_ROPE_YARN, .factor = 4.0, .original_max_position_embeddings = 32,
			.beta_fast = 32, .beta_slow = 1,
			.mscale = yarn == YARN_MSCALE ? 1.0 : 0.0,
			.mscale_all_dim = yarn == YARN_MSCALE ? 0.8 : 0.0,
		};
		w->factor = 4.0;
		w->orig_ctx = 32;
		w->beta_fast = 32;
		w->beta_slow = 1;
		w->mscale = c->cfg.rope_scaling.mscale;
		w->mscale_all_dim = c->cfg.rope_scaling.mscale_all_dim;
	}
	float s = 1.0f / sqrtf((float)H);
	if (q_lora) {
		w->wqa = attn_bufs_random(b, (size_t)rq * H, s, true, &seed);
		w->qa_norm = case_norm(c, rq, &seed);
		w->wqb = attn_bufs_random(b, (size_t)nH * dq * rq, 1.0f / sqrtf((float)rq), true, &seed);
	} else {
		w->wq = attn_bufs_random(b, (size_t)nH * dq * H, s, true, &seed);
	}
	w->wkva = attn_bufs_random(b, (size_t)(r + dr) * H, s, true, &seed);
	w->kva_norm = case_norm(c, r, &seed);
	w->wkvb = attn_bufs_random(b, (size_t)nH * (dn + dv) * r, 2.0f / sqrtf((float)r), true, &seed);
	w->wg = attn_bufs_random(b, (size_t)gw * H, 2 * s, true, &seed);
	w->wdense = attn_bufs_random(b, (size_t)H * nH * dv, 1.0f / sqrtf((float)(nH * dv)), true, &seed);
}

/* nope 16 / v 12, kv rank 24. */
static void case_init(struct mla_case *c, bool q_lora, bool head_wise, int yarn,
		      uint64_t seed)
{
	case_init_dims(c, q_lora, head_wise, yarn, 16, 12, 24, seed);
}

static void case_free(struct mla_case *c)
{
	attn_bufs_free(&c->bufs);
}

static tf_testhost *case_host(const struct mla_case *c, const char *skip)
{
	const mla_ref_weights *w = &c->w;
	const int64_t H = w->hidden, nH = w->heads, dq = w->dn + w->dr, rq = w->rq;
	const int64_t gw = w->gate_head_wise ? nH : nH * w->dv;
	tf_testhost *th = tf_testhost_new(&c->cfg, 2);
	const tf_test_tensor t[] = {
		{ "q_proj.weight", TF_DTYPE_BF16, 2, { nH * dq, H }, w->wq },
		{ "q_a_proj.weight", TF_DTYPE_BF16, 2, { rq, H }, w->wqa },
		{ "q_a_layernorm.weight", TF_DTYPE_BF16, 1, { rq }, w->qa_norm },
		{ "q_b_proj.weight", TF_DTYPE_BF16, 2, { nH * dq, rq }, w->wqb },
		{ "kv_a_proj_with_mqa.weight", TF_DTYPE_BF16, 2, { w->r + w->dr, H }, w->wkva },
		{ "kv_a_layernorm.weight", TF_DTYPE_F32, 1, { w->r }, w->kva_norm },
		{ "kv_b_proj.weight", TF_DTYPE_BF16, 2, { nH * (w->dn + w->dv), w->r }, w->wkvb },
		{ "g_proj.weight", TF_DTYPE_BF16, 2, { gw, H }, w->wg },
		{ "dense.weight", TF_DTYPE_BF16, 2, { H, nH * w->dv }, w->wdense },
	};
	tf_testhost_add_layer(th, PREFIX, t, sizeof(t) / sizeof(t[0]), skip);
	return th;
}

/* One sequence fed as one prefill, token by token, and in mixed pieces
 * that switch between the two forms over one cache.  With the small dims
 * runs of fewer than 11 tokens take the absorbed form; with the 128-wide
 * heads below, fewer than 120. */
static const int whole[] = { 1 << 20 }, decode[] = { 1 }, mixed[] = { 7, 20, 1, 3, 9, 40 };
static const struct plan {
	const int *s;
	int n;
	const char *what;
} plans[] = {
	{ whole, 1, "one prefill (naive)" }, { decode, 1, "decode (absorbed)" },
	{ mixed, 6, "mixed pieces" },
};

/* The float64 reference layer's output for n tokens x at positions 0.., as float. */
static void reference(const struct mla_case *c, const float *x, int64_t n, float *yd)
{
	const int H = c->w.hidden;
	double *ref = malloc((size_t)n * H * sizeof(double));
	int32_t *pos = malloc((size_t)n * sizeof(int32_t));
	mla_ref_state rs;

	for (int64_t i = 0; i < n; i++)
		pos[i] = (int32_t)i;
	mla_ref_state_init(&rs, &c->w, n);
	mla_ref_forward(&c->w, &rs, x, n, pos, ref);
	for (int64_t i = 0; i < n * H; i++)
		yd[i] = (float)ref[i];
	mla_ref_state_free(&rs);
	free(ref);
	free(pos);
}

/* x through a fresh layer in the pieces of `plan`, into NaN-poisoned y. */
static void run_plan(const tf_plugin_attention *p, tf_testhost *th, const float *x, int64_t n,
		     int H, const struct plan *plan, float *y)
{
	void *inst = attn_fixture_open(p, th, PREFIX, n + 5);
	for (int64_t i = 0; i < n * H; i++)
		y[i] = NAN;
	attn_fixture_run(p, inst, x, n, H, plan->s, plan->n, y);
	cr_expect_eq(p->seq_len(inst), n);
	p->layer_fini(inst);
}

static void check_layer(bool q_lora, bool head_wise, int yarn, int64_t n, uint64_t seed)
{
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	case_init(&c, q_lora, head_wise, yarn, seed);
	const int H = c.w.hidden;
	tf_testhost *th = case_host(&c, NULL);

	float *x = malloc((size_t)n * H * sizeof(float));
	float *y = malloc((size_t)n * H * sizeof(float));
	float *yd = malloc((size_t)n * H * sizeof(float));
	tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);
	reference(&c, x, n, yd);

	for (size_t k = 0; k < sizeof(plans) / sizeof(plans[0]); k++) {
		run_plan(p, th, x, n, H, &plans[k], y);
		double e = tf_test_rel_err(y, yd, (size_t)n * H, 1e-3);
		cr_log_info("%s (q_lora %d, head-wise %d, yarn %d): rel err %.3g", plans[k].what,
			    q_lora, head_wise, yarn, e);
		cr_expect(e < 1e-5, "%s (q_lora %d, head-wise %d, yarn %d): rel err %.3g vs f64",
			  plans[k].what, q_lora, head_wise, yarn, e);
	}
	free(x);
	free(y);
	free(yd);
	tf_testhost_free(th);
	case_free(&c);
}

/* 300 tokens: more than one expanded block and several absorbed parts. */
Test(mla, plain_rope_matches_f64) { check_layer(false, true, YARN_NONE, 300, 31); }
Test(mla, yarn_matches_f64) { check_layer(false, true, YARN_FACTOR_ONLY, 60, 32); }
Test(mla, yarn_mscale_matches_f64) { check_layer(false, true, YARN_MSCALE, 60, 33); }
Test(mla, q_lora_matches_f64) { check_layer(true, true, YARN_NONE, 60, 34); }
Test(mla, elementwise_gate_matches_f64) { check_layer(false, false, YARN_NONE, 60, 35); }

/*
 * kv_b_proj in EXL3 with 128-wide heads: the absorbed form multiplies
 * through the linear's slice products, the naive form expands the same
 * linear, and both decode the same unrounded weights, so they must agree
 * to float rounding.  Against float64 with the dequantized (fp16-rounded)
 * kv_b_proj the fused decode's skipped rounding allows more.
 */
Test(mla, exl3_kv_b_slices_match_naive)
{
	const tf_plugin_attention *p = mla_plugin();
	const int64_t n = 150;
	uint64_t seed = 41;
	struct mla_case c;
	case_init_dims(&c, false, true, YARN_NONE, 128, 128, 128, seed);
	const int H = c.w.hidden;
	const int64_t out = c.w.heads * (c.w.dn + c.w.dv);
	tf_testhost *th = case_host(&c, "kv_b_proj.weight");
	const tf_host *h = tf_testhost_host(th);
	tf_lin kvb = { 0 };

	tf_testhost_add_exl3(th, PREFIX ".kv_b_proj", c.w.r, out, &seed);
	cr_assert_eq(h->lin_open(h, PREFIX ".kv_b_proj", c.w.r, out, &kvb), TF_OK);
	cr_assert(tf_lin_has_slices(&kvb, c.w.dn));
	float *wkvb = malloc(sizeof(float) * out * c.w.r);
	cr_assert_eq(kvb.ops->dequant(kvb.impl, wkvb), TF_OK);
	h->lin_close(h, &kvb);
	c.w.wkvb = wkvb;

	float *x = malloc(sizeof(float) * n * H), *yn = malloc(sizeof(float) * n * H);
	float *y = malloc(sizeof(float) * n * H), *yd = malloc(sizeof(float) * n * H);
	tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);
	reference(&c, x, n, yd);

	run_plan(p, th, x, n, H, &plans[0], yn);
	double e = tf_test_rel_err(yn, yd, (size_t)n * H, 1e-3);
	cr_expect(e < 1e-3, "naive vs f64 with rounded weights: rel err %.3g", e);
	for (size_t k = 1; k < sizeof(plans) / sizeof(plans[0]); k++) {
		run_plan(p, th, x, n, H, &plans[k], y);
		e = tf_test_rel_err(y, yn, (size_t)n * H, 1e-3);
		cr_log_info("%s, EXL3 kv_b_proj: rel err %.3g vs naive", plans[k].what, e);
		cr_expect(e < 1e-5, "%s, EXL3 kv_b_proj: rel err %.3g vs naive", plans[k].what, e);
	}
	free(wkvb); free(x); free(yn); free(y); free(yd);
	tf_testhost_free(th);
	case_free(&c);
}

Test(mla, state_bytes_is_the_latent_cache)
{
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	case_init(&c, false, true, YARN_NONE, 3);
	tf_testhost *th = case_host(&c, NULL);
	cr_expect_eq(p->state_bytes(tf_testhost_host(th), 3, 1000), 1000 * (24 + 8) * 4);
	tf_testhost_free(th);
	case_free(&c);
}

/* Run N, snapshot, run M, roll back, run the same M: identical outputs. */
Test(mla, rollback_replays_identically)
{
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	case_init(&c, false, true, YARN_NONE, 21);
	tf_testhost *th = case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 128);
	/* Pieces of 4: the size of a drafter's verify batch. */
	void *snap = attn_fixture_expect_replay(p, inst, c.w.hidden, 30, 12, 4);

	/* The cache only truncates: a snapshot ahead of the sequence is refused. */
	void *ahead = attn_fixture_snapshot(p, inst);
	p->reset(inst);
	cr_expect_eq(p->seq_len(inst), 0);
	cr_expect_eq(p->rollback(inst, ahead), TF_ERR_INVALID);
	cr_expect(strstr(tf_testhost_last_error(th), "roll forward"), "%s",
		  tf_testhost_last_error(th));
	memset(snap, 0, p->snapshot_size(inst));
	cr_expect_eq(p->rollback(inst, snap), TF_ERR_INVALID, "a zeroed buffer is no snapshot");
	free(ahead);
	free(snap);
	p->layer_fini(inst);
	tf_testhost_free(th);
	case_free(&c);
}

Test(mla, forward_beyond_context_is_a_range_error)
{
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	case_init(&c, false, true, YARN_NONE, 4);
	tf_testhost *th = case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 8);
	float x[10 * 48], y[10 * 48];
	int32_t pos[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	uint64_t seed = 8;
	tf_test_fill_uniform(x, sizeof(x) / sizeof(x[0]), 1.0f, &seed);
	cr_assert_eq(p->forward(inst, x, 5, pos, y), TF_OK);
	cr_expect_eq(p->forward(inst, x, 4, pos + 5, y), TF_ERR_RANGE);
	cr_expect(strstr(tf_testhost_last_error(th), "context"), "%s", tf_testhost_last_error(th));
	cr_expect_eq(p->seq_len(inst), 5, "a refused forward consumes nothing");
	cr_expect_eq(p->forward(inst, x, 3, pos + 5, y), TF_OK);
	cr_expect_eq(p->forward(inst, x, 1, NULL, y), TF_ERR_INVALID, "positions are required");
	p->layer_fini(inst);
	tf_testhost_free(th);
	case_free(&c);
}

Test(mla, missing_tensor_is_named)
{
	static const char *const leaves[] = { "kv_a_layernorm.weight", "kv_b_proj.weight",
					      "dense.weight", "g_proj.weight", "q_proj.weight" };
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	case_init(&c, false, true, YARN_NONE, 5);
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		tf_testhost *th = case_host(&c, leaves[i]);
		char want[128];
		snprintf(want, sizeof(want), "%s.%.*s", PREFIX, (int)strcspn(leaves[i], "."),
			 leaves[i]);
		attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_NOT_FOUND, want);
		tf_testhost_free(th);
	}
	case_free(&c);

	/* q_lora: its norm weight is required */
	case_init(&c, true, true, YARN_NONE, 5);
	tf_testhost *th = case_host(&c, "q_a_layernorm.weight");
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_NOT_FOUND, PREFIX ".q_a_layernorm");
	tf_testhost_free(th);
	case_free(&c);
}

/* config.json disagrees with the tensors: the tensor is named. */
Test(mla, config_inconsistent_with_tensors_is_named)
{
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	case_init(&c, false, true, YARN_NONE, 6);
	c.cfg.kv_lora_rank = 20;        /* tensors hold 24 */
	tf_testhost *th = case_host(&c, NULL);
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_FORMAT, PREFIX ".kv_a_proj_with_mqa");
	tf_testhost_free(th);

	c.cfg.kv_lora_rank = 24;
	c.cfg.num_attention_heads = 4;  /* tensors hold 3 heads */
	th = case_host(&c, NULL);
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_FORMAT, PREFIX ".q_proj");
	tf_testhost_free(th);

	c.cfg.num_attention_heads = 3;
	c.cfg.qk_rope_head_dim = 7;     /* odd: no rope pairs */
	th = case_host(&c, NULL);
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_INVALID, "qk_rope_head_dim");
	tf_testhost_free(th);
	case_free(&c);
}
