/*
 * test_backend_convert.c - F32/F16/BF16 conversions through the ABI on
 * both descriptors: exhaustive F16 round trips, rounding to nearest even
 * at halfway points, subnormals, overflow, NaN, and the error paths.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fixture.h"

static cpu_fixture fx;

static void setup(void) { cpu_fixture_open(&fx, 2); }
static void teardown(void) { cpu_fixture_close(&fx); }

TestSuite(backend_convert, .init = setup, .fini = teardown);

static int f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

/* Every F16 value widens exactly and narrows back to itself. */
Test(backend_convert, f16_round_trip_every_value)
{
	enum { N = 65536 };
	uint16_t *h = malloc(N * 2), *back = malloc(N * 2);
	float *f = malloc(N * sizeof(float));
	for (int i = 0; i < N; i++)
		h[i] = (uint16_t)i;
	for (int k = 0; k < CPU_N; k++) {
		memset(back, 0, N * 2);
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], f, TF_DTYPE_F32, h, TF_DTYPE_F16, N), TF_OK);
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], back, TF_DTYPE_F16, f, TF_DTYPE_F32, N), TF_OK);
		for (int i = 0; i < N; i++) {
			if (f16_is_nan(h[i])) {
				cr_assert(isnan(f[i]) && f16_is_nan(back[i]), "%s NaN 0x%04x",
					  fx.be[k]->hdr.name, i);
				continue;
			}
			cr_assert_eq(f[i], tf_f16_to_f32(h[i]), "%s 0x%04x", fx.be[k]->hdr.name, i);
			cr_assert_eq(back[i], h[i], "%s 0x%04x -> %g -> 0x%04x",
				     fx.be[k]->hdr.name, i, f[i], back[i]);
		}
	}
	free(h);
	free(back);
	free(f);
}

/* Narrowing matches the header's scalar rounding bit for bit on random
 * values of every magnitude and on the hard cases. */
Test(backend_convert, narrowing_rounds_to_nearest_even)
{
	enum { N = 20011 };
	static const float special[] = {
		0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, -1e9f,
		INFINITY, -INFINITY,
		0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1.ffcp-15f, 0x1p-14f, /* F16 subnormals */
		1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, /* halfway cases */
		1.0f + 0x1.0002p-8f, 3.3895314e38f, FLT_MAX, 1e-40f, -1e-45f,
	};
	const size_t n_special = sizeof(special) / sizeof(special[0]);
	float *x = malloc(N * sizeof(float));
	uint16_t *y = malloc(N * 2);
	uint64_t seed = 99;
	for (int i = 0; i < N; i++) {
		/* Random bit patterns: every exponent, finite only. */
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		uint32_t u = (uint32_t)(seed >> 17);
		if ((u & 0x7f800000u) == 0x7f800000u)
			u ^= 0x40000000u;
		x[i] = (size_t)i < n_special ? special[i] : tf_bits_f32(u);
	}
	for (int k = 0; k < CPU_N; k++) {
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], y, TF_DTYPE_F16, x, TF_DTYPE_F32, N), TF_OK);
		for (int i = 0; i < N; i++)
			cr_assert_eq(y[i], tf_f32_to_f16(x[i]), "%s f16(%a) = 0x%04x, want 0x%04x",
				     fx.be[k]->hdr.name, x[i], y[i], tf_f32_to_f16(x[i]));
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], y, TF_DTYPE_BF16, x, TF_DTYPE_F32, N), TF_OK);
		for (int i = 0; i < N; i++)
			cr_assert_eq(y[i], tf_f32_to_bf16(x[i]), "%s bf16(%a) = 0x%04x, want 0x%04x",
				     fx.be[k]->hdr.name, x[i], y[i], tf_f32_to_bf16(x[i]));
	}
	free(x);
	free(y);
}

/* The scalar helpers the test trusts, checked on known answers. */
Test(backend_convert, known_answers)
{
	cr_assert_eq(tf_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);   /* tie, to even (down) */
	cr_assert_eq(tf_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);   /* tie, to even (up) */
	cr_assert_eq(tf_f32_to_f16(0x1p-24f), 0x0001);          /* smallest subnormal */
	cr_assert_eq(tf_f32_to_f16(0x1p-25f), 0x0000);          /* tie, to even zero */
	cr_assert_eq(tf_f32_to_f16(0x1.8p-25f), 0x0001);
	cr_assert_eq(tf_f32_to_f16(65520.0f), 0x7c00);          /* rounds to inf */
	cr_assert_eq(tf_f32_to_f16(65504.0f), 0x7bff);
	cr_assert_eq(tf_f16_to_f32(0x0001), 0x1p-24f);
	cr_assert_eq(tf_bf16_to_f32(0xc040), -3.0f);
}

