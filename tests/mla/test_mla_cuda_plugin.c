/*
 * test_mla_cuda_plugin.c - what the conformance suite does not reach in
 * the mla-cuda attention plugin, on the SIMT harness
 * (test_mla_cuda_plugin_sim, tests/simt): against the float64 layer over
 * a cache that crosses a page (a 270-row prefill in the naive form, then
 * absorbed and naive pieces), with and without q_lora, plain RoPE and
 * YaRN, head-wise and per-channel gates, f32 and bf16 caches; a fork
 * (state_copy) continuing as its source; decode steps recorded as graphs
 * across a page boundary giving the bits of launched ones; the refusal of
 * a host-memory backend and of dims the kernels do not take; heads
 * sharded over ranks (tensor parallelism) summing to the whole layer.
 * TF_MLA_CUDA, TF_CUDA_BACKEND and TF_CUDA_QUANT name the cuda-sim
 * modules.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kda/attn_fixture.h"
#include "mla_case.h"
#include "tf/attention.h"

/* The mla plugin is held to 1e-5 (test_mla.c), a bf16 cache against a
 * reference that rounds its cache the same way too. */
#define MLA_CUDA_TOL 1e-5

static const tf_plugin_attention *mla_cuda(void)
{
	return attn_fixture_plugin_at(TF_MLA_CUDA, "mla");
}

static tf_testhost *mla_host(const void *c) { return mla_case_host(c, NULL); }

/* The case's host on backend-cuda-sim with the device linears. */
static tf_testhost *device_host(const struct mla_case *c)
{
	return attn_fixture_device_host(mla_host, c, TF_CUDA_BACKEND, TF_CUDA_QUANT);
}

/* A layer on the device with n rows of inputs and NaN-poisoned outputs
 * in backend memory. */
struct dev_run {
	const tf_plugin_attention *a;
	tf_testhost *th;
	const tf_host *h;
	void *inst;
	float *x, *xd, *yd;             /* host inputs; device inputs, outputs */
	int32_t *pos;
	int64_t n, H;
};

static void dev_open(struct dev_run *r, const struct mla_case *c, int64_t n, uint64_t seed)
{
	r->a = mla_cuda();
	r->th = device_host(c);
	r->h = tf_testhost_host(r->th);
	r->n = n;
	r->H = c->w.hidden;
	const size_t sz = (size_t)(n * r->H);
	const tf_backend *be = r->h->backend;
	float *nan = malloc(sz * sizeof(float));
	r->x = malloc(sz * sizeof(float));
	r->pos = malloc((size_t)n * sizeof(int32_t));
	r->xd = be->alloc(r->h->backend_ctx, sz * sizeof(float));
	r->yd = be->alloc(r->h->backend_ctx, sz * sizeof(float));
	cr_assert(nan && r->x && r->pos && r->xd && r->yd);
	tf_test_fill_uniform(r->x, sz, 1.0f, &seed);
	for (size_t i = 0; i < sz; i++)
		nan[i] = NAN;
	for (int64_t i = 0; i < n; i++)
		r->pos[i] = (int32_t)i;
	cr_assert_eq(be->upload(r->h->backend_ctx, r->xd, r->x, sz * sizeof(float)), TF_OK);
	cr_assert_eq(be->upload(r->h->backend_ctx, r->yd, nan, sz * sizeof(float)), TF_OK);
	free(nan);
	r->inst = attn_fixture_open(r->a, r->th, MLA_CASE_PREFIX, n);
}

/* Rows [from, from + m) through state st into the outputs. */
static void dev_forward(struct dev_run *r, void *st, int64_t from, int64_t m)
{
	const tf_attn_seg seg = { .state = st, .row0 = 0, .n = m };
	const tf_attn_batch b = { .n = m, .pos = r->pos + from, .n_seg = 1, .seg = &seg };
	cr_assert_eq(r->a->forward_batch(r->inst, r->xd + from * r->H, &b, r->yd + from * r->H),
		     TF_OK, "%s", tf_testhost_last_error(r->th));
}

/* Rows [from, from + m) of the inputs (host and device) and positions
 * again at rows [to, to + m): a twin state's. */
static void dev_repeat_rows(struct dev_run *r, int64_t to, int64_t from, int64_t m)
{
	const size_t bytes = (size_t)(m * r->H) * sizeof(float);
	memcpy(r->x + to * r->H, r->x + from * r->H, bytes);
	memcpy(r->pos + to, r->pos + from, (size_t)m * sizeof(int32_t));
	cr_assert_eq(r->h->backend->upload(r->h->backend_ctx, r->xd + to * r->H, r->x + to * r->H,
					   bytes), TF_OK);
}

/* Outputs of rows [from, from + m) into host memory y. */
static void dev_download(struct dev_run *r, int64_t from, int64_t m, float *y)
{
	const tf_backend *be = r->h->backend;
	cr_assert_eq(be->sync(r->h->backend_ctx), TF_OK);
	cr_assert_eq(be->download(r->h->backend_ctx, y, r->yd + from * r->H,
				  (size_t)(m * r->H) * sizeof(float)), TF_OK);
}

