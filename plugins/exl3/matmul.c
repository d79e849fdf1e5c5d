/* matmul.c - tile decode and products with Ŵ, reference and fused (matmul.h). */
#include "matmul.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_int_kern.h"
#include "tf/error.h"
#include "tile_vec.h"

/* Bytes of the layout, padding included: whole 64-byte word rows. */
static size_t mat_bytes(const tf_exl3_mat *m)
{
	const size_t pairs = (size_t)(m->k / TILE) * (size_t)((m->n / TILE + 1) / 2);
	return pairs * 16 * (size_t)m->K * sizeof(uint32_t);
}

int tf_exl3_mat_alloc(tf_exl3_mat *m, int64_t k, int64_t n, int K, tf_exl3_cb cb)
{
	*m = (tf_exl3_mat){ .k = k, .n = n, .K = K, .cb = cb };
	/* Whole cache lines: a pair's word row is one 64-byte load.  (Huge
	 * pages measured no faster: the kernels stream sequential runs.) */
	m->lanes = aligned_alloc(64, mat_bytes(m));
	return m->lanes ? TF_OK : TF_ERR_NOMEM;
}

void tf_exl3_mat_pack(tf_exl3_mat *m, const uint16_t *trellis, int64_t j0, int64_t j1)
{
	const int64_t tiles_k = m->k / TILE, tiles_n = m->n / TILE;
	const int K = m->K;

	for (int64_t i = 0; i < tiles_k; i++)
		for (int64_t j = j0; j < j1; j++) {
			const uint16_t *tile = trellis + (size_t)(i * tiles_n + j) * 16 * (size_t)K;
			uint32_t *dst = (uint32_t *)mat_tile(m, i, j);
			for (int w = 0; w < K; w++)
				for (int c = 0; c < 8; c++)
					memcpy(dst + 16 * w + c, tile + 2 * (c * K + w), 4);
			if (j == tiles_n - 1 && j % 2 == 0)     /* a lone last tile */
				for (int w = 0; w < K; w++)
					memset(dst + 16 * w + 8, 0, 8 * sizeof(uint32_t));
		}
}

int tf_exl3_mat_init(tf_exl3_mat *m, const uint16_t *trellis, int64_t k,
		     int64_t n, int K, tf_exl3_cb cb)
{
	int rc = tf_exl3_mat_alloc(m, k, n, K, cb);

	if (!rc)
		tf_exl3_mat_pack(m, trellis, 0, n / TILE);
	return rc;
}

void tf_exl3_mat_free(tf_exl3_mat *m)
{
	free(m->lanes);
	m->lanes = NULL;
}

void tf_exl3_mat_tile_words(const tf_exl3_mat *m, int64_t i, int64_t j, uint16_t *words)
{
	const uint32_t *src = mat_tile(m, i, j);

	for (int w = 0; w < m->K; w++)
		for (int c = 0; c < 8; c++)
			memcpy(words + 2 * (c * m->K + w), src + 16 * w + c, 4);
}

void tf_exl3_mat_tile_ref(const tf_exl3_mat *m, int64_t i, int64_t j,
			  float out[TF_EXL3_TILE_N])
{
	uint16_t words[16 * TF_EXL3_K_MAX], h[TF_EXL3_TILE_N];

	tf_exl3_mat_tile_words(m, i, j, words);
	tf_exl3_tile_decode_ref(words, m->K, m->cb, h);
	for (int e = 0; e < TF_EXL3_TILE_N; e++)
		out[e] = tf_f16_to_f32(h[e]);
}

/* The same half-row through the codebook.  MUL1 returns the raw byte sum:
 * callers apply w = bs·K_INV + K_BIAS where it is cheapest. */
