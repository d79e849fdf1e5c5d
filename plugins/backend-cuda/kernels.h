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
/* y[i] = table[ids ? ids[i] : i] widened to float32; table and ids are
 * device-accessible. */
int tf_cuda_embed(cudaStream_t stream, float *y, const void *table,
		  tf_cuda_elem elem, int64_t dim, const int32_t *ids, int64_t n);
/* dst[i] = src[i] for n elements, widened exactly or rounded to nearest
 * even (NaN stays a quiet NaN, as tf/dtype.h's conversions); dst and src
 * are device memory and must not overlap. */
int tf_cuda_convert(cudaStream_t stream, void *dst, tf_cuda_elem dst_elem,
		    const void *src, tf_cuda_elem src_elem, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* TF_CUDA_KERNELS_H */
