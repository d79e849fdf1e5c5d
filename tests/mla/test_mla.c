/*
 * test_mla.c - the mla plugin through its ABI, with random bf16 weights in a
 * test host, against the float64 reference layer (mla_ref.c): the naive
 * form (prefill), the absorbed form (decode, short verify runs) and mixes
 * of both over one cache must all agree with it, with plain RoPE, YaRN, the
 * q_lora variant and the element-wise gate, with a float cache closely and
 * a bf16 cache within its rounding; several sequences in one batch as
 * alone, forks, pages taken on demand, snapshot/rollback, context overflow,
 * out of memory and bad checkpoints.
 */
#include <criterion/criterion.h>
#if defined(__SANITIZE_ADDRESS__)
/* sanitizer/allocator_interface.h, which GCC does not ship */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kda/attn_fixture.h"
#include "mla_case.h"

#define PREFIX MLA_CASE_PREFIX

static const tf_plugin_attention *mla_plugin(void)
{
	return attn_fixture_plugin("mla.so", "mla");
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

static void poison(float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = NAN;
}

/* x through a fresh sequence in the pieces of `plan`, into NaN-poisoned y. */
static void run_plan(const tf_plugin_attention *p, tf_testhost *th, const float *x, int64_t n,
		     int H, const struct plan *plan, float *y)
{
	void *inst = attn_fixture_open(p, th, PREFIX, n + 5);
	void *state = attn_fixture_state(p, inst, n + 5);
	poison(y, (size_t)n * H);
	attn_fixture_run(p, inst, state, x, n, H, plan->s, plan->n, y);
	cr_expect_eq(p->state_len(inst, state), n);
	p->state_free(inst, state);
	p->layer_fini(inst);
}

/*
 * Against the exact float64 layer, a bf16 cache errs by its rounding: each
 * cached element (normed latent, roped k_pe) rounded once to 8 significant
 * bits, relative error at most u = 2^-8.  Each output is a softmax average
 * of values W_UV c, whose rounded c err by about u relative, with weights
 * exp(s) whose scores s = q.k err by at most u sum|q_i k_i|, a few u with
 * these scores of order 1.  So a few u in all, against the largest output:
 * 4u = 2^-6 (measured: about u / 2, logged).
 */
#define BF16_TOL (4.0 / 256)

/*
 * Against a float64 layer that rounds its cache to bf16 the same way, the
 * float error is back: the reference rounds float64 values cast to float,
 * the plugin its float32 results, and the two part only where a value lies
 * within float error of a rounding tie (about one element in 2^14; none
 * with these seeds, and one would move the outputs near it by up to ~u).
 */
#define BF16_ROUNDED_TOL 1e-5

static void check_layer_kv(bool q_lora, bool head_wise, int yarn, int64_t n, uint64_t seed,
			   const char *kv_cache, double tol)
{
	const tf_plugin_attention *p = mla_plugin();
	const bool bf16 = !strcmp(kv_cache, "bf16");
	struct mla_case c;
	mla_case_init(&c, q_lora, head_wise, yarn, seed);
	c.kv_cache = kv_cache;
	const int H = c.w.hidden;
	tf_testhost *th = mla_case_host(&c, NULL);

	float *x = malloc((size_t)n * H * sizeof(float));
	float *y = malloc((size_t)n * H * sizeof(float));
	float *yd = malloc((size_t)n * H * sizeof(float));
	float *ye = malloc((size_t)n * H * sizeof(float));
	tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);
	mla_case_reference(&c, x, n, ye);
	c.w.bf16_cache = bf16;
	mla_case_reference(&c, x, n, yd);

	for (size_t k = 0; k < sizeof(plans) / sizeof(plans[0]); k++) {
		run_plan(p, th, x, n, H, &plans[k], y);
		double e = tf_test_rel_err(y, yd, (size_t)n * H, 1e-3);
		double ee = tf_test_rel_err(y, ye, (size_t)n * H, 1e-3);
		cr_log_info("%s (q_lora %d, head-wise %d, yarn %d, %s cache): rel err %.3g, vs an exact cache %.3g",
			    plans[k].what, q_lora, head_wise, yarn, kv_cache, e, ee);
		cr_expect(e < tol, "%s (q_lora %d, head-wise %d, yarn %d, %s cache): rel err %.3g vs f64",
			  plans[k].what, q_lora, head_wise, yarn, kv_cache, e);
		cr_expect(!bf16 || ee < BF16_TOL,
			  "%s (q_lora %d, head-wise %d, yarn %d): bf16 cache's rel err %.3g vs an exact cache",
			  plans[k].what, q_lora, head_wise, yarn, ee);
	}
	free(x);
	free(y);
	free(yd);
	free(ye);
	tf_testhost_free(th);
	mla_case_free(&c);
}