static inline __attribute__((always_inline)) tf_vf
halfrow(const uint32_t *tw, int K, tf_exl3_cb cb, int base, int v)
{
	tf_vi s = halfrow_state(tw, K, base, v);

	if (cb == TF_EXL3_CB_MUL1)
		return tf_vi_bytesum(tf_vi_mul(s, tf_vi_set1(TF_EXL3_MUL1_MUL)));
	tf_vi x = cb == TF_EXL3_CB_MCG
		? tf_vi_mul(s, tf_vi_set1(TF_EXL3_MCG_MUL))
		: tf_vi_add(tf_vi_mul(s, tf_vi_set1(TF_EXL3_3INST_MUL)),
			    tf_vi_set1(TF_EXL3_3INST_ADD));
	x = tf_vi_xor(tf_vi_and(x, tf_vi_set1(TF_EXL3_LOP_MASK)), tf_vi_set1(TF_EXL3_LOP_XOR));
	return tf_vi_halfsum(x);
}

/* Decode a whole tile to floats, row-major; raw: MUL1 tiles as their byte
 * sums, as tile_dot multiplies them (other codebooks ignore it). */
static inline __attribute__((always_inline)) void
tile_decode(const uint32_t *tile, int K, tf_exl3_cb cb, bool raw, float *out)
{
	uint32_t tw[TILE_SPANS] __attribute__((aligned(32)));

	tile_spans(tile, K, tw);
#pragma GCC unroll 16
	for (int r = 0; r < TILE; r++)
		for (int half = 0; half < 2; half++)
			for (int v = 0; v < 8; v += TF_VL) {
				tf_vf f = halfrow(tw, K, cb, tf_exl3_row_base(r) + 4 * half, v);
				if (cb == TF_EXL3_CB_MUL1 && !raw)
					f = tf_vf_fma(f, tf_vf_set1(TF_EXL3_MUL1_K_INV),
						      tf_vf_set1(TF_EXL3_MUL1_K_BIAS));
				tf_vf_store(out + r * TILE + 8 * half + v, f);
			}
}

/* acc[c] += Σ_r x[r]·Ŵ[r][c] over one tile, never leaving registers.  For
 * MUL1 acc gathers Σ x·bytesum; the caller finishes with K_INV and K_BIAS. */
static inline __attribute__((always_inline)) void
tile_dot(const uint32_t *tile, int K, tf_exl3_cb cb, const float *x, tf_vf *acc)
{
	uint32_t tw[TILE_SPANS] __attribute__((aligned(32)));

	tile_spans(tile, K, tw);
#pragma GCC unroll 16
	for (int r = 0; r < TILE; r++) {
		tf_vf xr = tf_vf_set1(x[r]);
		for (int half = 0; half < 2; half++)
			for (int v = 0; v < 8; v += TF_VL)
				acc[(8 * half + v) / TF_VL] = tf_vf_fma(
					xr, halfrow(tw, K, cb, tf_exl3_row_base(r) + 4 * half, v),
					acc[(8 * half + v) / TF_VL]);
	}
}

typedef void (*tile_decode_fn)(const uint32_t *tile, float *out);
typedef void (*tile_dot_fn)(const uint32_t *tile, const float *x, tf_vf *acc);

/* One instance of each per (K, codebook): 24 specialised loops. */
#define TILE_FNS(K, cb)                                                         \
	static void decode_##K##_##cb(const uint32_t *t, float *o)             \
	{ tile_decode(t, K, cb, false, o); }                                    \
	static void raw_##K##_##cb(const uint32_t *t, float *o)                \
	{ tile_decode(t, K, cb, true, o); }                                     \
	static void dot_##K##_##cb(const uint32_t *t, const float *x, tf_vf *a) \
	{ tile_dot(t, K, cb, x, a); }
#define TILE_FNS_K(K) TILE_FNS(K, 0) TILE_FNS(K, 1) TILE_FNS(K, 2)
TILE_FNS_K(1) TILE_FNS_K(2) TILE_FNS_K(3) TILE_FNS_K(4)
TILE_FNS_K(5) TILE_FNS_K(6) TILE_FNS_K(7) TILE_FNS_K(8)

