/*
 * tf_cuda_rope.h - RoPE as tf/backend.h's rope op defines it, on a CUDA
 * device, callable from C: backend-cuda's rope op and mla-cuda's q and
 * k_pe.  tf_cuda_rope.cu is in tfcudacommon, which each plugin links.
 */
#ifndef TF_CUDA_ROPE_H
#define TF_CUDA_ROPE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Queue on stream: rotate the first rot_dim values of each head of rows
 * [0, rows) of x in place, heads head_stride apart in rows row_stride
 * apart; pair j is (x[2j], x[2j+1]) when interleaved, else (x[j],
 * x[j + rot_dim / 2]), by the angle pos[row] * inv_freq[j] (a float
 * product, as the CPU backend), cos and sin scaled by attn_factor.  pos
 * and inv_freq are device memory.  Returns a cudaError_t:
 * cudaErrorInvalidValue for an odd or negative rot_dim or a negative
 * count.
 */
int tf_cuda_rope(cudaStream_t stream, float *x, int64_t rows, int64_t n_heads,
		 int64_t row_stride, int64_t head_stride, int64_t rot_dim,
		 const int32_t *pos, const float *inv_freq, float attn_factor,
		 int interleaved);

#ifdef __cplusplus
}
#endif
#endif /* TF_CUDA_ROPE_H */
