/*
 * test_kda_cuda_plugin.c - what the conformance suite does not reach in
 * the kda-cuda attention plugin, on the SIMT harness
 * (test_kda_cuda_plugin_sim, tests/simt): Kimi's low-rank gates (f_a/f_b,
 * g_a/g_b through head_dim) with its softplus gate against the float64
 * layer, prefill pieces and decode steps in one state; the refusal of a
 * host-memory backend, naming it; the refusal of a head size the
 * kernels do not take; heads sharded over ranks (tensor parallelism)
 * summing to the whole layer.  TF_KDA_CUDA, TF_CUDA_BACKEND and
 * TF_CUDA_QUANT name the cuda-sim modules.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kda/attn_fixture.h"
#include "kda/kda_case.h"
#include "tf/attention.h"

/* The kda plugin is held to 2e-5 (test_kda.c). */
#define KDA_CUDA_TOL 2e-5

static const tf_plugin_attention *kda_cuda(void)
{
	return attn_fixture_plugin_at(TF_KDA_CUDA, "kda");
}

static tf_testhost *kda_host(const void *c) { return kda_case_host(c, NULL); }

/* The case's host on backend-cuda-sim with the device linears. */
static tf_testhost *device_host(const struct kda_case *c)
{
	return attn_fixture_device_host(kda_host, c, TF_CUDA_BACKEND, TF_CUDA_QUANT);
}

