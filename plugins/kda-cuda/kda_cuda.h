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
 * Two kernels, one block per (segment, head, tile of 32 columns of S: the
 * columns evolve independently), the state held in registers for the
 * whole launch: tf_kda_cuda_recurrent steps token by token (decode,
 * and short prefills); tf_kda_cuda_chunked runs the chunked WY form over
 * KDA_CUDA_CHUNK tokens at a time (prefill).
 *
 * Around them, what plugins/kda/kda.c does between the input projections
 * and o_proj: tf_kda_cuda_prep (short causal conv + SiLU on each
 * sequence's conv history, L2 norms, decay gate, beta) before, and
 * tf_kda_cuda_gated_norm after.  So a KDA layer on the device is: the
 * projections into a tf_kda_cuda_act, prep, one of the delta kernels on
 * tf_kda_cuda_act_io(), gated_norm, o_proj.
 *
 * Each launcher queues one kernel on `stream` and returns its cudaError_t
 * as an int.  All pointers, the segment array included, are device memory.
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
/* Widest short convolution prep takes (Ling and Kimi use 4). */
#define KDA_CUDA_MAX_CONV 8
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
 * [heads, K, V], and (prep only) conv, [3, heads * dim, width - 1]: each
 * channel's last raw inputs of q, k and v, oldest first (as kda.c). */
typedef struct tf_kda_cuda_seg {
	int64_t row0, n;
	float *S, *conv;
} tf_kda_cuda_seg;

/* A KDA layer's fp32 tensors (device memory) and shape; K = V = dim. */
typedef struct tf_kda_cuda_layer {
	int heads, dim, width;
	int safe_gate;                  /* else Kimi's softplus gate */
	float lower_bound, eps;         /* safe gate bound; o_norm's eps */
	const float *conv_w[3];         /* q, k, v taps [heads * dim, width], oldest first */
	const float *a_exp;             /* exp(A_log) [heads] */
	const float *dt_bias;           /* [heads * dim] */
	const float *o_norm;            /* [dim] */
} tf_kda_cuda_layer;

/* One forward's activations, rows of heads * dim floats (beta: heads).
 * The projections fill q, k, v, g (f_proj's output), beta (b_proj's) and
 * gate (g_proj's); prep turns q, k, v, g, beta into the delta rule's
 * inputs in place; the delta kernel writes o; gated_norm scales o. */
typedef struct tf_kda_cuda_act {
	float *q, *k, *v, *g, *beta, *gate, *o;
} tf_kda_cuda_act;

static inline tf_kda_cuda_io tf_kda_cuda_act_io(const tf_kda_cuda_layer *L,
						const tf_kda_cuda_act *a)
{
	const int64_t P = (int64_t)L->heads * L->dim;
	tf_kda_cuda_io io = { a->q, a->k, a->g, a->v, a->beta, a->o, P, P, L->heads };
	return io;
}

/* 0 when the kernels take these shapes, else cudaErrorInvalidValue (what
 * the launchers return for them): the grid is heads x n_seg x column tiles. */
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

/* Per (segment, head), token after token: q, k, v <- SiLU(causal conv)
 * advancing seg->conv; q <- q / |q| dim^-1/2, k <- k / |k|; g <- the decay
 * gate of g + dt_bias; beta <- sigmoid(beta). */
int tf_kda_cuda_prep(cudaStream_t stream, const tf_kda_cuda_layer *L, const tf_kda_cuda_act *a,
		     const tf_kda_cuda_seg *seg, int n_seg);
/* Rows [0, n): o <- RMSNorm(o) o_norm sigmoid(gate), per head. */
int tf_kda_cuda_gated_norm(cudaStream_t stream, const tf_kda_cuda_layer *L,
			   const tf_kda_cuda_act *a, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* TF_KDA_CUDA_H */
