/*
 * matmul_vnni.c - the integer-activation MUL1 product with AVX-512 VNNI
 * (matmul_int.h), built with -mavx512f/bw/vl/vnni/vbmi2 and called only
 * when the CPU has them (tf_exl3_ipath_supported).
 *
 * Per 16 weights (tile_avx512.h: the window and the MUL1 multiply), then
 * the product's byte sum times the activation:
 *
 *  - 15-bit activations: vpmaddubsw against ones (byte pairs, ≤ 510) and
 *    vpdpwssd with v in both int16 halves, 5 operations per 16 weights;
 *  - 8-bit activations (|v| ≤ 127): one vpdpbusd of the product's four
 *    bytes against v in all four bytes, 4 operations.
 *
 * The window extraction is the dearest of them, then the multiply
 * (bench/exl3/README.md).  One row walks two tile pairs at once: four
 * independent sums instead of two (measured 1.07x).
 */
#include "matmul_int_kern.h"
#include "tile_avx512.h"

#define TILE TF_EXL3_TILE
#define PAIRS 4                 /* tile pairs walked together */
#define PREFETCH 8              /* tile rows ahead to prefetch */
#define TILES_PER_BLOCK (TF_EXL3_QBLOCK / TILE)

/* acc += bytesum(p)·v, v from the activation pair word *x. */
static inline __attribute__((always_inline)) __m512i
dot_step(__m512i acc, __m512i p, const uint32_t *x, int q8)
{
	if (q8)         /* v's low byte, in all four bytes */
		return _mm512_dpbusd_epi32(acc, p, _mm512_set1_epi8((char)*x));
	return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(p, _mm512_set1_epi8(1)),
				   _mm512_set1_epi32((int)*x));
}

/* acc[pp][row][half] += Σ_r bytesum·v over np (1 or 2) tile pairs, pair_words
 * apart (np = 2: both pairs whole); x holds the activation words of the
 * tiles' 16 rows, row stride xstride; acc rows are TF_EXL3_INT_ROWS apart. */
static inline __attribute__((always_inline)) void
pair_dot(const uint16_t *tiles, int64_t pair_words, int np, int K, int nt,
	 const uint32_t *x, int64_t xstride, int rows, int q8, __m512i *acc)
{
	__m512i D[2][2 * TF_EXL3_K_MAX], a[2][TF_EXL3_INT_ROWS][2];

	/* Sums in locals: __m512i may alias x, and sums kept through acc
	 * would be stored after every step. */
	for (int pp = 0; pp < np; pp++) {
		for (int row = 0; row < rows; row++)
			for (int half = 0; half < 2; half++)
				a[pp][row][half] = acc[(pp * TF_EXL3_INT_ROWS + row) * 2 + half];
		pair_halves(tiles + pp * pair_words, K, nt, D[pp]);
	}
#pragma GCC unroll 16
	for (int r = 0; r < TILE; r++)
#pragma GCC unroll 2
		for (int half = 0; half < 2; half++)
#pragma GCC unroll 2
			for (int pp = 0; pp < np; pp++) {
				__m512i p = pair_halfrow(D[pp], K, tf_exl3_row_base(r) + 4 * half);
				for (int row = 0; row < rows; row++)
					a[pp][row][half] = dot_step(a[pp][row][half], p,
								    x + row * xstride + r, q8);
			}
	for (int pp = 0; pp < np; pp++)
		for (int row = 0; row < rows; row++)
			for (int half = 0; half < 2; half++)
				acc[(pp * TF_EXL3_INT_ROWS + row) * 2 + half] = a[pp][row][half];
}

typedef void (*pair_dot_fn)(const uint16_t *tiles, int64_t pair_words, int np, int nt,
			    const uint32_t *x, int64_t xstride, int rows, int q8, __m512i *acc);

/* One row of two whole pairs (decode's common case) gets its own copies;
 * more rows take one pair at a time, their sums filling the registers. */
