/*
 * matmul_avx512.c - MUL1 products on AVX-512 VNNI, built with
 * -mavx512f/bw/vl/vnni/vbmi2 and called only where the CPU has them
 * (tf_exl3_ipath_supported): the integer-activation kernel of matmul_int.h
 * (15-bit and 8-bit) and the float kernel of tf_exl3_mat_mul() for a few
 * rows (TF_EXL3_INT_ROWS at a time).
 *
 * A zmm holds one half-row of a tile pair (pair_avx512.h), both tiles
 * sharing every shift.  Per 16 weights the 16-bit window is a shift and a
 * mask of a dword holding the two half-words it spans, then the MUL1
 * multiply, then by activation:
 *
 *  - 8-bit (exl3-q8), one row: one vpdpbusd of the product's four bytes
 *    against v in all four bytes: 4 operations;
 *  - 15-bit (exl3-int), and 8-bit for several rows (WALK_KP): the byte sum
 *    once (vpdpbusd against ones), two tile rows' sums packed as int16
 *    pairs, then per row one vpdpwssd for 2 k: half a row's operation per
 *    16 weights.  One 15-bit row so takes 2.5 multiply-pipe operations per
 *    16 weights where a vpmaddubsw of byte pairs and a vpdpwssd of v in
 *    both halves took 3 (4096x4096, K=3, one thread: 17.7 -> 19.2 G
 *    weights/s);
 *  - float (exl3): the byte sum as one vpdpbusd against ones, its exact
 *    conversion (≤ 1020) and an FMA: 6 operations, the same fp32 sums as
 *    the vector unit's path (Σ x·w = K_INV·Σ x·bs + K_BIAS·Σ x at the end).
 *
 * The multiply and vpdpbusd share one pipe on Zen 4 (one zmm a cycle
 * between them), which bounds the 8-bit kernel at 2 cycles per 16 weights;
 * it runs 2.2 in cache and, up to 5 bits a weight, the same streaming: a
 * column group's run is sequential (matmul.h), which the hardware
 * prefetcher follows without help.  From 6 bits it falls behind, and the
 * walker prefetches (PREFETCH_K_MIN).
 * bench/exl3/README.md has the measurements.
 */
#include <stdbool.h>
#include <stdint.h>

#include <immintrin.h>

#include "matmul_int_kern.h"
#include "pair_avx512.h"

#define TILE TF_EXL3_TILE
#define PAIRS 4                 /* pairs in a column group: 8 tiles, 128 outputs */
#define BLOCK_TILES (TF_EXL3_QBLOCK / TILE)     /* tile rows per activation block */
/* From 6 bits a weight, one thread streams its run faster than the hardware
 * prefetcher alone fetches it (K=6, 8-bit, one thread: 17 -> 19-20 G
 * weights/s); below, the prefetches only take issue slots (K=5: 23 -> 21.5). */
#define PREFETCH_K_MIN 6
#define PREFETCH_ROWS 8         /* tile rows ahead */

/* WALK_KP: integer activations two k a lane, for one 15-bit row or
 * several rows of either precision: each weight's byte sum is made once
 * (vpdpbusd against ones), two tile rows' sums packed as int16 pairs, and
 * each row adds 32 products an instruction (vpdpwssd against
 * tf_exl3_qx.kpair). */
typedef enum walk_mode { WALK_F32, WALK_Q8, WALK_KP } walk_mode;

/* Bytes of x holding k activations in `mode`'s layout. */
static inline __attribute__((always_inline)) int64_t x_bytes(walk_mode mode, int64_t k)
{
	return k * (mode == WALK_KP ? 2 : 4);
}

/* Asks for the group rows PREFETCH_ROWS tile rows past tr (np pairs of
 * one tile row), into L1, or into L2 where `l2`.  A prefetch never
 * faults: past a run's end the addresses may be another tensor's or none,
 * so no pointer arithmetic. */
static inline __attribute__((always_inline)) void
prefetch_ahead(const uint32_t *tr, int64_t stride, int np, int K, bool l2)
{
	const uintptr_t ahead = (uintptr_t)tr + PREFETCH_ROWS * (uintptr_t)stride * 4;

	for (int b = 0; b < np * 16 * K * 4; b += 64)
		if (l2)
			_mm_prefetch((const char *)(ahead + (uintptr_t)b), _MM_HINT_T1);
		else
			_mm_prefetch((const char *)(ahead + (uintptr_t)b), _MM_HINT_T0);
}

/* Activation x[at] broadcast as the step below wants it. */
static inline __attribute__((always_inline)) __m512i
walk_act(const void *x, int64_t at, walk_mode mode)
{
	if (mode == WALK_F32)
		return _mm512_castps_si512(_mm512_set1_ps(((const float *)x)[at]));
	const uint32_t v = ((const uint32_t *)x)[at];
	return mode == WALK_Q8 ? _mm512_set1_epi8((char)v) : _mm512_set1_epi32((int)v);
}

