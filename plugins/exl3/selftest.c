/*
 * selftest.c - exl3's vector kernels against their plain references, as a
 * program without Criterion so it also runs for aarch64 (NEON) under qemu.
 * Small shapes: emulation is slow.  Prints "N passed, N failed" last.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hadamard.h"
#include "matmul.h"
#include "matmul_int.h"
#include "plain_dot.h"
#include "tf/dtype.h"

/* Row counts checked for row invariance: past the kernels' 4- and 8-row
 * blocks, twice. */
#define ALONE_ROWS 17

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

/* The product of rows [0, rr) of x on path p into y, the column range
 * split raggedly so that kernels pairing tiles meet a lone one. */
static void mul_on(const tf_exl3_mat *m, const float *x, int rr, float *y, int p)
{
	tf_exl3_mat_mul_on(m, x, rr, y, 0, 1, (tf_exl3_rowpath)p);
	tf_exl3_mat_mul_on(m, x, rr, y, 1, m->n / 16, (tf_exl3_rowpath)p);
}

/* The layout returns the file's tiles; fused tile decode rounds to the
 * reference fp16 exactly; both products agree with a float64 sum of the
 * reference tiles, one row, a few and many; and every row of a product of
 * 2..ALONE_ROWS rows, wherever it sits in them, has the bits it has alone,
 * on every path, the paths alike.  n = 48: a column group of three tiles,
 * the last one alone in its pair. */
static void check_k_cb(int K, tf_exl3_cb cb, uint64_t *seed)
{
	enum { k = 32, n = 48, rows = ALONE_ROWS + 4 };
	static const int counts[] = { 1, 3, 9, rows };
	uint16_t tr[(k / 16) * (n / 16) * 16 * 8], h[256];
	float x[rows * k], y[rows * n], yr[rows * n], y1[rows * n], a[256], b[256];
	double ref[rows * n] = { 0 };
	tf_exl3_mat m;
	int ok = 1, same = 1;

	for (size_t i = 0; i < sizeof(tr) / 2; i++)
		tr[i] = (uint16_t)lcg(seed);
	for (int i = 0; i < rows * k; i++)
		x[i] = (float)((int)(lcg(seed) % 2001) - 1000) / 1000.0f;
	if (tf_exl3_mat_init(&m, tr, k, n, K, cb)) {
		check(0, "layout: out of memory", K, cb);
		return;
	}
	for (int i = 0; i < k / 16; i++)
		for (int j = 0; j < n / 16; j++) {
			tf_exl3_tile_decode_ref(tr + (i * (n / 16) + j) * 16 * K, K, cb, h);
			tf_exl3_mat_tile_ref(&m, i, j, b);
			for (int e = 0; e < 256; e++) {
				a[e] = tf_f16_to_f32(h[e]);
				same &= a[e] == b[e];
			}
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
	check(same, "layout round trip", K, cb);
	check(ok, "fused tile decode", K, cb);

	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		const int rr = counts[ci];
		double err = 0, err_ref = 0, scale = 1e-3;
		for (int i = 0; i < rr * n; i++)
			y[i] = yr[i] = NAN;
		tf_exl3_mat_mul_ref(&m, x, rr, yr, 0, n / 16);
		for (int i = 0; i < rr * n; i++) {
			scale = fmax(scale, fabs(ref[i]));
			err_ref = fmax(err_ref, isnan(yr[i]) ? INFINITY : fabs(yr[i] - ref[i]));
		}
		/* Every one-row kernel this CPU runs. */
		for (int p = TF_EXL3_ROWPATH_VEC; p < TF_EXL3_ROWPATH_COUNT; p++) {
			if (!tf_exl3_rowpath_supported((tf_exl3_rowpath)p))
				continue;
			for (int i = 0; i < rr * n; i++)
				y[i] = NAN;
			mul_on(&m, x, rr, y, p);
			err = 0;
			for (int i = 0; i < rr * n; i++)
				err = fmax(err, isnan(y[i]) ? INFINITY : fabs(y[i] - ref[i]));
			check(err / scale < 1e-3, p == TF_EXL3_ROWPATH_VEC ? "fused product" :
			      "fused product, avx512", K, cb);
		}
		check(err_ref / scale < 1e-5, "reference product", K, cb);
	}

	/* Each row alone on the vector unit, then every path and row count. */
	for (int r = 0; r < rows; r++) {
		for (int i = 0; i < n; i++)
			y1[r * n + i] = NAN;
		mul_on(&m, x + r * k, 1, y1 + r * n, TF_EXL3_ROWPATH_VEC);
	}
	for (int p = TF_EXL3_ROWPATH_VEC; p < TF_EXL3_ROWPATH_COUNT; p++) {
		int alone = 1;
		if (!tf_exl3_rowpath_supported((tf_exl3_rowpath)p))
			continue;
		for (int rr = 1; rr <= ALONE_ROWS; rr++) {
			const int at = (3 * rr) % (rows - rr + 1);     /* rows at..at+rr */
			for (int i = 0; i < rr * n; i++)
				y[i] = NAN;
			mul_on(&m, x + at * k, rr, y, p);
			alone &= !memcmp(y, y1 + at * n, sizeof(float) * (size_t)(rr * n));
		}
		check(alone, p == TF_EXL3_ROWPATH_VEC ? "rows as alone" :
		      "rows as alone, avx512", K, cb);
	}
	tf_exl3_mat_free(&m);
}