static void check_layer(bool q_lora, bool head_wise, int yarn, int64_t n, uint64_t seed)
{
	check_layer_kv(q_lora, head_wise, yarn, n, seed, "f32", 1e-5);
}

/* 300 tokens: more than one expanded block (and cache page) and several
 * absorbed parts. */
Test(mla, plain_rope_matches_f64) { check_layer(false, true, YARN_NONE, 300, 31); }
Test(mla, yarn_matches_f64) { check_layer(false, true, YARN_FACTOR_ONLY, 60, 32); }
Test(mla, yarn_mscale_matches_f64) { check_layer(false, true, YARN_MSCALE, 60, 33); }
Test(mla, q_lora_matches_f64) { check_layer(true, true, YARN_NONE, 60, 34); }
Test(mla, elementwise_gate_matches_f64) { check_layer(false, false, YARN_NONE, 60, 35); }
Test(mla, bf16_cache_matches_f64)
{
	check_layer_kv(false, true, YARN_NONE, 300, 31, "bf16", BF16_ROUNDED_TOL);
	check_layer_kv(true, false, YARN_MSCALE, 60, 36, "bf16", BF16_ROUNDED_TOL);
}

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
	mla_case_init_dims(&c, false, true, YARN_NONE, 128, 128, 128, seed);
	c.kv_cache = "f32";
	const int H = c.w.hidden;
	const int64_t out = c.w.heads * (c.w.dn + c.w.dv);
	tf_testhost *th = mla_case_host(&c, "kv_b_proj.weight");
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
	mla_case_reference(&c, x, n, yd);

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
	mla_case_free(&c);
}

/* One layer of the small case (nope 16, v 12, kv rank 24: lat 32). */
struct mla_open {
	const tf_plugin_attention *p;
	struct mla_case c;
	tf_testhost *th;
	void *inst;
	int H;
};

static void open_layer(struct mla_open *o, uint64_t seed, const char *kv_cache, int64_t max_ctx)
{
	o->p = mla_plugin();
	mla_case_init(&o->c, false, true, YARN_NONE, seed);
	o->c.kv_cache = kv_cache;
	o->th = mla_case_host(&o->c, NULL);
	o->inst = attn_fixture_open(o->p, o->th, PREFIX, max_ctx);
	o->H = o->c.w.hidden;
}

static void close_layer(struct mla_open *o)
{
	o->p->layer_fini(o->inst);
	tf_testhost_free(o->th);
	mla_case_free(&o->c);
}

/* n random rows of x (free()). */
static float *random_rows(int64_t n, int H, uint64_t seed)
{
	float *x = malloc((size_t)n * H * sizeof(float));
	cr_assert(x);
	tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);
	return x;
}

/* One cache page of lat 32 elements per row, plus its page-table entry. */
#define PAGE_BYTES(elem) (256 * (24 + 8) * (elem) + (int64_t)sizeof(void *))

