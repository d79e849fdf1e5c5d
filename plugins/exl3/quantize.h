/*
 * quantize.h - one linear layer to EXL3 (spec exl3.md §7.5): the
 * identity-Hessian recipe exllamav3 falls back to without calibration.
 *
 *   1. W = weightᵀ (k = in, n = out), zero-padded to multiples of 128;
 *   2. regularise (§7.2): out-channel RMS scales with random signs (svh),
 *      128-point Hadamard on both sides, in-channel RMS scales with random
 *      signs (suh) matching each row to the codebook's RMS; the scales are
 *      rounded to fp16 before use, so the stored ones are exact;
 *   3. every 16x16 tile through the tail-biting Viterbi (viterbi.h) in
 *      tensor-core order, packed into `trellis`.
 *
 * No global scale search: the in-channel scales target the codebook RMS
 * directly (1.2437 for 3INST/MCG, 1.0003 for MUL1).
 */
#ifndef TF_EXL3_QUANTIZE_H
#define TF_EXL3_QUANTIZE_H

#include <stdint.h>

#include "codebook.h"

typedef struct tf_exl3_qopts {
	int K;                  /* bits per weight, 1..8 */
	tf_exl3_cb cb;
	uint64_t seed;          /* sign vectors; the same seed gives the same output */
	int threads;            /* worker threads for the tile searches (>= 1) */
} tf_exl3_qopts;

typedef struct tf_exl3_qtensor {
	int64_t k, n;           /* padded in, out */
	int K;
	tf_exl3_cb cb;
	uint16_t *trellis;      /* [k/16][n/16][16·K] */
	uint16_t *suh, *svh;    /* fp16 [k], [n] */
	double rel_mse;         /* ||W - Wq||² / ||W||² over the logical weights */
} tf_exl3_qtensor;

/* Quantize weight [out][in] (HF orientation, float).  0 or a tf_status. */
int tf_exl3_quantize(const float *weight, int64_t out, int64_t in,
		     const tf_exl3_qopts *opts, tf_exl3_qtensor *q);
void tf_exl3_qtensor_free(tf_exl3_qtensor *q);

/* Rebuild W [k][n] in the original basis, float64, from a quantized
 * tensor: diag(suh)·Hbd·Ŵ·Hbd·diag(svh) (bit-exact Ŵ). */
int tf_exl3_reconstruct(const tf_exl3_qtensor *q, double *w);

#endif /* TF_EXL3_QUANTIZE_H */