#define PAIR_FN(K)                                                                     \
	static void pair_dot_##K(const uint16_t *t, int64_t pw, int np, int nt,         \
				 const uint32_t *x, int64_t xs, int rows, int q8,       \
				 __m512i *a)                                            \
	{                                                                              \
		if (np == 2 && q8)                                                     \
			pair_dot(t, pw, 2, K, 2, x, 0, 1, 1, a);                       \
		else if (np == 2)                                                      \
			pair_dot(t, pw, 2, K, 2, x, 0, 1, 0, a);                       \
		else                                                                   \
			pair_dot(t, pw, 1, K, nt, x, xs, rows, q8, a);                 \
	}
PAIR_FN(1) PAIR_FN(2) PAIR_FN(3) PAIR_FN(4) PAIR_FN(5) PAIR_FN(6) PAIR_FN(7) PAIR_FN(8)

static const pair_dot_fn pair_dots[TF_EXL3_K_MAX + 1] = {
	[1] = pair_dot_1, [2] = pair_dot_2, [3] = pair_dot_3, [4] = pair_dot_4,
	[5] = pair_dot_5, [6] = pair_dot_6, [7] = pair_dot_7, [8] = pair_dot_8,
};

void tf_exl3_int_vnni(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
		      int64_t j0, int64_t j1)
{
	const pair_dot_fn dot = pair_dots[m->K];
	const int64_t tiles_k = m->k / TILE, tile_words = 16 * (int64_t)m->K;
	const int64_t blocks = m->k / TF_EXL3_QBLOCK;
	const int rows = (int)q->rows, q8 = q->qmax <= TF_EXL3_QMAX_I8;

	for (int64_t jg = j0; jg < j1; jg += 2 * PAIRS) {
		const int nc = j1 - jg < 2 * PAIRS ? (int)(j1 - jg) : 2 * PAIRS;
		const int np = (nc + 1) / 2;
		__m512i acc[PAIRS][TF_EXL3_INT_ROWS][2];
		__m512 yf[PAIRS][TF_EXL3_INT_ROWS][2];

		for (int p = 0; p < np; p++)
			for (int row = 0; row < rows; row++)
				yf[p][row][0] = yf[p][row][1] = _mm512_setzero_ps();
		for (int64_t i = 0; i < tiles_k; i++) {
			const uint16_t *run = m->trellis +
				((size_t)i * (size_t)(m->n / TILE) + (size_t)jg) * (size_t)tile_words;
			if (i % TILES_PER_BLOCK == 0)
				for (int p = 0; p < np; p++)
					for (int row = 0; row < rows; row++)
						acc[p][row][0] = acc[p][row][1] = _mm512_setzero_si512();
			if (i + PREFETCH < tiles_k) {
				const char *ahead = (const char *)(run + PREFETCH * (m->n / TILE) * tile_words);
				for (int64_t b = 0; b < nc * tile_words * 2; b += 64)
					_mm_prefetch(ahead + b, _MM_HINT_T0);
			}
			for (int p = 0; p < np;) {
				const int nt = nc - 2 * p >= 2 ? 2 : 1;
				const int two = rows == 1 && nc - 2 * p >= 4 ? 2 : 1;
				dot(run + 2 * p * tile_words, 2 * tile_words, two, nt,
				    q->pair + i * TILE, q->k, rows, q8, acc[p][0]);
				p += two;
			}
			if (i % TILES_PER_BLOCK != TILES_PER_BLOCK - 1)
				continue;
			/* Block done: its int32 sums to float, at its unit. */
			for (int row = 0; row < rows; row++) {
				__m512 unit = _mm512_set1_ps(q->unit[row * blocks + i / TILES_PER_BLOCK]);
				for (int p = 0; p < np; p++)
					for (int half = 0; half < 2; half++)
						yf[p][row][half] = _mm512_fmadd_ps(
							_mm512_cvtepi32_ps(acc[p][row][half]), unit,
							yf[p][row][half]);
			}
		}
		for (int row = 0; row < rows; row++) {
			const __m512 bias = _mm512_set1_ps(TF_EXL3_MUL1_K_BIAS * q->sum[row]);
			const __m512 kinv = _mm512_set1_ps(TF_EXL3_MUL1_K_INV);
			for (int p = 0; p < np; p++)
				pair_store(yh + row * m->n + (jg + 2 * p) * TILE,
					   _mm512_fmadd_ps(yf[p][row][0], kinv, bias),
					   _mm512_fmadd_ps(yf[p][row][1], kinv, bias), nc - 2 * p >= 2);
		}
	}
}
