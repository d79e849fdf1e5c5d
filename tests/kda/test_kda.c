/*
 * test_kda.c - the kda plugin through its ABI, with random bf16 weights in a
 * test host, against the float64 reference layer (kda_ref.c): one prefill,
 * token-by-token decode and chunked prefills must all agree with it and
 * with each other (outputs and final state), for the safe gate near both
 * bounds and the Kimi softplus gate; several sequences in one batch against
 * each alone, state copies, snapshot/rollback, context overflow and bad
 * checkpoints.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_fixture.h"
#include "kda_case.h"

#define PREFIX KDA_CASE_PREFIX

static const tf_plugin_attention *kda_plugin(void)
{
	return attn_fixture_plugin("kda.so", "kda");
}

/* Prefill, decode and chunked prefills of one sequence against the f64
 * reference, and their final states against each other. */
static void check_layer(bool safe_gate, bool low_rank, float dt_shift, int width,
			uint64_t seed)
{
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init_gates(&c, safe_gate, low_rank, dt_shift, width, seed);
	const int H = c.w.hidden;
	const int64_t n = 150;
	tf_testhost *th = kda_case_host(&c, NULL);

	float *x = malloc((size_t)n * H * sizeof(float));
	float *y = malloc((size_t)n * H * sizeof(float));
	float *yd = malloc((size_t)n * H * sizeof(float));
	tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);

	kda_ref_state rs;
	kda_ref_state_init(&rs, &c.w);
	kda_case_reference(&c, &rs, x, n, yd);

	static const int whole[] = { 150 }, decode[] = { 1 }, mixed[] = { 7, 33, 1, 64, 20 },
			 verify[] = { 3, 5, 2 };
	const struct { const int *s; int n; const char *what; } plans[] = {
		{ whole, 1, "one prefill" }, { decode, 1, "decode" },
		{ mixed, 5, "chunked prefill" }, { verify, 3, "short runs" },
	};
	float *state0 = NULL;
	void *inst = attn_fixture_open(p, th, PREFIX, 256);
	for (size_t k = 0; k < sizeof(plans) / sizeof(plans[0]); k++) {
		void *st = attn_fixture_state(p, inst, 256);
		for (int64_t i = 0; i < n * H; i++)
			y[i] = NAN;
		attn_fixture_run(p, inst, st, x, n, H, plans[k].s, plans[k].n, y);
		cr_expect_eq(p->state_len(inst, st), n);
		double e = tf_test_rel_err(y, yd, (size_t)n * H, 1e-3);
		cr_log_info("%s (safe_gate %d, low rank %d, dt shift %g): rel err %.3g",
			    plans[k].what, safe_gate, low_rank, dt_shift, e);
		cr_expect(e < 2e-5, "%s (safe_gate %d, low rank %d, dt shift %g): rel err %.3g vs f64",
			  plans[k].what, safe_gate, low_rank, dt_shift, e);
		/* A kda snapshot is a 16-byte header, then the recurrent state
		 * [heads, dim, dim] and the conv history. */
		float *snap = attn_fixture_snapshot(p, inst, st);
		size_t nf = (p->state_snapshot_size(inst, st) - 16) / sizeof(float);
		p->state_free(inst, st);
		if (!state0) {
			state0 = snap;
			/* The final recurrent state matches the reference's too. */
			size_t ns = (size_t)c.w.heads * c.w.dim * c.w.dim;
			float *sd = malloc(ns * sizeof(float));
			for (size_t i = 0; i < ns; i++)
				sd[i] = (float)rs.S[i];
			double es = tf_test_rel_err(snap + 4, sd, ns, 1e-3);
			cr_expect(es < 2e-5, "final state: rel err %.3g vs f64", es);
			free(sd);
		} else {
			double es = tf_test_rel_err(snap + 4, state0 + 4, nf, 1e-3);
			cr_expect(es < 2e-5, "%s: final state differs from one prefill by %.3g",
				  plans[k].what, es);
			free(snap);
		}
	}
	p->layer_fini(inst);
	free(state0);
	kda_ref_state_free(&rs);
	free(x);
	free(y);
	free(yd);
	tf_testhost_free(th);
	kda_case_free(&c);
}