Test(mla, state_bytes_is_the_full_paged_cache)
{
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	mla_case_init(&c, false, true, YARN_NONE, 3);
	tf_testhost *th = mla_case_host(&c, NULL);
	/* 1000 tokens: 4 pages */
	cr_expect_eq(p->state_bytes(tf_testhost_host(th), 3, 1000), 4 * PAGE_BYTES(2));
	cr_expect_eq(p->state_bytes(tf_testhost_host(th), 3, 1024), 4 * PAGE_BYTES(2));
	tf_testhost_free(th);
	c.kv_cache = "f32";
	th = mla_case_host(&c, NULL);
	cr_expect_eq(p->state_bytes(tf_testhost_host(th), 3, 1000), 4 * PAGE_BYTES(4));
	tf_testhost_free(th);
	c.kv_cache = "f16";
	th = mla_case_host(&c, NULL);
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_INVALID, "kv_cache");
	tf_testhost_free(th);
	mla_case_free(&c);
}

/* Run N, snapshot, run M, roll back, run the same M: identical outputs;
 * across a page boundary. */
Test(mla, rollback_replays_identically)
{
	struct mla_open o;
	open_layer(&o, 21, NULL, 300);
	const tf_plugin_attention *p = o.p;
	void *st = attn_fixture_state(p, o.inst, 300);
	/* Pieces of 4: the size of a drafter's verify batch. */
	void *snap = attn_fixture_expect_replay(p, o.inst, st, o.H, 250, 12, 4);

	/* The cache only truncates: a snapshot ahead of the sequence is refused. */
	void *ahead = attn_fixture_snapshot(p, o.inst, st);
	p->state_reset(o.inst, st);
	cr_expect_eq(p->state_len(o.inst, st), 0);
	cr_expect_eq(p->state_rollback(o.inst, st, ahead), TF_ERR_INVALID);
	cr_expect(strstr(tf_testhost_last_error(o.th), "roll forward"), "%s",
		  tf_testhost_last_error(o.th));
	memset(snap, 0, p->state_snapshot_size(o.inst, st));
	cr_expect_eq(p->state_rollback(o.inst, st, snap), TF_ERR_INVALID,
		     "a zeroed buffer is no snapshot");
	cr_expect_eq(p->state_len(o.inst, st), 0);
	free(ahead);
	free(snap);
	p->state_free(o.inst, st);
	close_layer(&o);
}

Test(mla, forward_beyond_context_is_a_range_error)
{
	struct mla_open o;
	open_layer(&o, 4, NULL, 8);
	const tf_plugin_attention *p = o.p;
	void *st = attn_fixture_state(p, o.inst, 8);
	float *x = random_rows(10, o.H, 8), y[10 * 48];
	int64_t n5 = 5, n4 = 4, n3 = 3;

	/* positions are required; segments must tile the rows */
	tf_attn_seg seg = { .state = st, .row0 = 0, .n = 1 };
	tf_attn_batch b = { .n = 1, .pos = NULL, .n_seg = 1, .seg = &seg };
	cr_expect_eq(p->forward_batch(o.inst, x, &b, y), TF_ERR_INVALID, "positions are required");
	int32_t pos0 = 0;
	b.pos = &pos0;
	seg.row0 = 1;
	cr_expect_eq(p->forward_batch(o.inst, x, &b, y), TF_ERR_INVALID, "a gap before a segment");
	cr_expect_eq(p->state_len(o.inst, st), 0, "a refused forward consumes nothing");

	cr_assert_eq(attn_fixture_run_batch(p, o.inst, &st, &n5, 1, x, o.H, y), TF_OK);
	cr_expect_eq(attn_fixture_run_batch(p, o.inst, &st, &n4, 1, x, o.H, y), TF_ERR_RANGE);
	cr_expect(strstr(tf_testhost_last_error(o.th), "context"), "%s",
		  tf_testhost_last_error(o.th));
	cr_expect_eq(p->state_len(o.inst, st), 5, "a refused forward consumes nothing");
	cr_expect_eq(attn_fixture_run_batch(p, o.inst, &st, &n3, 1, x, o.H, y), TF_OK);
	cr_expect_eq(p->state_len(o.inst, st), 8);
	free(x);
	p->state_free(o.inst, st);
	close_layer(&o);
}

/* A batch whose second sequence would pass its context fails as a whole:
 * the first sequence continues afterwards exactly as one never batched. */
