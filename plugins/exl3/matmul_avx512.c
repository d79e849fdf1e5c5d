/*
 * matmul_avx512.c - the one-row (decode) product of a MUL1 trellis with
 * float activations on AVX-512 VNNI: the "exl3" descriptor's fast path,
 * chosen by tf_exl3_mat_mul() where the CPU has it.  Built with
 * -mavx512f/bw/vl/vnni/vbmi2.
 *
 * Per 16 weights: the window and the MUL1 multiply (tile_avx512.h), the
 * product's byte sum in one vpdpbusd against ones, its conversion to float
 * (exact: ≤ 1020) and one FMA with the activation: 6 operations, against
 * 7-9 per 8 weights on the AVX2 path.  Sums are fp32 and the affine form
 * comes off at the end, Σ x·w = K_INV·Σ x·bs + K_BIAS·Σ x, exactly as the
 * AVX2 path does, so the two differ only in the order of fp32 additions.
 */
#include "matmul_int_kern.h"
#include "tile_avx512.h"

#define TILE TF_EXL3_TILE
#define PAIRS 4                 /* tile pairs walked together */
#define PREFETCH 8              /* tile rows ahead to prefetch */

/* acc[pp][half] += Σ_r bs·x[r] over np (1 or 2) tile pairs, pair_words
 * apart (np = 2: both pairs whole). */
static inline __attribute__((always_inline)) void
pair_dot_f32(const uint16_t *tiles, int64_t pair_words, int np, int K, int nt,
	     const float *x, __m512 *acc)
{
	const __m512i ones = _mm512_set1_epi8(1);
	__m512i D[2][2 * TF_EXL3_K_MAX];
	__m512 a[2][2];

	for (int pp = 0; pp < np; pp++) {
		a[pp][0] = acc[2 * pp];
		a[pp][1] = acc[2 * pp + 1];
		pair_halves(tiles + pp * pair_words, K, nt, D[pp]);
	}
#pragma GCC unroll 16
	for (int r = 0; r < TILE; r++) {
		const __m512 xr = _mm512_set1_ps(x[r]);
#pragma GCC unroll 2
		for (int half = 0; half < 2; half++)
#pragma GCC unroll 2
			for (int pp = 0; pp < np; pp++) {
				__m512i p = pair_halfrow(D[pp], K, tf_exl3_row_base(r) + 4 * half);
				__m512i bs = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p, ones);
				a[pp][half] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(bs), xr, a[pp][half]);
			}
	}
	for (int pp = 0; pp < np; pp++) {
		acc[2 * pp] = a[pp][0];
		acc[2 * pp + 1] = a[pp][1];
	}
}

typedef void (*pair_dot_f32_fn)(const uint16_t *tiles, int64_t pair_words, int np, int nt,
				const float *x, __m512 *acc);

/* Two whole pairs at once where there are (four independent sums), else
 * one pair of one or two tiles. */
#define PAIR_FN(K)                                                                  \
	static void pair_dot_f32_##K(const uint16_t *t, int64_t pw, int np, int nt,  \
				     const float *x, __m512 *a)                      \
	{                                                                           \
		if (np == 2)                                                        \
			pair_dot_f32(t, pw, 2, K, 2, x, a);                         \
		else                                                                \
			pair_dot_f32(t, pw, 1, K, nt, x, a);                        \
	}
PAIR_FN(1) PAIR_FN(2) PAIR_FN(3) PAIR_FN(4) PAIR_FN(5) PAIR_FN(6) PAIR_FN(7) PAIR_FN(8)

static const pair_dot_f32_fn pair_dots[TF_EXL3_K_MAX + 1] = {
	[1] = pair_dot_f32_1, [2] = pair_dot_f32_2, [3] = pair_dot_f32_3, [4] = pair_dot_f32_4,
	[5] = pair_dot_f32_5, [6] = pair_dot_f32_6, [7] = pair_dot_f32_7, [8] = pair_dot_f32_8,
};

void tf_exl3_mul1_row_avx512(const tf_exl3_mat *m, const float *xh, float *yh, float xsum,
			     int64_t j0, int64_t j1)
{
	const pair_dot_f32_fn dot = pair_dots[m->K];
	const int64_t tiles_k = m->k / TILE, tile_words = 16 * (int64_t)m->K;
	const int64_t row_words = (m->n / TILE) * tile_words;
	const __m512 kinv = _mm512_set1_ps(TF_EXL3_MUL1_K_INV);
	const __m512 bias = _mm512_set1_ps(TF_EXL3_MUL1_K_BIAS * xsum);

	for (int64_t jg = j0; jg < j1; jg += 2 * PAIRS) {
		const int nc = j1 - jg < 2 * PAIRS ? (int)(j1 - jg) : 2 * PAIRS;
		const int np = (nc + 1) / 2;
		__m512 acc[PAIRS][2];

		for (int p = 0; p < np; p++)
			acc[p][0] = acc[p][1] = _mm512_setzero_ps();
		for (int64_t i = 0; i < tiles_k; i++) {
			const uint16_t *run = m->trellis + i * row_words + jg * tile_words;
			if (i + PREFETCH < tiles_k) {
				const char *ahead = (const char *)(run + PREFETCH * row_words);
				for (int64_t b = 0; b < nc * tile_words * 2; b += 64)
					_mm_prefetch(ahead + b, _MM_HINT_T0);
			}
			for (int p = 0; p < np;) {
				const int nt = nc - 2 * p >= 2 ? 2 : 1;
				const int two = nc - 2 * p >= 4 ? 2 : 1;
				dot(run + 2 * p * tile_words, 2 * tile_words, two, nt, xh + i * TILE,
				    acc[p]);
				p += two;
			}
		}
		for (int p = 0; p < np; p++)
			pair_store(yh + (jg + 2 * p) * TILE, _mm512_fmadd_ps(acc[p][0], kinv, bias),
				   _mm512_fmadd_ps(acc[p][1], kinv, bias), nc - 2 * p >= 2);
	}
}
