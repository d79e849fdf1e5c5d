/*
 * test_plain.c - the "plain" linear of exl3.so against a float64 product
 * of the same stored (rounded) weights, for every dtype, odd shapes and
 * ragged row counts, plus its refusals of malformed tensors.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/testhost.h"

static const tf_dtype dtypes[] = { TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16 };

/* The stored value of f in dtype dt, widened back. */
static float stored(float f, tf_dtype dt)
{
	if (dt == TF_DTYPE_F16)
		return tf_f16_to_f32(tf_f32_to_f16(f));
	if (dt == TF_DTYPE_BF16)
		return tf_bf16_to_f32(tf_f32_to_bf16(f));
	return f;
}

/* The slice products on a middle slice of the outputs (any width: the
 * plain linear's slice is 1) against float64 with the stored weights wd,
 * no bias, into NaN-poisoned outputs; a slice past `out` is refused. */
static void check_slices(const tf_lin *lin, tf_dtype dt, const float *wd, const float *x,
			 int64_t in, int64_t out, uint64_t *seed)
{
	const int64_t c0 = out / 3, c1 = out - out / 4;
	float *y = malloc(sizeof(float) * out), *ry = malloc(sizeof(float) * out);
	float *u = malloc(sizeof(float) * out), *z = malloc(sizeof(float) * in);
	float *rz = malloc(sizeof(float) * in);

	cr_assert(tf_lin_has_slices(lin, 1));
	tf_test_fill_uniform(u, (size_t)(c1 - c0), 1.0f, seed);
	for (int64_t o = c0; o < c1; o++) {
		double s = 0;
		for (int64_t i = 0; i < in; i++)
			s += (double)wd[o * in + i] * x[i];
		ry[o - c0] = (float)s;
		y[o - c0] = NAN;
	}
	for (int64_t i = 0; i < in; i++) {
		double s = 0;
		for (int64_t o = c0; o < c1; o++)
			s += (double)u[o - c0] * wd[o * in + i];
		rz[i] = (float)s;
		z[i] = NAN;
	}
	cr_assert_eq(lin->ops->forward_slice(lin->impl, x, c0, c1, y), TF_OK);
	cr_assert_eq(lin->ops->backward_slice(lin->impl, u, c0, c1, z), TF_OK);
	double ey = tf_test_rel_err(y, ry, (size_t)(c1 - c0), 1e-3);
	double ez = tf_test_rel_err(z, rz, (size_t)in, 1e-3);
	cr_expect_lt(ey, 1e-5, "%s forward_slice [%lld, %lld): rel err %g", tf_dtype_name(dt),
		     (long long)c0, (long long)c1, ey);
	cr_expect_lt(ez, 1e-5, "%s backward_slice [%lld, %lld): rel err %g", tf_dtype_name(dt),
		     (long long)c0, (long long)c1, ez);
	cr_expect_eq(lin->ops->forward_slice(lin->impl, x, c0, out + 1, y), TF_ERR_INVALID);
	cr_expect_eq(lin->ops->backward_slice(lin->impl, u, c1, c0, z), TF_ERR_INVALID);
	free(y); free(ry); free(u); free(z); free(rz);
}

