/*
 * gated_norm.cu - KDA's output norm (kda_cuda.h tf_kda_cuda_gated_norm):
 * per row and head, RMSNorm with the shared o_norm weight, then times
 * sigmoid(gate), as plugins/kda/kda.c's kda_head ends.  One block per
 * (row, head), one thread per channel.
 */
#include "block_sum.cuh"

__global__ static void __launch_bounds__(KDA_CUDA_MAX_DIM)
gated_norm_kernel(tf_kda_cuda_layer L, tf_kda_cuda_act a)
{
	__shared__ float buf[1][KDA_CUDA_MAX_DIM];
	const int D = L.dim, c = threadIdx.x;
	const int64_t at = (int64_t)blockIdx.x * L.heads * D + (int64_t)blockIdx.y * D + c;
	const float o = a.o[at];
	float ss[1] = { o * o };
	kda_block_sums<1>(buf, ss);
	const float r = 1.0f / sqrtf(ss[0] / (float)D + L.eps);
	a.o[at] = o * r * L.o_norm[c] * kda_sigmoid(a.gate[at]);
}

extern "C" int tf_kda_cuda_gated_norm(cudaStream_t stream, const tf_kda_cuda_layer *L,
				      const tf_kda_cuda_act *a, int64_t n)
{
	int rc = tf_kda_cuda_check(L->heads, L->dim, L->dim, 1);
	if (rc || n == 0)
		return rc;
	if (n < 0 || n > 0x7fffffff || L->heads > 65535)
		return cudaErrorInvalidValue;
	TF_LAUNCH(dim3((unsigned)n, L->heads), L->dim, 0, stream, gated_norm_kernel)(*L, *a);
	return cudaGetLastError();
}