Test(kda, safe_gate_mid_range_matches_f64) { check_layer(true, false, 0.0f, 4, 11); }
Test(kda, safe_gate_near_lower_bound_matches_f64) { check_layer(true, false, 12.0f, 4, 12); }
Test(kda, safe_gate_near_zero_matches_f64) { check_layer(true, false, -12.0f, 4, 13); }
Test(kda, kimi_softplus_gate_matches_f64) { check_layer(false, false, 2.0f, 4, 14); }
Test(kda, kimi_low_rank_gates_match_f64) { check_layer(false, true, 2.0f, 4, 15); }
/* Other widths config.json may give: no history at all, and one step. */
Test(kda, conv_widths_1_and_2_match_f64)
{
	check_layer(true, false, 0.0f, 1, 16);
	check_layer(true, false, 0.0f, 2, 17);
}

Test(kda, state_bytes_is_the_snapshot_payload)
{
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 3);
	tf_testhost *th = kda_case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 64);
	void *st = attn_fixture_state(p, inst, 64);
	int64_t bytes = p->state_bytes(tf_testhost_host(th), 0, 64);
	/* 3 heads x 16 x 16 recurrent + 3 x 48 channels x 3 taps of history */
	cr_expect_eq(bytes, 4 * (3 * 16 * 16 + 3 * 48 * 3));
	cr_expect_eq(p->state_snapshot_size(inst, st), (size_t)bytes + 16);
	p->state_free(inst, st);
	p->layer_fini(inst);
	tf_testhost_free(th);
	kda_case_free(&c);
}

/* Run N, snapshot, run M, roll back, run the same M: identical outputs. */
Test(kda, rollback_replays_identically)
{
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 21);
	tf_testhost *th = kda_case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 128);
	void *st = attn_fixture_state(p, inst, 128);
	void *snap = attn_fixture_expect_replay(p, inst, st, c.w.hidden, 37, 20, 64);

	/* 37 tokens do not fit a state of 16. */
	void *small = attn_fixture_state(p, inst, 16);
	cr_expect_eq(p->state_rollback(inst, small, snap), TF_ERR_INVALID);
	cr_expect_eq(p->state_len(inst, small), 0);
	p->state_reset(inst, st);
	cr_expect_eq(p->state_len(inst, st), 0);
	memset(snap, 0, p->state_snapshot_size(inst, st));
	cr_expect_eq(p->state_rollback(inst, st, snap), TF_ERR_INVALID,
		     "a zeroed buffer is no snapshot");
	free(snap);
	p->state_free(inst, small);
	p->state_free(inst, st);
	p->layer_fini(inst);
	tf_testhost_free(th);
	kda_case_free(&c);
}

Test(kda, forward_beyond_context_is_a_range_error)
{
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 4);
	const int H = c.w.hidden;
	tf_testhost *th = kda_case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 8);
	void *st = attn_fixture_state(p, inst, 8);
	float x[10 * 48], y[10 * 48];
	const int64_t five = 5, four = 4, three = 3;
	uint64_t seed = 8;
	tf_test_fill_uniform(x, 10 * (size_t)H, 1.0f, &seed);
	cr_assert_eq(attn_fixture_run_batch(p, inst, &st, &five, 1, x, H, y), TF_OK);
	cr_expect_eq(attn_fixture_run_batch(p, inst, &st, &four, 1, x, H, y), TF_ERR_RANGE);
	cr_expect(strstr(tf_testhost_last_error(th), "context"), "%s", tf_testhost_last_error(th));
	cr_expect_eq(p->state_len(inst, st), 5, "a refused forward consumes nothing");
	cr_expect_eq(attn_fixture_run_batch(p, inst, &st, &three, 1, x, H, y), TF_OK);
	p->state_free(inst, st);
	p->layer_fini(inst);
	tf_testhost_free(th);
	kda_case_free(&c);
}

Test(kda, missing_tensor_is_named)
{
	static const char *const leaves[] = { "A_log", "dt_bias", "k_conv1d.weight",
					      "o_norm.weight", "g_proj.weight" };
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 5);
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		tf_testhost *th = kda_case_host(&c, leaves[i]);
		char want[128];
		size_t stem = strcspn(leaves[i], ".");
		snprintf(want, sizeof(want), "%s.%.*s", PREFIX, (int)stem, leaves[i]);
		attn_fixture_expect_init_error(kda_plugin(), th, PREFIX, TF_ERR_NOT_FOUND, want);
		tf_testhost_free(th);
	}
	kda_case_free(&c);
}

