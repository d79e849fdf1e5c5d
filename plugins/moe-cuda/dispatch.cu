/*
 * dispatch.cu - n tokens' expert choices bucketed by expert, and expert
 * outputs added back to their tokens; see moe_cuda.h.
 *
 * A counting sort in three launches, with no atomic whose order shows:
 * each chunk of DISPATCH_CHUNK tokens counts its choices per expert
 * (hist), one block turns the counts into bucket offsets and each chunk's
 * start inside every bucket (scan), and each token finds its row as its
 * chunk's start plus the earlier tokens of the chunk that chose the same
 * expert (scatter).  Buckets list tokens ascending, as moe_layer.c's do.
 */
#include "moe_cuda.h"
#include "tf_launch.h"

#define DISPATCH_CHUNK 32
#define SCAN_THREADS 1024       /* one thread per expert: TF_MOE_CUDA_MAX_EXPERTS */
#define COMBINE_THREADS 256

static int64_t chunks(int64_t n)
{
	return (n + DISPATCH_CHUNK - 1) / DISPATCH_CHUNK;
}

static size_t align256(size_t b)
{
	return (b + 255) & ~(size_t)255;
}

extern "C" size_t tf_moe_cuda_plan_bytes(int n_experts, int top_k, int64_t n)
{
	size_t nk = (size_t)(n * top_k), E = (size_t)n_experts;

	return align256((E + 1) * 4) + 2 * align256(nk * 4) + align256(nk * sizeof(float)) +
	       align256(E * 4) + align256(4) + align256((size_t)chunks(n) * E * 4);
}

extern "C" void tf_moe_cuda_plan_init(tf_moe_cuda_plan *p, void *mem, int n_experts,
				      int top_k, int64_t n)
{
	size_t nk = (size_t)(n * top_k), E = (size_t)n_experts;
	char *at = (char *)mem;

	p->off = (int32_t *)at;
	at += align256((E + 1) * 4);
	p->tok = (int32_t *)at;
	at += align256(nk * 4);
	p->pos = (int32_t *)at;
	at += align256(nk * 4);
	p->tok_w = (float *)at;
	at += align256(nk * sizeof(float));
	p->active = (int32_t *)at;
	at += align256(E * 4);
	p->n_active = (int32_t *)at;
	at += align256(4);
	p->chunk_base = (int32_t *)at;
}

/* counts[c, e]: choices of expert e among chunk c's tokens.  Ids outside
 * 0 .. E-1 are not counted (scatter gives them row -1). */
__global__ static void hist_kernel(const int32_t *idx, int64_t n, int E, int k,
				   int32_t *counts)
{
	__shared__ int cnt[TF_MOE_CUDA_MAX_EXPERTS];
	int64_t t = blockIdx.x * (int64_t)DISPATCH_CHUNK + threadIdx.x;

	for (int e = threadIdx.x; e < E; e += blockDim.x)
		cnt[e] = 0;
	__syncthreads();
	for (int j = 0; t < n && j < k; j++) {
		int32_t e = idx[t * k + j];
		if (e >= 0 && e < E)
			atomicAdd(&cnt[e], 1);  /* a count: the order of adds cannot show */
	}
	__syncthreads();
	for (int e = threadIdx.x; e < E; e += blockDim.x)
		counts[blockIdx.x * (int64_t)E + e] = cnt[e];
}

/* Inclusive prefix sum of v over the block (blockDim.x = SCAN_THREADS). */
__device__ static int block_scan(int v)
{
	__shared__ int buf[2][SCAN_THREADS];
	int from = 0;

	buf[0][threadIdx.x] = v;
	__syncthreads();
	for (unsigned d = 1; d < blockDim.x; d <<= 1) {
		int x = buf[from][threadIdx.x];
		if (threadIdx.x >= d)
			x += buf[from][threadIdx.x - d];
		buf[from ^ 1][threadIdx.x] = x;
		from ^= 1;
		__syncthreads();
	}
	return buf[from][threadIdx.x];
}

/* One block, thread e for expert e: off, active, n_active, and counts
 * turned in place into each chunk's first row in bucket e. */
__global__ static void scan_kernel(int32_t *counts, int64_t n_chunks, int E, int32_t *off,
				   int32_t *active, int32_t *n_active)
{
	int e = threadIdx.x;
	int total = 0;

	for (int64_t c = 0; e < E && c < n_chunks; c++)
		total += counts[c * E + e];
	int end = block_scan(total);
	int rank = block_scan(e < E && total > 0);
	if (e >= E)
		return;
	off[e + 1] = end;
	if (e == 0)
		off[0] = 0;
	if (total > 0)
		active[rank - 1] = e;
	if (e == E - 1)
		*n_active = rank;
	int run = end - total;
	for (int64_t c = 0; c < n_chunks; c++) {
		int here = counts[c * E + e];
		counts[c * E + e] = run;
		run += here;
	}
}

