/*
 * cache.cuh - one element of the paged latent cache (mla_cuda.h), read as
 * float or written from one, and the bf16 rounding the CPU plugin uses
 * (tf/dtype.h's tf_f32_to_bf16: nearest even, NaN kept quiet); the online
 * softmax step both attention forms share.
 */
#ifndef TF_MLA_CUDA_CACHE_CUH
#define TF_MLA_CUDA_CACHE_CUH

#include <math.h>
#include <string.h>

#include "mla_cuda.h"
#include "tf_launch.h"

/* Element e of cache row t, lat elements a row. */
__device__ __forceinline__ float mla_cache_get(const tf_mla_cuda_cache c, int64_t lat, int64_t t,
					       int64_t e)
{
	const int64_t off = (t % MLA_CUDA_PAGE_ROWS) * lat + e;
	const void *page = c.page[t / MLA_CUDA_PAGE_ROWS];
	if (c.bf16)
		return __uint_as_float((uint32_t)((const uint16_t *)page)[off] << 16);
	return ((const float *)page)[off];
}

__device__ __forceinline__ uint16_t mla_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

__device__ __forceinline__ void mla_cache_put(const tf_mla_cuda_cache c, int64_t lat, int64_t t,
					      int64_t e, float v)
{
	const int64_t off = (t % MLA_CUDA_PAGE_ROWS) * lat + e;
	void *page = c.page[t / MLA_CUDA_PAGE_ROWS];
	if (c.bf16)
		((uint16_t *)page)[off] = mla_f32_to_bf16(v);
	else
		((float *)page)[off] = v;
}

/* Fold n scores s, their maximum mx, into a running softmax as attend.c's
 * run_rescale does: a grown maximum rescales the sum; the scores become
 * their weights exp(s - m).  Returns the factor for the accumulator. */
__device__ __forceinline__ float mla_run_fold(tf_mla_cuda_run *r, float mx, float *s, int n)
{
	float cf = 1.0f;
	if (mx > r->m) {
		cf = r->m == -INFINITY ? 0.0f : expf(r->m - mx);
		r->l *= cf;
		r->m = mx;
	}
	for (int t = 0; t < n; t++) {
		s[t] = expf(s[t] - r->m);
		r->l += s[t];
	}
	return cf;
}

/* Blocks for a grid-stride loop over n items, THREADS a block. */
static inline unsigned mla_grid(int64_t n, int threads)
{
	int64_t b = (n + threads - 1) / threads;
	return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

#endif /* TF_MLA_CUDA_CACHE_CUH */
