/*
 * kernels.cu - the CUDA backend's kernels; see kernels.h.
 */
#include <cuda_fp16.h>
#include <math.h>

#include "best.cuh"
#include "kernels.h"
#include "tf_launch.h"

/* Threads per block: 8 warps, enough to cover a 4096-wide row in 16 steps. */
#define TF_CUDA_BLOCK 256

static unsigned grid_for(int64_t n)
{
	int64_t blocks = (n + TF_CUDA_BLOCK - 1) / TF_CUDA_BLOCK;
	return (unsigned)(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

/* v combined over the block by op (associative and commutative, `none`
 * its identity), in every thread.  Calls may follow one another: each
 * reads `total` before the next call's first barrier lets thread 0 write
 * it again. */
template <class Op>
__device__ static float block_reduce(float v, Op op, float none)
{
	__shared__ float partial[TF_CUDA_BLOCK / 32];
	__shared__ float total;
	for (int off = 16; off > 0; off >>= 1)
		v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
	if ((threadIdx.x & 31) == 0)
		partial[threadIdx.x >> 5] = v;
	__syncthreads();
	if (threadIdx.x < 32) {
		v = threadIdx.x < TF_CUDA_BLOCK / 32 ? partial[threadIdx.x] : none;
		for (int off = 16; off > 0; off >>= 1)
			v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
	}
	if (threadIdx.x == 0)
		total = v;
	__syncthreads();
	return total;
}

__device__ static float block_sum(float v)
{
	return block_reduce(v, [](float a, float b) { return a + b; }, 0.0f);
}

/* One block per row. */
__global__ static void rmsnorm_kernel(float *y, const float *x, const float *w,
				      int64_t dim, float eps)
{
	const float *xr = x + blockIdx.x * dim;
	float *yr = y + blockIdx.x * dim;
	float ss = 0.0f;
	for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
		ss += xr[i] * xr[i];
	float scale = 1.0f / sqrtf(block_sum(ss) / (float)dim + eps);
	for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
		yr[i] = xr[i] * scale * w[i];
}

__global__ static void add_kernel(float *y, const float *a, const float *b,
				  int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		y[i] = a[i] + b[i];
}

__global__ static void swiglu_kernel(float *y, const float *gate,
				     const float *up, int64_t n, float limit)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float g = gate[i], u = up[i];
		float s = g / (1.0f + expf(-g));
		if (limit > 0.0f) {
			s = fminf(s, limit);
			u = fminf(fmaxf(u, -limit), limit);
		}
		y[i] = s * u;
	}
}

/* One block per row: the max (fmaxf skips NaN, as the CPU's), exp(x -
 * max) and its sum, then the scale by 1 / sum.  A NaN, or a row of -inf,
 * makes the sum NaN and so every value, as on the CPU. */
__global__ static void softmax_kernel(float *x, int64_t n)
{
	float *xr = x + blockIdx.x * n;
	float mx = -INFINITY, sum = 0.0f;
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
		mx = fmaxf(mx, xr[i]);
	mx = block_reduce(mx, [](float a, float b) { return fmaxf(a, b); }, -INFINITY);
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		float e = expf(xr[i] - mx);
		xr[i] = e;
		sum += e;
	}
	float inv = 1.0f / block_sum(sum);
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
		xr[i] *= inv;
}

/* One block per row: each thread's best non-NaN (value, index), then the
 * block's by best.cuh's order (lower index on ties). */
__global__ static void argmax_kernel(int32_t *out, const float *x, int n)
{
	const float *xr = x + (int64_t)blockIdx.x * n;
	float bv = -INFINITY;
	int bi = -1;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		if (!isnan(xr[i]) && tf_best_beats(xr[i], i, bv, bi)) {
			bv = xr[i];
			bi = i;
		}
	tf_best_block(&bv, &bi);
	if (threadIdx.x == 0)
		out[blockIdx.x] = bi < 0 ? 0 : bi;
}

/* Element `at` of an array of `elem`, widened to float (exact). */
__device__ static float load_elem(const void *p, tf_cuda_elem elem, int64_t at)
{
	if (elem == TF_CUDA_F32)
		return ((const float *)p)[at];
	if (elem == TF_CUDA_F16)
		return __half2float(__ushort_as_half(((const uint16_t *)p)[at]));
	return __uint_as_float((uint32_t)((const uint16_t *)p)[at] << 16);
}