/* Rows 0..rr of x (rows k = 256 wide, ALONE_ROWS of them) through the
 * integer path p into y, row stride n = 176. */
static int int_rows(const tf_exl3_mat *m, const float *x, int rr, int qmax, tf_exl3_ipath p,
		    float *y)
{
	tf_exl3_qx q;
	if (tf_exl3_qx_init(&q, m->k, rr, qmax))
		return 0;
	for (int r = 0; r < rr; r++)
		tf_exl3_qx_set(&q, r, x + r * m->k);
	for (int i = 0; i < rr * m->n; i++)
		y[i] = NAN;
	tf_exl3_mat_mul_int(m, &q, y, 0, 1, p);
	tf_exl3_mat_mul_int(m, &q, y, 1, m->n / 16, p);
	tf_exl3_qx_free(&q);
	return 1;
}

/* Every row of 2..ALONE_ROWS rows on integer path p has its bits alone. */
static int int_alone(const tf_exl3_mat *m, const float *x, int qmax, tf_exl3_ipath p)
{
	static float y1[ALONE_ROWS * 176], y[ALONE_ROWS * 176];
	int ok = 1;

	for (int r = 0; r < ALONE_ROWS; r++)
		ok &= int_rows(m, x + r * m->k, 1, qmax, p, y1 + r * m->n);
	for (int rr = 2; rr <= ALONE_ROWS; rr++) {
		ok &= int_rows(m, x, rr, qmax, p, y);
		ok &= !memcmp(y, y1, sizeof(float) * (size_t)(rr * m->n));
	}
	return ok;
}

/* The integer-activation MUL1 kernels this CPU runs (under qemu -cpu max:
 * NEON and dotprod) against the plain "ref" kernel on the same quantized
 * activations (exact int32 sums: 1e-5) and against float64 with the
 * unquantized x and unrounded weights: the quantization error is ~5e-5 at
 * 15 bits (bound 1e-4) and ~4e-3 at 8 bits for these uniform rows (2e-2).
 * n = 176: a whole column group, then three pairs with a lone tile. */
static void check_int(int K, int qmax, uint64_t *seed)
{
	const double tol = qmax == TF_EXL3_QMAX_I15 ? 1e-4 : 2e-2;
	enum { k = 256, n = 176, rows = ALONE_ROWS };
	uint16_t tr[(k / 16) * (n / 16) * 16 * 8];
	float x[rows * k], y[rows * n], yr[rows * n];
	double ref[rows * n] = { 0 };
	tf_exl3_mat m;
	tf_exl3_qx q;

	for (size_t i = 0; i < sizeof(tr) / 2; i++)
		tr[i] = (uint16_t)lcg(seed);
	for (int i = 0; i < rows * k; i++)
		x[i] = (float)((int)(lcg(seed) % 2001) - 1000) / 1000.0f;
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < k; i++)
			for (int o = 0; o < n; o++) {
				const uint16_t *tile = tr + ((i / 16) * (n / 16) + o / 16) * 16 * K;
				uint16_t st = tf_exl3_state(tile, K, tf_exl3_pos(i % 16, o % 16));
				ref[r * n + o] += (double)x[r * k + i] *
						  (tf_exl3_mul1_bytesum(st) * (double)TF_EXL3_MUL1_K_INV +
						   TF_EXL3_MUL1_K_BIAS);
			}
	if (tf_exl3_mat_init(&m, tr, k, n, K, TF_EXL3_CB_MUL1)) {
		check(0, "int: out of memory", K, TF_EXL3_CB_MUL1);
		return;
	}
	if (tf_exl3_qx_init(&q, k, rows, qmax)) {
		check(0, "int: out of memory", K, TF_EXL3_CB_MUL1);
		tf_exl3_mat_free(&m);
		return;
	}
	for (int r = 0; r < rows; r++)
		tf_exl3_qx_set(&q, r, x + r * k);
	tf_exl3_mat_mul_int(&m, &q, yr, 0, n / 16, TF_EXL3_IPATH_REF);
	for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++) {
		double e = 0, er = 0, s2 = 0, sr = 0;
		if (!tf_exl3_ipath_supported((tf_exl3_ipath)p))
			continue;
		for (int i = 0; i < rows * n; i++)
			y[i] = NAN;
		tf_exl3_mat_mul_int(&m, &q, y, 0, 1, (tf_exl3_ipath)p);   /* ragged split */
		tf_exl3_mat_mul_int(&m, &q, y, 1, n / 16, (tf_exl3_ipath)p);
		for (int i = 0; i < rows * n; i++) {
			e += (y[i] - ref[i]) * (y[i] - ref[i]);
			s2 += ref[i] * ref[i];
			er += (double)(y[i] - yr[i]) * (y[i] - yr[i]);
			sr += (double)yr[i] * yr[i];
		}
		check(sqrt(e / s2) < tol, tf_exl3_ipath_name((tf_exl3_ipath)p), K, TF_EXL3_CB_MUL1);
		check(sqrt(er / sr) < 1e-5, tf_exl3_ipath_name((tf_exl3_ipath)p), K, TF_EXL3_CB_MUL1);
		check(int_alone(&m, x, qmax, (tf_exl3_ipath)p), "int rows as alone", K,
		      TF_EXL3_CB_MUL1);
	}
	/* AUTO changes kernel at TF_EXL3_GEMM_ROWS (< ALONE_ROWS): rows on
	 * either side keep their bits. */
	check(int_alone(&m, x, qmax, TF_EXL3_IPATH_AUTO), "int rows as alone (auto)", K,
	      TF_EXL3_CB_MUL1);
	tf_exl3_qx_free(&q);
	tf_exl3_mat_free(&m);
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
	tf_had128_ref(o, 128);
	check(memcmp(v, o, sizeof(v)) == 0, "hadamard: the plain loop's bits", 0, 0);
}

