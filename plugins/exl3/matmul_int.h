/*
 * matmul_int.h - the integer-activation product for MUL1 trellises:
 * yh[rows][n] = xh[rows][k] · Ŵ with xh quantized to 15-bit integers.
 *
 * MUL1 weights are affine in a byte sum (spec exl3.md §4.4):
 *
 *     w = K_INV · bs + K_BIAS,   bs = bytesum(state · 0x83DCD12D) in 0..1020
 *
 * so with integer activations v the product needs no float decode at all:
 * Σ_r v_r·bs_r is an exact int32 dot product of the hash's bytes against
 * the activation (vpmaddubsw + vpdpwssd or vpmaddwd, udot + mla), and
 *
 *     yh = K_INV · Σ_b unit_b · (Σ_r∈b v_r·bs_r) + K_BIAS · Σ_r xq_r
 *
 * over 128-row blocks b, xq_r = unit_b · v_r the dequantized activation.
 *
 * Quantization: per 128-block, unit = max|x| / qmax and v = round(x /
 * unit), |v| ≤ qmax, one of two precisions:
 *
 *  - 15 bits, qmax = 16256 = 127·128: the precision of exllamav3's int8
 *    GEMV "mode 1" (an int8 pass, hi, and an int8 residual pass at 1/128
 *    of its scale, lo: v = 128·hi + lo), taken as one int16.  The error per
 *    element is at most unit/2 = max|x|/32512, about 5e-5 of the row's RMS
 *    for Gaussian-like rows ("exl3-int");
 *  - 8 bits, qmax = 127: llama.cpp's Q8 activations, about 6e-3 of the
 *    RMS, for a cheaper kernel where the CPU has one (AVX-512 VNNI
 *    vpdpbusd: 4 vector operations per 16 weights instead of 5; "exl3-q8").
 *
 * Sums stay below 2^31: 128 · 1020 · 16256 < 2^31, so blocks accumulate in
 * int32 and fold into float once per block.
 *
 * On AVX-512, a 15-bit row and several rows of either precision (a
 * verify, a batch's sequences) pair k in registers: two tile rows' byte
 * sums as int16 pairs, one vpdpwssd a row per 32 weights; many rows (a
 * prefill chunk) take the GEMM: a strip of byte sums decoded once as
 * int16 for every row, two k a lane (gemm_avx512.c).  The int32 block sums are the same exact integers
 * either way, so every kernel gives a row the one-row walk's bits.
 *
 * Like the fused float path, the weights are the unrounded affine values
 * (no final fp16 rounding, at most half an fp16 ulp off the bit-exact Ŵ).
 */
#ifndef TF_EXL3_MATMUL_INT_H
#define TF_EXL3_MATMUL_INT_H

#include <stdint.h>

#include "matmul.h"

#define TF_EXL3_QBLOCK 128              /* rows sharing one activation scale */
#define TF_EXL3_QMAX_I15 16256          /* largest |v| at 15 bits: 127 · 128 */
#define TF_EXL3_QMAX_I8 127             /* ... and at 8 bits */
#define TF_EXL3_INT_ROWS 8              /* rows a kernel takes at once */
#define TF_EXL3_GEMM_ROWS 16            /* from here AUTO takes the GEMM */

/* Quantized activation rows; every array is owned. */
typedef struct tf_exl3_qx {
	int64_t k, rows;
	int qmax;               /* TF_EXL3_QMAX_I15 or TF_EXL3_QMAX_I8 */
	uint32_t *pair;         /* [rows][k] v as int16 in both halves */
	uint32_t *kpair;        /* [rows][k/2] v[2i] low half, v[2i+1] high */
	float *unit;            /* [rows][k/128] value of v = 1 per block */
	float *sum;             /* [rows] Σ unit·v, for the K_BIAS term */
} tf_exl3_qx;

/* Room for rows x k (k a multiple of 128, rows >= 1) at precision qmax
 * (TF_EXL3_QMAX_I15 or _I8).  0 or TF_ERR_NOMEM. */
int tf_exl3_qx_init(tf_exl3_qx *q, int64_t k, int64_t rows, int qmax);
void tf_exl3_qx_free(tf_exl3_qx *q);

/* Quantize x[0 .. k) as row `row` of q. */
void tf_exl3_qx_set(tf_exl3_qx *q, int64_t row, const float *x);

/* Row `row` dequantized: out[i] = unit · v (the activation the integer
 * paths actually multiply). */
void tf_exl3_qx_get(const tf_exl3_qx *q, int64_t row, float *out);

/* Kernels.  AUTO takes the best this CPU runs; the others are forced (the
 * tests reach each).  VEC is the build's vector unit (AVX2, NEON, scalar). */
typedef enum tf_exl3_ipath {
	TF_EXL3_IPATH_AUTO = 0,
	TF_EXL3_IPATH_REF,      /* plain loops over the reference decode */
	TF_EXL3_IPATH_VEC,      /* vpmaddubsw + vpmaddwd / vpaddl + vmla */
	TF_EXL3_IPATH_VNNI,     /* AVX-512 vpdpwssd / vpdpbusd + VBMI2: x86-64 only */
	TF_EXL3_IPATH_DOTPROD,  /* ARMv8.2 udot + vmla: aarch64 only */
	TF_EXL3_IPATH_GEMM,     /* AVX-512 VNNI, each tile decoded once for all
				 * rows to int16 pairs, vpdpwssd: x86-64 only */
	TF_EXL3_IPATH_GEMM_VEC, /* the same on the build's vector unit where it
				 * pairs k (AVX2 vpmaddwd, NEON vmlal) */
	TF_EXL3_IPATH_COUNT
} tf_exl3_ipath;

/* Whether this build and CPU run `path` (AUTO: always). */
int tf_exl3_ipath_supported(tf_exl3_ipath path);

/* AUTO resolved for one row: the fastest supported path.  For
 * TF_EXL3_GEMM_ROWS rows and more AUTO takes a GEMM: VNNI's, else the
 * vector unit's. */
tf_exl3_ipath tf_exl3_ipath_best(void);

/* "ref", "vec", "vnni", "dotprod", "gemm", "gemm-vec" ("auto" for AUTO). */
const char *tf_exl3_ipath_name(tf_exl3_ipath path);

/* yh[r][16j .. 16j+15] for tile columns j in [j0, j1) and every row of q,
 * TF_EXL3_INT_ROWS rows at a time (the GEMM: all at once); m is MUL1 with
 * m->k == q->k, path supported (checked by the caller).  Each row's bits
 * are its own alone on every path: its int32 sums are exact, and fold
 * into float in one order. */
void tf_exl3_mat_mul_int(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
			 int64_t j0, int64_t j1, tf_exl3_ipath path);

#endif /* TF_EXL3_MATMUL_INT_H */
