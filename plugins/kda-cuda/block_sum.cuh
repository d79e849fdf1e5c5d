/*
 * block_sum.cuh - sums over the threads of a block in a fixed tree order
 * (so results do not depend on the schedule), for blocks of at most
 * KDA_CUDA_MAX_DIM threads: prep.cu's L2 norms, gated_norm.cu's RMSNorm.
 */
#ifndef TF_KDA_BLOCK_SUM_CUH
#define TF_KDA_BLOCK_SUM_CUH

#include "kda_cuda.h"
#include "tf_launch.h"        /* the device model, under the harness */

/* v[k] <- the sum of every thread's v[k], for k < N, on every thread.
 * buf: N x KDA_CUDA_MAX_DIM floats of __shared__ memory. */
template <int N>
__device__ static inline void kda_block_sums(float (*buf)[KDA_CUDA_MAX_DIM], float v[N])
{
	const int n = blockDim.x, i = threadIdx.x;
	int s = 1;
	while (2 * s < n)
		s <<= 1;
	for (int k = 0; k < N; k++)
		buf[k][i] = v[k];
	__syncthreads();
	for (; s > 0; s >>= 1) {
		if (i < s && i + s < n)
			for (int k = 0; k < N; k++)
				buf[k][i] += buf[k][i + s];
		__syncthreads();
	}
	for (int k = 0; k < N; k++)
		v[k] = buf[k][0];
	/* Every thread has read the sums before buf is written again. */
	__syncthreads();
}

__device__ static inline float kda_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

#endif /* TF_KDA_BLOCK_SUM_CUH */
