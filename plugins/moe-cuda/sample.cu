/*
 * sample.cu - one token per row of logits on the device; see moe_cuda.h.
 *
 * One block per row.  The top_k candidates come best first from top_k
 * block reductions, each the best (scaled logit, lower id) after the last
 * one: the order tf_sampler_sample_ref sorts the vocabulary in.  Thread 0
 * then follows tf_sampler_sample_ref step by step on those few: softmax
 * (float exp, double sum), re-sort by probability, the top-p cut, min-p
 * and renormalisation, and the walk to u.  u is tf_sampler_uniform's hash
 * of (seed, seq, pos), so the draw needs no random state on the device.
 */
#include <math.h>

#include "best.cuh"
#include "moe_cuda.h"
#include "tf_launch.h"

#define SAMPLE_THREADS 256

/* splitmix64's finaliser, as core/src/sampler.c. */
__device__ static inline uint64_t mix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Larger p first, lower id on ties: sampler.c's cand_cmp. */
__device__ static inline bool cand_before(float p, int id, float q, int jd)
{
	return p > q || (p == q && id < jd);
}

/* Renormalise p[0 .. m) to sum 1 (double sum), as min_p_cut's tail. */
__device__ static void normalise(float *p, int m)
{
	double z = 0;
	for (int i = 0; i < m; i++)
		z += p[i];
	for (int i = 0; i < m; i++)
		p[i] = (float)(p[i] / z);
}

/* The draw from candidates id[0 .. m), values p: scaled logits, best first. */
__device__ static int32_t draw(const tf_moe_cuda_sample_par &par, int *id, float *p, int m,
			       double u)
{
	float mx = -INFINITY;
	double z = 0;

	for (int i = 0; i < m; i++)
		mx = p[i] > mx ? p[i] : mx;
	if (mx == -INFINITY)
		return -1;
	for (int i = 0; i < m; i++) {
		p[i] = expf(p[i] - mx);
		z += p[i];
	}
	for (int i = 0; i < m; i++)
		p[i] = (float)(p[i] / z);
	/* Distinct logits can round to one probability: re-order by it. */
	for (int i = 1; i < m; i++) {
		float pv = p[i];
		int iv = id[i], j = i;
		for (; j > 0 && cand_before(pv, iv, p[j - 1], id[j - 1]); j--) {
			p[j] = p[j - 1];
			id[j] = id[j - 1];
		}
		p[j] = pv;
		id[j] = iv;
	}
	if (par.top_p < 1) {
		double acc = 0;
		int i;
		for (i = 0; i < m; i++) {
			acc += p[i];
			if (acc >= par.top_p)
				break;
		}
		m = i < m ? i + 1 : m;
	}
	if (par.min_p > 0) {
		float pmax = 0;
		int k = 0;
		for (int i = 0; i < m; i++)
			pmax = p[i] > pmax ? p[i] : pmax;
		for (int i = 0; i < m; i++)
			if (p[i] >= par.min_p * pmax) {
				p[k] = p[i];
				id[k++] = id[i];
			}
		m = k;
	}
	normalise(p, m);
	double acc = 0;
	int i;
	for (i = 0; i + 1 < m; i++) {
		acc += p[i];
		if (u < acc)
			break;
	}
	return id[i];
}

__global__ static void sample_kernel(tf_moe_cuda_sample_par par, const float *logits,
				     int n_vocab, const uint64_t *seq, const uint64_t *pos,
				     int32_t *token)
{
	__shared__ int cid[TF_MOE_CUDA_SAMPLE_MAX_K];
	__shared__ float cp[TF_MOE_CUDA_SAMPLE_MAX_K];
	const float *l = logits + (int64_t)blockIdx.x * n_vocab;
	const bool greedy = !(par.temperature > 0);
	const float t = greedy ? 1.0f : par.temperature;
	const int k = greedy ? 1 : (par.top_k < n_vocab ? par.top_k : n_vocab);
	float pv = INFINITY;
	int pi = -1;

	for (int j = 0; j < k; j++) {
		tf_best_next(n_vocab, [&](int i) { return l[i] / t; }, &pv, &pi);
		if (threadIdx.x == 0) {
			cid[j] = pi;
			cp[j] = pv;
		}
	}
	if (threadIdx.x)
		return;
	if (greedy) {
		token[blockIdx.x] = cp[0] == -INFINITY ? -1 : cid[0];
		return;
	}
	uint64_t h = mix64(par.seed ^ mix64(seq[blockIdx.x] ^ mix64(pos[blockIdx.x])));
	token[blockIdx.x] = draw(par, cid, cp, k, (double)(h >> 11) * 0x1.0p-53);
}

extern "C" int tf_moe_cuda_sample(cudaStream_t stream, const tf_moe_cuda_sample_par *par,
				  const float *logits, int64_t rows, int n_vocab,
				  const uint64_t *seq, const uint64_t *pos, int32_t *token)
{
	bool greedy = !(par->temperature > 0);

	if (n_vocab < 1 || rows < 0 || rows > 0x7fffffff ||
	    (!greedy && (!(par->temperature < 1e6f) || par->top_k < 1 ||
			 par->top_k > TF_MOE_CUDA_SAMPLE_MAX_K || !(par->top_p > 0) ||
			 !(par->top_p <= 1) || !(par->min_p >= 0) || !(par->min_p <= 1))))
		return cudaErrorInvalidValue;
	if (rows == 0)
		return cudaSuccess;
	TF_LAUNCH((unsigned)rows, SAMPLE_THREADS, 0, stream, sample_kernel)(*par, logits, n_vocab,
									     seq, pos, token);
	return cudaGetLastError();
}
