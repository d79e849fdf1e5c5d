/*
 * viterbi.h - the best K-bit trellis path for one tile (spec exl3.md §7.4).
 *
 * Given 256 target values in tile position order, find the 256 16-bit
 * states of a tail-biting bitshift trellis (state t = (state t-1 << K |
 * symbol t) & 0xFFFF, cyclically) minimising Σ (codebook(state t) - x t)².
 * Two passes, as exllamav3: a free-start pass over positions 128..255,
 * 0..127 fixes the edge the path must wrap through at 255; the second pass
 * runs 0..255 with both ends tied to that edge.
 *
 * Costs are float32.  Every position's cost row is kept (2^(16-K) floats)
 * so the traceback recomputes the argmins instead of the forward pass
 * storing them; the workspace is 256·2^(16-K)·4 bytes (8 MiB at K = 3).
 */
#ifndef TF_EXL3_VITERBI_H
#define TF_EXL3_VITERBI_H

#include <stdint.h>

#include "trellis.h"

typedef struct tf_exl3_viterbi {
	int K;
	tf_exl3_cb cb;
	float *cb_value;        /* the codebook by state, as fp16 values (viterbi.c) */
	float *cost;            /* [256][2^(16-K)] */
} tf_exl3_viterbi;

/* 0, or TF_ERR_NOMEM / TF_ERR_INVALID (K outside 1..8). */
int tf_exl3_viterbi_init(tf_exl3_viterbi *v, int K, tf_exl3_cb cb);
void tf_exl3_viterbi_free(tf_exl3_viterbi *v);

/* states for x (position order); returns the squared error of the path. */
double tf_exl3_viterbi_run(tf_exl3_viterbi *v, const float x[TF_EXL3_TILE_N],
			   uint16_t states[TF_EXL3_TILE_N]);

#endif /* TF_EXL3_VITERBI_H */