/* config.json disagrees with the tensors (3 heads of 16): the first
 * tensor checked against the config is named. */
Test(kda, config_inconsistent_with_tensors_is_named)
{
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 6);
	c.cfg.num_attention_heads = 4;
	c.cfg.head_dim = 12;
	tf_testhost *th = kda_case_host(&c, NULL);
	/* 4 x 12 == 3 x 16: the projections fit, the per-head b_proj does not */
	attn_fixture_expect_init_error(kda_plugin(), th, PREFIX, TF_ERR_FORMAT, PREFIX ".b_proj");
	tf_testhost_free(th);

	c.cfg.num_attention_heads = 3;
	c.cfg.head_dim = 20;
	th = kda_case_host(&c, NULL);
	attn_fixture_expect_init_error(kda_plugin(), th, PREFIX, TF_ERR_FORMAT, PREFIX ".q_proj");
	tf_testhost_free(th);

	/* Right projections, a conv weight of the wrong width. */
	c.cfg.num_attention_heads = 3;
	c.cfg.head_dim = 16;
	c.cfg.short_conv_kernel_size = 3;
	th = kda_case_host(&c, NULL);
	attn_fixture_expect_init_error(kda_plugin(), th, PREFIX, TF_ERR_FORMAT, PREFIX ".q_conv1d.weight");
	cr_expect(strstr(tf_testhost_last_error(th), "[48, 1, 3]"), "%s", tf_testhost_last_error(th));
	tf_testhost_free(th);
	kda_case_free(&c);
}

/* A small tensor in a dtype the plugin cannot widen. */
Test(kda, wrong_dtype_is_named)
{
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 7);
	tf_testhost *th = kda_case_host(&c, "dt_bias");
	const int64_t P = (int64_t)c.w.heads * c.w.dim;
	int32_t *bad = calloc((size_t)P, sizeof(int32_t));
	tf_testhost_add_tensor(th, PREFIX ".dt_bias", TF_DTYPE_I32, 1, &P, bad);
	attn_fixture_expect_init_error(kda_plugin(), th, PREFIX, TF_ERR_FORMAT,
				       PREFIX ".dt_bias: dtype I32");
	free(bad);
	tf_testhost_free(th);
	kda_case_free(&c);
}

/* Two layers alive at once share the plugin's activation arena: a large
 * prefill on one (growing the arena) between decode steps of the other
 * must not disturb either. */
Test(kda, layers_interleaved_share_the_arena)
{
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 17);
	const int H = c.w.hidden, n = 100;
	uint64_t seed = 9;
	tf_testhost *th = kda_case_host(&c, NULL);
	void *a = attn_fixture_open(p, th, PREFIX, 128), *b = attn_fixture_open(p, th, PREFIX, 128);
	void *sa = attn_fixture_state(p, a, 128), *sb = attn_fixture_state(p, b, 128);
	float *x = malloc((size_t)n * H * sizeof(float));
	float *ya = malloc((size_t)n * H * sizeof(float)), *yb = malloc((size_t)n * H * sizeof(float));
	tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);
	static const int one[] = { 1 }, all[] = { 100 };

	attn_fixture_run(p, a, sa, x, 10, H, one, 1, ya);
	attn_fixture_run(p, b, sb, x, n, H, all, 1, yb);
	attn_fixture_run(p, a, sa, x + 10 * H, n - 10, H, one, 1, ya + 10 * H);
	double e = tf_test_rel_err(ya, yb, (size_t)n * H, 1e-3);
	cr_expect(e < 2e-5, "interleaved layers disagree: %.3g", e);
	p->state_free(a, sa);
	p->state_free(b, sb);
	p->layer_fini(a);
	p->layer_fini(b);
	free(x);
	free(ya);
	free(yb);
	tf_testhost_free(th);
	kda_case_free(&c);
}

/* max |a - b| over max |b|: within fp32 rounding of the same sums. */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]);
		d = e > d || isnan(e) ? e : d;
		m = fabs(b[i]) > m ? fabs(b[i]) : m;
	}
	return d / (m > 0 ? m : 1);
}