Test(mla, batch_range_error_leaves_every_state)
{
	struct mla_open o;
	open_layer(&o, 9, NULL, 64);
	const tf_plugin_attention *p = o.p;
	void *st[2] = { attn_fixture_state(p, o.inst, 64), attn_fixture_state(p, o.inst, 8) };
	void *ref = attn_fixture_state(p, o.inst, 64);
	float *x = random_rows(16, o.H, 10), *y = malloc(sizeof(float) * 16 * o.H);
	float *y1 = malloc(sizeof(float) * 6 * o.H), *y2 = malloc(sizeof(float) * 6 * o.H);
	int64_t first[2] = { 10, 5 }, more[2] = { 6, 4 }, ten = 10, six = 6;

	cr_assert_eq(attn_fixture_run_batch(p, o.inst, st, first, 2, x, o.H, y), TF_OK);
	cr_expect_eq(attn_fixture_run_batch(p, o.inst, st, more, 2, x, o.H, y), TF_ERR_RANGE);
	cr_expect(strstr(tf_testhost_last_error(o.th), "context"), "%s",
		  tf_testhost_last_error(o.th));
	cr_expect_eq(p->state_len(o.inst, st[0]), 10);
	cr_expect_eq(p->state_len(o.inst, st[1]), 5);

	cr_assert_eq(attn_fixture_run_batch(p, o.inst, &ref, &ten, 1, x, o.H, y), TF_OK);
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, &ref, &six, 1, x + 10 * o.H, o.H, y1), TF_OK);
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, st, &six, 1, x + 10 * o.H, o.H, y2), TF_OK);
	cr_expect(!memcmp(y1, y2, sizeof(float) * 6 * o.H), "the refused batch changed a state");
	free(x);
	free(y);
	free(y1);
	free(y2);
	p->state_free(o.inst, ref);
	p->state_free(o.inst, st[0]);
	p->state_free(o.inst, st[1]);
	close_layer(&o);
}

/*
 * Out of memory for pages: a batch whose second sequence needs more pages
 * than the address space has room for fails TF_ERR_NOMEM naming the
 * tokens, and the first sequence then continues as one never batched.
 * The room is cut with RLIMIT_AS (this test's process only), which ASan's
 * shadow memory does not survive.
 */
Test(mla, out_of_memory_leaves_every_state)
{
#if defined(__SANITIZE_ADDRESS__)
	cr_skip_test("RLIMIT_AS and ASan's shadow memory do not mix");
#else
	enum { BIG = 600000 };  /* 77 MB of f32 pages */
	struct mla_open o;
	open_layer(&o, 19, "f32", BIG);
	const tf_plugin_attention *p = o.p;
	const size_t H = (size_t)o.H;
	void *st[2] = { attn_fixture_state(p, o.inst, 64), attn_fixture_state(p, o.inst, BIG) };
	void *ref = attn_fixture_state(p, o.inst, 64);
	/* untouched beyond the first rows: the batch must fail before reading */
	float *x = calloc((size_t)BIG * H, sizeof(float)), *y = malloc(sizeof(float) * BIG * H);
	float *y1 = malloc(sizeof(float) * 6 * H), *y2 = malloc(sizeof(float) * 6 * H);
	int64_t rows[2] = { 6, BIG - 6 }, ten = 10, six = 6;
	uint64_t seed = 20;
	long vm_pages = 0;

	cr_assert(x && y && y1 && y2);
	tf_test_fill_uniform(x, 16 * H, 1.0f, &seed);
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, &st[0], &ten, 1, x, o.H, y), TF_OK);
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, &ref, &ten, 1, x, o.H, y), TF_OK);

	/* the address space now, after the workers' first forward */
	FILE *f = fopen("/proc/self/statm", "r");
	cr_assert(f && fscanf(f, "%ld", &vm_pages) == 1);
	fclose(f);
	struct rlimit old, cut;
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	cut = old;
	cut.rlim_cur = (rlim_t)vm_pages * (rlim_t)sysconf(_SC_PAGESIZE) + (32u << 20);
	cr_assert_eq(setrlimit(RLIMIT_AS, &cut), 0);
	int rc = attn_fixture_run_batch(p, o.inst, st, rows, 2, x + 10 * H, o.H, y);
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_expect_eq(rc, TF_ERR_NOMEM, "status %d: %s", rc, tf_testhost_last_error(o.th));
	cr_expect(strstr(tf_testhost_last_error(o.th), "out of memory for a cache of"), "%s",
		  tf_testhost_last_error(o.th));
	cr_expect_eq(p->state_len(o.inst, st[0]), 10);
	cr_expect_eq(p->state_len(o.inst, st[1]), 0);

	cr_assert_eq(attn_fixture_run_batch(p, o.inst, &ref, &six, 1, x + 10 * H, o.H, y1), TF_OK);
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, st, &six, 1, x + 10 * H, o.H, y2), TF_OK);
	cr_expect(!memcmp(y1, y2, sizeof(float) * 6 * H), "the failed batch changed a state");
	free(x);
	free(y);
	free(y1);
	free(y2);
	p->state_free(o.inst, ref);
	p->state_free(o.inst, st[0]);
	p->state_free(o.inst, st[1]);
	close_layer(&o);
