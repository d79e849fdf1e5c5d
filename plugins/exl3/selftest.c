/*
 * selftest.c - exl3's vector kernels against their plain references, as a
 * program without Criterion so it also runs for aarch64 (NEON) under qemu.
 * Small shapes: emulation is slow.  Prints "N passed, N failed" last.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hadamard.h"
#include "matmul.h"
#include "tf/dtype.h"

static int passed, failed;

static void check(int ok, const char *what, int K, int cb)
{
	if (ok) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL %s K=%d %s\n", what, K, tf_exl3_cb_name((tf_exl3_cb)cb));
}

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 16;
}

/* Fused tile decode rounds to the reference fp16 exactly; both products
 * agree with a float64 sum of the reference tiles. */
static void check_k_cb(int K, tf_exl3_cb cb, uint64_t *seed)
{
	enum { k = 32, n = 48, rows = 3 };
	uint16_t tr[(k / 16) * (n / 16) * 16 * 8];
	float x[rows * k], y[rows * n], yr[rows * n], a[256], b[256];
	double ref[rows * n] = { 0 };
	tf_exl3_mat m;
	int ok = 1;

	for (size_t i = 0; i < sizeof(tr) / 2; i++)
		tr[i] = (uint16_t)lcg(seed);
	for (int i = 0; i < rows * k; i++)
		x[i] = (float)((int)(lcg(seed) % 2001) - 1000) / 1000.0f;
	tf_exl3_mat_init(&m, tr, k, n, K, cb);
	for (int i = 0; i < k / 16; i++)
		for (int j = 0; j < n / 16; j++) {
			tf_exl3_mat_tile_ref(&m, i, j, a);
			tf_exl3_mat_tile(&m, i, j, b);
			for (int e = 0; e < 256; e++) {
				ok &= tf_f32_to_f16(b[e]) == tf_f32_to_f16(a[e]);
				for (int r = 0; r < rows; r++)
					if (e % 16 == 0)
						for (int c = 0; c < 16; c++)
							ref[r * n + 16 * j + c] += (double)x[r * k + 16 * i + e / 16] *
										   a[e + c];
			}
		}
	check(ok, "fused tile decode", K, cb);

	for (int rr = 1; rr <= rows; rr += rows - 1) {          /* 1 row and 3 rows */
		double err = 0, err_ref = 0, scale = 1e-3;
		for (int i = 0; i < rr * n; i++)
			y[i] = yr[i] = NAN;
		tf_exl3_mat_mul(&m, x, rr, y, 0, n / 16);
		tf_exl3_mat_mul_ref(&m, x, rr, yr, 0, n / 16);
		for (int i = 0; i < rr * n; i++) {
			scale = fmax(scale, fabs(ref[i]));
			err = fmax(err, isnan(y[i]) ? INFINITY : fabs(y[i] - ref[i]));
			err_ref = fmax(err_ref, isnan(yr[i]) ? INFINITY : fabs(yr[i] - ref[i]));
		}
		check(err / scale < 1e-3, "fused product", K, cb);
		check(err_ref / scale < 1e-5, "reference product", K, cb);
	}
}

static void check_hadamard(uint64_t *seed)
{
	float v[128], o[128];
	int ok = 1;
	for (int i = 0; i < 128; i++)
		o[i] = v[i] = (float)((int)(lcg(seed) % 2001) - 1000) / 1000.0f;
	tf_had128(v, 128);
	for (int i = 0; i < 128; i++) {
		double s = 0;
		for (int j = 0; j < 128; j++)
			s += (__builtin_popcount(i & j) & 1 ? -1.0 : 1.0) * o[j];
		ok &= fabs(v[i] - s / sqrt(128.0)) < 1e-5;
	}
	check(ok, "hadamard", 0, 0);
}

int main(void)
{
	uint64_t seed = 1;
	check_hadamard(&seed);
	for (int K = 1; K <= 8; K++)
		for (int cb = 0; cb < TF_EXL3_CB_COUNT; cb++)
			check_k_cb(K, (tf_exl3_cb)cb, &seed);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
