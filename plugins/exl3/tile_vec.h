/*
 * tile_vec.h - the trellis half-row extraction every vector kernel of
 * matmul.c and matmul_*.c shares, written against vec.h's tf_vi.
 */
#ifndef TF_EXL3_TILE_VEC_H
#define TF_EXL3_TILE_VEC_H

#include <string.h>

#include "matmul.h"
#include "vec.h"

#define TILE TF_EXL3_TILE

/* Tile (i, j) of m: 16·K words. */
static inline const uint16_t *mat_tile(const tf_exl3_mat *m, int64_t i, int64_t j)
{
	return m->trellis + ((size_t)i * (size_t)(m->n / TILE) + (size_t)j) * 16 * (size_t)m->K;
}

/*
 * The fused decode.  A tile's 8·K words are first transposed so that row
 * 2(w+1) of `tw` holds word w of each of the 8 column groups (row 0: word
 * -1, the previous group's last, cyclically; odd rows are filled by
 * tile_spans below); every half-row is then one vector load, a shift and
 * the codebook hash.  Everything below is inlined with K, the codebook
 * and the half-row constant, so shifts and word offsets become immediates.
 */
static inline __attribute__((always_inline)) void
tile_transpose_scalar(const uint16_t *tile, int K, uint32_t *tw)
{
	for (int c = 0; c < 8; c++)
		for (int w = 0; w < K; w++) {
			uint32_t v;
			memcpy(&v, tile + 2 * (c * K + w), 4);  /* little-endian pair */
			tw[2 * (w + 1) * 8 + c] = v;
		}
	for (int c = 0; c < 8; c++)             /* word -1: the previous group's last */
		tw[c] = tw[2 * K * 8 + (c + 7) % 8];
}

#if defined(TF_SIMD_AVX2)
/* In registers: each row gathers its 8 words from the K source vectors
 * with one permute per source and a blend (K constant: all indices fold).
 * That is K·(K+1) shuffles: past K = 5 the scalar copy is cheaper. */
static inline __attribute__((always_inline)) void
tile_transpose(const uint16_t *tile, int K, uint32_t *tw)
{
	__m256i src[TF_EXL3_K_MAX];

	if (K > 5) {
		tile_transpose_scalar(tile, K, tw);
		return;
	}
#pragma GCC unroll 8
	for (int q = 0; q < K; q++)
		src[q] = _mm256_loadu_si256((const __m256i *)tile + q);
#pragma GCC unroll 9
	for (int w = -1; w < K; w++) {
		int idx[8], from[8];
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++) {
			int s = (c * K + w + 8 * K) % (8 * K);
			idx[c] = s % 8;
			from[c] = s / 8;
		}
		const __m256i vidx = _mm256_setr_epi32(idx[0], idx[1], idx[2], idx[3],
						       idx[4], idx[5], idx[6], idx[7]);
		__m256i row = _mm256_setzero_si256();
#pragma GCC unroll 8
		for (int q = 0; q < K; q++) {
			const __m256i sel = _mm256_setr_epi32(
				-(from[0] == q), -(from[1] == q), -(from[2] == q), -(from[3] == q),
				-(from[4] == q), -(from[5] == q), -(from[6] == q), -(from[7] == q));
			row = _mm256_blendv_epi8(row, _mm256_permutevar8x32_epi32(src[q], vidx), sel);
		}
		_mm256_store_si256((__m256i *)(tw + 2 * (w + 1) * 8), row);
	}
}
#else
static inline __attribute__((always_inline)) void
tile_transpose(const uint16_t *tile, int K, uint32_t *tw)
{
	tile_transpose_scalar(tile, K, tw);
}
#endif

/*
 * A tile's 32-bit spans: row m+1 (m = -1 .. 2K-1) holds, for each column
 * group, the stream bits ending with half-word m (half-word 2w is word w's
 * high half, 2w+1 its low half: the stream is MSB first).  Every 16-bit
 * window lies inside one span, so a half-row is one load, a shift and a
 * mask, with no second word to join.  Even rows are the words themselves
 * (row 0: word -1); odd rows join the low half of one word with the high
 * half of the next.
 */
#define TILE_SPANS ((2 * TF_EXL3_K_MAX + 1) * 8)

static inline __attribute__((always_inline)) void
tile_spans(const uint16_t *tile, int K, uint32_t *sp)
{
	tile_transpose(tile, K, sp);
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

#endif /* TF_EXL3_TILE_VEC_H */
