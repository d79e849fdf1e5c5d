/*
 * mla_cuda.h - gated MLA attention on a CUDA device, callable from C.
 *
 * The same math as plugins/mla (attend.h, mla.c), kernel for kernel:
 *
 *   tf_cuda_rope              the backend's rope op (tf_cuda_rope.h):
 *                             rotate pairs of a slice of each head
 *                             (interleaved or half split) by pos * inv_freq,
 *                             cos and sin times the YaRN attention factor
 *   tf_mla_cuda_cache_write   mla_cache_write: rows into the paged latent
 *                             cache, rounded once to bf16 or kept as float
 *   absorbed form (decode):   mla_absorb_query, then mla_absorbed_rows over
 *                             parts of the cache (split-K, flash-decoding
 *                             style, so one long sequence fills the GPU),
 *                             then mla_absorbed_out (merge the parts, W_UV)
 *   naive form (prefill):     mla_naive_split a page of the cache, kv_b_proj
 *                             (the caller's GEMM), mla_naive_block, and the
 *                             final division by the softmax sum
 *   tf_mla_cuda_gate          o *= sigmoid(gate), per head or per channel
 *
 * The cache is MLA_CUDA_PAGE_ROWS-row pages of lat = r + dr elements per
 * row, as the CPU plugin's.  kv_b_proj is the dequantised float matrix
 * [heads, dn + dv, r] (W_UK_h rows first, then W_UV_h).
 *
 * Each launcher queues its kernel(s) on `stream` and returns a cudaError_t
 * as an int: cudaErrorInvalidValue for shapes the kernels do not take
 * (tf_mla_cuda_check), else the launch's error.  All pointers are device
 * memory, the page table included.
 */
#ifndef TF_MLA_CUDA_H
#define TF_MLA_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tf_cuda_rope.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows per cache page: attend.h's MLA_PAGE_ROWS. */
#define MLA_CUDA_PAGE_ROWS 256
/* Largest kv_lora_rank, rope slice and q head (dn + dr) the kernels take
 * (Ling-3 flash: 512, 64, 192). */
#define MLA_CUDA_MAX_R 512
#define MLA_CUDA_MAX_DR 64
#define MLA_CUDA_MAX_DQ 256
/* Most parts a decode is split into (the combine's shared coefficients). */
#define MLA_CUDA_MAX_PARTS 1024
/* Cache rows a decode part scores together (its part_rows is a multiple). */
#define MLA_CUDA_TILE 8

typedef struct tf_mla_cuda_dims {
	int heads, dn, dr, dv, r;
	float scale;                    /* softmax scale */
} tf_mla_cuda_dims;

/* A sequence's cache: page[t / MLA_CUDA_PAGE_ROWS] holds row t. */
typedef struct tf_mla_cuda_cache {
	void *const *page;
	int bf16;                       /* elements are bf16, else float */
} tf_mla_cuda_cache;

/* One (query, head)'s running softmax: max and sum of exp(s - max). */
typedef struct tf_mla_cuda_run {
	float m, l;
} tf_mla_cuda_run;

/* 0 when the kernels take these dims, else cudaErrorInvalidValue. */
static inline int tf_mla_cuda_check(const tf_mla_cuda_dims *d)
{
	if (d->heads < 1 || d->dn < 1 || d->dv < 1 || d->r < 1 || d->dr < 2 || d->dr % 2 ||
	    d->r > MLA_CUDA_MAX_R || d->dr > MLA_CUDA_MAX_DR || d->dn + d->dr > MLA_CUDA_MAX_DQ)
		return cudaErrorInvalidValue;
	return cudaSuccess;
}

/* Rows [0, rows) of x, `stride` floats apart: their first dim elements
 * x = x / sqrt(mean(x^2) + eps) * w, in place. */
int tf_mla_cuda_rmsnorm(cudaStream_t stream, float *x, int64_t rows, int dim, int64_t stride,
			const float *w, float eps);