static void check_plain(int threads, tf_dtype dt, int64_t in, int64_t out,
			int64_t rows, int with_bias, uint64_t seed)
{
	tf_testhost *th = tf_testhost_new(NULL, threads);
	const tf_host *h = tf_testhost_host(th);
	float *w = malloc(sizeof(float) * in * out);
	float *b = malloc(sizeof(float) * out);
	float *x = malloc(sizeof(float) * in * rows);
	float *y = malloc(sizeof(float) * out * rows);
	float *ref = malloc(sizeof(float) * out * rows);
	float *wd = malloc(sizeof(float) * in * out);
	int64_t ws[2] = { out, in }, bs[1] = { out };
	tf_lin lin = { 0 };

	tf_test_fill_uniform(w, in * out, 1.0f, &seed);
	tf_test_fill_uniform(b, out, 0.5f, &seed);
	tf_test_fill_uniform(x, in * rows, 2.0f, &seed);
	tf_testhost_add_f32(th, "m.proj.weight", dt, 2, ws, w);
	if (with_bias)
		tf_testhost_add_f32(th, "m.proj.bias", dt, 1, bs, b);

	cr_assert_eq(h->lin_open(h, "m.proj", in, out, &lin), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_assert_str_eq(lin.ops->hdr.name, "plain");
	cr_assert_eq(lin.info.in, in);
	cr_assert_eq(lin.info.out, out);
	cr_assert_eq(lin.info.bits, (int)tf_dtype_size(dt) * 8);

	for (int64_t r = 0; r < rows; r++)
		for (int64_t o = 0; o < out; o++) {
			double s = with_bias ? stored(b[o], dt) : 0.0;
			for (int64_t i = 0; i < in; i++)
				s += (double)stored(w[o * in + i], dt) * x[r * in + i];
			ref[r * out + o] = (float)s;
		}
	for (int64_t i = 0; i < out * rows; i++)
		y[i] = NAN;
	cr_assert_eq(tf_lin_forward(&lin, x, rows, y), TF_OK);
	double err = tf_test_rel_err(y, ref, out * rows, 1e-3);
	cr_expect_lt(err, 1e-5, "%s %lldx%lld rows %lld threads %d: rel err %g",
		     tf_dtype_name(dt), (long long)in, (long long)out,
		     (long long)rows, threads, err);

	for (int64_t i = 0; i < in * out; i++)
		wd[i] = NAN;
	cr_assert_eq(lin.ops->dequant(lin.impl, wd), TF_OK);
	for (int64_t i = 0; i < in * out; i++)
		cr_assert_eq(wd[i], stored(w[i], dt), "dequant element %lld", (long long)i);

	check_slices(&lin, dt, wd, x, in, out, &seed);
	h->lin_close(h, &lin);
	free(w); free(b); free(x); free(y); free(ref); free(wd);
	tf_testhost_free(th);
}

Test(plain, matches_float64_every_dtype)
{
	static const int64_t rows[] = { 1, 2, 3, 4, 5, 9 };
	uint64_t seed = 11;
	for (size_t d = 0; d < 3; d++)
		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
			check_plain(1, dtypes[d], 37, 19, rows[r], (int)(r & 1), seed++);
}

Test(plain, multithreaded_large)
{
	for (size_t d = 0; d < 3; d++) {
		check_plain(2, dtypes[d], 512, 300, 1, 1, 21 + d);
		check_plain(2, dtypes[d], 257, 129, 7, 0, 31 + d);
	}
}

/*
 * Rows long enough that a thread's outputs pass in several L2 blocks
 * (8203 inputs: 7 to 15 outputs a block) and several row chunks, an input
 * count past the vector blocks (a scalar tail) and an output count the
 * kernels' register blocks do not divide (some outputs go in blocks for
 * one row count and alone for another): each row of a many-row product
 * equals that row's product alone, bit for bit, and the float64 product
 * within 1e-5.
 */
Test(plain, rows_as_alone_across_output_blocks)
{
	enum { IN = 8203, OUT = 43, ROWS = 9 };
	uint64_t seed = 71;
	float *w = malloc(sizeof(float) * IN * OUT), *x = malloc(sizeof(float) * IN * ROWS);
	float *y = malloc(sizeof(float) * OUT * ROWS), *alone = malloc(sizeof(float) * OUT);
	float *ref = malloc(sizeof(float) * OUT);
	int64_t ws[2] = { OUT, IN };

	tf_test_fill_uniform(w, IN * OUT, 1.0f, &seed);
	tf_test_fill_uniform(x, IN * ROWS, 2.0f, &seed);
	for (size_t d = 0; d < 3; d++)
		for (int threads = 1; threads <= 2; threads++) {
			tf_testhost *th = tf_testhost_new(NULL, threads);
			const tf_host *h = tf_testhost_host(th);
			tf_lin lin = { 0 };
			tf_testhost_add_f32(th, "m.proj.weight", dtypes[d], 2, ws, w);
			cr_assert_eq(h->lin_open(h, "m.proj", IN, OUT, &lin), TF_OK, "%s",
				     tf_testhost_last_error(th));
			for (int64_t i = 0; i < OUT * ROWS; i++)
				y[i] = NAN;
			cr_assert_eq(tf_lin_forward(&lin, x, ROWS, y), TF_OK);
			for (int64_t r = 0; r < ROWS; r++) {
				for (int64_t o = 0; o < OUT; o++)
					alone[o] = NAN;
				cr_assert_eq(tf_lin_forward(&lin, x + r * IN, 1, alone), TF_OK);
				cr_assert_eq(memcmp(alone, y + r * OUT, sizeof(float) * OUT), 0,
					     "%s, %d threads: row %lld differs from itself alone",
					     tf_dtype_name(dtypes[d]), threads, (long long)r);
				for (int64_t o = 0; o < OUT; o++) {
					double s = 0;
					for (int64_t i = 0; i < IN; i++)
						s += (double)stored(w[o * IN + i], dtypes[d]) *
						     x[r * IN + i];
					ref[o] = (float)s;
				}
				double err = tf_test_rel_err(y + r * OUT, ref, OUT, 1e-3);
				cr_assert_lt(err, 1e-5, "%s row %lld: rel err %g",
					     tf_dtype_name(dtypes[d]), (long long)r, err);
			}
			h->lin_close(h, &lin);
			tf_testhost_free(th);
		}
	free(w); free(x); free(y); free(alone); free(ref);
}

/* Open "m.proj" after adding `weight` (and `bias`, if given). */
static int open_bad(tf_testhost *th, tf_dtype wdt, int wnd, const int64_t *wshape,
		    const int64_t *bshape, int64_t in, int64_t out)
{
	const tf_host *h = tf_testhost_host(th);
	static float data[4096];
	tf_lin lin = { 0 };
	uint64_t seed = 5;

	tf_test_fill_uniform(data, 4096, 1.0f, &seed);
	if (wnd >= 0)
		tf_testhost_add_tensor(th, "m.proj.weight", wdt, wnd, wshape, data);
	if (bshape)
		tf_testhost_add_tensor(th, "m.proj.bias", TF_DTYPE_F32, 1, bshape, data);
	int rc = h->lin_open(h, "m.proj", in, out, &lin);
	if (rc == TF_OK)
		h->lin_close(h, &lin);
	return rc;
}

Test(plain, refuses_malformed)
{
	static const int64_t s32x16[2] = { 32, 16 }, s16[1] = { 16 }, s8[1] = { 8 };
	static const int64_t s512[1] = { 512 };
	struct {
		tf_dtype dt;
		int nd;
		const int64_t *ws, *bs;
		int64_t in, out;
		const char *needle;
	} cases[] = {
		{ TF_DTYPE_F16, 2, s32x16, NULL, 32, 16, "m.proj.weight" },   /* in/out swapped */
		{ TF_DTYPE_I32, 2, s32x16, NULL, 16, 32, "dtype I32" },
		{ TF_DTYPE_F32, 1, s512, NULL, 16, 32, "m.proj.weight" },
		{ TF_DTYPE_F32, 2, s32x16, s8, 16, 32, "m.proj.bias" },
		{ TF_DTYPE_F32, 2, s32x16, s16, 16, 32, "m.proj.bias" },
		{ TF_DTYPE_F32, 2, s32x16, NULL, 0, 32, "m.proj" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tf_testhost *th = tf_testhost_new(NULL, 1);
		int rc = open_bad(th, cases[i].dt, cases[i].nd, cases[i].ws, cases[i].bs,
				  cases[i].in, cases[i].out);
		cr_expect_neq(rc, TF_OK, "case %zu opened", i);
		cr_expect(strstr(tf_testhost_last_error(th), cases[i].needle),
			  "case %zu: '%s' lacks '%s'", i, tf_testhost_last_error(th),
			  cases[i].needle);
		tf_testhost_free(th);
	}
}

Test(plain, no_tensor_no_match)
{
	tf_testhost *th = tf_testhost_new(NULL, 1);
	const tf_host *h = tf_testhost_host(th);
	tf_lin lin = { 0 };
	cr_expect_eq(h->lin_open(h, "m.absent", 4, 4, &lin), TF_ERR_NOT_FOUND);
	cr_expect(strstr(tf_testhost_last_error(th), "m.absent"));
	tf_testhost_free(th);
}

/*
 * Tensor-parallel parts (open_part) of a 37 x 53 layer: output parts give
 * their columns of x·Wᵀ + b, input parts partial sums with the bias on the
 * first part only; dequant and the slice products of a part read its own
 * rows and columns of the stored weight (a strided view).
 */
static void check_plain_part(tf_dtype dt, tf_lin_axis axis, int64_t lo, int64_t hi,
			     uint64_t seed)
{
	enum { IN = 37, OUT = 53, ROWS = 5 };
	tf_testhost *th = tf_testhost_new(NULL, 2);
	const tf_host *h = tf_testhost_host(th);
	const bool cols = axis == TF_LIN_PART_IN;
	const int64_t in = cols ? hi - lo : IN, out = cols ? OUT : hi - lo;
	const int64_t i0 = cols ? lo : 0, o0 = cols ? 0 : lo;
	float *w = malloc(sizeof(float) * IN * OUT), *b = malloc(sizeof(float) * OUT);
	float *x = malloc(sizeof(float) * in * ROWS), *y = malloc(sizeof(float) * out * ROWS);
	float *ref = malloc(sizeof(float) * out * ROWS), *wd = malloc(sizeof(float) * in * out);
	int64_t ws[2] = { OUT, IN }, bs[1] = { OUT };
	const tf_lin_part part = { .axis = axis, .lo = lo, .hi = hi };
	tf_lin lin = { 0 };

	tf_test_fill_uniform(w, IN * OUT, 1.0f, &seed);
	tf_test_fill_uniform(b, OUT, 0.5f, &seed);
	tf_test_fill_uniform(x, in * ROWS, 2.0f, &seed);
	tf_testhost_add_f32(th, "m.proj.weight", dt, 2, ws, w);
	tf_testhost_add_f32(th, "m.proj.bias", dt, 1, bs, b);
	cr_assert_eq(h->lin_open_part(h, "m.proj", IN, OUT, &part, &lin), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_assert_eq(lin.info.in, in);
	cr_assert_eq(lin.info.out, out);
	for (int64_t r = 0; r < ROWS; r++)
		for (int64_t o = 0; o < out; o++) {
			double s = i0 == 0 ? stored(b[o0 + o], dt) : 0.0;
			for (int64_t i = 0; i < in; i++)
				s += (double)stored(w[(o0 + o) * IN + i0 + i], dt) * x[r * in + i];
			ref[r * out + o] = (float)s;
		}
	for (int64_t i = 0; i < out * ROWS; i++)
		y[i] = NAN;
	cr_assert_eq(tf_lin_forward(&lin, x, ROWS, y), TF_OK);
	double err = tf_test_rel_err(y, ref, out * ROWS, 1e-3);
	cr_expect_lt(err, 1e-5, "%s %s part [%lld, %lld): rel err %g", tf_dtype_name(dt),
		     cols ? "input" : "output", (long long)lo, (long long)hi, err);
	for (int64_t i = 0; i < in * out; i++)
		wd[i] = NAN;
	cr_assert_eq(lin.ops->dequant(lin.impl, wd), TF_OK);
	for (int64_t o = 0; o < out; o++)
		for (int64_t i = 0; i < in; i++)
			cr_assert_eq(wd[o * in + i], stored(w[(o0 + o) * IN + i0 + i], dt),
				     "dequant [%lld, %lld]", (long long)o, (long long)i);
	check_slices(&lin, dt, wd, x, in, out, &seed);
	h->lin_close(h, &lin);
	free(w); free(b); free(x); free(y); free(ref); free(wd);
	tf_testhost_free(th);
}

Test(plain, parts_of_a_layer)
{
	uint64_t seed = 70;
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
		check_plain_part(dtypes[d], TF_LIN_PART_OUT, 0, 20, seed++);
		check_plain_part(dtypes[d], TF_LIN_PART_OUT, 20, 53, seed++);
		check_plain_part(dtypes[d], TF_LIN_PART_IN, 0, 11, seed++);
		check_plain_part(dtypes[d], TF_LIN_PART_IN, 11, 37, seed++);
	}
}
