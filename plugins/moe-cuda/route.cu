/*
 * route.cu - the Ling router on the device; see moe_cuda.h.
 *
 * Two launches.  The gate GEMV in fp32 spreads over the GPU: a warp per
 * expert (lanes along hidden), GATE_ROWS tokens per pass over its row.
 * Then a block per token picks: warps take groups for their scores, and
 * both picks follow plugins/router/topk.c's reference rule (k passes, each
 * the best not yet taken, lower index on ties): the groups' (at most 64)
 * by one thread, the experts' as block reductions.
 */
#include <math.h>

#include "best.cuh"
#include "moe_cuda.h"
#include "tf_launch.h"

#define ROUTE_THREADS 256
#define GATE_WARPS 8
#define GATE_ROWS 4

__device__ static inline float warp_sum(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

/* The larger two of a warp's (a, b) pairs, a >= b: gate.c's group score. */
__device__ static inline void warp_top2(float *a, float *b)
{
	for (int off = 16; off > 0; off >>= 1) {
		float oa = __shfl_xor_sync(0xffffffffu, *a, off);
		float ob = __shfl_xor_sync(0xffffffffu, *b, off);
		float lo = fminf(*a, oa);
		*a = fmaxf(*a, oa);
		*b = fmaxf(lo, fmaxf(*b, ob));
	}
}

/* logits[t, e] = x[t] . gate[e] for the block's experts and tokens. */
__global__ static void gate_kernel(const float *gate, const float *x, int64_t n, int H, int E,
				   float *logits)
{
	const int lane = threadIdx.x & 31, e = blockIdx.x * GATE_WARPS + (threadIdx.x >> 5);
	const int64_t t0 = blockIdx.y * (int64_t)GATE_ROWS;
	const int m = n - t0 < GATE_ROWS ? (int)(n - t0) : GATE_ROWS;
	float acc[GATE_ROWS] = { 0 };

	if (e >= E)
		return;
	const float *w = gate + (int64_t)e * H;
	for (int i = lane; i < H; i += 32) {
		float wi = w[i];
		for (int r = 0; r < m; r++)
			acc[r] += x[(t0 + r) * H + i] * wi;
	}
	for (int r = 0; r < m; r++) {
		float v = warp_sum(acc[r]);
		if (lane == 0)
			logits[(t0 + r) * E + e] = v;
	}
}

__global__ static void route_kernel(tf_moe_cuda_router r, const float *logits, int32_t *idx,
				    float *w)
{
	__shared__ float s[TF_MOE_CUDA_MAX_EXPERTS], sb[TF_MOE_CUDA_MAX_EXPERTS];
	__shared__ float gscore[TF_MOE_CUDA_MAX_GROUPS];
	__shared__ int keep[TF_MOE_CUDA_MAX_GROUPS];
	__shared__ int pick[TF_MOE_CUDA_MAX_TOPK];
	const int E = r.n_experts, G = r.n_group, gs = E / G;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	const float *lr = logits + (int64_t)blockIdx.x * E;

	for (int e = threadIdx.x; e < E; e += blockDim.x) {
		s[e] = 1.0f / (1.0f + expf(-lr[e]));
		sb[e] = r.bias ? s[e] + r.bias[e] : s[e];
	}
	__syncthreads();

	if (G > 1) {
		for (int g = warp; g < G; g += warps) {
			float a = -INFINITY, b = -INFINITY;
			for (int i = lane; i < gs; i += 32) {
				float v = sb[g * gs + i];
				b = fmaxf(b, fminf(a, v));
				a = fmaxf(a, v);
			}
			warp_top2(&a, &b);
			if (lane == 0)
				gscore[g] = r.bias && gs > 1 ? a + b : a;
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			for (int g = 0; g < G; g++)
				keep[g] = 0;
			for (int j = 0; j < r.topk_group; j++) {
				int best = -1;
				for (int g = 0; g < G; g++)
					if (!keep[g] && (best < 0 || gscore[g] > gscore[best]))
						best = g;
				keep[best] = 1;
			}
		}
		__syncthreads();
	}

	/* The experts of the kept groups, best first. */
	float pv = INFINITY;
	int pe = -1;
	for (int j = 0; j < r.top_k; j++) {
		tf_best_next(E, [&](int e) { return G > 1 && !keep[e / gs] ? -INFINITY : sb[e]; },
			     &pv, &pe);
		if (threadIdx.x == 0)
			pick[j] = pe;
	}
	__syncthreads();

	if (threadIdx.x == 0) {
		int32_t *ir = idx + (int64_t)blockIdx.x * r.top_k;
		float *wr = w + (int64_t)blockIdx.x * r.top_k, sum = 0.0f;
		for (int j = 0; j < r.top_k; j++) {
			ir[j] = pick[j];
			wr[j] = s[pick[j]];
			sum += wr[j];
		}
		for (int j = 0; j < r.top_k; j++) {
			if (r.norm_topk && r.top_k > 1)
				wr[j] /= sum + 1e-20f;
			wr[j] *= r.scaling;
		}
	}
}

extern "C" int tf_moe_cuda_router_check(const tf_moe_cuda_router *r)
{
	int G = r->n_group;

	if (!r->gate || r->hidden < 1 || r->n_experts < 1 ||
	    r->n_experts > TF_MOE_CUDA_MAX_EXPERTS || G < 1 || G > TF_MOE_CUDA_MAX_GROUPS ||
	    r->n_experts % G || r->top_k < 1 || r->top_k > TF_MOE_CUDA_MAX_TOPK ||
	    !(r->scaling > 0))
		return cudaErrorInvalidValue;
	if (G > 1 && (r->topk_group < 1 || r->topk_group > G ||
		      r->top_k > r->topk_group * (r->n_experts / G)))
		return cudaErrorInvalidValue;
	if (r->top_k > r->n_experts)
		return cudaErrorInvalidValue;
	return cudaSuccess;
}

extern "C" int tf_moe_cuda_route(cudaStream_t stream, const tf_moe_cuda_router *r,
				 const float *x, int64_t n, float *logits, int32_t *idx, float *w)
{
	int rc = tf_moe_cuda_router_check(r);

	if (rc || n > 65535 * (int64_t)GATE_ROWS)
		return rc ? rc : cudaErrorInvalidValue;
	if (n <= 0)
		return cudaSuccess;
	dim3 gate_grid((unsigned)((r->n_experts + GATE_WARPS - 1) / GATE_WARPS),
		       (unsigned)((n + GATE_ROWS - 1) / GATE_ROWS));
	TF_LAUNCH(gate_grid, GATE_WARPS * 32, 0, stream, gate_kernel)(r->gate, x, n, r->hidden,
								       r->n_experts, logits);
	TF_LAUNCH((unsigned)n, ROUTE_THREADS, 0, stream, route_kernel)(*r, logits, idx, w);
	return cudaGetLastError();
}
