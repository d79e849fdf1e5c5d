/*
 * test_plain_cuda.c - the device linears of exl3-cuda.so on a CUDA
 * backend against their CPU twins of exl3.so on backend-cpu, reading the
 * same tensors, into NaN-poisoned device outputs: "plain-cuda" against
 * "plain" for every stored dtype, with and without bias, shapes that are
 * no multiple of the kernel's tile, 1 (decode) to 37 rows; "exl3-cuda"
 * against "exl3" on a random EXL3 layer, through its GEMV (3 rows) and
 * its WMMA GEMM (20 and 77 rows); the parts of a linear tensor parallelism
 * opens (output rows, input columns with and without the bias) against
 * the CPU linears' parts.  Also: plain-cuda declines a host-memory
 * backend and names a malformed tensor; exl3-cuda names a part that cuts
 * a Hadamard block.
 *
 * Built on the SIMT harness as test_plain_cuda_sim (tests/simt):
 * TF_CUDA_BACKEND and TF_CUDA_QUANT name backend-cuda-sim.so and
 * exl3-cuda-sim.so, TF_CUDA_LIN the linear's name there.  The same test
 * on a GPU is test_plain_cuda_gpu (scripts/gpu-check.sh).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/testhost.h"

/* fp32 sums in another order than the CPU's: measured at most 4e-7. */
#define PLAIN_CUDA_TOL 2e-6

/* Measured at most 3.1e-4 through the GEMV (its fused decode skips the codebook's
 * fp16 rounding) and at most 3.8e-4 through the GEMM (fp16 activations),
 * the parts alike. */
#define EXL3_CUDA_TOL 2e-3

#define PREFIX "model.layers.0.mlp.down_proj"

#ifndef TF_CUDA_BACKEND
#define TF_CUDA_BACKEND TF_PLUGIN_DIR "/backend-cuda.so"
#define TF_CUDA_QUANT TF_PLUGIN_DIR "/exl3-cuda.so"
#define TF_CUDA_LIN "plain-cuda"
#define TF_CUDA_EXL3 "exl3-cuda"
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

/* Open PREFIX, or its `part` (NULL: the whole), on both hosts, each
 * through the linear named; both parts' shapes and sizes agree. */
static void open_both(tf_testhost *cpu, tf_testhost *dev, int64_t in, int64_t out,
		      const tf_lin_part *part, tf_lin *lc, tf_lin *ld, const char *cpu_lin,
		      const char *dev_lin)
{
	const tf_host *hc = tf_testhost_host(cpu), *hd = tf_testhost_host(dev);
	cr_assert_eq(part ? hc->lin_open_part(hc, PREFIX, in, out, part, lc)
			  : hc->lin_open(hc, PREFIX, in, out, lc), TF_OK, "%s",
		     tf_testhost_last_error(cpu));
	cr_assert_eq(part ? hd->lin_open_part(hd, PREFIX, in, out, part, ld)
			  : hd->lin_open(hd, PREFIX, in, out, ld), TF_OK, "%s",
		     tf_testhost_last_error(dev));
	cr_assert_str_eq(lc->ops->hdr.name, cpu_lin);
	cr_assert_str_eq(ld->ops->hdr.name, dev_lin);
	cr_assert_eq(ld->info.in, lc->info.in);
	cr_assert_eq(ld->info.out, lc->info.out);
	cr_assert_eq(ld->info.bits, lc->info.bits);
	cr_assert_eq(ld->info.bytes, lc->info.bytes);
}

/* rows of x through lc (host memory, backend-cpu) and ld (hd's device
 * memory, outputs poisoned): the relative error of ld's against lc's. */