/* v stored as `elem`, rounded to nearest even as tf/dtype.h's
 * tf_f32_to_f16 and tf_f32_to_bf16 do, NaN included (the quiet NaN
 * they make), so the bits equal backend-cpu's. */
__device__ static void store_elem(void *p, tf_cuda_elem elem, int64_t at, float v)
{
	uint32_t u = __float_as_uint(v);
	bool nan = (u & 0x7fffffffu) > 0x7f800000u;
	if (elem == TF_CUDA_F32)
		((float *)p)[at] = v;
	else if (elem == TF_CUDA_F16)
		((uint16_t *)p)[at] = nan ? (uint16_t)((u >> 16 & 0x8000u) | 0x7e00u)
					  : __half_as_ushort(__float2half_rn(v));
	else
		((uint16_t *)p)[at] = nan ? (uint16_t)(u >> 16 | 0x40u)
					  : (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* One block per token row. */
__global__ static void embed_kernel(float *y, const void *table, tf_cuda_elem elem,
				    int64_t dim, const int32_t *ids)
{
	int64_t row = ids ? ids[blockIdx.x] : blockIdx.x;
	float *yr = y + blockIdx.x * dim;
	for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
		yr[i] = load_elem(table, elem, row * dim + i);
}

__global__ static void convert_kernel(void *dst, tf_cuda_elem dst_elem, const void *src,
				      tf_cuda_elem src_elem, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		store_elem(dst, dst_elem, i, load_elem(src, src_elem, i));
}

extern "C" int tf_cuda_rmsnorm(cudaStream_t stream, float *y, const float *x,
			       const float *w, int64_t rows, int64_t dim, float eps)
{
	if (rows <= 0 || dim <= 0)
		return cudaSuccess;
	if (rows > 0x7fffffff)
		return cudaErrorInvalidValue;
	TF_LAUNCH((unsigned)rows, TF_CUDA_BLOCK, 0, stream, rmsnorm_kernel)(y, x, w, dim, eps);
	return cudaGetLastError();
}

extern "C" int tf_cuda_add(cudaStream_t stream, float *y, const float *a,
			   const float *b, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	TF_LAUNCH(grid_for(n), TF_CUDA_BLOCK, 0, stream, add_kernel)(y, a, b, n);
	return cudaGetLastError();
}

extern "C" int tf_cuda_swiglu(cudaStream_t stream, float *y, const float *gate,
			      const float *up, int64_t n, float limit)
{
	if (n <= 0)
		return cudaSuccess;
	TF_LAUNCH(grid_for(n), TF_CUDA_BLOCK, 0, stream, swiglu_kernel)(y, gate, up, n, limit);
	return cudaGetLastError();
}

extern "C" int tf_cuda_softmax(cudaStream_t stream, float *x, int64_t rows, int64_t n)
{
	if (rows <= 0 || n <= 0)
		return cudaSuccess;
	if (rows > 0x7fffffff)
		return cudaErrorInvalidValue;
	TF_LAUNCH((unsigned)rows, TF_CUDA_BLOCK, 0, stream, softmax_kernel)(x, n);
	return cudaGetLastError();
}

extern "C" int tf_cuda_argmax(cudaStream_t stream, int32_t *out, const float *x,
			      int64_t rows, int64_t n)
{
	if (rows <= 0 || n <= 0)
		return cudaSuccess;
	if (rows > 0x7fffffff || n > 0x7fffffff)
		return cudaErrorInvalidValue;
	TF_LAUNCH((unsigned)rows, TF_CUDA_BLOCK, 0, stream, argmax_kernel)(out, x, (int)n);
	return cudaGetLastError();
}

extern "C" int tf_cuda_embed(cudaStream_t stream, float *y, const void *table,
			     tf_cuda_elem elem, int64_t dim, const int32_t *ids,
			     int64_t n)
{
	if (n <= 0 || dim <= 0)
		return cudaSuccess;
	if (n > 0x7fffffff)
		return cudaErrorInvalidValue;
	TF_LAUNCH((unsigned)n, TF_CUDA_BLOCK, 0, stream, embed_kernel)(y, table, elem, dim, ids);
	return cudaGetLastError();
}

extern "C" int tf_cuda_convert(cudaStream_t stream, void *dst, tf_cuda_elem dst_elem,
			       const void *src, tf_cuda_elem src_elem, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	TF_LAUNCH(grid_for(n), TF_CUDA_BLOCK, 0, stream, convert_kernel)(dst, dst_elem, src,
									 src_elem, n);
	return cudaGetLastError();
}
