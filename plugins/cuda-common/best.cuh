/*
 * best.cuh - the best (value, index) pair over a block: the larger value,
 * the lower index on ties (the order of plugins/router/topk.c and the
 * sampler's argmax).  A total order on non-NaN values, so every schedule
 * and every reduction tree gives the same pair.
 */
#ifndef TF_CUDA_BEST_CUH
#define TF_CUDA_BEST_CUH

#include <math.h>

#include "tf_launch.h"      /* the device model, on the harness */

/* Whether (v, i) beats (bv, bi); index -1 is "nothing yet". */
__device__ static inline bool tf_best_beats(float v, int i, float bv, int bi)
{
	return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

/* Every thread of the block passes its best pair and gets the block's.
 * blockDim.x is a multiple of 32, at most 1024. */
__device__ static inline void tf_best_block(float *v, int *i)
{
	__shared__ float wv[32];
	__shared__ int wi[32];
	for (int off = 16; off > 0; off >>= 1) {
		float ov = __shfl_xor_sync(0xffffffffu, *v, off);
		int oi = __shfl_xor_sync(0xffffffffu, *i, off);
		if (tf_best_beats(ov, oi, *v, *i)) {
			*v = ov;
			*i = oi;
		}
	}
	if ((threadIdx.x & 31) == 0) {
		wv[threadIdx.x >> 5] = *v;
		wi[threadIdx.x >> 5] = *i;
	}
	__syncthreads();
	for (unsigned w = 0; w < blockDim.x >> 5; w++)
		if (tf_best_beats(wv[w], wi[w], *v, *i)) {
			*v = wv[w];
			*i = wi[w];
		}
	__syncthreads();        /* wv, wi are free for the next call */
}

/*
 * One pass of topk.c's reference rule over n values: the best (value(i),
 * i) that comes after (*v, *i) in the order, i.e. the best not yet taken
 * when the earlier passes took everything before it (*i = -1 before the
 * first pass).  Updates *v, *i in every thread.  NaN ranks as -inf.
 */
template <class F>
__device__ static inline void tf_best_next(int n, F value, float *v, int *i)
{
	float bv = -INFINITY;
	int bi = -1;

	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float x = value(j);
		x = isnan(x) ? -INFINITY : x;
		bool after = *i < 0 || x < *v || (x == *v && j > *i);
		if (after && tf_best_beats(x, j, bv, bi)) {
			bv = x;
			bi = j;
		}
	}
	tf_best_block(&bv, &bi);
	*v = bv;
	*i = bi;
}

#endif /* TF_CUDA_BEST_CUH */