/* Float rows src [n, lat] as cache rows t .. t + n - 1 (pages present). */
int tf_mla_cuda_cache_write(cudaStream_t stream, const tf_mla_cuda_dims *d,
			    const tf_mla_cuda_cache *c, int64_t t, int64_t n, const float *src);

/* --- absorbed form: n queries at cache rows len .. len + n - 1 --- */

/* qlat [n, heads, r + dr] = scale [W_UK_h^T q_nope_h ; q_pe_h] for the
 * queries q [n, heads * (dn + dr)]; wkvb [heads, dn + dv, r]. */
int tf_mla_cuda_absorb_query(cudaStream_t stream, const tf_mla_cuda_dims *d,
			     const float *wkvb, const float *q, int64_t n, float *qlat);

/* Rows per part for a decode of n queries over at most `rows` cache rows:
 * enough parts for the split launch to have about `blocks` blocks (e.g.
 * twice the SMs), each part a page at least, at most MLA_CUDA_MAX_PARTS
 * parts; a multiple of MLA_CUDA_TILE. */
int64_t tf_mla_cuda_part_rows(const tf_mla_cuda_dims *d, int64_t rows, int64_t n, int blocks);

static inline int tf_mla_cuda_parts(int64_t rows, int64_t part_rows)
{
	return (int)((rows + part_rows - 1) / part_rows);
}

/* Query i over cache rows [p part_rows, (p + 1) part_rows) ∩ [0, len + i + 1)
 * for every part p < parts: run [parts, n, heads] and acc [parts, n, heads,
 * r] (a part past a query's rows: m = -inf, l = 0, acc = 0). */
int tf_mla_cuda_decode_split(cudaStream_t stream, const tf_mla_cuda_dims *d,
			     const float *qlat, int64_t n, const tf_mla_cuda_cache *c,
			     int64_t len, int64_t part_rows, int parts, tf_mla_cuda_run *run,
			     float *acc);

/* Merge the parts and project: o [n, heads * dv], o_h = W_UV_h lat / l. */
int tf_mla_cuda_decode_combine(cudaStream_t stream, const tf_mla_cuda_dims *d,
			       const float *wkvb, const tf_mla_cuda_run *run, const float *acc,
			       int parts, int64_t n, float *o);

/* --- naive form: per page of rows [t0, t0 + tb), tb <= MLA_CUDA_PAGE_ROWS --- */

/* run [n, heads] = (-inf, 0), acc [n, heads * dv] = 0. */
int tf_mla_cuda_naive_begin(cudaStream_t stream, const tf_mla_cuda_dims *d, int64_t n,
			    tf_mla_cuda_run *run, float *acc);

/* The rows' latents cb [tb, r] (kv_b_proj's input) and keys kpe [tb, dr]. */
int tf_mla_cuda_naive_split(cudaStream_t stream, const tf_mla_cuda_dims *d,
			    const tf_mla_cuda_cache *c, int64_t t0, int64_t tb, float *cb,
			    float *kpe);

/* Every head of queries q [n, heads * (dn + dr)] at rows len + i against
 * the rows' expanded kv [tb, heads * (dn + dv)] and kpe [tb, dr], causal. */
int tf_mla_cuda_naive_block(cudaStream_t stream, const tf_mla_cuda_dims *d, const float *q,
			    int64_t n, int64_t len, const float *kv, const float *kpe,
			    int64_t t0, int64_t tb, tf_mla_cuda_run *run, float *acc);

/* acc /= l: acc is then the heads' outputs o [n, heads * dv]. */
int tf_mla_cuda_naive_end(cudaStream_t stream, const tf_mla_cuda_dims *d, int64_t n,
			  const tf_mla_cuda_run *run, float *acc);

/* o [n, heads * dv] *= sigmoid(gate), gate [n, heads] (head_wise) or
 * [n, heads * dv]. */
int tf_mla_cuda_gate(cudaStream_t stream, const tf_mla_cuda_dims *d, float *o,
		     const float *gate, int64_t n, int head_wise);

#ifdef __cplusplus
}
#endif
#endif /* TF_MLA_CUDA_H */
