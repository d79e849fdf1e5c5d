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
#include <string.h>

#include <immintrin.h>

#include "matmul_int_kern.h"
#include "pair_avx512.h"

#define TILE TF_EXL3_TILE
#define STRIP_TILES 4                           /* tile columns a strip: 64 outputs */
#define BLOCK_TILES (TF_EXL3_QBLOCK / TILE)     /* tile rows a strip: one block */
#define KPAIRS (TF_EXL3_QBLOCK / 2)             /* k pairs a block */
#define ROW_BLOCK 4                             /* rows whose sums stay in registers */

/* w[kp][16t + c] = bs[2kp][c] | bs[2kp+1][c] << 16 of tile column t, for
 * the block's tile rows i0 .. i0+7 and tile columns j .. j+nt-1: each pair
 * of tiles decoded as the walk decodes it, two tile rows r, r+1 at a time. */
static inline __attribute__((always_inline)) void
strip_decode_k(const tf_exl3_mat *m, int K, int64_t i0, int64_t j, int nt,
	       uint32_t (*w)[STRIP_TILES * TILE])
{
	for (int64_t jp = j & ~(int64_t)1; jp < j + nt; jp += 2)
		for (int i = 0; i < BLOCK_TILES; i++) {
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

/* One copy per K, its shifts and word offsets immediates. */
#define DECODE_K(K)                                                              \
	case K:                                                                  \
		strip_decode_k(m, K, i0, j, nt, w);                              \
		break;
static void strip_decode(const tf_exl3_mat *m, int64_t i0, int64_t j, int nt,
			 uint32_t (*w)[STRIP_TILES * TILE])
{
	switch (m->K) {
	DECODE_K(1) DECODE_K(2) DECODE_K(3) DECODE_K(4)
	DECODE_K(5) DECODE_K(6) DECODE_K(7) DECODE_K(8)
	}
}
#undef DECODE_K

/* y[row][16t ..] = fma(Σ_kp w[kp]·x[row][kp], unit[row], y[row]) for rows
 * < nr, tile columns t < nt; x row stride xs (in pairs), y's ys. */
static inline __attribute__((always_inline)) void
strip_apply(const uint32_t (*w)[STRIP_TILES * TILE], int nt, const uint32_t *x, int64_t xs,
	    const float *unit, int64_t us, float *y, int64_t ys, int nr)
{
	__m512i acc[ROW_BLOCK][STRIP_TILES];

#pragma GCC unroll 4
	for (int row = 0; row < nr; row++)
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
			acc[row][t] = _mm512_setzero_si512();
#pragma GCC unroll 2
	for (int kp = 0; kp < KPAIRS; kp++) {
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
			_mm512_storeu_ps(yt, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[row][t]), u,
							     _mm512_loadu_ps(yt)));
		}
	}
}

/* One copy per (rows, tiles) with constant bounds, the sums in registers. */
typedef void (*apply_fn)(const uint32_t (*w)[STRIP_TILES * TILE], const uint32_t *x,
			 int64_t xs, const float *unit, int64_t us, float *y, int64_t ys);
#define APPLY_FN(nr, nt)                                                                \
	static void apply_##nr##_##nt(const uint32_t (*w)[STRIP_TILES * TILE],         \
				      const uint32_t *x, int64_t xs, const float *unit, \
				      int64_t us, float *y, int64_t ys)                 \
	{                                                                               \
		strip_apply(w, nt, x, xs, unit, us, y, ys, nr);                         \
	}
#define APPLY_FNS(nr) APPLY_FN(nr, 1) APPLY_FN(nr, 2) APPLY_FN(nr, 3) APPLY_FN(nr, 4)
APPLY_FNS(1) APPLY_FNS(2) APPLY_FNS(3) APPLY_FNS(4)
_Static_assert(ROW_BLOCK == 4 && STRIP_TILES == 4, "one apply_R_T per count");
#define APPLY_ROW(nr) { NULL, apply_##nr##_1, apply_##nr##_2, apply_##nr##_3, apply_##nr##_4 }
static const apply_fn applies[ROW_BLOCK + 1][STRIP_TILES + 1] = {
	[1] = APPLY_ROW(1), [2] = APPLY_ROW(2), [3] = APPLY_ROW(3), [4] = APPLY_ROW(4),
};

/* Rows rows0 .. rows0+rows-1 of q. */
static void gemm_rows(const tf_exl3_mat *m, const tf_exl3_qx *q, int64_t row0, int64_t rows,
		      float *yh, int64_t j0, int64_t j1)
{
	uint32_t w[KPAIRS][STRIP_TILES * TILE] __attribute__((aligned(64)));
	const int64_t blocks = q->k / TF_EXL3_QBLOCK, kp = q->k / 2;

	for (int64_t j = j0; j < j1; j += STRIP_TILES) {
		const int nt = j1 - j < STRIP_TILES ? (int)(j1 - j) : STRIP_TILES;
		for (int64_t row = row0; row < row0 + rows; row++)
			memset(yh + row * m->n + j * TILE, 0, (size_t)nt * TILE * sizeof(float));
		for (int64_t b = 0; b < blocks; b++) {
			strip_decode(m, b * BLOCK_TILES, j, nt, w);
			for (int64_t r0 = row0; r0 < row0 + rows; r0 += ROW_BLOCK) {
				const int64_t left = row0 + rows - r0;
				const int nr = left < ROW_BLOCK ? (int)left : ROW_BLOCK;
				applies[nr][nt]((const uint32_t (*)[STRIP_TILES * TILE])w,
						q->kpair + r0 * kp + b * KPAIRS, kp,
						q->unit + r0 * blocks + b, blocks,
						yh + r0 * m->n + j * TILE, m->n);
			}
		}
		for (int64_t row = row0; row < row0 + rows; row++) {
			const __m512 kinv = _mm512_set1_ps(TF_EXL3_MUL1_K_INV);
			const __m512 bias = _mm512_set1_ps(TF_EXL3_MUL1_K_BIAS * q->sum[row]);
			for (int t = 0; t < nt; t++) {
				float *y = yh + row * m->n + (j + t) * TILE;
				_mm512_storeu_ps(y, _mm512_fmadd_ps(_mm512_loadu_ps(y), kinv, bias));
			}
		}
	}
}

/* ROW_CHUNK rows at a time: their activations and sums stay in L2 while
 * the strips pass (at 512 rows in one pass they did not: 67 against 81 G
 * row-weights/s at 64), and a strip's decode is still shared by enough
 * rows to cost little. */
#define ROW_CHUNK 64

void tf_exl3_int_gemm_vnni(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
			   int64_t j0, int64_t j1)
{
	for (int64_t r0 = 0; r0 < q->rows; r0 += ROW_CHUNK)
		gemm_rows(m, q, r0, q->rows - r0 < ROW_CHUNK ? q->rows - r0 : ROW_CHUNK, yh, j0, j1);
}