/* acc += the products p times activation v. */
static inline __attribute__((always_inline)) __m512i
walk_step(__m512i acc, __m512i p, __m512i v, walk_mode mode)
{
	const __m512i ones = _mm512_set1_epi8(1);

	if (mode == WALK_Q8)
		return _mm512_dpbusd_epi32(acc, p, v);
	__m512 bs = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), p, ones));
	return _mm512_castps_si512(_mm512_fmadd_ps(bs, _mm512_castsi512_ps(v),
						   _mm512_castsi512_ps(acc)));
}

/* a[pp][row][half] += the products of one tile row of `count` (1 or 2)
 * adjacent pairs at tr, activations x[row·xstride + r] (WALK_KP: the pair
 * r, r+1 at x[row·xstride + r/2]). */
static inline __attribute__((always_inline)) void
walk_pairs(const uint32_t *tr, int count, int K, walk_mode mode, const void *x,
	   int64_t xstride, int rows, __m512i (*a)[TF_EXL3_INT_ROWS][2])
{
	__m512i D[2][2 * TF_EXL3_K_MAX];

	for (int pp = 0; pp < count; pp++)
		pair_halves(tr + pp * 16 * K, K, D[pp]);
	if (mode == WALK_KP) {
#pragma GCC unroll 8
		for (int r = 0; r < TILE; r += 2)
#pragma GCC unroll 8
			for (int row = 0; row < rows; row++) {
				const __m512i v = walk_act(x, row * xstride + r / 2, mode);
#pragma GCC unroll 2
				for (int half = 0; half < 2; half++)
#pragma GCC unroll 2
					for (int pp = 0; pp < count; pp++)
						a[pp][row][half] = _mm512_dpwssd_epi32(
							a[pp][row][half], pair_kp(D[pp], K, r, half), v);
			}
		return;
	}
#pragma GCC unroll 16
	for (int r = 0; r < TILE; r++)
#pragma GCC unroll 8
		for (int row = 0; row < rows; row++) {
			const __m512i v = walk_act(x, row * xstride + r, mode);
#pragma GCC unroll 2
			for (int half = 0; half < 2; half++)
#pragma GCC unroll 2
				for (int pp = 0; pp < count; pp++)
					a[pp][row][half] = walk_step(
						a[pp][row][half],
						pair_halfrow(D[pp], K, tf_exl3_row_base(r) + 4 * half),
						v, mode);
		}
}

/*
 * acc[(p·rows + row)·2 + half] += the products of tile rows [0, nr) of np
 * adjacent pairs: pair p of tile row i at run + i·stride + p·16K, its
 * activations x[row·xstride + 16i ..].  Two pairs go at once where their
 * D fit in registers beside the sums (one row, K ≤ 4): four independent
 * sums, and the two pairs' loads overlap.
 */
static inline __attribute__((always_inline)) void
walk(const uint32_t *run, int64_t stride, int nr, int np, int K, walk_mode mode,
     const void *x, int64_t xstride, int rows, __m512i *acc)
{
	const int step = rows == 1 && K <= 4 ? 2 : 1;
	__m512i a[PAIRS][TF_EXL3_INT_ROWS][2];

	/* Sums in locals: __m512i may alias x, and sums kept through acc
	 * would be stored after every step. */
	for (int p = 0; p < np; p++)
		for (int row = 0; row < rows; row++)
			for (int half = 0; half < 2; half++)
				a[p][row][half] = acc[(p * rows + row) * 2 + half];
	for (int i = 0; i < nr; i++) {
		const uint32_t *tr = run + i * stride;
		if (K >= PREFETCH_K_MIN)
			prefetch_ahead(tr, stride, np, K, false);
#pragma GCC unroll 4
		for (int p = 0; p < np; p += step) {
			const void *xi = (const char *)x + x_bytes(mode, i * TILE);
			if (step == 2 && p + 1 < np)
				walk_pairs(tr + p * 16 * K, 2, K, mode, xi, xstride, rows, a + p);
			else
				walk_pairs(tr + p * 16 * K, 1, K, mode, xi, xstride, rows, a + p);
		}
	}
	for (int p = 0; p < np; p++)
		for (int row = 0; row < rows; row++)
			for (int half = 0; half < 2; half++)
				acc[(p * rows + row) * 2 + half] = a[p][row][half];
}

/*
 * The same for several rows, pair by pair: each pair's sums for every row
 * stay in registers down the walk's tile rows (2·rows of them; pair
 * after pair the rows' 4·2·rows sums would not fit), each half-row decoded
 * once for all the rows.  Every sum is still added in tile-row, then r,
 * order: the bits of walk's.
 */
