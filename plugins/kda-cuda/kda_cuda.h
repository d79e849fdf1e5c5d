/*
 * kda_cuda.h - the gated delta rule of KDA on a CUDA device, callable from C.
 *
 * The same map as plugins/kda/delta.h, for every (sequence, head) of a
 * batch in one launch: per head a K x V fp32 state S (rows are key
 * channels, row-major) and, per token t, the per-channel log-decay g_t,
 * the write strength beta_t, an L2-normed key k_t and a scaled, L2-normed
 * query q_t:
 *
 *     S   <- Diag(exp(g_t)) S
 *     u_t <- beta_t (v_t - S^T k_t)
 *     S   <- S + k_t u_t^T
 *     o_t <- S^T q_t
 *
 * The conv, norms and gates that prepare q, k, g, beta and the gated norm
 * after o are not part of it (plugins/kda/kda.c does them around delta.c).
 *
 * Two kernels, one block per (segment, head), the state held in registers
 * for the whole launch: tf_kda_cuda_recurrent steps token by token (decode,
 * and short prefills); tf_kda_cuda_chunked runs the chunked WY form over
 * KDA_CUDA_CHUNK tokens at a time (prefill).  Each launcher queues one
 * kernel on `stream` and returns its cudaError_t as an int.  All pointers,
 * the segment array included, are device memory.
 */
#ifndef TF_KDA_CUDA_H
#define TF_KDA_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest K and V the kernels take (Ling and Kimi use 128). */
#define KDA_CUDA_MAX_DIM 128
/* Tokens per chunk of the WY form: one 16-token block, inside which the
 * safe gate bounds every inverse decay by e^80 < FLT_MAX. */
#define KDA_CUDA_CHUNK 16

/* The activations of a batch, rows [0, n): head h of row r reads
 * q, k, g at r * ldk + h * K, v at r * ldv + h * V, beta at r * ldb + h,
 * and writes o at r * ldv + h * V. */
typedef struct tf_kda_cuda_io {
	const float *q, *k, *g, *v, *beta;
	float *o;
	int64_t ldk, ldv, ldb;
} tf_kda_cuda_io;

/* One sequence: rows [row0, row0 + n) of the batch advance state S,
 * [heads, K, V]. */
typedef struct tf_kda_cuda_seg {
	int64_t row0, n;
	float *S;
} tf_kda_cuda_seg;

/* 0 when the kernels take these shapes, else cudaErrorInvalidValue (what
 * the launchers return for them): the grid is heads x n_seg blocks. */
static inline int tf_kda_cuda_check(int heads, int K, int V, int n_seg)
{
	if (heads < 1 || n_seg < 1 || n_seg > 65535 || K < 1 || V < 1 ||
	    K > KDA_CUDA_MAX_DIM || V > KDA_CUDA_MAX_DIM)
		return cudaErrorInvalidValue;
	return cudaSuccess;
}

int tf_kda_cuda_recurrent(cudaStream_t stream, const tf_kda_cuda_io *io,
			  const tf_kda_cuda_seg *seg, int n_seg, int heads, int K, int V);
int tf_kda_cuda_chunked(cudaStream_t stream, const tf_kda_cuda_io *io,
			const tf_kda_cuda_seg *seg, int n_seg, int heads, int K, int V);

#ifdef __cplusplus
}
#endif
#endif /* TF_KDA_CUDA_H */