#define TILE_ROW(K, fn) { fn##_##K##_0, fn##_##K##_1, fn##_##K##_2 }
static const tile_decode_fn tile_decoders[TF_EXL3_K_MAX + 1][TF_EXL3_CB_COUNT] = {
	[1] = TILE_ROW(1, decode), [2] = TILE_ROW(2, decode), [3] = TILE_ROW(3, decode),
	[4] = TILE_ROW(4, decode), [5] = TILE_ROW(5, decode), [6] = TILE_ROW(6, decode),
	[7] = TILE_ROW(7, decode), [8] = TILE_ROW(8, decode),
};
static const tile_decode_fn tile_raws[TF_EXL3_K_MAX + 1][TF_EXL3_CB_COUNT] = {
	[1] = TILE_ROW(1, raw), [2] = TILE_ROW(2, raw), [3] = TILE_ROW(3, raw),
	[4] = TILE_ROW(4, raw), [5] = TILE_ROW(5, raw), [6] = TILE_ROW(6, raw),
	[7] = TILE_ROW(7, raw), [8] = TILE_ROW(8, raw),
};
static const tile_dot_fn tile_dots[TF_EXL3_K_MAX + 1][TF_EXL3_CB_COUNT] = {
	[1] = TILE_ROW(1, dot), [2] = TILE_ROW(2, dot), [3] = TILE_ROW(3, dot),
	[4] = TILE_ROW(4, dot), [5] = TILE_ROW(5, dot), [6] = TILE_ROW(6, dot),
	[7] = TILE_ROW(7, dot), [8] = TILE_ROW(8, dot),
};

void tf_exl3_mat_tile(const tf_exl3_mat *m, int64_t i, int64_t j,
		      float out[TF_EXL3_TILE_N])
{
	tile_decoders[m->K][m->cb](mat_tile(m, i, j), out);
}

void tf_exl3_mat_tile_raw(const tf_exl3_mat *m, int64_t i, int64_t j,
			  float out[TF_EXL3_TILE_N])
{
	tile_raws[m->K][TF_EXL3_CB_MUL1](mat_tile(m, i, j), out);
}

void tf_exl3_mat_mul_ref(const tf_exl3_mat *m, const float *xh, int64_t rows,
			 float *yh, int64_t j0, int64_t j1)
{
	float w[TF_EXL3_TILE_N];

	for (int64_t j = j0; j < j1; j++) {
		for (int64_t row = 0; row < rows; row++)
			memset(yh + row * m->n + j * TILE, 0, TILE * sizeof(float));
		for (int64_t i = 0; i < m->k / TILE; i++) {
			tf_exl3_mat_tile_ref(m, i, j, w);
			for (int64_t row = 0; row < rows; row++) {
				const float *x = xh + row * m->k + i * TILE;
				float *y = yh + row * m->n + j * TILE;
				for (int r = 0; r < TILE; r++)
					for (int c = 0; c < TILE; c++)
						y[c] += x[r] * w[r * TILE + c];
			}
		}
	}
}

/* Tile columns walked together: one column group, whose pairs lie in one
 * sequential run of the layout (the hardware prefetcher follows it:
 * software prefetch measured no faster). */
#define ROW_COLS 8

/*
 * Row invariance: a row's outputs have the same bits whatever the row
 * count, the path (but the reference) and the thread count.  Every kernel
 * sums each output down k in one order, tile row by tile row and row r of
 * a tile 0..15, one fma per weight, from 0; MUL1 sums x·(byte sum), and
 * each row then gets y = Σ·K_INV + K_BIAS·xsum in one fma, with xsum from
 * row_xsum.  The tests hold every path to it.
 */

/* Σ xh[0 .. k): MUL1's offset term, in one fixed order for a given k (four
 * vector sums, then the tail).  Every path and row count calls this, once
 * per row and call: as one scalar chain it cost a 512-row prefill 7%. */