static double run_both(const tf_lin *lc, const tf_host *hd, const tf_lin *ld, const float *x,
		       int64_t rows, int64_t in, int64_t out)
{
	const tf_backend *be = hd->backend;
	const size_t nx = (size_t)(rows * in), ny = (size_t)(rows * out);
	float *y = malloc(sizeof(float) * ny), *ref = malloc(sizeof(float) * ny);
	cr_assert(y && ref);
	for (size_t i = 0; i < ny; i++)
		ref[i] = y[i] = NAN;
	cr_assert_eq(tf_lin_forward(lc, x, rows, ref), TF_OK);

	float *xd = be->alloc(hd->backend_ctx, nx * sizeof(float));
	float *yd = be->alloc(hd->backend_ctx, ny * sizeof(float));
	cr_assert(xd && yd);
	cr_assert_eq(be->upload(hd->backend_ctx, xd, x, nx * sizeof(float)), TF_OK);
	cr_assert_eq(be->upload(hd->backend_ctx, yd, y, ny * sizeof(float)), TF_OK);
	cr_assert_eq(tf_lin_forward(ld, xd, rows, yd), TF_OK);
	cr_assert_eq(be->sync(hd->backend_ctx), TF_OK);
	cr_assert_eq(be->download(hd->backend_ctx, y, yd, ny * sizeof(float)), TF_OK);
	double e = tf_test_rel_err(y, ref, ny, 1e-3);
	be->free(hd->backend_ctx, xd);
	be->free(hd->backend_ctx, yd);
	free(y);
	free(ref);
	return e;
}

/* " out [lo, hi)" or " in [lo, hi)" of part, "" for the whole layer. */
static const char *part_str(char *buf, size_t n, const tf_lin_part *part)
{
	if (!part)
		return "";
	snprintf(buf, n, " %s [%lld, %lld)", part->axis == TF_LIN_PART_OUT ? "out" : "in",
		 (long long)part->lo, (long long)part->hi);
	return buf;
}

/* rows through plain-cuda's `part` (NULL: the whole layer) of a random
 * in x out layer against plain's same part. */
static void check(tf_dtype dt, int64_t in, int64_t out, const tf_lin_part *part, int64_t rows,
		  int with_bias, uint64_t seed)
{
	tf_testhost *cpu = tf_testhost_new_with(NULL, 2, NULL, NULL);
	tf_testhost *dev = tf_testhost_new_with(NULL, 1, TF_CUDA_BACKEND, TF_CUDA_QUANT);
	const tf_host *hc = tf_testhost_host(cpu), *hd = tf_testhost_host(dev);
	const size_t nx = (size_t)(rows * in);
	float *w = malloc(sizeof(float) * (size_t)(in * out)), *b = malloc(sizeof(float) * out);
	float *x = malloc(sizeof(float) * nx);
	tf_lin lc = { 0 }, ld = { 0 };

	cr_assert(w && b && x);
	tf_test_fill_uniform(w, (size_t)(in * out), 1.0f, &seed);
	tf_test_fill_uniform(b, (size_t)out, 0.5f, &seed);
	tf_test_fill_uniform(x, nx, 1.0f, &seed);
	add_layer(cpu, dt, w, with_bias ? b : NULL, in, out);
	add_layer(dev, dt, w, with_bias ? b : NULL, in, out);

	open_both(cpu, dev, in, out, part, &lc, &ld, "plain", TF_CUDA_LIN);
	cr_assert_eq(tf_testhost_released(dev, PREFIX ".weight"), 1,
		     "the device copy is all it reads");

	double e = run_both(&lc, hd, &ld, x, rows, ld.info.in, ld.info.out);
	char what[96], ps[48];
	snprintf(what, sizeof(what), "%s %lld x %lld%s, %lld rows, bias %d", tf_dtype_name(dt),
		 (long long)in, (long long)out, part_str(ps, sizeof(ps), part), (long long)rows,
		 with_bias);
	cr_log_info("%s: rel err %.3g", what, e);
	cr_expect_lt(e, PLAIN_CUDA_TOL, "%s: rel err %.3g", what, e);

	hc->lin_close(hc, &lc);
	hd->lin_close(hd, &ld);
	tf_testhost_free(cpu);
	tf_testhost_free(dev);
	free(w); free(b); free(x);
}

Test(plain_cuda, matches_cpu_plain)
{
	uint64_t seed = 91;
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
		check(dtypes[d], 40, 24, NULL, 1, 1, seed++);         /* decode: one row */
		check(dtypes[d], 33, 50, NULL, 37, 0, seed++);        /* ragged tiles both ways */
		check(dtypes[d], 64, 16, NULL, 16, 1, seed++);        /* whole tiles */
	}
}

/* A rank's part, as tensor parallelism opens them: output rows (the
 * bias's rows with them), input columns (the bias only where they start
 * at column 0), ragged widths, 1 and 19 rows. */
