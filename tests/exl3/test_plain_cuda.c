/*
 * test_plain_cuda.c - the "plain-cuda" linear (exl3-cuda.so) on a CUDA
 * backend against the CPU "plain" linear (exl3.so on backend-cpu) reading
 * the same tensors: every stored dtype, with and without bias, shapes
 * that are no multiple of the kernel's tile, 1 (decode) to 37 rows, into
 * NaN-poisoned device outputs.  Also: it declines a host-memory backend
 * and names a malformed tensor.
 *
 * Built on the SIMT harness as test_plain_cuda_sim (tests/simt):
 * TF_CUDA_BACKEND and TF_CUDA_QUANT name backend-cuda-sim.so and
 * exl3-cuda-sim.so, TF_CUDA_LIN the linear's name there.  The same test
 * on a GPU is test_plain_cuda_gpu (scripts/gpu-check.sh).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/testhost.h"

/* fp32 sums in another order than the CPU's: measured at most 4e-7. */
#define PLAIN_CUDA_TOL 2e-6

#define PREFIX "model.layers.0.mlp.down_proj"

#ifndef TF_CUDA_BACKEND
#define TF_CUDA_BACKEND TF_PLUGIN_DIR "/backend-cuda.so"
#define TF_CUDA_QUANT TF_PLUGIN_DIR "/exl3-cuda.so"
#define TF_CUDA_LIN "plain-cuda"
#endif

static const tf_dtype dtypes[] = { TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16 };

/* The same random layer on both hosts. */
static void add_layer(tf_testhost *th, tf_dtype dt, const float *w, const float *b,
		      int64_t in, int64_t out)
{
	tf_testhost_add_f32(th, PREFIX ".weight", dt, 2, (int64_t[]){ out, in }, w);
	if (b)
		tf_testhost_add_f32(th, PREFIX ".bias", TF_DTYPE_F32, 1, (int64_t[]){ out }, b);
}

static void check(tf_dtype dt, int64_t in, int64_t out, int64_t rows, int with_bias,
		  uint64_t seed)
{
	tf_testhost *cpu = tf_testhost_new_with(NULL, 2, NULL, NULL);
	tf_testhost *dev = tf_testhost_new_with(NULL, 1, TF_CUDA_BACKEND, TF_CUDA_QUANT);
	const tf_host *hc = tf_testhost_host(cpu), *hd = tf_testhost_host(dev);
	const tf_backend *be = hd->backend;
	const size_t nx = (size_t)(rows * in), ny = (size_t)(rows * out);
	float *w = malloc(sizeof(float) * (size_t)(in * out)), *b = malloc(sizeof(float) * out);
	float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
	float *ref = malloc(sizeof(float) * ny);
	tf_lin lc = { 0 }, ld = { 0 };

	cr_assert(w && b && x && y && ref);
	tf_test_fill_uniform(w, (size_t)(in * out), 1.0f, &seed);
	tf_test_fill_uniform(b, (size_t)out, 0.5f, &seed);
	tf_test_fill_uniform(x, nx, 1.0f, &seed);
	add_layer(cpu, dt, w, with_bias ? b : NULL, in, out);
	add_layer(dev, dt, w, with_bias ? b : NULL, in, out);

	cr_assert_eq(hc->lin_open(hc, PREFIX, in, out, &lc), TF_OK, "%s",
		     tf_testhost_last_error(cpu));
	cr_assert_eq(hd->lin_open(hd, PREFIX, in, out, &ld), TF_OK, "%s",
		     tf_testhost_last_error(dev));
	cr_assert_str_eq(lc.ops->hdr.name, "plain");
	cr_assert_str_eq(ld.ops->hdr.name, TF_CUDA_LIN);
	cr_assert_eq(ld.info.bits, lc.info.bits);
	cr_assert_eq(ld.info.bytes, lc.info.bytes);
	cr_assert_eq(tf_testhost_released(dev, PREFIX ".weight"), 1,
		     "the device copy is all it reads");

	for (size_t i = 0; i < ny; i++)
		ref[i] = y[i] = NAN;
	cr_assert_eq(tf_lin_forward(&lc, x, rows, ref), TF_OK);

	float *xd = be->alloc(hd->backend_ctx, nx * sizeof(float));
	float *yd = be->alloc(hd->backend_ctx, ny * sizeof(float));
	cr_assert(xd && yd);
	cr_assert_eq(be->upload(hd->backend_ctx, xd, x, nx * sizeof(float)), TF_OK);
	cr_assert_eq(be->upload(hd->backend_ctx, yd, y, ny * sizeof(float)), TF_OK);
	cr_assert_eq(tf_lin_forward(&ld, xd, rows, yd), TF_OK, "%s", tf_testhost_last_error(dev));
	cr_assert_eq(be->sync(hd->backend_ctx), TF_OK);
	cr_assert_eq(be->download(hd->backend_ctx, y, yd, ny * sizeof(float)), TF_OK);

	double e = tf_test_rel_err(y, ref, ny, 1e-3);
	cr_log_info("%s %lld x %lld, %lld rows, bias %d: rel err %.3g", tf_dtype_name(dt),
		    (long long)in, (long long)out, (long long)rows, with_bias, e);
	cr_expect_lt(e, PLAIN_CUDA_TOL, "%s %lld x %lld, %lld rows, bias %d: rel err %.3g",
		     tf_dtype_name(dt), (long long)in, (long long)out, (long long)rows, with_bias, e);

	be->free(hd->backend_ctx, xd);
	be->free(hd->backend_ctx, yd);
	hc->lin_close(hc, &lc);
	hd->lin_close(hd, &ld);
	tf_testhost_free(cpu);
	tf_testhost_free(dev);
	free(w); free(b); free(x); free(y); free(ref);
}

