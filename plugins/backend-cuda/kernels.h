/*
 * kernels.h - the CUDA backend's kernel launchers, callable from C.
 *
 * Each launcher queues one kernel on `stream` and returns the launch's
 * cudaError_t as an int (0 on success); failures inside the kernel show up
 * at the next synchronisation.  Pointers are device memory unless a
 * parameter says otherwise.  The CPU backend's plain reference kernels
 * (plugins/backend-cpu/ops_ref.c) define what each must compute.
 */
#ifndef TF_CUDA_KERNELS_H
#define TF_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stored element types of an embedding table or a conversion.  tf/dtype.h
 * is C only (its tables use array designators), so the .cu side gets its
 * own names. */
typedef enum tf_cuda_elem { TF_CUDA_F32, TF_CUDA_F16, TF_CUDA_BF16 } tf_cuda_elem;

int tf_cuda_rmsnorm(cudaStream_t stream, float *y, const float *x,
		    const float *w, int64_t rows, int64_t dim, float eps);
int tf_cuda_add(cudaStream_t stream, float *y, const float *a, const float *b,
		int64_t n);
int tf_cuda_swiglu(cudaStream_t stream, float *y, const float *gate,
		   const float *up, int64_t n, float limit);
/* In-place softmax of each of rows rows of n (a row holding NaN, or only
 * -inf, becomes NaN, as on the CPU). */
int tf_cuda_softmax(cudaStream_t stream, float *x, int64_t rows, int64_t n);
/* out[r] = the index of the largest non-NaN value of row r, the lower one
 * on ties; 0 for a row of NaN. */
int tf_cuda_argmax(cudaStream_t stream, int32_t *out, const float *x, int64_t rows,
		   int64_t n);
/* y[i] = table[ids ? ids[i] : i] widened to float32; table and ids are
 * device-accessible. */
int tf_cuda_embed(cudaStream_t stream, float *y, const void *table,
		  tf_cuda_elem elem, int64_t dim, const int32_t *ids, int64_t n);
/* dst[i] = src[i] for n elements, widened exactly or rounded to nearest
 * even (NaN stays a quiet NaN, as tf/dtype.h's conversions); dst and src
 * are device memory and must not overlap. */
int tf_cuda_convert(cudaStream_t stream, void *dst, tf_cuda_elem dst_elem,
		    const void *src, tf_cuda_elem src_elem, int64_t n);

/* Most candidates the sampler keeps (top_k); 0 < top_k <= this is needed
 * whenever temperature > 0. */
#define TF_CUDA_SAMPLE_MAX_K 64

/* tf_sampler_params' draw (penalties are the caller's: they need the
 * history). */
typedef struct tf_cuda_sample_par {
	float temperature, top_p, min_p;
	int top_k;
	uint64_t seed;
} tf_cuda_sample_par;

/* token[r] for rows r of logits, ld floats apart, each over its first
 * n_vocab (NaN counts as -inf), as core's tf_sampler_sample picks with no
 * history: the argmax (lower id on ties) when temperature <= 0, else a
 * draw by u = hash(seed, seq[r], pos[r]); -1 when every logit is -inf.
 * At most 65535 rows; scratch holds tf_cuda_sample_scratch_bytes(rows)
 * bytes.  cudaErrorInvalidValue (nothing queued) for parameters it does
 * not draw with: top_k 0 or above TF_CUDA_SAMPLE_MAX_K when drawing. */
int tf_cuda_sample(cudaStream_t stream, const tf_cuda_sample_par *par, const float *logits,
		   int64_t rows, int n_vocab, int64_t ld, const uint64_t *seq,
		   const uint64_t *pos, void *scratch, int32_t *token);
size_t tf_cuda_sample_scratch_bytes(int64_t rows);

#ifdef __cplusplus
}
#endif
#endif /* TF_CUDA_KERNELS_H */