Test(plain_cuda, parts_match_cpu_plain)
{
	static const tf_lin_part parts[] = {
		{ .axis = TF_LIN_PART_OUT, .lo = 10, .hi = 30 },
		{ .axis = TF_LIN_PART_OUT, .lo = 0, .hi = 7 },
		{ .axis = TF_LIN_PART_IN, .lo = 0, .hi = 17 },
		{ .axis = TF_LIN_PART_IN, .lo = 17, .hi = 50 },
	};
	uint64_t seed = 301;
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++)
		for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++) {
			check(dtypes[d], 50, 37, &parts[p], 1, 1, seed++);
			check(dtypes[d], 50, 37, &parts[p], 19, 1, seed++);
		}
}

/* The same random EXL3 layer (in x out, from seed) on both hosts, or its
 * `part` (NULL: the whole): exl3-cuda's GEMV (3 rows) and WMMA GEMM (20
 * rows, part of a 64-row tile; 77, a whole tile and part of another)
 * against the CPU exl3 linear. */
static void check_exl3(int64_t in, int64_t out, const tf_lin_part *part, uint64_t seed)
{
	static const int64_t rows[] = { 3, 20, 77 };
	tf_testhost *cpu = tf_testhost_new_with(NULL, 2, NULL, NULL);
	tf_testhost *dev = tf_testhost_new_with(NULL, 1, TF_CUDA_BACKEND, TF_CUDA_QUANT);
	const tf_host *hc = tf_testhost_host(cpu), *hd = tf_testhost_host(dev);
	uint64_t sc = seed, sd = seed, sx = seed + 1;
	float *x = malloc(sizeof(float) * 77 * (size_t)in);
	tf_lin lc = { 0 }, ld = { 0 };

	cr_assert(x);
	tf_test_fill_uniform(x, 77 * (size_t)in, 1.0f, &sx);
	tf_testhost_add_exl3(cpu, PREFIX, in, out, &sc);
	tf_testhost_add_exl3(dev, PREFIX, in, out, &sd);
	tf_testhost_set_conf(cpu, "plugins", "quant", "exl3");    /* the float path */
	open_both(cpu, dev, in, out, part, &lc, &ld, "exl3", TF_CUDA_EXL3);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		double e = run_both(&lc, hd, &ld, x, rows[i], ld.info.in, ld.info.out);
		char what[80], ps[48];
		snprintf(what, sizeof(what), "exl3 %lld x %lld%s, %lld rows", (long long)in,
			 (long long)out, part_str(ps, sizeof(ps), part), (long long)rows[i]);
		cr_log_info("%s: rel err %.3g", what, e);
		cr_expect_lt(e, EXL3_CUDA_TOL, "%s: rel err %.3g", what, e);
	}
	hc->lin_close(hc, &lc);
	hd->lin_close(hd, &ld);
	tf_testhost_free(cpu);
	tf_testhost_free(dev);
	free(x);
}

Test(exl3_cuda, matches_cpu_exl3)
{
	check_exl3(256, 128, NULL, 17);
}

/* exl3-cuda's parts on the 128-feature Hadamard blocks against exl3's:
 * output columns of tiles, input rows of tiles; a cut inside a block is
 * refused naming the trellis. */
Test(exl3_cuda, parts_match_cpu_exl3)
{
	static const tf_lin_part parts[] = {
		{ .axis = TF_LIN_PART_OUT, .lo = 128, .hi = 384 },
		{ .axis = TF_LIN_PART_OUT, .lo = 0, .hi = 128 },
		{ .axis = TF_LIN_PART_IN, .lo = 0, .hi = 128 },
		{ .axis = TF_LIN_PART_IN, .lo = 128, .hi = 256 },
	};
	for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++)
		check_exl3(256, 384, &parts[p], 23 + p);

	tf_testhost *dev = tf_testhost_new_with(NULL, 1, TF_CUDA_BACKEND, TF_CUDA_QUANT);
	const tf_host *hd = tf_testhost_host(dev);
	const tf_lin_part cut = { .axis = TF_LIN_PART_OUT, .lo = 0, .hi = 192 };
	uint64_t seed = 29;
	tf_lin l = { 0 };
	tf_testhost_add_exl3(dev, PREFIX, 256, 384, &seed);
	cr_assert_eq(hd->lin_open_part(hd, PREFIX, 256, 384, &cut, &l), TF_ERR_UNSUPPORTED);
	cr_assert(strstr(tf_testhost_last_error(dev), PREFIX ".trellis: the part [0, 192)"),
		  "%s", tf_testhost_last_error(dev));
	tf_testhost_free(dev);
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