Test(plain_cuda, matches_cpu_plain)
{
	uint64_t seed = 91;
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
		check(dtypes[d], 40, 24, 1, 1, seed++);       /* decode: one row */
		check(dtypes[d], 33, 50, 37, 0, seed++);      /* ragged tiles both ways */
		check(dtypes[d], 64, 16, 16, 1, seed++);      /* whole tiles */
	}
}

/* Each host keeps to its own linear: plain-cuda declines backend-cpu
 * with a reason, and "plain" a device backend. */
Test(plain_cuda, declines_host_backend)
{
	tf_testhost *cpu = tf_testhost_new_with(NULL, 1, NULL, TF_CUDA_QUANT);
	const tf_host *h = tf_testhost_host(cpu);
	const float w[6] = { 1, 2, 3, 4, 5, 6 };
	tf_lin l = { 0 };
	add_layer(cpu, TF_DTYPE_F32, w, NULL, 3, 2);
	cr_assert_eq(h->lin_open(h, PREFIX, 3, 2, &l), TF_OK);
	cr_assert_str_eq(l.ops->hdr.name, "plain");
	h->lin_close(h, &l);

	const tf_plugin_quant *dev = NULL;
	const char *why = NULL;
	tf_testhost *d = tf_testhost_new_with(NULL, 1, TF_CUDA_BACKEND, TF_CUDA_QUANT);
	add_layer(d, TF_DTYPE_F32, w, NULL, 3, 2);
	cr_assert_eq(tf_testhost_host(d)->lin_open(tf_testhost_host(d), PREFIX, 3, 2, &l), TF_OK);
	dev = l.ops;
	cr_assert_str_eq(dev->hdr.name, TF_CUDA_LIN);
	cr_assert_eq(dev->hdr.probe(h, &why), 0);
	cr_assert(why && strstr(why, "needs backend cuda"), "%s", why ? why : "(none)");
	tf_testhost_host(d)->lin_close(tf_testhost_host(d), &l);
	tf_testhost_free(d);
	tf_testhost_free(cpu);
}

/* A weight of the wrong shape fails naming the tensor and both shapes. */
Test(plain_cuda, names_a_bad_tensor)
{
	tf_testhost *d = tf_testhost_new_with(NULL, 1, TF_CUDA_BACKEND, TF_CUDA_QUANT);
	const tf_host *h = tf_testhost_host(d);
	const float w[6] = { 1, 2, 3, 4, 5, 6 };
	tf_lin l = { 0 };
	add_layer(d, TF_DTYPE_BF16, w, NULL, 2, 3);
	cr_assert_eq(h->lin_open(h, PREFIX, 3, 2, &l), TF_ERR_FORMAT);
	cr_assert(strstr(tf_testhost_last_error(d), PREFIX ".weight: shape [3, 2], expected [out 2, in 3]"),
		  "%s", tf_testhost_last_error(d));
	tf_testhost_free(d);
}
