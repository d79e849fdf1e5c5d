/*
 * exl3_mlp.cu - SwiGLU MLPs over the rows of each expert with EXL3 weights;
 * see moe_cuda.h.  Each linear is exl3-cuda's (exl3_cuda.cuh):
 * y = Had128(Had128(x ⊙ suh) · Ŵ) ⊙ svh, here over every active expert's
 * rows at once, each expert's trellis, K and codebook its own:
 *
 *   in    xg = Had(x ⊙ suh_gate), xu = Had(x ⊙ suh_up)       [rows, kh]
 *   gemv  yg = xg · Ŵ_gate, yu = xu · Ŵ_up                    [rows, ki]
 *   mid   h = act(Had(yg) ⊙ svh_gate, Had(yu) ⊙ svh_up), 0 past inter;
 *         xd = Had(h ⊙ suh_down), over yg                     [rows, ki]
 *   gemv  yd = xd · Ŵ_down, over xg                           [rows, kh]
 *   out   o = Had(yd) ⊙ svh_down, trimmed to hidden
 *
 * kh and ki are hidden and inter padded to 128: the gate's output blocks
 * are down's input blocks, so the activation and down's input transform
 * are one kernel.  A block serves one expert (blockIdx.y, a slot of the
 * plan's active list, mlp.cuh) and one Hadamard block or GEMV tile column
 * (blockIdx.x); blockIdx.z picks gate or up.  The GEMV takes its expert's
 * rows 8 at a time, decoding the tile column once per pass.  Blocks of an
 * expert another rank holds (its trellis NULL) return at once; a rank's
 * share of the features is only narrower linears (moe_cuda.h).
 */
#include "exl3_cuda.cuh"
#include "mlp.cuh"

#define ROWS TF_EXL3_CUDA_GEMV_ROWS

/* The block's expert and rows; false when it has none or its linear
 * `lin` is another rank's (trellis NULL). */
__device__ static inline bool lin_rows(const tf_moe_rows &rs, const tf_moe_cuda_exl3 *lin, int *e,
				       int64_t *r0, int64_t *r1)
{
	return tf_moe_block_rows(rs, e, r0, r1) && lin[*e].trellis;
}

/* A Hadamard kernel's block: its feature *c (blockIdx.x's block of 128),
 * its expert and rows; false as lin_rows. */
__device__ static inline bool had_block(const tf_moe_rows &rs, const tf_moe_cuda_exl3 *lin,
					int64_t *c, int *e, int64_t *r0, int64_t *r1)
{
	*c = (int64_t)blockIdx.x * TF_EXL3_HAD + threadIdx.x;
	return lin_rows(rs, lin, e, r0, r1);
}

/* grid (kh/128, slots, 2), block 128: xg (z 0) or xu (z 1) of the block's
 * rows, input row p being x[tok[p]] with a plan. */
__global__ static void in_kernel(tf_moe_rows rs, const tf_moe_cuda_exl3 *gate,
				 const tf_moe_cuda_exl3 *up, const float *x, int hidden, int64_t kh,
				 float *xg, float *xu)
{
	__shared__ float sh[TF_EXL3_HAD];
	int64_t i, r0, r1;
	int e;

	if (!had_block(rs, gate, &i, &e, &r0, &r1))
		return;
	const float *suh = (blockIdx.z ? up : gate)[e].suh;
	float *xh = blockIdx.z ? xu : xg;
	for (int64_t p = r0; p < r1; p++) {
		const float *xr = x + (rs.tok ? rs.tok[p] : p) * (int64_t)hidden;
		sh[threadIdx.x] = i < hidden ? xr[i] * suh[i] : 0.0f;
		tf_exl3_had128_shared(sh);
		xh[p * kh + i] = sh[threadIdx.x];
	}
}

/* One GEMV launch: linear z of each expert, xh [rows, k] -> yh [rows, n]. */
struct gemv_pass {
	const tf_moe_cuda_exl3 *lin[2];
	const float *xh[2];
	float *yh[2];
	int64_t k, n;
};

#define GEMV_CB(K, CB) tf_exl3_gemv_col<K, CB>(l.trellis, k, n, j, xh, rows, yh, red)
#define GEMV_K(K)                                    \
	case K:                                      \
		if (l.cb == 0)                       \
			GEMV_CB(K, 0);               \
		else if (l.cb == 1)                  \
			GEMV_CB(K, 1);               \
		else                                 \
			GEMV_CB(K, 2);               \
		break

/* tf_exl3_gemv_col at the linear's own K and codebook (the block's alike,
 * so every thread takes the same branch to the same barriers). */
__device__ static void gemv_any(const tf_moe_cuda_exl3 &l, int64_t k, int64_t n, int64_t j,
				const float *xh, int rows, float *yh, tf_exl3_gemv_red &red)
{
	switch (l.K) {
		GEMV_K(1);
		GEMV_K(2);
		GEMV_K(3);
		GEMV_K(4);
		GEMV_K(5);
		GEMV_K(6);
		GEMV_K(7);
		GEMV_K(8);
	}
}

/* grid (n/16, slots, linears), block 32·TF_EXL3_GEMV_WARPS: tile column
 * blockIdx.x of linear blockIdx.z of the block's expert over its rows. */