static inline __attribute__((always_inline)) void
walk_rows(const uint32_t *run, int64_t stride, int nr, int np, int K, walk_mode mode,
	  const void *x, int64_t xstride, int rows, __m512i *acc)
{
	for (int p = 0; p < np; p++) {
		__m512i a[1][TF_EXL3_INT_ROWS][2];
		for (int row = 0; row < rows; row++)
			for (int half = 0; half < 2; half++)
				a[0][row][half] = acc[(p * rows + row) * 2 + half];
		for (int i = 0; i < nr; i++) {
			/* The first pair's pass asks for the next block's whole
			 * group rows, into L2: pair by pair the walk reads its
			 * run in strides the hardware prefetcher does not follow
			 * (2048x2048 at 4 bits, one thread, 2 rows: 296 us
			 * streaming, 245 in cache, 252 so; into L1, or two
			 * blocks ahead, gained less or lost). */
			if (p == 0)
				prefetch_ahead(run + i * stride, stride, np, K, true);
			walk_pairs(run + i * stride + p * 16 * K, 1, K, mode,
				   (const char *)x + x_bytes(mode, i * TILE), xstride, rows, a);
		}
		for (int row = 0; row < rows; row++)
			for (int half = 0; half < 2; half++)
				acc[(p * rows + row) * 2 + half] = a[0][row][half];
	}
}

typedef void (*walk_fn)(const uint32_t *run, int64_t stride, int nr, int np,
			const void *x, int64_t xstride, int rows, __m512i *acc);

/* Per K and mode: one row through a whole column group (decode's case)
 * gets its own copy with every loop bound constant, and so do 2, 3, 4 and
 * 8 rows of the modes that take several (their sums in registers;
 * mul_groups cuts other counts into those); the rest share one. */
#define WALK_ROWS(K, mode, R)                                                  \
	case R:                                                                \
		walk_rows(run, stride, nr, np, K, mode, x, xstride, R, acc);   \
		break;
#define WALK_FN(K, mode)                                                               \
	static void walk_##K##_##mode(const uint32_t *run, int64_t stride, int nr, int np, \
				      const void *x, int64_t xstride, int rows,         \
				      __m512i *acc)                                      \
	{                                                                              \
		switch (mode == WALK_F32 || mode == WALK_KP ? rows : 1) {              \
		WALK_ROWS(K, mode, 2) WALK_ROWS(K, mode, 3) WALK_ROWS(K, mode, 4)      \
		WALK_ROWS(K, mode, 8)                                                  \
		default:                                                               \
			if (rows == 1 && np == PAIRS)                                  \
				walk(run, stride, nr, PAIRS, K, mode, x, 0, 1, acc);   \
			else                                                           \
				walk(run, stride, nr, np, K, mode, x, xstride, rows, acc); \
		}                                                                      \
	}
_Static_assert(TF_EXL3_INT_ROWS == 8, "walk_rows takes at most 8 rows");
#define WALK_FNS(K) WALK_FN(K, WALK_F32) WALK_FN(K, WALK_Q8) WALK_FN(K, WALK_KP)
WALK_FNS(1) WALK_FNS(2) WALK_FNS(3) WALK_FNS(4) WALK_FNS(5) WALK_FNS(6) WALK_FNS(7) WALK_FNS(8)

#define WALK_ROW(K) { walk_##K##_WALK_F32, walk_##K##_WALK_Q8, walk_##K##_WALK_KP }
static const walk_fn walks[TF_EXL3_K_MAX + 1][3] = {
	[1] = WALK_ROW(1), [2] = WALK_ROW(2), [3] = WALK_ROW(3), [4] = WALK_ROW(4),
	[5] = WALK_ROW(5), [6] = WALK_ROW(6), [7] = WALK_ROW(7), [8] = WALK_ROW(8),
};

/* A pair's outputs, h0 the half-row-0 lanes and h1 the half-row-1 lanes,
 * back in tile order: tile 2p's 16 at y, tile 2p+1's at y + 16, each only
 * where [ja, jb) has it. */
static void pair_store(float *y, int64_t p, int64_t ja, int64_t jb, __m512 h0, __m512 h1)
{
	const __m512i i0 = _mm512_castps_si512(h0), i1 = _mm512_castps_si512(h1);

	if (2 * p >= ja)
		_mm512_storeu_ps(y, _mm512_castsi512_ps(pair_tile(i0, i1, 0)));
	if (2 * p + 1 < jb)
		_mm512_storeu_ps(y + 16, _mm512_castsi512_ps(pair_tile(i0, i1, 1)));
}

/*
 * yh[row][16j ..] for tile columns [j0, j1), column group by column group:
 * each walks its pairs down k, 8 tile rows (one activation block) per
 * walk.  The integer modes fold each block's int32 sums into float at the
 * block's unit; the float mode sums in fp32 throughout.
 */
