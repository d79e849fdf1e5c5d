/*
 * prefill.cu - the naive form of MLA attention (mla_cuda.h): per page of
 * cache rows, their latents are split out for the caller's kv_b_proj
 * GEMM, then every (query, head) scores the page's expanded keys and
 * folds it into its online softmax over the value rows, as
 * mla_naive_block.  One block per (head, query), a thread per row's
 * score: a plain kernel, the keys and values read from global memory
 * (and caches) for each query.
 */
#include <math.h>

#include "cache.cuh"

#define PRE_THREADS 128

__global__ static void naive_begin_kernel(int64_t nh, int dv, tf_mla_cuda_run *run, float *acc)
{
	for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < nh * dv;
	     k += (int64_t)gridDim.x * blockDim.x) {
		if (k % dv == 0) {
			run[k / dv].m = -INFINITY;
			run[k / dv].l = 0.0f;
		}
		acc[k] = 0.0f;
	}
}

extern "C" int tf_mla_cuda_naive_begin(cudaStream_t stream, const tf_mla_cuda_dims *d,
				       int64_t n, tf_mla_cuda_run *run, float *acc)
{
	if (tf_mla_cuda_check(d) || n < 0)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	const int64_t nh = n * d->heads;
	TF_LAUNCH(mla_grid(nh * d->dv, PRE_THREADS), PRE_THREADS, 0, stream, naive_begin_kernel)(
		nh, d->dv, run, acc);
	return cudaGetLastError();
}

__global__ static void naive_split_kernel(tf_mla_cuda_dims d, tf_mla_cuda_cache c, int64_t t0,
					  int64_t tb, float *cb, float *kpe)
{
	const int lat = d.r + d.dr;
	for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < tb * lat;
	     k += (int64_t)gridDim.x * blockDim.x) {
		const int64_t t = k / lat;
		const int e = (int)(k % lat);
		const float v = mla_cache_get(c, lat, t0 + t, e);
		if (e < d.r)
			cb[t * d.r + e] = v;
		else
			kpe[t * d.dr + e - d.r] = v;
	}
}

extern "C" int tf_mla_cuda_naive_split(cudaStream_t stream, const tf_mla_cuda_dims *d,
				       const tf_mla_cuda_cache *c, int64_t t0, int64_t tb,
				       float *cb, float *kpe)
{
	if (tf_mla_cuda_check(d) || t0 < 0 || tb < 0 || tb > MLA_CUDA_PAGE_ROWS)
		return cudaErrorInvalidValue;
	if (tb == 0)
		return cudaSuccess;
	TF_LAUNCH(mla_grid(tb * (d->r + d->dr), PRE_THREADS), PRE_THREADS, 0, stream,
		  naive_split_kernel)(*d, *c, t0, tb, cb, kpe);
	return cudaGetLastError();
}

/*
 * Three barriers: the query is in shared memory; the scores of the rows
 * it sees are; the running softmax has turned them into weights.  A
 * query before the block has no rows in it and its block leaves at once.
 */
__global__ static void __launch_bounds__(PRE_THREADS)
naive_block_kernel(tf_mla_cuda_dims d, const float *q, int64_t len, const float *kv,
		   const float *kpe, int64_t t0, int64_t tb, tf_mla_cuda_run *run, float *acc)
{
	__shared__ float sq[MLA_CUDA_MAX_DQ], s[MLA_CUDA_PAGE_ROWS], corr;
	const int h = blockIdx.x, dq = d.dn + d.dr, dkv = d.dn + d.dv;
	const int64_t i = blockIdx.y, ldkv = (int64_t)d.heads * dkv;
	if (len + i < t0)
		return;
	const int end = len + i + 1 - t0 < tb ? (int)(len + i + 1 - t0) : (int)tb;
	tf_mla_cuda_run *r = run + i * d.heads + h;

	for (int e = threadIdx.x; e < dq; e += blockDim.x)
		sq[e] = q[(i * d.heads + h) * dq + e];
	__syncthreads();
	for (int t = threadIdx.x; t < end; t += blockDim.x) {
		const float *kn = kv + t * ldkv + (int64_t)h * dkv, *kp = kpe + (int64_t)t * d.dr;
		float v = 0.0f;
		for (int e = 0; e < d.dn; e++)
			v += sq[e] * kn[e];
		for (int e = 0; e < d.dr; e++)
			v += sq[d.dn + e] * kp[e];
		s[t] = v * d.scale;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		float mx = -INFINITY;
		for (int t = 0; t < end; t++)
			mx = fmaxf(mx, s[t]);
		corr = mla_run_fold(r, mx, s, end);
	}
	__syncthreads();
	float *a = acc + (i * d.heads + h) * d.dv;
	const float *v = kv + (int64_t)h * dkv + d.dn;
	for (int e = threadIdx.x; e < d.dv; e += blockDim.x) {
		float x = a[e] * corr;
		for (int t = 0; t < end; t++)
			x += s[t] * v[t * ldkv + e];
		a[e] = x;
	}
}

extern "C" int tf_mla_cuda_naive_block(cudaStream_t stream, const tf_mla_cuda_dims *d,
				       const float *q, int64_t n, int64_t len, const float *kv,
				       const float *kpe, int64_t t0, int64_t tb,
				       tf_mla_cuda_run *run, float *acc)
{
	if (tf_mla_cuda_check(d) || n < 0 || n > 65535 || len < 0 || t0 < 0 || tb < 1 ||
	    tb > MLA_CUDA_PAGE_ROWS)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	TF_LAUNCH(dim3(d->heads, (unsigned)n), PRE_THREADS, 0, stream, naive_block_kernel)(
		*d, q, len, kv, kpe, t0, tb, run, acc);
	return cudaGetLastError();
}

/* As mla.c: times the reciprocal of the sum. */
__global__ static void naive_end_kernel(int64_t nh, int dv, const tf_mla_cuda_run *run,
					float *acc)
{
	for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < nh * dv;
	     k += (int64_t)gridDim.x * blockDim.x)
		acc[k] *= 1.0f / run[k / dv].l;
}

extern "C" int tf_mla_cuda_naive_end(cudaStream_t stream, const tf_mla_cuda_dims *d, int64_t n,
				     const tf_mla_cuda_run *run, float *acc)
{
	if (tf_mla_cuda_check(d) || n < 0)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	const int64_t nh = n * d->heads;
	TF_LAUNCH(mla_grid(nh * d->dv, PRE_THREADS), PRE_THREADS, 0, stream, naive_end_kernel)(
		nh, d->dv, run, acc);
	return cudaGetLastError();
}