/* Thread t of chunk c places token t's choices. */
__global__ static void scatter_kernel(const int32_t *idx, const float *w, int64_t n, int E,
				      int k, tf_moe_cuda_plan p)
{
	int64_t t0 = blockIdx.x * (int64_t)DISPATCH_CHUNK, t = t0 + threadIdx.x;

	for (int j = 0; t < n && j < k; j++) {
		int32_t e = idx[t * k + j], row = -1;
		if (e >= 0 && e < E) {
			row = p.chunk_base[blockIdx.x * (int64_t)E + e];
			for (int64_t u = t0; u < t; u++)
				for (int i = 0; i < k; i++)
					row += idx[u * k + i] == e;
			p.tok[row] = (int32_t)t;
			p.tok_w[row] = w[t * k + j];
		}
		p.pos[t * k + j] = row;
	}
}

extern "C" int tf_moe_cuda_dispatch(cudaStream_t stream, const tf_moe_cuda_plan *p,
				    const int32_t *idx, const float *w, int64_t n,
				    int n_experts, int top_k)
{
	int64_t nc = chunks(n);

	if (n_experts < 1 || n_experts > TF_MOE_CUDA_MAX_EXPERTS || top_k < 1 ||
	    top_k > TF_MOE_CUDA_MAX_TOPK || n < 0 || n > 0x7fffffff / top_k)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	TF_LAUNCH((unsigned)nc, DISPATCH_CHUNK, 0, stream, hist_kernel)(idx, n, n_experts, top_k,
									 p->chunk_base);
	TF_LAUNCH(1, SCAN_THREADS, 0, stream, scan_kernel)(p->chunk_base, nc, n_experts, p->off,
							     p->active, p->n_active);
	TF_LAUNCH((unsigned)nc, DISPATCH_CHUNK, 0, stream, scatter_kernel)(idx, w, n, n_experts,
									    top_k, *p);
	return cudaGetLastError();
}

/* One block per token: its rows sorted by expert id by thread 0, then
 * every column summed in that order onto y, as moe_layer.c's scatter. */
__global__ static void combine_kernel(tf_moe_cuda_plan p, const float *const *gate,
				      const tf_moe_cuda_exl3 *gate_q, const int32_t *idx, int k,
				      int64_t H, const float *o, float *y)
{
	__shared__ int32_t exp_s[TF_MOE_CUDA_MAX_TOPK], row_s[TF_MOE_CUDA_MAX_TOPK];
	int64_t t = blockIdx.x;

	if (threadIdx.x == 0) {
		for (int j = 0; j < k; j++) {
			int32_t e = idx[t * k + j], row = p.pos[t * k + j];
			int i = j;
			for (; i > 0 && exp_s[i - 1] > e; i--) {
				exp_s[i] = exp_s[i - 1];
				row_s[i] = row_s[i - 1];
			}
			exp_s[i] = e;
			const bool here = gate_q ? gate_q[e].trellis != NULL : !gate || gate[e];
			row_s[i] = row >= 0 && here ? row : -1;
		}
	}
	__syncthreads();
	for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
		float acc = y[t * H + c];
		for (int j = 0; j < k; j++)
			if (row_s[j] >= 0)
				acc += p.tok_w[row_s[j]] * o[row_s[j] * H + c];
		y[t * H + c] = acc;
	}
}

extern "C" int tf_moe_cuda_combine(cudaStream_t stream, const tf_moe_cuda_plan *p,
				   const tf_moe_cuda_mlp_w *routed,
				   const tf_moe_cuda_exl3_w *routed_q, const int32_t *idx,
				   int64_t n, int top_k, const float *o, float *y)
{
	const int hidden = routed_q ? routed_q->hidden : routed->hidden;
	if (top_k < 1 || top_k > TF_MOE_CUDA_MAX_TOPK || n < 0 || n > 0x7fffffff / top_k ||
	    hidden < 1)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	TF_LAUNCH((unsigned)n, COMBINE_THREADS, 0, stream, combine_kernel)(
		*p, routed_q ? NULL : routed->gate, routed_q ? routed_q->gate : NULL, idx, top_k,
		hidden, o, y);
	return cudaGetLastError();
}
