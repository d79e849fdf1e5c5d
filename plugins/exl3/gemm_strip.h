/*
 * gemm_strip.h - the loops the integer-activation GEMMs share
 * (gemm_avx512.c, gemm_vec.c); each brings its strip decode and its apply.
 *
 * Per strip of tile columns and 128-k block (one activation unit) the
 * strip is decoded once into int16 byte sums, k-adjacent pairs in each
 * 32-bit lane (w[kp][16t + c] = bs[2kp][c] | bs[2kp+1][c] << 16 of tile
 * column t), and each block of rows folds its sums into its outputs:
 * y = fma(Σ_kp w[kp]·x[row][kp], unit, y) from y = 0 (the first block's
 * product alone: fma with +0 is the product), and after the last block
 * y = fma(y, K_INV, K_BIAS·Σxq), in the apply's registers.  Every row's
 * sums are exact int32s folded in block order, so its bits are those of
 * the row alone, on any kernel.
 */
#ifndef TF_EXL3_GEMM_STRIP_H
#define TF_EXL3_GEMM_STRIP_H

#include "matmul_int.h"

#define GEMM_BLOCK_TILES (TF_EXL3_QBLOCK / TF_EXL3_TILE)   /* tile rows a strip */
#define GEMM_KPAIRS (TF_EXL3_QBLOCK / 2)                   /* k pairs a strip */
/* Rows a strip's decode serves: as many as keep their k-pair activations
 * (2k bytes a row) within GEMM_ROW_BYTES of L2 while the strips pass, and
 * at least GEMM_ROW_CHUNK.  All 512 rows of 4096 k in one pass ran 67
 * against 81 G row-weights/s at 64 (AVX-512); at 1280 k, 204 rows a
 * decode ran 5-10% above 64 (bench_exl3 gemm on 512 rows). */
#define GEMM_ROW_CHUNK 64
#define GEMM_ROW_BYTES (512u << 10)

static inline int64_t gemm_row_chunk(int64_t k)
{
	const int64_t fit = (int64_t)(GEMM_ROW_BYTES / (2 * (size_t)k));
	return fit > GEMM_ROW_CHUNK ? fit : GEMM_ROW_CHUNK;
}

/* A strip's outputs, from the includer's STRIP_TILES. */
#define STRIP_COLS (STRIP_TILES * TF_EXL3_TILE)

/* Decodes tile columns [j, j + nt) of tile rows [i0, i0 + GEMM_BLOCK_TILES)
 * into w. */
typedef void (*gemm_decode_fn)(const tf_exl3_mat *m, int64_t i0, int64_t j, int nt,
			       uint32_t *w);
/* y[row][..16nt] = fma(Σ_kp w[kp]·x[row·xs + kp], unit[row·us], y[row]) for
 * rows < nr, y's row stride ys; `first`: y taken as 0, `last`: then
 * y = fma(y, K_INV, K_BIAS·sum[row]).  */
typedef void (*gemm_apply_fn)(const uint32_t *w, int nt, int nr, const uint32_t *x, int64_t xs,
			      const float *unit, int64_t us, const float *sum, float *y,
			      int64_t ys, int first, int last);

/* strip_decode (a gemm_decode_fn) over the includer's strip_decode_k(m, K,
 * i0, j, nt, w), one copy per K with K constant: its shifts and word
 * offsets become immediates. */
#define GEMM_STRIP_DECODE(cols)                                                          \
	static void strip_decode(const tf_exl3_mat *m, int64_t i0, int64_t j, int nt,    \
				 uint32_t *wp)                                           \
	{                                                                                \
		uint32_t (*w)[cols] = (uint32_t (*)[cols])wp;                            \
		switch (m->K) {                                                          \
		case 1: strip_decode_k(m, 1, i0, j, nt, w); break;                       \
		case 2: strip_decode_k(m, 2, i0, j, nt, w); break;                       \
		case 3: strip_decode_k(m, 3, i0, j, nt, w); break;                       \
		case 4: strip_decode_k(m, 4, i0, j, nt, w); break;                       \
		case 5: strip_decode_k(m, 5, i0, j, nt, w); break;                       \
		case 6: strip_decode_k(m, 6, i0, j, nt, w); break;                       \
		case 7: strip_decode_k(m, 7, i0, j, nt, w); break;                       \
		case 8: strip_decode_k(m, 8, i0, j, nt, w); break;                       \
		}                                                                        \
	}

/* Rows row0 .. row0+rows-1 of q, tile columns [j0, j1), strips of
 * strip_tiles columns and rows row_block at a time; w holds a strip. */
static inline __attribute__((always_inline)) void
gemm_strips(const tf_exl3_mat *m, const tf_exl3_qx *q, int64_t row0, int64_t rows, float *yh,
	    int64_t j0, int64_t j1, int strip_tiles, int row_block, uint32_t *w,
	    gemm_decode_fn decode, gemm_apply_fn apply)
{
	const int64_t blocks = q->k / TF_EXL3_QBLOCK, kp = q->k / 2, ts = TF_EXL3_TILE;

	for (int64_t j = j0; j < j1; j += strip_tiles) {
		const int nt = j1 - j < strip_tiles ? (int)(j1 - j) : strip_tiles;
		for (int64_t b = 0; b < blocks; b++) {
			decode(m, b * GEMM_BLOCK_TILES, j, nt, w);
			for (int64_t r0 = row0; r0 < row0 + rows; r0 += row_block) {
				const int64_t left = row0 + rows - r0;
				apply(w, nt, left < row_block ? (int)left : row_block,
				      q->kpair + r0 * kp + b * GEMM_KPAIRS, kp, q->unit + r0 * blocks + b,
				      blocks, q->sum + r0, yh + r0 * m->n + j * ts, m->n, b == 0,
				      b == blocks - 1);
			}
		}
	}
}

/* The kernel `name` (a tf_exl3_int_kern) from the includer's strip_decode
 * and applies[nr][nt] (rows nr <= ROW_BLOCK, tile columns nt <=
 * STRIP_TILES), a strip's buffer aligned to `align` bytes. */
#define GEMM_KERNEL(name, align)                                                          \
	static void strip_apply_any(const uint32_t *w, int nt, int nr, const uint32_t *x, \
				    int64_t xs, const float *unit, int64_t us,            \
				    const float *sum, float *y, int64_t ys, int first,    \
				    int last)                                             \
	{                                                                                 \
		applies[nr][nt]((const uint32_t (*)[STRIP_COLS])w, x, xs, unit, us, sum, y, \
				ys, first, last);                                         \
	}                                                                                 \
	void name(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh, int64_t j0,       \
		  int64_t j1)                                                             \
	{                                                                                 \
		uint32_t w[GEMM_KPAIRS][STRIP_COLS] __attribute__((aligned(align)));      \
		const int64_t chunk = gemm_row_chunk(q->k);                               \
		for (int64_t r0 = 0; r0 < q->rows; r0 += chunk)                           \
			gemm_strips(m, q, r0, q->rows - r0 < chunk ? q->rows - r0 : chunk, \
				    yh, j0, j1, STRIP_TILES, ROW_BLOCK, w[0], strip_decode,  \
				    strip_apply_any);                                     \
	}

#endif /* TF_EXL3_GEMM_STRIP_H */
