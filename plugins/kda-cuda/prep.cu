/*
 * prep.cu - the KDA layer between its input projections and the delta
 * rule (kda_cuda.h tf_kda_cuda_prep), as plugins/kda/kda.c's kda_head
 * does it on the CPU: one block per (head, segment), one thread per
 * channel of the head, the tokens of the segment in order because each
 * channel's conv history carries from one to the next.
 */
#include "block_sum.cuh"

/* fla's l2norm: eps inside the root (kda.c KDA_L2_EPS). */
#define KDA_CUDA_L2_EPS 1e-6f

enum { KDA_Q, KDA_K, KDA_V, KDA_NCONV };

/* torch softplus, beta 1, threshold 20 (tensor_util.h tf_tu_softplus). */
__device__ static inline float kda_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__global__ static void __launch_bounds__(KDA_CUDA_MAX_DIM)
prep_kernel(tf_kda_cuda_layer L, tf_kda_cuda_act a, const tf_kda_cuda_seg *segs)
{
	__shared__ float buf[2][KDA_CUDA_MAX_DIM];
	const tf_kda_cuda_seg sg = segs[blockIdx.y];
	const int h = blockIdx.x, D = L.dim, back = L.width - 1;
	const int64_t P = (int64_t)L.heads * D, ch = (int64_t)h * D + threadIdx.x;
	const float qscale = 1.0f / sqrtf((float)D), ah = L.a_exp[h], bias = L.dt_bias[ch];
	float *const x[KDA_NCONV] = { a.q, a.k, a.v };
	float hist[KDA_NCONV][KDA_CUDA_MAX_CONV - 1];
	const float *w[KDA_NCONV];

	for (int s = 0; s < KDA_NCONV; s++) {
		w[s] = L.conv_w[s] + ch * L.width;
#pragma unroll
		for (int j = 0; j < KDA_CUDA_MAX_CONV - 1; j++)
			hist[s][j] = j < back ? sg.conv[(s * P + ch) * back + j] : 0.0f;
	}
	for (int64_t t = 0; t < sg.n; t++) {
		const int64_t at = (sg.row0 + t) * P + ch;
		float y[KDA_NCONV];
		/* kda.c's kda_conv_step: the taps oldest first, the newest on
		 * this token's raw input, which joins the history. */
		for (int s = 0; s < KDA_NCONV; s++) {
			const float raw = x[s][at];
			float acc = 0.0f;
#pragma unroll
			for (int j = 0; j < KDA_CUDA_MAX_CONV - 1; j++)
				if (j < back)
					acc += w[s][j] * hist[s][j];
			acc += w[s][back] * raw;
#pragma unroll
			for (int j = 0; j < KDA_CUDA_MAX_CONV - 1; j++)
				if (j < back)
					hist[s][j] = j + 1 < back ? hist[s][j + 1] : raw;
			y[s] = acc / (1.0f + expf(-acc));
		}
		float ss[2] = { y[KDA_Q] * y[KDA_Q], y[KDA_K] * y[KDA_K] };
		kda_block_sums<2>(buf, ss);
		a.q[at] = y[KDA_Q] * (qscale / sqrtf(ss[0] + KDA_CUDA_L2_EPS));
		a.k[at] = y[KDA_K] * (1.0f / sqrtf(ss[1] + KDA_CUDA_L2_EPS));
		a.v[at] = y[KDA_V];

		const float f = a.g[at] + bias;
		a.g[at] = L.safe_gate ? L.lower_bound * kda_sigmoid(ah * f) : -ah * kda_softplus(f);
		if (threadIdx.x == 0) {
			float *b = a.beta + (sg.row0 + t) * L.heads + h;
			*b = kda_sigmoid(*b);
		}
	}
	for (int s = 0; s < KDA_NCONV; s++)
#pragma unroll
		for (int j = 0; j < KDA_CUDA_MAX_CONV - 1; j++)
			if (j < back)
				sg.conv[(s * P + ch) * back + j] = hist[s][j];
}

extern "C" int tf_kda_cuda_prep(cudaStream_t stream, const tf_kda_cuda_layer *L,
				const tf_kda_cuda_act *a, const tf_kda_cuda_seg *seg, int n_seg)
{
	int rc = tf_kda_cuda_check(L->heads, L->dim, L->dim, n_seg);
	if (rc)
		return rc;
	if (L->width < 1 || L->width > KDA_CUDA_MAX_CONV)
		return cudaErrorInvalidValue;
	TF_LAUNCH(dim3(L->heads, n_seg), L->dim, 0, stream, prep_kernel)(*L, *a, seg);
	return cudaGetLastError();
}