/* Three sequences of 5, 40 and 70 prompt rows (recurrent, one chunk, two
 * chunks), then one decode row each: one batch equals each alone. */
Test(kda, batched_equals_alone)
{
	enum { NSEQ = 3 };
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 31);
	const int H = c.w.hidden;
	const int64_t len[NSEQ] = { 5, 40, 70 }, one[NSEQ] = { 1, 1, 1 };
	const int64_t n = 5 + 40 + 70, total = n + NSEQ;
	tf_testhost *th = kda_case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 128);
	float *x = malloc((size_t)total * H * sizeof(float));
	float *ya = malloc((size_t)total * H * sizeof(float));
	float *yb = malloc((size_t)total * H * sizeof(float));
	void *alone[NSEQ], *batch[NSEQ];
	uint64_t seed = 32;
	cr_assert(x && ya && yb);
	tf_test_fill_uniform(x, (size_t)total * H, 1.0f, &seed);
	for (int64_t i = 0; i < total * H; i++)
		ya[i] = yb[i] = NAN;

	for (int k = 0, row = 0; k < NSEQ; row += (int)len[k], k++) {
		const int whole = (int)len[k], dec = 1;
		alone[k] = attn_fixture_state(p, inst, 128);
		batch[k] = attn_fixture_state(p, inst, 128);
		attn_fixture_run(p, inst, alone[k], x + (size_t)row * H, len[k], H, &whole, 1,
				 ya + (size_t)row * H);
		attn_fixture_run(p, inst, alone[k], x + (size_t)(n + k) * H, 1, H, &dec, 1,
				 ya + (size_t)(n + k) * H);
	}
	cr_assert_eq(attn_fixture_run_batch(p, inst, batch, len, NSEQ, x, H, yb), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_assert_eq(attn_fixture_run_batch(p, inst, batch, one, NSEQ, x + (size_t)n * H, H,
					    yb + (size_t)n * H),
		     TF_OK, "%s", tf_testhost_last_error(th));
	double e = max_rel_diff(yb, ya, (size_t)total * H);
	cr_expect(e <= 1e-5, "batched vs alone: max diff %.3g of max |y|", e);
	for (int k = 0; k < NSEQ; k++) {
		cr_expect_eq(p->state_len(inst, batch[k]), len[k] + 1);
		p->state_free(inst, alone[k]);
		p->state_free(inst, batch[k]);
	}
	p->layer_fini(inst);
	free(x);
	free(ya);
	free(yb);
	tf_testhost_free(th);
	kda_case_free(&c);
}

/* A copy of a state after a prefix continues exactly as the original. */
Test(kda, state_copy_forks_identically)
{
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 33);
	const int H = c.w.hidden, pre = 30, m = 20;
	tf_testhost *th = kda_case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 64), *other = attn_fixture_open(p, th, PREFIX, 64);
	float *x = malloc((size_t)(pre + m) * H * sizeof(float));
	float *y1 = malloc((size_t)(pre + m) * H * sizeof(float));
	float *y2 = malloc((size_t)m * H * sizeof(float));
	static const int whole[] = { 30 }, cont[] = { 7, 1, 12 };
	uint64_t seed = 34;
	cr_assert(x && y1 && y2);
	tf_test_fill_uniform(x, (size_t)(pre + m) * H, 1.0f, &seed);

	void *a = attn_fixture_state(p, inst, 64), *b = attn_fixture_state(p, inst, 64);
	attn_fixture_run(p, inst, b, x + (size_t)pre * H, 5, H, cont, 3, y2);  /* dropped by the copy */
	attn_fixture_run(p, inst, a, x, pre, H, whole, 1, y1);
	cr_assert_eq(p->state_copy(inst, b, a), TF_OK, "%s", tf_testhost_last_error(th));
	cr_expect_eq(p->state_len(inst, b), pre);
	for (size_t i = 0; i < (size_t)m * H; i++)
		y2[i] = NAN;
	attn_fixture_run(p, inst, a, x + (size_t)pre * H, m, H, cont, 3, y1 + (size_t)pre * H);
	attn_fixture_run(p, inst, b, x + (size_t)pre * H, m, H, cont, 3, y2);
	cr_expect(!memcmp(y1 + (size_t)pre * H, y2, (size_t)m * H * sizeof(float)),
		  "the copy continues differently");

	/* A copy needs room in dst, and states of this layer. */
	void *small = attn_fixture_state(p, inst, 16), *foreign = attn_fixture_state(p, other, 64);
	cr_expect_eq(p->state_copy(inst, small, a), TF_ERR_RANGE);
	cr_expect(strstr(tf_testhost_last_error(th), "layer 0 (kda)"), "%s",
		  tf_testhost_last_error(th));
	cr_expect_eq(p->state_len(inst, small), 0);
	cr_expect_eq(p->state_copy(inst, foreign, a), TF_ERR_INVALID);
	p->state_free(inst, small);
	p->state_free(other, foreign);
	p->state_free(inst, a);
	p->state_free(inst, b);
	p->layer_fini(inst);
	p->layer_fini(other);
	free(x);
	free(y1);
	free(y2);
	tf_testhost_free(th);
	kda_case_free(&c);
}