#endif
}

/*
 * Three sequences of 3, 50 and 300 rows (absorbed, naive, naive across a
 * page) give in one batch what they give alone, and so does a decode row
 * of each: the projections run over other row counts, so equal to float
 * rounding, not bit for bit.
 */
Test(mla, batched_equals_alone)
{
	enum { NS = 3 };
	struct mla_open o;
	open_layer(&o, 11, NULL, 400);
	const tf_plugin_attention *p = o.p;
	const int64_t rows[NS] = { 3, 50, 300 }, ones[NS] = { 1, 1, 1 }, one = 1;
	const int64_t n = 353, H = o.H;
	void *alone[NS], *batch[NS];
	float *x = random_rows(n + NS, o.H, 12);
	float *ya = malloc(sizeof(float) * (n + NS) * H), *yb = malloc(sizeof(float) * (n + NS) * H);

	poison(ya, (size_t)(n + NS) * H);
	poison(yb, (size_t)(n + NS) * H);
	for (int k = 0, r = 0; k < NS; r += rows[k++]) {
		alone[k] = attn_fixture_state(p, o.inst, 400);
		batch[k] = attn_fixture_state(p, o.inst, 400);
		cr_assert_eq(attn_fixture_run_batch(p, o.inst, &alone[k], &rows[k], 1, x + r * H,
						    o.H, ya + r * H), TF_OK);
		cr_assert_eq(attn_fixture_run_batch(p, o.inst, &alone[k], &one, 1,
						    x + (n + k) * H, o.H, ya + (n + k) * H), TF_OK);
	}
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, batch, rows, NS, x, o.H, yb), TF_OK);
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, batch, ones, NS, x + n * H, o.H, yb + n * H),
		     TF_OK);
	double e = tf_test_rel_err(yb, ya, (size_t)n * H, 1e-3);
	double ed = tf_test_rel_err(yb + n * H, ya + n * H, (size_t)NS * H, 1e-3);
	cr_log_info("batched vs alone: prefill rel err %.3g, decode %.3g", e, ed);
	cr_expect(e < 1e-5, "prefill batched vs alone: rel err %.3g", e);
	cr_expect(ed < 1e-5, "decode batched vs alone: rel err %.3g", ed);
	for (int k = 0; k < NS; k++) {
		cr_expect_eq(p->state_len(o.inst, batch[k]), rows[k] + 1);
		p->state_free(o.inst, alone[k]);
		p->state_free(o.inst, batch[k]);
	}
	free(x);
	free(ya);
	free(yb);
	close_layer(&o);
}

/*
 * A verify's rows (pieces of 9: a verify at depth 8) get, bit for bit,
 * what each row gets alone, with 1, 2 or 3 workers: the absorbed form's
 * parts follow each query's own rows, here across a change of their length
 * (a query seeing 1024 rows splits them in parts of 64, one seeing 1025 in
 * parts of 128), and the queries scanned together read each part once.
 */
