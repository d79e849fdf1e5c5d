/*
 * gemm_avx512.c - the integer-activation product for many rows
 * (TF_EXL3_IPATH_GEMM), built with the AVX-512 VNNI flags of
 * matmul_avx512.c and called only where the CPU has them.
 *
 * The walk kernel (matmul_avx512.c) decodes each weight once for at most 8
 * rows, and multiplies a weight's byte sum with one row in one vpdpwssd
 * lane: 16 weight-products an instruction, the float FMA's rate.  Here a
 * strip of 128 k (one activation block) by 64 outputs is decoded once for
 * all the rows into int16 byte sums, k-adjacent pairs in each 32-bit lane,
 * and each vpdpwssd multiplies 16 outputs by 2 k against a row's pair of
 * activations (tf_exl3_qx.kpair): 32 weight-products an instruction.
 *
 * The bits are the walk's: each block's Σ bs·v is an exact int32 (both
 * orders give it), folded into float in block order as fma(sum, unit, y),
 * then y·K_INV + K_BIAS·Σxq.  So a row's outputs do not depend on the row
 * count, the kernel, or the thread split.
 */
#include <stdint.h>

#include <immintrin.h>

#include "gemm_strip.h"
#include "matmul_int_kern.h"
#include "pair_avx512.h"

#define TILE TF_EXL3_TILE
#define STRIP_TILES 4                           /* tile columns a strip: 64 outputs */
#define ROW_BLOCK 4                             /* rows whose sums stay in registers */

/* w[kp][16t + c] = bs[2kp][c] | bs[2kp+1][c] << 16 of tile column t, for
 * the block's tile rows i0 .. i0+7 and tile columns j .. j+nt-1: each pair
 * of tiles decoded as the walk decodes it, two tile rows r, r+1 at a time. */
static inline __attribute__((always_inline)) void
strip_decode_k(const tf_exl3_mat *m, int K, int64_t i0, int64_t j, int nt,
	       uint32_t (*w)[STRIP_COLS])
{
	for (int64_t jp = j & ~(int64_t)1; jp < j + nt; jp += 2)
		for (int i = 0; i < GEMM_BLOCK_TILES; i++) {
			__m512i D[2 * TF_EXL3_K_MAX];
			pair_halves(tf_exl3_mat_pair(m, i0 + i, jp), K, D);
#pragma GCC unroll 8
			for (int r = 0; r < TILE; r += 2) {
				const __m512i h[2] = { pair_kp(D, K, r, 0), pair_kp(D, K, r, 1) };
				uint32_t *row = w[(i * TILE + r) / 2];
				for (int t = 0; t < 2; t++)
					if (jp + t >= j && jp + t < j + nt)
						_mm512_store_si512(row + (jp + t - j) * TILE,
								   pair_tile(h[0], h[1], t));
			}
		}
}

GEMM_STRIP_DECODE(STRIP_COLS)

/* y[row][16t ..] = fma(Σ_kp w[kp]·x[row][kp], unit[row], y[row]) for rows
 * < nr, tile columns t < nt; x row stride xs (in pairs), y's ys; first and
 * last as gemm_apply_fn's. */
static inline __attribute__((always_inline)) void
strip_apply(const uint32_t (*w)[STRIP_COLS], int nt, const uint32_t *x, int64_t xs,
	    const float *unit, int64_t us, const float *sum, float *y, int64_t ys, int nr,
	    int first, int last)
{
	__m512i acc[ROW_BLOCK][STRIP_TILES];

#pragma GCC unroll 4
	for (int row = 0; row < nr; row++)
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
			acc[row][t] = _mm512_setzero_si512();
#pragma GCC unroll 2
	for (int kp = 0; kp < GEMM_KPAIRS; kp++) {
		__m512i wv[STRIP_TILES];
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
			wv[t] = _mm512_loadu_si512(w[kp] + t * TILE);
#pragma GCC unroll 4
		for (int row = 0; row < nr; row++) {
			const __m512i xv = _mm512_set1_epi32((int)x[row * xs + kp]);
#pragma GCC unroll 4
			for (int t = 0; t < nt; t++)
				acc[row][t] = _mm512_dpwssd_epi32(acc[row][t], wv[t], xv);
		}
	}
#pragma GCC unroll 4
	for (int row = 0; row < nr; row++) {
		const __m512 u = _mm512_set1_ps(unit[row * us]);
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++) {
			float *yt = y + row * ys + t * TILE;
			const __m512 s = _mm512_cvtepi32_ps(acc[row][t]);
			__m512 v = first ? _mm512_mul_ps(s, u) : _mm512_fmadd_ps(s, u, _mm512_loadu_ps(yt));
			if (last)
				v = _mm512_fmadd_ps(v, _mm512_set1_ps(TF_EXL3_MUL1_K_INV),
						    _mm512_set1_ps(TF_EXL3_MUL1_K_BIAS * sum[row]));
			_mm512_storeu_ps(yt, v);
		}
	}
}

/* One copy per (rows, tiles) with constant bounds, the sums in registers. */
typedef void (*apply_fn)(const uint32_t (*w)[STRIP_COLS], const uint32_t *x,
			 int64_t xs, const float *unit, int64_t us, const float *sum, float *y,
			 int64_t ys, int first, int last);
#define APPLY_FN(nr, nt)                                                                \
	static void apply_##nr##_##nt(const uint32_t (*w)[STRIP_COLS],         \
				      const uint32_t *x, int64_t xs, const float *unit, \
				      int64_t us, const float *sum, float *y, int64_t ys, \
				      int first, int last)                              \
	{                                                                               \
		strip_apply(w, nt, x, xs, unit, us, sum, y, ys, nr, first, last);       \
	}
#define APPLY_FNS(nr) APPLY_FN(nr, 1) APPLY_FN(nr, 2) APPLY_FN(nr, 3) APPLY_FN(nr, 4)
APPLY_FNS(1) APPLY_FNS(2) APPLY_FNS(3) APPLY_FNS(4)
_Static_assert(ROW_BLOCK == 4 && STRIP_TILES == 4, "one apply_R_T per count");
#define APPLY_ROW(nr) { NULL, apply_##nr##_1, apply_##nr##_2, apply_##nr##_3, apply_##nr##_4 }
static const apply_fn applies[ROW_BLOCK + 1][STRIP_TILES + 1] = {
	[1] = APPLY_ROW(1), [2] = APPLY_ROW(2), [3] = APPLY_ROW(3), [4] = APPLY_ROW(4),
};

GEMM_KERNEL(tf_exl3_int_gemm_vnni, 64)
