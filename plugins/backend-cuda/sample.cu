/*
 * sample.cu - one token per row of logits on the device; see kernels.h.
 *
 * Two launches.  Each row's vocabulary is cut into up to SAMPLE_SLICES
 * slices of at least top_k (and SAMPLE_SLICE_MIN) tokens, a block each, which find the slice's
 * top_k (scaled logit, id) best first by top_k block reductions, each the
 * best after the last one.  Then a block per row does the same over those
 * candidates (the row's top_k are among them), which gives the order
 * tf_sampler_sample_ref sorts the vocabulary in, and thread 0 follows
 * tf_sampler_sample_ref step by step on the top_k: softmax (float exp,
 * double sum), re-sort by probability, the top-p cut, min-p and
 * renormalisation, and the walk to u.  u is tf_sampler_uniform's hash of
 * (seed, seq, pos), so the draw needs no random state on the device.
 */
#include <math.h>

#include "best.cuh"
#include "kernels.h"
#include "tf_launch.h"

#define SAMPLE_THREADS 256
/* Blocks per row in the first pass: a decode step's row still fills a GPU. */
#define SAMPLE_SLICES 64
/* Fewest tokens in a slice: smaller ones cost more reductions than they save. */
#define SAMPLE_SLICE_MIN 2048

/* splitmix64's finaliser, as core/src/engine/sampler.c. */
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
__device__ static int32_t draw(const tf_cuda_sample_par &par, int *id, float *p, int m,
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

/* The candidates' layout: rows of `slices` slices of k (value, id) pairs. */
struct cand_of {
	float *v;
	int32_t *id;
	int slices, len, k;             /* len: tokens per slice (the last may hold fewer) */
};

/* Block (slice, row): the slice's k best (scaled logit, id), best first.  A
 * slice shorter than k (only the last can be) pads with -inf and id -1,
 * at the end of the row's candidates, where no real one comes after them. */
__global__ static void slice_kernel(float t, const float *logits, int n_vocab, int64_t ld,
				    cand_of c)
{
	const int64_t lo = (int64_t)blockIdx.x * c.len;
	const int n = n_vocab - lo < c.len ? (int)(n_vocab - lo) : c.len;
	const float *l = logits + (int64_t)blockIdx.y * ld + lo;
	const int64_t at = ((int64_t)blockIdx.y * c.slices + blockIdx.x) * c.k;
	float pv = INFINITY;
	int pi = -1;

	for (int j = 0; j < c.k; j++) {
		if (j < n)
			tf_best_next(n, [&](int i) { return l[i] / t; }, &pv, &pi);
		if (threadIdx.x == 0) {
			c.v[at + j] = j < n ? pv : -INFINITY;
			c.id[at + j] = j < n ? (int32_t)(lo + pi) : -1;
		}
	}
}

/* One block per row: the k best of its candidates, then the draw.  Equal
 * values sit in candidate order as in id order (slices ascending, ids
 * ascending inside one), so the lower-index rule picks the lower id. */
__global__ static void sample_kernel(tf_cuda_sample_par par, cand_of c, const uint64_t *seq,
				     const uint64_t *pos, int32_t *token)
{
	__shared__ int cid[TF_CUDA_SAMPLE_MAX_K];
	__shared__ float cp[TF_CUDA_SAMPLE_MAX_K];
	const int64_t at = (int64_t)blockIdx.x * c.slices * c.k;
	float pv = INFINITY;
	int pi = -1;

	for (int j = 0; j < c.k; j++) {
		tf_best_next(c.slices * c.k, [&](int i) { return c.v[at + i]; }, &pv, &pi);
		if (threadIdx.x == 0) {
			cid[j] = c.id[at + pi];
			cp[j] = pv;
		}
	}
	if (threadIdx.x)
		return;
	if (!(par.temperature > 0)) {
		token[blockIdx.x] = cp[0] == -INFINITY ? -1 : cid[0];
		return;
	}
	uint64_t h = mix64(par.seed ^ mix64(seq[blockIdx.x] ^ mix64(pos[blockIdx.x])));
	token[blockIdx.x] = draw(par, cid, cp, c.k, (double)(h >> 11) * 0x1.0p-53);
}

extern "C" size_t tf_cuda_sample_scratch_bytes(int64_t rows)
{
	return (size_t)rows * SAMPLE_SLICES * TF_CUDA_SAMPLE_MAX_K *
	       (sizeof(float) + sizeof(int32_t));
}

extern "C" int tf_cuda_sample(cudaStream_t stream, const tf_cuda_sample_par *par,
			      const float *logits, int64_t rows, int n_vocab, int64_t ld,
			      const uint64_t *seq, const uint64_t *pos, void *scratch,
			      int32_t *token)
{
	bool greedy = !(par->temperature > 0);
	cand_of c;

	if (n_vocab < 1 || ld < n_vocab || rows < 0 || rows > 65535 ||
	    (!greedy && (!(par->temperature < 1e6f) || par->top_k < 1 ||
			 par->top_k > TF_CUDA_SAMPLE_MAX_K || !(par->top_p > 0) ||
			 !(par->top_p <= 1) || !(par->min_p >= 0) || !(par->min_p <= 1))))
		return cudaErrorInvalidValue;
	if (rows == 0)
		return cudaSuccess;
	/* Slices of at least k tokens, so only the last can be short. */
	c.k = greedy ? 1 : (par->top_k < n_vocab ? par->top_k : n_vocab);
	c.len = (n_vocab + SAMPLE_SLICES - 1) / SAMPLE_SLICES;
	c.len = c.len > SAMPLE_SLICE_MIN ? c.len : SAMPLE_SLICE_MIN;
	c.len = c.len > c.k ? c.len : c.k;
	c.slices = (n_vocab + c.len - 1) / c.len;
	c.v = (float *)scratch;
	c.id = (int32_t *)(c.v + rows * c.slices * c.k);
	TF_LAUNCH(dim3((unsigned)c.slices, (unsigned)rows), SAMPLE_THREADS, 0, stream,
		  slice_kernel)(greedy ? 1.0f : par->temperature, logits, n_vocab, ld,
				 c);
	TF_LAUNCH((unsigned)rows, SAMPLE_THREADS, 0, stream, sample_kernel)(*par, c, seq, pos,
									     token);
	return cudaGetLastError();
}
