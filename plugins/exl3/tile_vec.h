/*
 * tile_vec.h - the trellis half-row extraction the vector-unit kernels of
 * matmul.c and matmul_dotprod.c share, written against vec.h's tf_vi.
 */
#ifndef TF_EXL3_TILE_VEC_H
#define TF_EXL3_TILE_VEC_H

#include "matmul.h"
#include "vec.h"

#define TILE TF_EXL3_TILE

/* Tile (i, j) of m: lane 0 of its word 0, word w 16 lanes on (matmul.h). */
static inline const uint32_t *mat_tile(const tf_exl3_mat *m, int64_t i, int64_t j)
{
	return tf_exl3_mat_pair(m, i, j) + (j % 2) * 8;
}

/*
 * A tile's 32-bit spans: row m+1 (m = -1 .. 2K-1) holds, for each column
 * group, the stream bits ending with half-word m (half-word 2w is word w's
 * high half, 2w+1 its low half: the stream is MSB first).  Every 16-bit
 * window lies inside one span, so a half-row is one load, a shift and a
 * mask, with no second word to join.  Even rows are the words themselves,
 * 8 adjacent lanes of the layout (row 0: word -1, the previous group's
 * last, cyclically); odd rows join the low half of one word with the high
 * half of the next.  Everything below is inlined with K and the half-row
 * constant, so shifts and word offsets become immediates.
 */
#define TILE_SPANS ((2 * TF_EXL3_K_MAX + 1) * 8)

static inline __attribute__((always_inline)) void
tile_spans(const uint32_t *tile, int K, uint32_t *sp)
{
#pragma GCC unroll 8
	for (int w = 0; w < K; w++)
		for (int v = 0; v < 8; v += TF_VL)
			tf_vi_store(sp + 2 * (w + 1) * 8 + v, tf_vi_load(tile + 16 * w + v));
	for (int c = 0; c < 8; c++)
		sp[c] = tile[16 * (K - 1) + (c + 7) % 8];
#pragma GCC unroll 8
	for (int w = 0; w < K; w++)
		for (int v = 0; v < 8; v += TF_VL) {
			tf_vi prev = tf_vi_load(sp + 2 * w * 8 + v);
			tf_vi cur = tf_vi_load(sp + 2 * (w + 1) * 8 + v);
			tf_vi_store(sp + (2 * w + 1) * 8 + v,
				    tf_vi_or(tf_vi_sll(prev, 16), tf_vi_srl(cur, 16)));
		}
}

/* The 16-bit states of lanes v .. v+TF_VL-1 of the half-row at `base`. */
static inline __attribute__((always_inline)) tf_vi
halfrow_state(const uint32_t *sp, int K, int base, int v)
{
	const int end = (base + 1) * K, half = (end - 1) / 16;
	const int shift = (half + 1) * 16 - end;

	return tf_vi_and(tf_vi_srl(tf_vi_load(sp + (half + 1) * 8 + v), shift),
			 tf_vi_set1(0xFFFF));
}

#ifdef TF_VI_KPAIR
/* Lanes v .. v+TF_VL-1 of half `half` of tile rows r and r+1 (r even) as
 * int16 byte-sum pairs, row r's in the low half: what a k-pair product
 * multiplies (vec.h's tf_vacc_pairdot). */
static inline __attribute__((always_inline)) tf_vi
halfrow_kpair(const uint32_t *sp, int K, int r, int half, int v)
{
	const tf_vi mul = tf_vi_set1(TF_EXL3_MUL1_MUL);
	return tf_vi_bspair(
		tf_vi_mul(halfrow_state(sp, K, tf_exl3_row_base(r) + 4 * half, v), mul),
		tf_vi_mul(halfrow_state(sp, K, tf_exl3_row_base(r + 1) + 4 * half, v), mul));
}
#endif

#endif /* TF_EXL3_TILE_VEC_H */