__global__ static void __launch_bounds__(32 * TF_EXL3_GEMV_WARPS)
gemv_kernel(tf_moe_rows rs, gemv_pass g)
{
	__shared__ tf_exl3_gemv_red red;
	const int z = blockIdx.z;
	int e;
	int64_t r0, r1;

	if (!lin_rows(rs, g.lin[z], &e, &r0, &r1))
		return;
	const tf_moe_cuda_exl3 l = g.lin[z][e];
	for (int64_t p0 = r0; p0 < r1; p0 += ROWS) {
		const int m = r1 - p0 < ROWS ? (int)(r1 - p0) : ROWS;
		gemv_any(l, g.k, g.n, blockIdx.x, g.xh[z] + p0 * g.k, m, g.yh[z] + p0 * g.n, red);
	}
}

/* grid (ki/128, slots), block 128: gate and up's outputs, the activation
 * and down's input transform, in place over yg. */
__global__ static void mid_kernel(tf_moe_rows rs, tf_moe_cuda_exl3_w m, int64_t ki, float *yg,
				  const float *yu)
{
	__shared__ float sh[TF_EXL3_HAD];
	const int t = threadIdx.x;
	int64_t c, r0, r1;
	int e;

	if (!had_block(rs, m.gate, &c, &e, &r0, &r1))
		return;
	const float sg = m.gate[e].svh[c], su = m.up[e].svh[c], sd = m.down[e].suh[c];
	for (int64_t p = r0; p < r1; p++) {
		sh[t] = yg[p * ki + c];
		tf_exl3_had128_shared(sh);
		const float g = sh[t] * sg;
		sh[t] = yu[p * ki + c];
		tf_exl3_had128_shared(sh);
		const float u = sh[t] * su;
		sh[t] = c < m.inter ? tf_moe_swiglu(g, u, m.limit) * sd : 0.0f;
		tf_exl3_had128_shared(sh);
		yg[p * ki + c] = sh[t];
	}
}

/* grid (kh/128, slots), block 128: o = Had(yd) ⊙ svh of down, [rows, hidden]. */
__global__ static void out_kernel(tf_moe_rows rs, const tf_moe_cuda_exl3 *down, int hidden,
				  int64_t kh, const float *yd, float *o)
{
	__shared__ float sh[TF_EXL3_HAD];
	int64_t c, r0, r1;
	int e;

	if (!had_block(rs, down, &c, &e, &r0, &r1))
		return;
	for (int64_t p = r0; p < r1; p++) {
		sh[threadIdx.x] = yd[p * kh + c];
		tf_exl3_had128_shared(sh);
		if (c < hidden)
			o[p * hidden + c] = sh[threadIdx.x] * down[e].svh[c];
	}
}

extern "C" size_t tf_moe_cuda_exl3_scratch(const tf_moe_cuda_exl3_w *m, int64_t rows)
{
	const int64_t kh = TF_MOE_CUDA_EXL3_PAD(m->hidden), ki = TF_MOE_CUDA_EXL3_PAD(m->inter);
	return (size_t)(2 * rows * (kh + ki));
}

extern "C" int tf_moe_cuda_exl3_mlp(cudaStream_t stream, const tf_moe_cuda_exl3_w *m,
				    const tf_moe_cuda_plan *plan, int top_k, const float *x,
				    int64_t n, float *h, float *o)
{
	const int64_t kh = TF_MOE_CUDA_EXL3_PAD(m->hidden), ki = TF_MOE_CUDA_EXL3_PAD(m->inter);
	tf_moe_rows rs;
	unsigned slots;

	if (m->hidden < 1 || m->inter < 1 || m->n_experts < 1 || !(m->limit >= 0) || n < 0 ||
	    !tf_moe_rows_init(plan, top_k, n, m->n_experts, &rs, &slots))
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	float *xg = h, *xu = xg + rs.n * kh, *yg = xu + rs.n * kh, *yu = yg + rs.n * ki;
	const unsigned bh = (unsigned)(kh / TF_EXL3_HAD), bi = (unsigned)(ki / TF_EXL3_HAD);
	const gemv_pass up = { { m->gate, m->up }, { xg, xu }, { yg, yu }, kh, ki };
	const gemv_pass down = { { m->down, m->down }, { yg, yg }, { xg, xg }, ki, kh };

	TF_LAUNCH(dim3(bh, slots, 2), TF_EXL3_HAD, 0, stream, in_kernel)(rs, m->gate, m->up, x,
									   m->hidden, kh, xg, xu);
	TF_LAUNCH(dim3((unsigned)(ki / 16), slots, 2), 32 * TF_EXL3_GEMV_WARPS, 0, stream,
		  gemv_kernel)(rs, up);
	TF_LAUNCH(dim3(bi, slots), TF_EXL3_HAD, 0, stream, mid_kernel)(rs, *m, ki, yg, yu);
	TF_LAUNCH(dim3((unsigned)(kh / 16), slots, 1), 32 * TF_EXL3_GEMV_WARPS, 0, stream,
		  gemv_kernel)(rs, down);
	TF_LAUNCH(dim3(bh, slots), TF_EXL3_HAD, 0, stream, out_kernel)(rs, m->down, m->hidden, kh,
									xg, o);
	return cudaGetLastError();
}
