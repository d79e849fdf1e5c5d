/*
 * elementwise.cu - the MLA kernels that touch each element once
 * (mla_cuda.h): the strided RMSNorm, the cache append and the output gate
 * (RoPE is cuda-common's tf_cuda_rope.cu, backend-cuda's op too).
 */
#include <math.h>

#include "cache.cuh"

#define EW_THREADS 256

/* One block per row: each thread's squares, a tree sum in shared memory
 * (NORM_THREADS a power of two), then the row scaled in place. */
#define NORM_THREADS 128
__global__ static void __launch_bounds__(NORM_THREADS)
rmsnorm_kernel(float *x, int dim, int64_t stride, const float *w, float eps)
{
	__shared__ float ss[NORM_THREADS];
	float *row = x + (int64_t)blockIdx.x * stride;
	float v = 0.0f;
	for (int e = threadIdx.x; e < dim; e += NORM_THREADS)
		v += row[e] * row[e];
	ss[threadIdx.x] = v;
	for (int k = NORM_THREADS / 2; k > 0; k /= 2) {
		__syncthreads();
		if ((int)threadIdx.x < k)
			ss[threadIdx.x] += ss[threadIdx.x + k];
	}
	__syncthreads();
	const float scale = 1.0f / sqrtf(ss[0] / (float)dim + eps);
	for (int e = threadIdx.x; e < dim; e += NORM_THREADS)
		row[e] = row[e] * scale * w[e];
}

extern "C" int tf_mla_cuda_rmsnorm(cudaStream_t stream, float *x, int64_t rows, int dim,
				   int64_t stride, const float *w, float eps)
{
	if (rows < 0 || rows > 0x7fffffff || dim < 1 || stride < dim)
		return cudaErrorInvalidValue;
	if (rows == 0)
		return cudaSuccess;
	TF_LAUNCH((unsigned)rows, NORM_THREADS, 0, stream, rmsnorm_kernel)(x, dim, stride, w, eps);
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
