/*
 * tf_cuda_rope.cu - RoPE on a CUDA device; see tf_cuda_rope.h.
 */
#include <math.h>

#include "tf_cuda_rope.h"
#include "tf_launch.h"

#define ROPE_THREADS 256

/* One thread per (row, head, pair): cos and sin are recomputed per head,
 * which the CPU shares; the values are the same float products. */
__global__ static void rope_kernel(float *x, int64_t rows, int64_t n_heads, int64_t row_stride,
				   int64_t head_stride, int64_t pairs, const int32_t *pos,
				   const float *inv_freq, float attn_factor, int interleaved)
{
	const int64_t total = rows * n_heads * pairs;
	for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
	     k += (int64_t)gridDim.x * blockDim.x) {
		const int64_t j = k % pairs;
		const int64_t rh = k / pairs, r = rh / n_heads;
		float *head = x + r * row_stride + (rh % n_heads) * head_stride;
		const float angle = (float)pos[r] * inv_freq[j];
		const float cs = cosf(angle) * attn_factor, sn = sinf(angle) * attn_factor;
		float *a = interleaved ? head + 2 * j : head + j;
		float *b = interleaved ? a + 1 : a + pairs;
		const float va = *a, vb = *b;
		*a = va * cs - vb * sn;
		*b = va * sn + vb * cs;
	}
}

extern "C" int tf_cuda_rope(cudaStream_t stream, float *x, int64_t rows, int64_t n_heads,
			    int64_t row_stride, int64_t head_stride, int64_t rot_dim,
			    const int32_t *pos, const float *inv_freq, float attn_factor,
			    int interleaved)
{
	if (rows < 0 || n_heads < 0 || rot_dim < 0 || rot_dim % 2)
		return cudaErrorInvalidValue;
	const int64_t total = rows * n_heads * (rot_dim / 2);
	if (total == 0)
		return cudaSuccess;
	int64_t blocks = (total + ROPE_THREADS - 1) / ROPE_THREADS;
	blocks = blocks > 4096 ? 4096 : blocks;
	TF_LAUNCH((unsigned)blocks, ROPE_THREADS, 0, stream, rope_kernel)(
		x, rows, n_heads, row_stride, head_stride, rot_dim / 2, pos, inv_freq,
		attn_factor, interleaved);
	return cudaGetLastError();
}