Test(mla, verify_rows_equal_rows_alone)
{
	enum { PRE = 1010, N = 27 };
	const int64_t pre = PRE, nine = 9, one = 1;
	float *want = NULL;

	for (int threads = 0; threads <= 3; threads++) {
		struct mla_open o;
		struct mla_case c;
		mla_case_init(&c, false, true, YARN_NONE, 52);
		c.threads = threads ? threads : 2;
		o.p = mla_plugin();
		o.c = c;
		o.th = mla_case_host(&o.c, NULL);
		o.inst = attn_fixture_open(o.p, o.th, PREFIX, PRE + N + 1);
		o.H = o.c.w.hidden;
		float *x = random_rows(PRE + N, o.H, 53), *y = malloc(sizeof(float) * (PRE + N) * o.H);
		void *st = attn_fixture_state(o.p, o.inst, PRE + N + 1);
		cr_assert(y);
		poison(y, (size_t)(PRE + N) * o.H);
		cr_assert_eq(attn_fixture_run_batch(o.p, o.inst, &st, &pre, 1, x, o.H, y), TF_OK);
		/* threads 0: the reference, two workers a row at a time */
		for (int64_t i = PRE; i < PRE + N; i += threads ? 9 : 1)
			cr_assert_eq(attn_fixture_run_batch(o.p, o.inst, &st, threads ? &nine : &one,
							    1, x + i * o.H, o.H, y + i * o.H),
				     TF_OK);
		if (!want) {
			want = y;
			y = NULL;
		} else {
			for (int64_t i = PRE; i < PRE + N; i++)
				cr_expect(!memcmp(y + i * o.H, want + i * o.H, sizeof(float) * o.H),
					  "%d workers: row %lld of a 9-row piece differs from it alone",
					  threads, (long long)i);
		}
		o.p->state_free(o.inst, st);
		free(x);
		free(y);
		close_layer(&o);
	}
	free(want);
}

/*
 * Verifies of several sequences in one batch, with a prefill between
 * them: the absorbed form's rounds take 16 queries from whichever
 * sequences come (here 9 + 9 + 9, so a round ends inside a sequence's
 * rows), and every row gets, bit for bit, what its sequence gets alone.
 */
Test(mla, verify_rounds_across_sequences_equal_alone)
{
	enum { NS = 4 };
	struct mla_open o;
	open_layer(&o, 61, NULL, 400);
	const tf_plugin_attention *p = o.p;
	const int64_t pre[NS] = { 70, 130, 20, 260 }, rows[NS] = { 9, 9, 40, 9 };
	const int64_t n = 9 + 9 + 40 + 9, H = o.H;
	void *alone[NS], *batch[NS];
	float *xp = random_rows(260, o.H, 62), *x = random_rows(n, o.H, 63);
	float *ya = malloc(sizeof(float) * n * H), *yb = malloc(sizeof(float) * n * H);
	float *yp = malloc(sizeof(float) * 260 * H);

	cr_assert(ya && yb && yp);
	poison(ya, (size_t)n * H);
	poison(yb, (size_t)n * H);
	for (int k = 0, r = 0; k < NS; r += rows[k++]) {
		alone[k] = attn_fixture_state(p, o.inst, 400);
		batch[k] = attn_fixture_state(p, o.inst, 400);
		cr_assert_eq(attn_fixture_run_batch(p, o.inst, &alone[k], &pre[k], 1, xp, o.H, yp),
			     TF_OK);
		cr_assert_eq(attn_fixture_run_batch(p, o.inst, &batch[k], &pre[k], 1, xp, o.H, yp),
			     TF_OK);
		cr_assert_eq(attn_fixture_run_batch(p, o.inst, &alone[k], &rows[k], 1, x + r * H,
						    o.H, ya + r * H), TF_OK);
	}
	cr_assert_eq(attn_fixture_run_batch(p, o.inst, batch, rows, NS, x, o.H, yb), TF_OK);
	for (int64_t i = 0; i < n; i++)
		cr_expect(!memcmp(ya + i * H, yb + i * H, sizeof(float) * H),
			  "batch row %lld differs from its sequence alone", (long long)i);
	for (int k = 0; k < NS; k++) {
		cr_expect_eq(p->state_len(o.inst, batch[k]), pre[k] + rows[k]);
		p->state_free(o.inst, alone[k]);
		p->state_free(o.inst, batch[k]);
	}
	free(xp);
	free(x);
	free(ya);
	free(yb);
	free(yp);
	close_layer(&o);
}

