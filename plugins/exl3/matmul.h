/*
 * matmul.h - products with a decoded EXL3 weight matrix Ŵ, in the rotated
 * basis: yh[rows][n] = xh[rows][k] · Ŵ.
 *
 * The caller applies the input transform xh = Had128(x ⊙ suh) before and
 * the output transform y = Had128(yh) ⊙ svh after (spec exl3.md §3); this
 * module only decodes tiles and multiplies.  Work is split by tile column
 * (16 output features), so threads write disjoint outputs.
 *
 * Two paths with one interface:
 *  - the reference decodes each tile with tf_exl3_tile_decode_ref (bit-exact
 *    fp16 Ŵ) and multiplies with plain loops;
 *  - the fused path decodes a half-row of 8 states at a time in vector
 *    registers (all 8 share one bit shift) straight to float32, skipping
 *    the final fp16 rounding of each weight (at most half an fp16 ulp).
 *    One row (decode) keeps each tile column's sums in registers down all
 *    of k; more rows decode a 128-k strip of a tile column once and apply
 *    it to 4 rows at a time, their sums in registers down the strip (MUL1
 *    up to 15 rows on AVX-512: its kernel decodes each weight once for 8).
 *    Each row gets the bits it gets alone, whatever the row count and the
 *    thread count (matmul.c says how), so a speculative verify's rows and
 *    a batch's sequences get serial decoding's logits.
 */
#ifndef TF_EXL3_MATMUL_H
#define TF_EXL3_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "trellis.h"

/*
 * The CPU kernels' layout of a trellis, made once when a layer is opened:
 * the same 32-bit words as the file's [k/16][n/16][16·K] int16 tiles,
 * reordered so that every kernel reads straight runs.
 *
 *  - Tiles come in pairs (j, j+1), j even.  Word w of a pair is one row of
 *    16 lanes: lane c < 8 holds word w of tile j's column group c (its
 *    file words 2(cK+w), 2(cK+w)+1 as one little-endian uint32), lane 8+c
 *    the same of tile j+1.  A pair is K such rows, 16·K words; a lone last
 *    tile (n/16 odd) gets zero lanes 8-15.
 *  - Column group g (tiles 8g .. 8g+7: 128 outputs, one Hadamard block)
 *    holds its pairs for tile row 0, then tile row 1, and so on: a decode
 *    row walking group g down k reads one sequential run.
 *
 * So a tile's word w for its 8 column groups is 8 adjacent lanes, and a
 * pair's is one 64-byte row: no transpose is left for the kernels.
 */
typedef struct tf_exl3_mat {
	uint32_t *lanes;                /* owned, the layout above */
	int64_t k, n;                   /* padded in/out features, multiples of 16 */
	int K;                          /* bits per weight, 1..8 */
	tf_exl3_cb cb;
} tf_exl3_mat;

/* Lay out a file-order trellis (k, n multiples of 16, K in 1..8: checked
 * by the caller, who names the tensor).  TF_ERR_NOMEM or TF_OK. */
int tf_exl3_mat_init(tf_exl3_mat *m, const uint16_t *trellis, int64_t k,
		     int64_t n, int K, tf_exl3_cb cb);
/* The same in two steps, for callers that lay out in parallel: allocate
 * (TF_ERR_NOMEM or TF_OK), then lay out tile columns [j0, j1) of the
 * trellis, j0 even.  Calls on disjoint ranges may run concurrently: each
 * writes only its own tiles' pairs, and a pair is never split (j1 even or
 * n/16). */
int tf_exl3_mat_alloc(tf_exl3_mat *m, int64_t k, int64_t n, int K, tf_exl3_cb cb);
void tf_exl3_mat_pack(tf_exl3_mat *m, const uint16_t *trellis, int64_t j0, int64_t j1);
void tf_exl3_mat_free(tf_exl3_mat *m);

/* Lane 0 of word 0 of the pair holding tile (i, j); word w is 16·w on. */
static inline const uint32_t *tf_exl3_mat_pair(const tf_exl3_mat *m, int64_t i, int64_t j)
{
	const int64_t tiles_k = m->k / TF_EXL3_TILE, pairs_n = (m->n / TF_EXL3_TILE + 1) / 2;
	const int64_t g = j / 8, first = 4 * g;
	const int64_t pairs_g = pairs_n - first < 4 ? pairs_n - first : 4;

	return m->lanes + (size_t)(first * tiles_k + i * pairs_g + (j % 8) / 2) *
			  16 * (size_t)m->K;
}

/* Tile (i, j)'s 16·K int16 words in the file's order (the reference
 * decode reads these). */
void tf_exl3_mat_tile_words(const tf_exl3_mat *m, int64_t i, int64_t j, uint16_t *words);

/* Tile (i, j) as floats, row-major [r·16 + c]: bit-exact reference. */
void tf_exl3_mat_tile_ref(const tf_exl3_mat *m, int64_t i, int64_t j,
			  float out[TF_EXL3_TILE_N]);
/* The same through the fused decode (fp32, unrounded). */
void tf_exl3_mat_tile(const tf_exl3_mat *m, int64_t i, int64_t j,
		      float out[TF_EXL3_TILE_N]);

/* A MUL1 tile's byte sums (w = K_INV·bs + K_BIAS), as floats, [r·16 + c]. */
void tf_exl3_mat_tile_raw(const tf_exl3_mat *m, int64_t i, int64_t j,
			  float out[TF_EXL3_TILE_N]);

/* yh[r][16j .. 16j+15] = xh[r] · Ŵ[:, 16j .. 16j+15] for tile columns
 * j in [j0, j1) and rows r < rows; row strides are k (xh) and n (yh).
 * The fused product gives each row the bits it has alone. */
void tf_exl3_mat_mul_ref(const tf_exl3_mat *m, const float *xh, int64_t rows,
			 float *yh, int64_t j0, int64_t j1);
void tf_exl3_mat_mul(const tf_exl3_mat *m, const float *xh, int64_t rows,
		     float *yh, int64_t j0, int64_t j1);

/* The transposed product on tile columns [j0, j1): t[i] = Σ_c Ŵ[i][c] ·
 * wh[c] for every i < k, c over the columns 16·j0 .. 16·j1 - 1 (wh is
 * indexed by column).  One row; tiles through the fused decode. */
void tf_exl3_mat_mul_t(const tf_exl3_mat *m, const float *wh, int64_t j0, int64_t j1,
		       float *t);

/* The kernels of tf_exl3_mat_mul for MUL1 trellises: the build's vector
 * unit, or AVX-512 VNNI (x86-64, where the CPU has it; AUTO takes it there)
 * for up to 15 rows.  Other codebooks and more rows always take the vector
 * unit.  Both give the same bits; tests force each path. */
typedef enum tf_exl3_rowpath {
	TF_EXL3_ROWPATH_AUTO = 0,
	TF_EXL3_ROWPATH_VEC,
	TF_EXL3_ROWPATH_AVX512,
	TF_EXL3_ROWPATH_COUNT
} tf_exl3_rowpath;

int tf_exl3_rowpath_supported(tf_exl3_rowpath path);
void tf_exl3_mat_mul_on(const tf_exl3_mat *m, const float *xh, int64_t rows, float *yh,
			int64_t j0, int64_t j1, tf_exl3_rowpath path);

#endif /* TF_EXL3_MATMUL_H */
