/*
 * trellis.h - EXL3 tiles: the position order inside a 16x16 tile, the
 * packed bitstream, and the plain reference decode (spec exl3.md §4).
 *
 * A tensor's `trellis` is [k/16][n/16][16·K] int16: tile (i, j) holds the
 * decoded weights Ŵ[16i + r][16j + c] (r = input channel, c = output
 * channel).  Its 256 positions follow the mma.m16n8k16 B-fragment order,
 * each position stores K bits, and the 16-bit state of a position is the
 * window of the (cyclic) bitstream ending at its symbol.
 */
#ifndef TF_EXL3_TRELLIS_H
#define TF_EXL3_TRELLIS_H

#include <stdint.h>

#include "codebook.h"

#define TF_EXL3_TILE 16                 /* tile side */
#define TF_EXL3_TILE_N 256              /* positions per tile */
#define TF_EXL3_K_MAX 8                 /* bits per weight: 1..8 */

/* Element r·16 + c held by position t (tensor-core order). */
int tf_exl3_perm(int t);

/* Position holding element (r, c): the inverse of tf_exl3_perm. */
int tf_exl3_pos(int r, int c);

/* Position of element (r, 0): row r's columns c = 0..7 sit at this + 32·c
 * and columns 8..15 at this + 4 + 32·(c - 8), so each half-row's 8 states
 * lie at one offset inside the 8 column groups of 32 positions. */
static inline int tf_exl3_row_base(int r)
{
	return 8 * ((r % 8) / 2) + (r % 2) + 2 * (r >= 8);
}

/* The 16-bit state of position t of a tile whose 16·K int16 words are
 * `tile` (read as 8·K little-endian uint32). */
uint16_t tf_exl3_state(const uint16_t *tile, int K, int t);

/* Decode one tile to fp16 bits, row-major out[r·16 + c]. */
void tf_exl3_tile_decode_ref(const uint16_t *tile, int K, tf_exl3_cb cb,
			     uint16_t out[TF_EXL3_TILE_N]);

/* Pack the low K bits of 256 states (position order) into 16·K int16
 * words.  The states must form a tail-biting trellis path (each state's
 * high 16-K bits equal the previous state's low ones, cyclically) for the
 * decode to return them. */
void tf_exl3_tile_pack(const uint16_t states[TF_EXL3_TILE_N], int K, uint16_t *tile);

#endif /* TF_EXL3_TRELLIS_H */