/*
 * A fork (state_copy) of a 300-token sequence into a state that held
 * other tokens continues bit for bit as the sequence itself would, and
 * owns its rows: the source refilled with other tokens changes nothing.
 */
Test(mla, fork_continues_identically)
{
	static const int pieces[] = { 64, 100, 7, 129 }, cont[] = { 1, 7, 32 };
	struct mla_open o;
	open_layer(&o, 13, NULL, 400);
	const tf_plugin_attention *p = o.p;
	const int64_t H = o.H;
	void *src = attn_fixture_state(p, o.inst, 400), *ref = attn_fixture_state(p, o.inst, 400);
	void *fork = attn_fixture_state(p, o.inst, 400), *small = attn_fixture_state(p, o.inst, 100);
	float *x = random_rows(340, o.H, 14), *junk = random_rows(300, o.H, 15);
	float *y = malloc(sizeof(float) * 300 * H);
	float *y1 = malloc(sizeof(float) * 40 * H), *y2 = malloc(sizeof(float) * 40 * H);

	attn_fixture_run(p, o.inst, src, x, 300, o.H, pieces, 4, y);
	attn_fixture_run(p, o.inst, ref, x, 300, o.H, pieces, 4, y);
	attn_fixture_run(p, o.inst, fork, junk, 20, o.H, cont, 3, y);
	cr_assert_eq(p->state_copy(o.inst, fork, src), TF_OK);
	cr_expect_eq(p->state_len(o.inst, fork), 300);
	cr_expect_eq(p->state_copy(o.inst, small, src), TF_ERR_RANGE, "300 tokens into 100");
	cr_expect_eq(p->state_len(o.inst, small), 0);

	p->state_reset(o.inst, src);
	attn_fixture_run(p, o.inst, src, junk, 300, o.H, pieces, 4, y);
	poison(y2, (size_t)40 * H);
	attn_fixture_run(p, o.inst, ref, x + 300 * H, 40, o.H, cont, 3, y1);
	attn_fixture_run(p, o.inst, fork, x + 300 * H, 40, o.H, cont, 3, y2);
	cr_expect(!memcmp(y1, y2, sizeof(float) * 40 * H), "the fork continues differently");
	free(x);
	free(junk);
	free(y);
	free(y1);
	free(y2);
	p->state_free(o.inst, src);
	p->state_free(o.inst, ref);
	p->state_free(o.inst, fork);
	p->state_free(o.inst, small);
	close_layer(&o);
}

/* Bytes malloc has handed out and not had back, touched or not: glibc's
 * main arena (where this thread allocates) and every mmapped block, or
 * the sanitizer's count where it replaces malloc. */
static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd;
#endif
}

/*
 * 64 sequences of a 262144-token context (a full bf16 cache is 16 MiB
 * each, 1 GiB in all) fed 10 tokens each take one page and a page table
 * apiece, measured as heap bytes in use; the page tables' share proves
 * the count sees the plugin's allocations.
 */