static void dev_close(struct dev_run *r)
{
	r->a->layer_fini(r->inst);
	r->h->backend->free(r->h->backend_ctx, r->xd);
	r->h->backend->free(r->h->backend_ctx, r->yd);
	tf_testhost_free(r->th);
	free(r->x);
	free(r->pos);
}

/* A 270-row prefill (naive, two pages), 9 rows (absorbed), two decode
 * steps and 20 rows (naive) in one state, against the float64 layer. */
static void check_f64(bool q_lora, bool head_wise, int yarn, const char *kv_cache,
		      uint64_t seed)
{
	static const int64_t pieces[] = { 270, 9, 1, 1, 20 };
	enum { ROWS = 301 };
	struct mla_case c;
	struct dev_run r;
	void *st = NULL;
	mla_case_init(&c, q_lora, head_wise, yarn, seed);
	c.kv_cache = kv_cache;
	dev_open(&r, &c, ROWS, seed + 1);
	cr_assert_eq(r.a->state_new(r.inst, ROWS, &st), TF_OK);
	for (size_t p = 0, row = 0; p < sizeof(pieces) / sizeof(pieces[0]); row += pieces[p++])
		dev_forward(&r, st, row, pieces[p]);
	cr_assert_eq(r.a->state_len(r.inst, st), ROWS);

	const size_t sz = (size_t)(ROWS * r.H);
	float *y = malloc(sz * sizeof(float)), *yd = malloc(sz * sizeof(float));
	cr_assert(y && yd);
	dev_download(&r, 0, ROWS, y);
	c.w.bf16_cache = !strcmp(kv_cache, "bf16");
	mla_case_reference(&c, r.x, ROWS, yd);
	double e = tf_test_rel_err(y, yd, sz, 1e-3);
	cr_log_info("q_lora %d, head-wise %d, yarn %d, %s cache: rel err %.3g", q_lora, head_wise,
		    yarn, kv_cache, e);
	cr_expect_lt(e, MLA_CUDA_TOL, "q_lora %d, head-wise %d, yarn %d, %s cache: rel err %.3g vs f64",
		     q_lora, head_wise, yarn, kv_cache, e);

	r.a->state_free(r.inst, st);
	dev_close(&r);
	mla_case_free(&c);
	free(y);
	free(yd);
}

Test(mla_cuda_plugin, plain_f32_matches_f64, .timeout = 600)
{
	check_f64(false, true, YARN_NONE, "f32", 71);
}

Test(mla_cuda_plugin, q_lora_yarn_bf16_matches_f64, .timeout = 600)
{
	check_f64(true, false, YARN_MSCALE, "bf16", 72);
}

Test(mla_cuda_plugin, q_lora_yarn_factor_f32_matches_f64, .timeout = 600)
{
	check_f64(true, true, YARN_FACTOR_ONLY, "f32", 73);
}

/* A fork of a two-page cache (state_copy on the device) continues as its
 * source: the same rows give the same bits, and the lengths agree. */
Test(mla_cuda_plugin, fork_continues_as_source, .timeout = 600)
{
	enum { PRE = 260, MORE = 3, ROWS = PRE + 2 * MORE };
	struct mla_case c;
	struct dev_run r;
	void *src = NULL, *fork = NULL;
	mla_case_init(&c, false, true, YARN_NONE, 74);
	c.kv_cache = "bf16";
	dev_open(&r, &c, ROWS, 75);
	cr_assert_eq(r.a->state_new(r.inst, ROWS, &src), TF_OK);
	cr_assert_eq(r.a->state_new(r.inst, ROWS, &fork), TF_OK);
	dev_forward(&r, src, 0, PRE);
	cr_assert_eq(r.a->state_copy(r.inst, fork, src), TF_OK, "%s", tf_testhost_last_error(r.th));
	cr_assert_eq(r.a->state_len(r.inst, fork), PRE);
	/* rows PRE.. on the source, the same inputs (copied to PRE + MORE..) on the fork */
	dev_repeat_rows(&r, PRE + MORE, PRE, MORE);
	dev_forward(&r, src, PRE, MORE);
	dev_forward(&r, fork, PRE + MORE, MORE);
	cr_assert_eq(r.a->state_len(r.inst, fork), PRE + MORE);

	float a[MORE * 48], b[MORE * 48];
	cr_assert_eq(r.H, 48);
	dev_download(&r, PRE, MORE, a);
	dev_download(&r, PRE + MORE, MORE, b);
	cr_expect(!isnan(a[0]) && !memcmp(a, b, sizeof(a)), "a fork's rows differ from its source's");

	r.a->state_free(r.inst, src);
	r.a->state_free(r.inst, fork);
	dev_close(&r);
	mla_case_free(&c);
}

/* Decode steps recorded as graphs (the backend's graph_begin/graph_end,
 * as the engine brackets a step) across the second page give the bits of
 * the same steps launched on a twin state; the first step and the one that
 * takes the page build a graph, the others replay one: the steps after the
 * page replay the graph of those before it, kept beside the page's. */