static float row_xsum(const float *xh, int64_t k)
{
	tf_vf s[4] = { tf_vf_zero(), tf_vf_zero(), tf_vf_zero(), tf_vf_zero() };
	int64_t i = 0;

	for (; i + 4 * TF_VL <= k; i += 4 * TF_VL)
		for (int u = 0; u < 4; u++)
			s[u] = tf_vf_add(s[u], tf_vf_load(xh + i + u * TF_VL));
	for (; i + TF_VL <= k; i += TF_VL)
		s[0] = tf_vf_add(s[0], tf_vf_load(xh + i));
	float xsum = tf_vf_sum(tf_vf_add(tf_vf_add(s[0], s[1]), tf_vf_add(s[2], s[3])));
	for (; i < k; i++)
		xsum += xh[i];
	return xsum;
}

#if defined(__x86_64__)
/* Whether MUL1 products take the AVX-512 float kernel on this path. */
static bool mul1_avx512(const tf_exl3_mat *m, tf_exl3_rowpath path)
{
	return m->cb == TF_EXL3_CB_MUL1 && path != TF_EXL3_ROWPATH_VEC &&
	       tf_exl3_rowpath_supported(TF_EXL3_ROWPATH_AVX512);
}
#endif

/* One row: each tile column's 16 sums stay in registers across a tile. */
static void mat_mul_row(const tf_exl3_mat *m, const float *xh, float *yh,
			int64_t j0, int64_t j1, tf_exl3_rowpath path)
{
	const tile_dot_fn dot = tile_dots[m->K][m->cb];
	const int64_t tiles_k = m->k / TILE;
	const float xsum = m->cb == TF_EXL3_CB_MUL1 ? row_xsum(xh, m->k) : 0.0f;

#if defined(__x86_64__)
	/* MUL1 on AVX-512 VNNI: 6 operations per 16 weights (matmul_avx512.c). */
	if (mul1_avx512(m, path)) {
		tf_exl3_mul1_rows_avx512(m, xh, 1, yh, &xsum, j0, j1);
		return;
	}
#else
	(void)path;
#endif
	for (int64_t jg = j0; jg < j1; jg += ROW_COLS) {
		const int nc = j1 - jg < ROW_COLS ? (int)(j1 - jg) : ROW_COLS;
		tf_vf acc[ROW_COLS][TILE / TF_VL];

		for (int c = 0; c < nc; c++)
			for (int v = 0; v < TILE / TF_VL; v++)
				acc[c][v] = tf_vf_zero();
		for (int64_t i = 0; i < tiles_k; i++)
			for (int c = 0; c < nc; c++)
				dot(mat_tile(m, i, jg + c), xh + i * TILE, acc[c]);
		for (int c = 0; c < nc; c++)
			for (int v = 0; v < TILE / TF_VL; v++) {
				tf_vf a = acc[c][v];
				if (m->cb == TF_EXL3_CB_MUL1)   /* Σ x·w = K_INV·Σ x·bs + K_BIAS·Σ x */
					a = tf_vf_fma(a, tf_vf_set1(TF_EXL3_MUL1_K_INV),
						      tf_vf_set1(TF_EXL3_MUL1_K_BIAS * xsum));
				tf_vf_store(yh + (jg + c) * TILE + v * TF_VL, a);
			}
	}
}

int tf_exl3_rowpath_supported(tf_exl3_rowpath path)
{
	switch (path) {
	case TF_EXL3_ROWPATH_AUTO:
	case TF_EXL3_ROWPATH_VEC:
		return 1;
	case TF_EXL3_ROWPATH_AVX512:
		return tf_exl3_ipath_supported(TF_EXL3_IPATH_VNNI);
	default:
		return 0;
	}
}

