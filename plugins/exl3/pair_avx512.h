/*
 * pair_avx512.h - the MUL1 half-row decode of a tile pair in one zmm, the
 * step matmul_avx512.c's walk and gemm_avx512.c's strip decode share
 * (both built with the AVX-512 F/BW/VL/VNNI/VBMI2 flags).
 *
 * A zmm holds one half-row of a tile pair: lanes 0-7 the 8 column groups
 * of tile j, lanes 8-15 those of tile j+1, as the layout of matmul.h stores
 * a pair's words.  Half-row tf_exl3_row_base(r) + 4·h holds tile row r's
 * columns 8h .. 8h+7 of both tiles, lane c (c < 8) column 8h + c of tile
 * j, lane 8 + c that of tile j+1.
 */
#ifndef TF_EXL3_PAIR_AVX512_H
#define TF_EXL3_PAIR_AVX512_H

#include <stdint.h>

#include <immintrin.h>

#include "codebook.h"
#include "trellis.h"

#define SETR16(f) _mm512_setr_epi32(f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), \
				    f(8), f(9), f(10), f(11), f(12), f(13), f(14), f(15))

/*
 * D[h] = stream half-words h-1 and h of each lane's column group as one
 * dword, h-1 in the high half: half-word m = 2w is word w's high half and
 * 2w+1 its low half (the stream is MSB first), and half-word -1 is the low
 * half of the previous group's last word (a group's first windows wrap
 * cyclically).  D[2w+1] is word w itself, one row of the pair; D[2w] joins
 * words w-1 and w.  Every 16-bit window of a half-row lies inside one D.
 */
static inline __attribute__((always_inline)) void
pair_halves(const uint32_t *pair, int K, __m512i *D)
{
#pragma GCC unroll 8
	for (int w = 0; w < K; w++)
		D[2 * w + 1] = _mm512_loadu_si512(pair + 16 * w);
#define ROT(L) ((L) / 8 * 8 + ((L) % 8 + 7) % 8)
	D[0] = _mm512_shrdi_epi32(D[1], _mm512_permutexvar_epi32(SETR16(ROT), D[2 * K - 1]), 16);
#undef ROT
#pragma GCC unroll 8
	for (int w = 1; w < K; w++)
		D[2 * w] = _mm512_shrdi_epi32(D[2 * w + 1], D[2 * w - 1], 16);
}

/* The MUL1 products of half-row `base` of both tiles. */
static inline __attribute__((always_inline)) __m512i
pair_halfrow(const __m512i *D, int K, int base)
{
	const int end = (base + 1) * K, half = (end - 1) / 16;
	const int shift = (half + 1) * 16 - end;
	/* A shift and a mask: on Zen 4 this ran 1.27x faster than one 16-bit
	 * funnel shift (vpshrdw) of zero-extended half-words. */
	__m512i s = _mm512_and_si512(_mm512_srli_epi32(D[half], (unsigned)shift),
				     _mm512_set1_epi32(0xFFFF));

	return _mm512_mullo_epi32(s, _mm512_set1_epi32((int)TF_EXL3_MUL1_MUL));
}

/* Tile rows r and r+1's byte sums (vpdpbusd against ones: ≤ 1020) of
 * half `half` of both tiles, r's in the low int16 of each lane: the int16
 * pairs a vpdpwssd multiplies by two k's activations at once. */
static inline __attribute__((always_inline)) __m512i
pair_kp(const __m512i *D, int K, int r, int half)
{
	const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
	const __m512i b0 = _mm512_dpbusd_epi32(
		zero, pair_halfrow(D, K, tf_exl3_row_base(r) + 4 * half), ones);
	const __m512i b1 = _mm512_dpbusd_epi32(
		zero, pair_halfrow(D, K, tf_exl3_row_base(r + 1) + 4 * half), ones);

	return _mm512_or_si512(b0, _mm512_slli_epi32(b1, 16));
}

/* Tile t (0: j, 1: j+1) of a pair's two half-rows h0 and h1, its 16
 * columns in order. */
static inline __attribute__((always_inline)) __m512i
pair_tile(__m512i h0, __m512i h1, int t)
{
	const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7,
						16, 17, 18, 19, 20, 21, 22, 23);

	return _mm512_permutex2var_epi32(h0, _mm512_add_epi32(first, _mm512_set1_epi32(8 * t)), h1);
}

#endif /* TF_EXL3_PAIR_AVX512_H */