Test(mla_cuda_plugin, graph_steps_cross_a_page, .timeout = 600)
{
	enum { PRE = 254, K = 5, OFF = PRE + K, ROWS = 2 * OFF };
	static const int want_reused[K] = { 0, 1, 0, 1, 1 };    /* rows 254 .. 258 */
	struct mla_case c;
	struct dev_run r;
	void *eager = NULL, *graphed = NULL;
	mla_case_init(&c, true, false, YARN_MSCALE, 76);
	c.kv_cache = "bf16";
	dev_open(&r, &c, ROWS, 77);
	const tf_backend *be = r.h->backend;
	void *bctx = r.h->backend_ctx;
	cr_assert(tf_backend_has_graph(be));
	dev_repeat_rows(&r, OFF, 0, OFF);       /* the graphed state's rows */
	cr_assert_eq(r.a->state_new(r.inst, ROWS, &eager), TF_OK);
	cr_assert_eq(r.a->state_new(r.inst, ROWS, &graphed), TF_OK);
	dev_forward(&r, eager, 0, PRE);
	dev_forward(&r, graphed, OFF, PRE);
	for (int t = 0; t < K; t++) {
		int reused = -1;
		dev_forward(&r, eager, PRE + t, 1);
		cr_assert_eq(be->graph_begin(bctx), TF_OK, "%s", tf_testhost_last_error(r.th));
		dev_forward(&r, graphed, OFF + PRE + t, 1);
		cr_assert_eq(be->graph_end(bctx, 1, &reused), TF_OK, "%s",
			     tf_testhost_last_error(r.th));
		cr_expect_eq(reused, want_reused[t], "row %d: reused %d", PRE + t, reused);
	}
	cr_assert_eq(r.a->state_len(r.inst, graphed), OFF);

	float a[K * 48], b[K * 48];
	cr_assert_eq(r.H, 48);
	dev_download(&r, PRE, K, a);
	dev_download(&r, OFF + PRE, K, b);
	cr_expect(!isnan(a[0]) && !memcmp(a, b, sizeof(a)),
		  "graphed decode steps differ from launched ones");
	r.a->state_free(r.inst, eager);
	r.a->state_free(r.inst, graphed);
	dev_close(&r);
	mla_case_free(&c);
}

/* backend-cpu has no device stream: probe declines and layer_init fails,
 * naming the backend and what the plugin needs. */
Test(mla_cuda_plugin, declines_host_backend)
{
	const tf_plugin_attention *a = mla_cuda();
	struct mla_case c;
	const char *why = NULL;
	mla_case_init(&c, false, true, YARN_NONE, 76);
	tf_testhost *th = mla_case_host(&c, NULL);
	const tf_host *h = tf_testhost_host(th);

	cr_assert_eq(a->hdr.probe(h, &why), 0);
	cr_assert(why && strstr(why, "needs backend cuda-sim"), "%s", why ? why : "(none)");
	attn_fixture_expect_init_error(a, th, MLA_CASE_PREFIX, TF_ERR_UNSUPPORTED,
				       "layer 0 (mla-cuda): backend cpu: needs backend cuda-sim");
	tf_testhost_free(th);
	mla_case_free(&c);
}

/* kv_lora_rank 520: beyond the kernels' 512, refused at layer_init. */
Test(mla_cuda_plugin, refuses_rank_beyond_kernels)
{
	const tf_plugin_attention *a = mla_cuda();
	struct mla_case c;
	mla_case_init_dims(&c, false, true, YARN_NONE, 16, 12, 520, 77);
	tf_testhost *th = device_host(&c);
	attn_fixture_expect_init_error(a, th, MLA_CASE_PREFIX, TF_ERR_UNSUPPORTED,
				       "layer 0 (mla-cuda): kv_lora_rank 520");
	tf_testhost_free(th);
	mla_case_free(&c);
}

static tf_testhost *device_host_of(const void *c) { return device_host(c); }

/* Tensor parallel as the mla plugin (test_mla.c): each rank's heads
 * (their rows of q or q_b_proj, kv_b_proj and g_proj, dense's columns,
 * through the device linears' parts; the latent path whole on each), the
 * ranks' outputs summed equal to the whole layer's on the device, a
 * 20-row naive prefill then absorbed decode steps.  Three heads over
 * three ranks, with and without q_lora; two ranks cannot share them. */
Test(mla_cuda_plugin, heads_sharded_over_ranks_sum_to_whole)
{
	for (int q_lora = 0; q_lora < 2; q_lora++) {
		struct mla_case c;
		mla_case_init(&c, q_lora, !q_lora, YARN_NONE, 41 + q_lora);
		c.kv_cache = "f32";
		attn_fixture_expect_shards(mla_cuda(), device_host_of, &c, MLA_CASE_PREFIX,
					   c.w.hidden, 3, 2, "num_attention_heads", MLA_CUDA_TOL, 6);
		mla_case_free(&c);
	}
}