void tf_exl3_mat_mul(const tf_exl3_mat *m, const float *xh, int64_t rows,
		     float *yh, int64_t j0, int64_t j1)
{
	tf_exl3_mat_mul_on(m, xh, rows, yh, j0, j1, TF_EXL3_ROWPATH_AUTO);
}

/*
 * More than one row: tiles are decoded a strip at a time (APPLY_TILES
 * tile rows of one tile column, 128 k by 16 outputs, 8 KB of floats in
 * L1) and applied to ROW_BLOCK rows at once, their 16 sums each held in
 * registers down the whole strip: ROW_BLOCK·16/TF_VL independent FMA
 * chains, enough to cover the FMA latency, and each weight vector loaded
 * once per ROW_BLOCK rows.
 */
#define APPLY_TILES 8
#define ROW_BLOCK 4
#define WALK_ROWS_MAX 16        /* from here the strips, where the AVX-512 walk runs */

/* y[row][0 .. 16) += Σ_kk x[row·xs + kk] · w[kk][0 .. 16) over nk < 128 k
 * and nr rows; row strides xs, ys. */
static inline __attribute__((always_inline)) void
strip_apply(const float *w, int nk, const float *x, int64_t xs, float *y, int64_t ys, int nr)
{
	enum { VPT = TILE / TF_VL };
	tf_vf acc[ROW_BLOCK][VPT];

#pragma GCC unroll 8
	for (int row = 0; row < nr; row++)
#pragma GCC unroll 16
		for (int v = 0; v < VPT; v++)
			acc[row][v] = tf_vf_load(y + row * ys + v * TF_VL);
	for (int kk = 0; kk < nk; kk++) {
		tf_vf wr[VPT];
#pragma GCC unroll 16
		for (int v = 0; v < VPT; v++)
			wr[v] = tf_vf_load(w + kk * TILE + v * TF_VL);
#pragma GCC unroll 8
		for (int row = 0; row < nr; row++) {
			tf_vf xr = tf_vf_set1(x[row * xs + kk]);
#pragma GCC unroll 16
			for (int v = 0; v < VPT; v++)
				acc[row][v] = tf_vf_fma(xr, wr[v], acc[row][v]);
		}
	}
#pragma GCC unroll 8
	for (int row = 0; row < nr; row++)
#pragma GCC unroll 16
		for (int v = 0; v < VPT; v++)
			tf_vf_store(y + row * ys + v * TF_VL, acc[row][v]);
}

/* One out-of-line copy per row count: inlined into the row loop, the
 * compiler hoisted the strip's weights across blocks and spilled the sums
 * (measured 2x slower). */
typedef void (*strip_fn)(const float *w, int nk, const float *x, int64_t xs, float *y,
			 int64_t ys);
#define STRIP_FN(nr)                                                                 \
	__attribute__((noinline)) static void strip_apply_##nr(                      \
		const float *w, int nk, const float *x, int64_t xs, float *y, int64_t ys) \
	{                                                                            \
		strip_apply(w, nk, x, xs, y, ys, nr);                                \
	}
STRIP_FN(1) STRIP_FN(2) STRIP_FN(3) STRIP_FN(4)
_Static_assert(ROW_BLOCK == 4, "one strip_apply_N per row count up to ROW_BLOCK");
static const strip_fn strip_fns[ROW_BLOCK + 1] = {
	[1] = strip_apply_1, [2] = strip_apply_2, [3] = strip_apply_3, [4] = strip_apply_4,
};