static void mul_groups(const tf_exl3_mat *m, walk_mode mode, const void *x, int64_t xstride,
		       int rows, const float *unit, const float *xsum, float *yh,
		       int64_t j0, int64_t j1)
{
	const walk_fn fn = walks[m->K][mode];
	const int64_t tiles_k = m->k / TILE, blocks = m->k / TF_EXL3_QBLOCK;

	for (int64_t ja = j0; ja < j1;) {
		const int64_t jb = j1 < (ja / 8 + 1) * 8 ? j1 : (ja / 8 + 1) * 8;
		const int64_t pa = ja / 2;
		const int np = (int)((jb + 1) / 2 - pa);
		const uint32_t *run = tf_exl3_mat_pair(m, 0, 2 * pa);
		const int64_t stride = tiles_k > 1 ? tf_exl3_mat_pair(m, 1, 2 * pa) - run : 0;
		__m512i acc[PAIRS * TF_EXL3_INT_ROWS * 2];
		__m512 yf[PAIRS * TF_EXL3_INT_ROWS * 2];

		for (int e = 0; e < np * rows * 2; e++) {
			acc[e] = _mm512_setzero_si512();
			yf[e] = _mm512_setzero_ps();
		}
		for (int64_t i = 0; i < tiles_k; i += BLOCK_TILES) {
			const int nr = tiles_k - i < BLOCK_TILES ? (int)(tiles_k - i) : BLOCK_TILES;
			fn(run + i * stride, stride, nr, np, (const char *)x + x_bytes(mode, i * TILE),
			   xstride, rows, acc);
			if (mode == WALK_F32)
				continue;
			/* Block done: its int32 sums to float, at its unit. */
			for (int row = 0; row < rows; row++) {
				const __m512 u = _mm512_set1_ps(unit[row * blocks + i / BLOCK_TILES]);
				for (int e = row * 2; e < np * rows * 2; e += rows * 2)
					for (int half = 0; half < 2; half++) {
						yf[e + half] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[e + half]),
									       u, yf[e + half]);
						acc[e + half] = _mm512_setzero_si512();
					}
			}
		}
		for (int row = 0; row < rows; row++) {
			const __m512 kinv = _mm512_set1_ps(TF_EXL3_MUL1_K_INV);
			const __m512 bias = _mm512_set1_ps(TF_EXL3_MUL1_K_BIAS * xsum[row]);
			for (int p = 0; p < np; p++) {
				const int e = (p * rows + row) * 2;
				__m512 s0 = mode == WALK_F32 ? _mm512_castsi512_ps(acc[e]) : yf[e];
				__m512 s1 = mode == WALK_F32 ? _mm512_castsi512_ps(acc[e + 1]) : yf[e + 1];
				pair_store(yh + row * m->n + 2 * (pa + p) * TILE, pa + p, ja, jb,
					   _mm512_fmadd_ps(s0, kinv, bias), _mm512_fmadd_ps(s1, kinv, bias));
			}
		}
		ja = jb;
	}
}

/* Rows in the counts walk_rows has copies for (a 5 is 4 + 1, a 7 is
 * 4 + 3): each row's sums are the same whichever part it falls in. */
static void mul_rows(const tf_exl3_mat *m, walk_mode mode, const void *x, int64_t xstride,
		     int rows, const float *unit, const float *xsum, float *yh,
		     int64_t j0, int64_t j1)
{
	const int64_t blocks = m->k / TF_EXL3_QBLOCK;

	for (int r0 = 0; r0 < rows;) {
		const int left = rows - r0, part = left >= 8 ? 8 : left > 4 ? 4 : left;
		mul_groups(m, mode, (const char *)x + (size_t)(r0 * xstride) * 4, xstride, part,
			   unit ? unit + r0 * blocks : NULL, xsum + r0, yh + r0 * m->n, j0, j1);
		r0 += part;
	}
}

/* One 8-bit row walks with its activation in every byte; the rest take
 * the k-pair walk (the same exact int32 block sums, so the same bits). */
void tf_exl3_int_vnni(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
		      int64_t j0, int64_t j1)
{
	if (q->rows > 1 || q->qmax > TF_EXL3_QMAX_I8)
		mul_rows(m, WALK_KP, q->kpair, q->k / 2, (int)q->rows, q->unit, q->sum, yh, j0, j1);
	else
		mul_rows(m, WALK_Q8, q->pair, q->k, 1, q->unit, q->sum, yh, j0, j1);
}

void tf_exl3_mul1_rows_avx512(const tf_exl3_mat *m, const float *xh, int rows, float *yh,
			      const float *xsum, int64_t j0, int64_t j1)
{
	mul_rows(m, WALK_F32, xh, m->k, rows, NULL, xsum, yh, j0, j1);
}