/* A batch refused (one segment past its context, a state twice, no
 * segment) leaves every state as it was: the other sequence then decodes
 * exactly as a twin that never saw the batch. */
Test(kda, refused_batch_touches_no_state)
{
	const tf_plugin_attention *p = kda_plugin();
	struct kda_case c;
	kda_case_init(&c, true, 0.0f, 35);
	const int H = c.w.hidden;
	tf_testhost *th = kda_case_host(&c, NULL);
	void *inst = attn_fixture_open(p, th, PREFIX, 64);
	float x[20 * 48], y[20 * 48], yt[48];
	uint64_t seed = 36;
	tf_test_fill_uniform(x, 20 * (size_t)H, 1.0f, &seed);
	void *a = attn_fixture_state(p, inst, 64), *small = attn_fixture_state(p, inst, 8);
	void *twin = attn_fixture_state(p, inst, 64);
	const int ten = 10, six = 6, one = 1;
	attn_fixture_run(p, inst, a, x, 10, H, &ten, 1, y);
	attn_fixture_run(p, inst, twin, x, 10, H, &ten, 1, y);
	attn_fixture_run(p, inst, small, x, 6, H, &six, 1, y);

	void *both[2] = { a, small }, *same[2] = { a, a };
	const int64_t rows[2] = { 3, 3 };
	cr_expect_eq(attn_fixture_run_batch(p, inst, both, rows, 2, x + 10 * H, H, y), TF_ERR_RANGE);
	cr_expect(strstr(tf_testhost_last_error(th), "layer 0 (kda)"), "%s",
		  tf_testhost_last_error(th));
	cr_expect_eq(attn_fixture_run_batch(p, inst, same, rows, 2, x + 10 * H, H, y),
		     TF_ERR_INVALID);
	cr_expect_eq(attn_fixture_run_batch(p, inst, both, rows, 0, x + 10 * H, H, y),
		     TF_ERR_INVALID);
	cr_expect_eq(p->state_len(inst, a), 10);
	cr_expect_eq(p->state_len(inst, small), 6);

	attn_fixture_run(p, inst, a, x + 16 * H, 1, H, &one, 1, y);
	attn_fixture_run(p, inst, twin, x + 16 * H, 1, H, &one, 1, yt);
	cr_expect(!memcmp(y, yt, sizeof(yt)), "a refused batch changed the other state");
	p->state_free(inst, a);
	p->state_free(inst, small);
	p->state_free(inst, twin);
	p->layer_fini(inst);
	tf_testhost_free(th);
	kda_case_free(&c);
}

static tf_testhost *kda_host(const void *c) { return kda_case_host(c, NULL); }

/* Three heads: a head per rank of three; two ranks cannot share them. */
Test(kda, heads_sharded_over_ranks_sum_to_whole)
{
	for (int low_rank = 0; low_rank < 2; low_rank++) {
		struct kda_case c;
		kda_case_init_gates(&c, true, low_rank, 0.0f, 4, 21 + low_rank);
		attn_fixture_expect_shards(kda_plugin(), kda_host, &c, PREFIX, c.w.hidden, 3, 2,
					   "num_attention_heads", 1e-5, 5);
		kda_case_free(&c);
	}
}