/* NaNs of every kind, placed in vector bodies and in tails. */
Test(backend_convert, nan_stays_nan)
{
	enum { N = 37 };
	static const int at[] = { 0, 3, 9, 17, 30, 36 };
	static const uint32_t nan_bits[] = { 0x7fc00000u, 0xffc00000u, 0x7f800001u,
					     0xffc00001u, 0x7fffffffu, 0xff800100u };
	float x[N], back[N];
	uint16_t y[N];
	uint64_t seed = 3;
	tf_test_fill_uniform(x, N, 10.0f, &seed);
	for (int i = 0; i < 6; i++)
		x[at[i]] = tf_bits_f32(nan_bits[i]);
	for (int k = 0; k < CPU_N; k++) {
		const char *name = fx.be[k]->hdr.name;
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], y, TF_DTYPE_F16, x, TF_DTYPE_F32, N), TF_OK);
		for (int i = 0; i < N; i++)
			cr_assert(isnan(x[i]) ? f16_is_nan(y[i]) : y[i] == tf_f32_to_f16(x[i]),
				  "%s f16 [%d] 0x%08x -> 0x%04x", name, i, tf_f32_bits(x[i]), y[i]);
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], back, TF_DTYPE_F32, y, TF_DTYPE_F16, N), TF_OK);
		for (int i = 0; i < 6; i++)
			cr_assert(isnan(back[at[i]]), "%s f16 -> f32 [%d]", name, at[i]);
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], y, TF_DTYPE_BF16, x, TF_DTYPE_F32, N), TF_OK);
		for (int i = 0; i < N; i++)
			cr_assert(isnan(x[i]) ? bf16_is_nan(y[i]) : y[i] == tf_f32_to_bf16(x[i]),
				  "%s bf16 [%d] 0x%08x -> 0x%04x", name, i, tf_f32_bits(x[i]), y[i]);
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], back, TF_DTYPE_F32, y, TF_DTYPE_BF16, N), TF_OK);
		for (int i = 0; i < 6; i++)
			cr_assert(isnan(back[at[i]]), "%s bf16 -> f32 [%d]", name, at[i]);
	}
}

/* F16 <-> BF16 goes through F32, and big inputs split over the pool. */
Test(backend_convert, half_to_bfloat_and_large_counts)
{
	enum { N = 3 * 16384 + 17 };
	uint16_t *h = malloc(N * 2), *b = malloc(N * 2), *h2 = malloc(N * 2);
	float *f = malloc(N * sizeof(float));
	uint64_t seed = 7;
	tf_test_fill_uniform(f, N, 300.0f, &seed);
	for (int i = 0; i < N; i++)
		h[i] = tf_f32_to_f16(f[i]);
	for (int k = 0; k < CPU_N; k++) {
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], b, TF_DTYPE_BF16, h, TF_DTYPE_F16, N), TF_OK);
		for (int i = 0; i < N; i++)
			cr_assert_eq(b[i], tf_f32_to_bf16(tf_f16_to_f32(h[i])), "%s [%d]",
				     fx.be[k]->hdr.name, i);
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], h2, TF_DTYPE_F16, b, TF_DTYPE_BF16, N), TF_OK);
		for (int i = 0; i < N; i++)
			cr_assert_eq(h2[i], tf_f32_to_f16(tf_bf16_to_f32(b[i])));
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], h2, TF_DTYPE_F16, h, TF_DTYPE_F16, N), TF_OK);
		cr_assert(memcmp(h2, h, N * 2) == 0);
	}
	free(h);
	free(b);
	free(h2);
	free(f);
}

Test(backend_convert, bad_requests_fail_cleanly)
{
	float f[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint16_t h[8];
	for (int k = 0; k < CPU_N; k++) {
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], h, TF_DTYPE_I8, f, TF_DTYPE_F32, 8),
			     TF_ERR_UNSUPPORTED);
		cr_assert(strstr(tf_testhost_last_error(fx.th), "F32 -> I8"), "%s",
			  tf_testhost_last_error(fx.th));
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], h, TF_DTYPE_F16, f, TF_DTYPE_INVALID, 8),
			     TF_ERR_UNSUPPORTED);
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], h, TF_DTYPE_F16, f, TF_DTYPE_F32, -1),
			     TF_ERR_INVALID);
		/* Narrowing onto its own source would race between chunks. */
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], f + 1, TF_DTYPE_F16, f, TF_DTYPE_F32, 4),
			     TF_ERR_INVALID);
		cr_assert(strstr(tf_testhost_last_error(fx.th), "overlap"));
		cr_assert_eq(fx.be[k]->convert(fx.ctx[k], h, TF_DTYPE_F16, f, TF_DTYPE_F32, 0), TF_OK);
	}
}