Test(kda_cuda_plugin, low_rank_gates_match_f64)
{
	static const int64_t pieces[] = { 7, 20, 1, 1 };
	enum { ROWS = 29 };
	const tf_plugin_attention *a = kda_cuda();
	struct kda_case c;
	kda_case_init_shape(&c, false, true, 0.0f, 4, 2, 32, 61);
	tf_testhost *th = device_host(&c);
	const tf_host *h = tf_testhost_host(th);
	const tf_backend *be = h->backend;
	const int64_t H = c.w.hidden;
	const size_t n = (size_t)(ROWS * H);
	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
	float *yd = malloc(n * sizeof(float));
	float *xd = be->alloc(h->backend_ctx, n * sizeof(float));
	float *ydev = be->alloc(h->backend_ctx, n * sizeof(float));
	int32_t pos[ROWS];
	uint64_t seed = 62;
	void *inst = NULL, *st = NULL;
	kda_ref_state rs;

	cr_assert(x && y && yd && xd && ydev);
	tf_test_fill_uniform(x, n, 1.0f, &seed);
	for (size_t i = 0; i < n; i++)
		y[i] = NAN;
	for (int i = 0; i < ROWS; i++)
		pos[i] = i;
	cr_assert_eq(be->upload(h->backend_ctx, xd, x, n * sizeof(float)), TF_OK);
	cr_assert_eq(be->upload(h->backend_ctx, ydev, y, n * sizeof(float)), TF_OK);
	cr_assert_eq(a->layer_init(h, 0, KDA_CASE_PREFIX, ROWS, &inst), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_assert_eq(a->state_new(inst, ROWS, &st), TF_OK);
	for (size_t p = 0, r = 0; p < sizeof(pieces) / sizeof(pieces[0]); r += pieces[p++]) {
		const tf_attn_seg seg = { .state = st, .row0 = 0, .n = pieces[p] };
		const tf_attn_batch b = { .n = pieces[p], .pos = pos + r, .n_seg = 1, .seg = &seg };
		cr_assert_eq(a->forward_batch(inst, xd + r * H, &b, ydev + r * H), TF_OK, "%s",
			     tf_testhost_last_error(th));
	}
	cr_assert_eq(a->state_len(inst, st), ROWS);
	cr_assert_eq(be->sync(h->backend_ctx), TF_OK);
	cr_assert_eq(be->download(h->backend_ctx, y, ydev, n * sizeof(float)), TF_OK);

	kda_ref_state_init(&rs, &c.w);
	kda_case_reference(&c, &rs, x, ROWS, yd);
	kda_ref_state_free(&rs);
	double e = tf_test_rel_err(y, yd, n, 1e-3);
	cr_log_info("low-rank gates, Kimi gate: rel err %.3g", e);
	cr_expect_lt(e, KDA_CUDA_TOL, "low-rank gates: rel err %.3g vs f64", e);

	a->state_free(inst, st);
	a->layer_fini(inst);
	be->free(h->backend_ctx, xd);
	be->free(h->backend_ctx, ydev);
	tf_testhost_free(th);
	kda_case_free(&c);
	free(x); free(y); free(yd);
}

/* backend-cpu has no device stream: probe declines and layer_init fails,
 * naming the backend and what the plugin needs. */
Test(kda_cuda_plugin, declines_host_backend)
{
	const tf_plugin_attention *a = kda_cuda();
	struct kda_case c;
	const char *why = NULL;
	void *inst = NULL;
	kda_case_init(&c, true, 0.0f, 63);
	tf_testhost *th = kda_case_host(&c, NULL);
	const tf_host *h = tf_testhost_host(th);

	cr_assert_eq(a->hdr.probe(h, &why), 0);
	cr_assert(why && strstr(why, "needs backend cuda-sim"), "%s", why ? why : "(none)");
	cr_assert_eq(a->layer_init(h, 0, KDA_CASE_PREFIX, 16, &inst), TF_ERR_UNSUPPORTED);
	cr_assert_null(inst);
	cr_assert(strstr(tf_testhost_last_error(th), "layer 0 (kda-cuda): backend cpu: needs backend cuda-sim"),
		  "%s", tf_testhost_last_error(th));
	tf_testhost_free(th);
	kda_case_free(&c);
}

/* Head size 160: beyond the kernels' 128, refused at layer_init. */
Test(kda_cuda_plugin, refuses_head_size_beyond_kernels)
{
	const tf_plugin_attention *a = kda_cuda();
	struct kda_case c;
	void *inst = NULL;
	kda_case_init_shape(&c, true, false, 0.0f, 4, 1, 160, 64);
	tf_testhost *th = device_host(&c);
	const tf_host *h = tf_testhost_host(th);
	cr_assert_eq(a->layer_init(h, 0, KDA_CASE_PREFIX, 16, &inst), TF_ERR_UNSUPPORTED);
	cr_assert(strstr(tf_testhost_last_error(th), "head_dim 160"), "%s",
		  tf_testhost_last_error(th));
	tf_testhost_free(th);
	kda_case_free(&c);
}

static tf_testhost *device_host_of(const void *c) { return device_host(c); }

/* Tensor parallel as the kda plugin (test_kda.c): each rank's heads
 * through the device linears' parts, its partial o_proj on the device;
 * the ranks' outputs summed equal the whole layer's on the device, a
 * prefill of 20 rows then decode steps.  Three heads over three ranks
 * (full-rank and low-rank gates) and four heads of 32 over two; heads
 * that do not split are refused naming the key. */
Test(kda_cuda_plugin, heads_sharded_over_ranks_sum_to_whole)
{
	for (int low_rank = 0; low_rank < 2; low_rank++) {
		struct kda_case c;
		kda_case_init_gates(&c, true, low_rank, 0.0f, 4, 21 + low_rank);
		attn_fixture_expect_shards(kda_cuda(), device_host_of, &c, KDA_CASE_PREFIX,
					   c.w.hidden, 3, 2, "num_attention_heads", KDA_CUDA_TOL, 5);
		kda_case_free(&c);
	}
	struct kda_case c;
	kda_case_init_shape(&c, true, false, 0.0f, 4, 4, 32, 66);
	attn_fixture_expect_shards(kda_cuda(), device_host_of, &c, KDA_CASE_PREFIX, c.w.hidden,
				   2, 3, "num_attention_heads", KDA_CUDA_TOL, 7);
	kda_case_free(&c);
}