PLAIN_DOT_FOR(static, plain_dot_f32, TF_DTYPE_F32)
PLAIN_DOT_FOR(static, plain_dot_f16, TF_DTYPE_F16)
PLAIN_DOT_FOR(static, plain_dot_bf16, TF_DTYPE_BF16)

/* The plain linear's dot products on the build's vector unit (plain_dot.h)
 * against a float64 sum of the stored weights; and each row of 1..4 rows
 * over 1..n outputs has the bits of itself alone over all of them.  in =
 * 83: whole 2·TF_VL blocks and a tail on every unit; n = 11: register
 * blocks and lone outputs. */
static void check_plain_dot(tf_dtype dt, plain_dot_fn dot, uint64_t *seed)
{
	enum { in = 83, n = 11, ld = 90 };
	float x[PLAIN_ROWS * in], y[PLAIN_ROWS * n], y1[n];
	uint16_t w16[n * ld];
	float w32[n * ld], wf[n * ld];
	const void *w = dt == TF_DTYPE_F32 ? (const void *)w32 : (const void *)w16;
	int ok = 1, same = 1;

	for (int i = 0; i < n * ld; i++) {
		float v = (float)((int)(lcg(seed) % 2001) - 1000) / 700.0f;
		w16[i] = dt == TF_DTYPE_F16 ? tf_f32_to_f16(v) : tf_f32_to_bf16(v);
		w32[i] = v;
		wf[i] = dt == TF_DTYPE_F16 ? tf_f16_to_f32(w16[i])
			: dt == TF_DTYPE_BF16 ? tf_bf16_to_f32(w16[i]) : v;
	}
	for (int i = 0; i < PLAIN_ROWS * in; i++)
		x[i] = (float)((int)(lcg(seed) % 2001) - 1000) / 300.0f;
	dot(x, in, 1, w, ld, n, NULL, y1, 0);
	for (int o = 0; o < n; o++) {
		double s = 0, m = 0;
		for (int i = 0; i < in; i++) {
			s += (double)wf[o * ld + i] * x[i];
			m += fabs((double)wf[o * ld + i] * x[i]);
		}
		ok &= fabs(y1[o] - s) <= 1e-5 * m;
	}
	for (int nr = 1; nr <= PLAIN_ROWS; nr++)
		for (int no = 1; no <= n; no++) {
			for (int i = 0; i < PLAIN_ROWS * n; i++)
				y[i] = NAN;
			dot(x, in, nr, w, ld, no, NULL, y, n);
			for (int j = 0; j < nr; j++) {
				dot(x + j * in, in, 1, w, ld, n, NULL, y1, 0);
				same &= memcmp(y + j * n, y1, (size_t)no * sizeof(float)) == 0;
			}
		}
	char what[64];
	snprintf(what, sizeof(what), "plain dot %s: against float64", tf_dtype_name(dt));
	check(ok, what, 0, 0);
	snprintf(what, sizeof(what), "plain dot %s: rows and outputs as alone", tf_dtype_name(dt));
	check(same, what, 0, 0);
}

int main(void)
{
	uint64_t seed = 1;
	check_hadamard(&seed);
	check_plain_dot(TF_DTYPE_F32, plain_dot_f32, &seed);
	check_plain_dot(TF_DTYPE_F16, plain_dot_f16, &seed);
	check_plain_dot(TF_DTYPE_BF16, plain_dot_bf16, &seed);
	for (int K = 1; K <= 8; K++)
		for (int cb = 0; cb < TF_EXL3_CB_COUNT; cb++)
			check_k_cb(K, (tf_exl3_cb)cb, &seed);
	for (int K = 1; K <= 8; K++) {
		check_int(K, TF_EXL3_QMAX_I15, &seed);
		check_int(K, TF_EXL3_QMAX_I8, &seed);
	}
	printf("integer kernels: best here is %s\n", tf_exl3_ipath_name(tf_exl3_ipath_best()));
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