void tf_exl3_mat_mul_on(const tf_exl3_mat *m, const float *xh, int64_t rows, float *yh,
			int64_t j0, int64_t j1, tf_exl3_rowpath path)
{
	float w[APPLY_TILES * TF_EXL3_TILE_N] __attribute__((aligned(64)));
	const tile_decode_fn decode = tile_raws[m->K][m->cb];
	const int64_t tiles_k = m->k / TILE;

	if (rows == 1) {
		mat_mul_row(m, xh, yh, j0, j1, path);
		return;
	}
#if defined(__x86_64__)
	/* A few rows: the AVX-512 kernel, each weight decoded once for up to
	 * 8 of them.  It cuts 9-15 rows into 8 and the rest, and that still
	 * beats the strips below (bench_exl3 rows: 9 rows, K=3, 2 threads,
	 * 45 G row-weights/s through the strips, 8 + 1 rows ~58). */
	if (rows < WALK_ROWS_MAX && mul1_avx512(m, path)) {
		float xsum[WALK_ROWS_MAX];
		for (int64_t r = 0; r < rows; r++)
			xsum[r] = row_xsum(xh + r * m->k, m->k);
		tf_exl3_mul1_rows_avx512(m, xh, (int)rows, yh, xsum, j0, j1);
		return;
	}
#endif
	for (int64_t j = j0; j < j1; j++) {
		for (int64_t row = 0; row < rows; row++)
			memset(yh + row * m->n + j * TILE, 0, TILE * sizeof(float));
		for (int64_t i = 0; i < tiles_k; i += APPLY_TILES) {
			const int nt = tiles_k - i < APPLY_TILES ? (int)(tiles_k - i) : APPLY_TILES;
			const float *x = xh + i * TILE;
			float *y = yh + j * TILE;
			/* Decode once, then apply to every row while in L1. */
			for (int t = 0; t < nt; t++)
				decode(mat_tile(m, i + t, j), w + t * TF_EXL3_TILE_N);
			for (int64_t row = 0; row < rows; row += ROW_BLOCK) {
				const int nr = rows - row < ROW_BLOCK ? (int)(rows - row) : ROW_BLOCK;
				strip_fns[nr](w, nt * TILE, x + row * m->k, m->k, y + row * m->n, m->n);
			}
		}
	}
	if (m->cb != TF_EXL3_CB_MUL1)
		return;
	for (int64_t row = 0; row < rows; row++) {         /* Σ x·bs to Σ x·w */
		const tf_vf kinv = tf_vf_set1(TF_EXL3_MUL1_K_INV);
		const tf_vf bias = tf_vf_set1(TF_EXL3_MUL1_K_BIAS * row_xsum(xh + row * m->k, m->k));
		for (int64_t c = j0 * TILE; c < j1 * TILE; c += TF_VL) {
			float *y = yh + row * m->n + c;
			tf_vf_store(y, tf_vf_fma(tf_vf_load(y), kinv, bias));
		}
	}
}

void tf_exl3_mat_mul_t(const tf_exl3_mat *m, const float *wh, int64_t j0, int64_t j1,
		       float *t)
{
	enum { VPT = TILE / TF_VL };
	float w[TF_EXL3_TILE_N] __attribute__((aligned(64)));
	const tile_decode_fn decode = tile_decoders[m->K][m->cb];

	for (int64_t i = 0; i < m->k / TILE; i++) {
		tf_vf acc[TILE];
		for (int r = 0; r < TILE; r++)
			acc[r] = tf_vf_zero();
		for (int64_t j = j0; j < j1; j++) {
			tf_vf wv[VPT];
			decode(mat_tile(m, i, j), w);
			for (int v = 0; v < VPT; v++)
				wv[v] = tf_vf_load(wh + j * TILE + v * TF_VL);
			for (int r = 0; r < TILE; r++)
				for (int v = 0; v < VPT; v++)
					acc[r] = tf_vf_fma(tf_vf_load(w + r * TILE + v * TF_VL), wv[v], acc[r]);
		}
		for (int r = 0; r < TILE; r++)
			t[i * TILE + r] = tf_vf_sum(acc[r]);
	}
}

/* The integer-activation product on this vector unit. */
#define INT_BSDOT tf_vi_bsdot
#define INT_KERN tf_exl3_int_vec
#include "matmul_int_vec.h"
