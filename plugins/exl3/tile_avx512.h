/*
 * tile_avx512.h - MUL1 products of tile pairs in AVX-512 registers, shared
 * by the AVX-512 kernels (matmul_vnni.c: integer activations,
 * matmul_avx512.c: float activations).  Include only from files built
 * with -mavx512f/bw/vl/vnni/vbmi2.
 *
 * A zmm holds one half-row of two adjacent tiles: lanes 0-7 the 8 column
 * groups of tile j, lanes 8-15 those of tile j+1.  Both tiles share every
 * shift, so per 16 weights the work is the 16-bit window (a shift and a
 * mask of a dword holding the two half-words it spans) and the MUL1
 * multiply; what follows depends on the activations.
 */
#ifndef TF_EXL3_TILE_AVX512_H
#define TF_EXL3_TILE_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "codebook.h"
#include "trellis.h"

#define SETR16(f) _mm512_setr_epi32(f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), \
				    f(8), f(9), f(10), f(11), f(12), f(13), f(14), f(15))

/* Source dword of lane L for word w: tile L/8, column group L%8. */
static inline int pair_src(int K, int w, int L)
{
	return (L / 8) * 8 * K + (L % 8) * K + w;
}

/*
 * D[h] = stream half-words h-1 and h of each lane's column group as one
 * dword, h-1 in the high half: half-word m = 2w is word w's high half and
 * 2w+1 its low half (the stream is MSB first), and half-word -1 is the low
 * half of the previous group's last word (a group's first windows wrap
 * cyclically).  D[2w+1] is word w itself; D[2w] joins words w-1 and w.
 * Every 16-bit window of a half-row lies inside one D, so it costs a
 * plain shift and a mask (pair_halfrow).
 *
 * The words come first: a pair's 16·K dwords are K registers, and each
 * word row gathers from them two at a time with vpermt2d (K constant:
 * indices and masks fold).  nt = 1 loads one tile, lanes 8-15 zero.
 */
static inline __attribute__((always_inline)) void
pair_halves(const uint16_t *tiles, int K, int nt, __m512i *D)
{
	__m512i src[TF_EXL3_K_MAX];
	const int dwords = nt * 8 * K;

#pragma GCC unroll 8
	for (int q = 0; q < K; q++) {
		int have = dwords - 16 * q;
		__mmask16 mk = have >= 16 ? 0xFFFF : have <= 0 ? 0 : (__mmask16)((1u << have) - 1);
		src[q] = _mm512_maskz_loadu_epi32(mk, (const uint32_t *)tiles + 16 * q);
	}
#pragma GCC unroll 8
	for (int w = 0; w < K; w++) {
#define SRC(L) pair_src(K, w, L)
		const __m512i idx = SETR16(SRC);
		__m512i row = _mm512_setzero_si512();
#pragma GCC unroll 4
		for (int pp = 0; 2 * pp < K; pp++) {
			__mmask16 mk = 0;
#pragma GCC unroll 16
			for (int L = 0; L < 16; L++)
				mk |= (__mmask16)((SRC(L) / 32 == pp) << L);
			if (!mk)
				continue;
			__m512i t = _mm512_permutex2var_epi32(src[2 * pp], idx,
							      src[2 * pp + 1 < K ? 2 * pp + 1 : 2 * pp]);
			row = _mm512_mask_blend_epi32(mk, row, t);
		}
#undef SRC
		D[2 * w + 1] = row;
	}
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

/* A pair's outputs, h0 the half-row-0 lanes and h1 the half-row-1 lanes,
 * back in tile order at y: tile j's 16, then tile j+1's when the pair has
 * both tiles. */
static inline __attribute__((always_inline)) void
pair_store(float *y, __m512 h0, __m512 h1, int both)
{
	const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7,
						16, 17, 18, 19, 20, 21, 22, 23);

	_mm512_storeu_ps(y, _mm512_permutex2var_ps(h0, first, h1));
	if (both)
		_mm512_storeu_ps(y + 16, _mm512_permutex2var_ps(
					    h0, _mm512_add_epi32(first, _mm512_set1_epi32(8)), h1));
}

#endif /* TF_EXL3_TILE_AVX512_H */
