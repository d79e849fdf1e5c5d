/*
 * plain_cuda.h - the plain linear's product on a CUDA device, callable
 * from C: y[rows, out] = x[rows, in] · Wᵀ (+ bias), W [out, in] stored as
 * F32, F16 or BF16 and widened in the kernel, products summed in fp32.
 * The CPU plain linear (plain_lin.c) defines what it computes.
 *
 * All pointers are device memory; the call queues one kernel on `stream`
 * and returns the launch status (0 or a cudaError_t value).
 */
#ifndef TF_PLAIN_CUDA_H
#define TF_PLAIN_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How W is stored.  tf/dtype.h is C only, so the .cu side has its own. */
typedef enum tf_plain_cuda_elem {
	TF_PLAIN_CUDA_F32, TF_PLAIN_CUDA_F16, TF_PLAIN_CUDA_BF16
} tf_plain_cuda_elem;

/* bias may be NULL. */
int tf_plain_cuda_matmul(void *stream, const float *x, int64_t rows, int64_t in,
			 const void *w, tf_plain_cuda_elem elem, int64_t out,
			 const float *bias, float *y);

#ifdef __cplusplus
}
#endif
#endif /* TF_PLAIN_CUDA_H */
