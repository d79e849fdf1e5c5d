/*
 * mlp.cu - SwiGLU MLPs over the rows of each expert; see moe_cuda.h.
 *
 * Two launches: gate and up with the activation (h = act(x Wg^T, x Wu^T)),
 * then down (o = h Wd^T).  A block serves one expert (blockIdx.y, an entry
 * of the plan's active list) and MLP_WARPS output columns (blockIdx.x), a
 * warp per column: lanes walk the weight row once per MLP_ROWS rows of
 * the expert, so a decode step (a row or two per expert) reads each weight
 * once, coalesced.  Blocks past the active list return at once.
 */
#include <math.h>

#include "moe_cuda.h"
#include "tf_launch.h"

#define MLP_WARPS 8
#define MLP_ROWS 4

/* What both launches share: which rows, where they come from. */
struct rows_of {
	const int32_t *off, *active, *n_active, *tok;   /* off NULL: expert 0, rows [0, n) */
	int64_t n;
};

__device__ static inline float warp_sum(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

/* The block's expert and rows [*r0, *r1); false when it has none. */
__device__ static inline bool block_rows(const rows_of &rs, int *e, int64_t *r0, int64_t *r1)
{
	if (!rs.off) {
		*e = 0;
		*r0 = 0;
		*r1 = rs.n;
		return true;
	}
	if ((int)blockIdx.y >= *rs.n_active)
		return false;
	*e = rs.active[blockIdx.y];
	*r0 = rs.off[*e];
	*r1 = rs.off[*e + 1];
	return true;
}

/*
 * out[p, c] = act(in[p] . w0[e][c], in[p] . w1[e][c]) when GLU, else
 * in[p] . w0[e][c], for the block's rows p and the warp's column c; input
 * row p is in[tok[p]] when tok is given.  K inputs, N outputs, weight
 * rows ldw floats apart.  Experts whose gate pointer is NULL are another
 * rank's: skipped.
 */
template <bool GLU>
__global__ static void rows_linear(rows_of rs, const float *const *gate, const float *const *w0,
				   const float *const *w1, const float *in, int64_t K, int64_t ldw,
				   int64_t N, float limit, float *out)
{
	const int lane = threadIdx.x & 31;
	const int64_t c = blockIdx.x * (int64_t)MLP_WARPS + (threadIdx.x >> 5);
	int e;
	int64_t r0, r1;

	if (!block_rows(rs, &e, &r0, &r1) || !gate[e] || c >= N)
		return;
	const float *a = w0[e] + c * ldw, *b = GLU ? w1[e] + c * ldw : a;
	for (int64_t p0 = r0; p0 < r1; p0 += MLP_ROWS) {
		const float *x[MLP_ROWS];
		float acc0[MLP_ROWS] = { 0 }, acc1[MLP_ROWS] = { 0 };
		int m = r1 - p0 < MLP_ROWS ? (int)(r1 - p0) : MLP_ROWS;
		for (int r = 0; r < m; r++)
			x[r] = in + (rs.tok ? rs.tok[p0 + r] : p0 + r) * K;
		for (int64_t i = lane; i < K; i += 32) {
			float wa = a[i], wb = GLU ? b[i] : 0.0f;
			for (int r = 0; r < m; r++) {
				acc0[r] += x[r][i] * wa;
				if (GLU)
					acc1[r] += x[r][i] * wb;
			}
		}
		for (int r = 0; r < m; r++) {
			float g = warp_sum(acc0[r]), u = GLU ? warp_sum(acc1[r]) : 0.0f;
			if (lane)
				continue;
			if (GLU) {      /* backend ops_ref.c's swiglu */
				float s = g / (1.0f + expf(-g));
				if (limit > 0.0f) {
					s = fminf(s, limit);
					u = fminf(fmaxf(u, -limit), limit);
				}
				g = s * u;
			}
			out[(p0 + r) * N + c] = g;
		}
	}
}

extern "C" int tf_moe_cuda_mlp(cudaStream_t stream, const tf_moe_cuda_mlp_w *m,
			       const tf_moe_cuda_plan *plan, int top_k, const float *x,
			       int64_t n, float *h, float *o)
{
	rows_of rs = { NULL, NULL, NULL, NULL, n };
	unsigned slots = 1;

	if (m->hidden < 1 || m->inter < 1 || m->n_experts < 1 || !(m->limit >= 0) || n < 0 ||
	    (m->down_ld && m->down_ld < m->inter) ||
	    (plan && (top_k < 1 || n > 0x7fffffff / top_k)))
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	if (plan) {
		rs = rows_of{ plan->off, plan->active, plan->n_active, plan->tok, n * top_k };
		/* Experts with rows: at most one per row. */
		slots = (unsigned)(n * top_k < m->n_experts ? n * top_k : m->n_experts);
		if (slots > 65535)
			return cudaErrorInvalidValue;
	}
	dim3 up_grid((unsigned)((m->inter + MLP_WARPS - 1) / MLP_WARPS), slots);
	dim3 down_grid((unsigned)((m->hidden + MLP_WARPS - 1) / MLP_WARPS), slots);
	TF_LAUNCH(up_grid, MLP_WARPS * 32, 0, stream, rows_linear<true>)(rs, m->gate, m->gate,
									  m->up, x, m->hidden,
									  m->hidden, m->inter,
									  m->limit, h);
	rs.tok = NULL;
	const int64_t ld = m->down_ld ? m->down_ld : m->inter;
	TF_LAUNCH(down_grid, MLP_WARPS * 32, 0, stream, rows_linear<false>)(rs, m->gate, m->down,
									     m->down, h, m->inter, ld,
									     m->hidden, 0.0f, o);
	return cudaGetLastError();
}
