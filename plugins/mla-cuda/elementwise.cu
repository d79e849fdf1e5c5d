/*
 * elementwise.cu - the MLA kernels that touch each element once
 * (mla_cuda.h): RoPE, the cache append and the output gate.
 */
#include <math.h>

#include "cache.cuh"

#define EW_THREADS 256

/* One thread per (row, head, pair): cos and sin are recomputed per head,
 * which the CPU shares; the values are the same float products. */
__global__ static void rope_kernel(float *x, int64_t rows, int n_heads, int64_t row_stride,
				   int64_t head_stride, int pairs, const int32_t *pos,
				   const float *inv_freq, float attn_factor, int interleaved)
{
	const int64_t total = rows * n_heads * pairs;
	for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
	     k += (int64_t)gridDim.x * blockDim.x) {
		const int j = (int)(k % pairs);
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

extern "C" int tf_mla_cuda_rope(cudaStream_t stream, float *x, int64_t rows, int n_heads,
				int64_t row_stride, int64_t head_stride, int rot_dim,
				const int32_t *pos, const float *inv_freq, float attn_factor,
				int interleaved)
{
	if (rows < 0 || n_heads < 0 || rot_dim < 0 || rot_dim % 2)
		return cudaErrorInvalidValue;
	const int64_t total = rows * n_heads * (rot_dim / 2);
	if (total == 0)
		return cudaSuccess;
	TF_LAUNCH(mla_grid(total, EW_THREADS), EW_THREADS, 0, stream, rope_kernel)(
		x, rows, n_heads, row_stride, head_stride, rot_dim / 2, pos, inv_freq,
		attn_factor, interleaved);
	return cudaGetLastError();
}

__global__ static void cache_write_kernel(tf_mla_cuda_cache c, int64_t lat, int64_t t,
					  int64_t n, const float *src)
{
	for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n * lat;
	     k += (int64_t)gridDim.x * blockDim.x)
		mla_cache_put(c, lat, t + k / lat, k % lat, src[k]);
}

extern "C" int tf_mla_cuda_cache_write(cudaStream_t stream, const tf_mla_cuda_dims *d,
				       const tf_mla_cuda_cache *c, int64_t t, int64_t n,
				       const float *src)
{
	const int64_t lat = d->r + d->dr;
	if (tf_mla_cuda_check(d) || t < 0 || n < 0)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	TF_LAUNCH(mla_grid(n * lat, EW_THREADS), EW_THREADS, 0, stream, cache_write_kernel)(
		*c, lat, t, n, src);
	return cudaGetLastError();
}

/* As the CPU's tf_tu_sigmoid: 1 / (1 + e^-x). */
__global__ static void gate_kernel(float *o, const float *gate, int64_t total, int per)
{
	for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
	     k += (int64_t)gridDim.x * blockDim.x)
		o[k] *= 1.0f / (1.0f + expf(-gate[k / per]));
}

extern "C" int tf_mla_cuda_gate(cudaStream_t stream, const tf_mla_cuda_dims *d, float *o,
				const float *gate, int64_t n, int head_wise)
{
	const int64_t total = n * d->heads * d->dv;
	if (tf_mla_cuda_check(d) || n < 0)
		return cudaErrorInvalidValue;
	if (total == 0)
		return cudaSuccess;
	TF_LAUNCH(mla_grid(total, EW_THREADS), EW_THREADS, 0, stream, gate_kernel)(
		o, gate, total, head_wise ? d->dv : 1);
	return cudaGetLastError();
}