Test(mla, pages_are_taken_as_the_sequence_grows)
{
	enum { NS = 64, CTX = 262144 };
	struct mla_open o;
	open_layer(&o, 17, NULL, CTX);
	const tf_plugin_attention *p = o.p;
	const size_t table = CTX / 256 * sizeof(void *), page = 256 * (24 + 8) * 2;
	void *st[NS];
	float *x = random_rows(10, o.H, 18), y[10 * 48];
	const int ten[] = { 10 };

	cr_expect_eq(p->state_bytes(tf_testhost_host(o.th), 3, CTX),
		     (int64_t)(CTX / 256) * PAGE_BYTES(2), "state_bytes is the worst case");
	/* the activation arena grows on a first forward: not a state's */
	st[0] = attn_fixture_state(p, o.inst, CTX);
	attn_fixture_run(p, o.inst, st[0], x, 10, o.H, ten, 1, y);
	p->state_free(o.inst, st[0]);

	size_t before = heap_in_use();
	for (int k = 0; k < NS; k++) {
		st[k] = attn_fixture_state(p, o.inst, CTX);
		attn_fixture_run(p, o.inst, st[k], x, 10, o.H, ten, 1, y);
	}
	size_t used = heap_in_use() - before;
	cr_log_info("64 states of 10 tokens: %zu bytes (a page %zu, a table %zu)", used, page,
		    table);
	cr_expect_geq(used, NS * table, "the count misses the page tables: %zu bytes", used);
	cr_expect_leq(used, NS * (table + page + 1024), "%zu bytes for 64 x 10 tokens", used);
	for (int k = 0; k < NS; k++)
		p->state_free(o.inst, st[k]);
	free(x);
	close_layer(&o);
}

Test(mla, missing_tensor_is_named)
{
	static const char *const leaves[] = { "kv_a_layernorm.weight", "kv_b_proj.weight",
					      "dense.weight", "g_proj.weight", "q_proj.weight" };
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	mla_case_init(&c, false, true, YARN_NONE, 5);
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		tf_testhost *th = mla_case_host(&c, leaves[i]);
		char want[128];
		snprintf(want, sizeof(want), "%s.%.*s", PREFIX, (int)strcspn(leaves[i], "."),
			 leaves[i]);
		attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_NOT_FOUND, want);
		tf_testhost_free(th);
	}
	mla_case_free(&c);

	/* q_lora: its norm weight is required */
	mla_case_init(&c, true, true, YARN_NONE, 5);
	tf_testhost *th = mla_case_host(&c, "q_a_layernorm.weight");
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_NOT_FOUND, PREFIX ".q_a_layernorm");
	tf_testhost_free(th);
	mla_case_free(&c);
}

/* config.json disagrees with the tensors: the tensor is named. */
Test(mla, config_inconsistent_with_tensors_is_named)
{
	const tf_plugin_attention *p = mla_plugin();
	struct mla_case c;
	mla_case_init(&c, false, true, YARN_NONE, 6);
	c.cfg.kv_lora_rank = 20;        /* tensors hold 24 */
	tf_testhost *th = mla_case_host(&c, NULL);
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_FORMAT, PREFIX ".kv_a_proj_with_mqa");
	tf_testhost_free(th);

	c.cfg.kv_lora_rank = 24;
	c.cfg.num_attention_heads = 4;  /* tensors hold 3 heads */
	th = mla_case_host(&c, NULL);
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_FORMAT, PREFIX ".q_proj");
	tf_testhost_free(th);

	c.cfg.num_attention_heads = 3;
	c.cfg.qk_rope_head_dim = 7;     /* odd: no rope pairs */
	th = mla_case_host(&c, NULL);
	attn_fixture_expect_init_error(p, th, PREFIX, TF_ERR_INVALID, "qk_rope_head_dim");
	tf_testhost_free(th);
	mla_case_free(&c);
}

static tf_testhost *mla_host(const void *c) { return mla_case_host(c, NULL); }

/* Three heads: a head per rank of three (the latent path on each);
 * two ranks cannot share them. */
Test(mla, heads_sharded_over_ranks_sum_to_whole)
{
	for (int q_lora = 0; q_lora < 2; q_lora++) {
		struct mla_case c;
		mla_case_init(&c, q_lora, !q_lora, YARN_NONE, 41 + q_lora);
		c.kv_cache = "f32";
		attn_fixture_expect_shards(mla_plugin(), mla_host, &c, PREFIX, c.w.hidden, 3, 2,
					   "num_attention_heads", 1e-5, 6);
		mla_case_free(&c);
	}
}
