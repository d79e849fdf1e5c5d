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
#include "mlp.cuh"

#define MLP_WARPS 8
#define MLP_ROWS 4

__device__ static inline float warp_sum(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

/*
 * out[p, c] = act(in[p] . w0[e][c], in[p] . w1[e][c]) when GLU, else
 * in[p] . w0[e][c], for the block's rows p and the warp's column c; input
 * row p is in[tok[p]] when tok is given.  K inputs, N outputs, weight
 * rows ldw floats apart.  Experts whose gate pointer is NULL are another
 * rank's: skipped.
 */
template <bool GLU>
__global__ static void rows_linear(tf_moe_rows rs, const float *const *gate,
				   const float *const *w0, const float *const *w1, const float *in,
				   int64_t K, int64_t ldw, int64_t N, float limit, float *out)
{
	const int lane = threadIdx.x & 31;
	const int64_t c = blockIdx.x * (int64_t)MLP_WARPS + (threadIdx.x >> 5);
	int e;
	int64_t r0, r1;

	if (!tf_moe_block_rows(rs, &e, &r0, &r1) || !gate[e] || c >= N)
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
			out[(p0 + r) * N + c] = GLU ? tf_moe_swiglu(g, u, limit) : g;
		}
	}
}

extern "C" int tf_moe_cuda_mlp(cudaStream_t stream, const tf_moe_cuda_mlp_w *m,
			       const tf_moe_cuda_plan *plan, int top_k, const float *x,
			       int64_t n, float *h, float *o)
{
	tf_moe_rows rs;
	unsigned slots;

	if (m->hidden < 1 || m->inter < 1 || m->n_experts < 1 || !(m->limit >= 0) || n < 0 ||
	    (m->down_ld && m->down_ld < m->inter) ||
	    !tf_moe_rows_init(plan, top_k, n, m->n_experts, &rs, &slots))
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
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
