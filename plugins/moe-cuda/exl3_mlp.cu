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
 * (blockIdx.x); blockIdx.z picks gate or up.
 *
 * Each linear's product is two launches over every active expert, split
 * by the expert's rows (cuda_kernels.h says why at 8, as exl3-cuda's
 * linear splits):
 *  - up to TF_EXL3_CUDA_GEMV_ROWS rows (decode): the GEMV, one pass;
 *  - more (prefill): the WMMA GEMM (tf_exl3_gemm_tile), each trellis tile
 *    decoded once per TF_EXL3_GEMM_ROWS rows into shared memory, where
 *    the GEMV would decode it once per 8.  Its blocks take the items of a
 *    work list (expert, row tile), built on the device from the plan by
 *    list_kernel, times the column tiles (blockIdx.x).
 * The GEMM's launches are skipped when no expert can have that many rows
 * (rows <= 8 in all, as in decode).  Blocks of an expert another rank
 * holds (its trellis NULL) return at once; a rank's share of the features
 * is only narrower linears (moe_cuda.h).
 */
#include "exl3_cuda.cuh"
#include "mlp.cuh"

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

/* grid (n/16, slots, linears), block 32·TF_EXL3_GEMV_WARPS: tile column
 * blockIdx.x of linear blockIdx.z of the block's expert over its rows,
 * unless they are the GEMM's. */
__global__ static void __launch_bounds__(32 * TF_EXL3_GEMV_WARPS)
gemv_kernel(tf_moe_rows rs, gemv_pass g)
{
	__shared__ tf_exl3_gemv_red red;
	const int z = blockIdx.z;
	int e;
	int64_t r0, r1;

	if (!lin_rows(rs, g.lin[z], &e, &r0, &r1) || r1 - r0 > TF_EXL3_CUDA_GEMV_ROWS)
		return;
	const tf_moe_cuda_exl3 &l = g.lin[z][e];
	tf_exl3_product(red, l.K, l.cb, l.trellis, g.k, g.n, 16 * (int64_t)blockIdx.x,
			g.xh[z] + r0 * g.k, (int)(r1 - r0), g.yh[z] + r0 * g.n);
}

/* The GEMM's work list: its length, then per item the expert and the
 * item's rows [r0, r1), at most TF_EXL3_GEMM_ROWS of the expert's. */
struct gemm_item {
	int32_t e, r0, r1;
};

/* Most items a list of `rows` rows over `slots` experts holds: each of
 * the experts with more than TF_EXL3_CUDA_GEMV_ROWS rows (at most
 * rows / 9 of them) has one item per whole TF_EXL3_GEMM_ROWS rows and at
 * most one partial. */
static int64_t gemm_items(int64_t rows, int64_t slots)
{
	const int64_t many = rows / (TF_EXL3_CUDA_GEMV_ROWS + 1);
	return rows / TF_EXL3_GEMM_ROWS + (many < slots ? many : slots);
}

#define LIST_THREADS 256

/* The tiles of the experts of slots [s0, s1) the GEMM takes; with `list`,
 * written from item `at`. */
__device__ static int list_slots(const tf_moe_rows &rs, int s0, int s1, gemm_item *list, int at)
{
	int e;
	int64_t r0, r1;
	for (int s = s0; s < s1; s++) {
		if (!tf_moe_slot_rows(rs, s, &e, &r0, &r1) || r1 - r0 <= TF_EXL3_CUDA_GEMV_ROWS)
			continue;
		for (int64_t r = r0; r < r1; r += TF_EXL3_GEMM_ROWS, at++) {
			const int64_t end = r + TF_EXL3_GEMM_ROWS < r1 ? r + TF_EXL3_GEMM_ROWS : r1;
			if (list)
				list[at] = gemm_item{ e, (int32_t)r, (int32_t)end };
		}
	}
	return at;
}

/* grid 1, block LIST_THREADS: the GEMM's work list over `slots` slots into
 * *count and list: each thread counts the tiles of a run of slots, a scan
 * over the threads places its run's items. */
__global__ static void __launch_bounds__(LIST_THREADS)
list_kernel(tf_moe_rows rs, int slots, int32_t *count, gemm_item *list)
{
	__shared__ int32_t sum[LIST_THREADS];
	const int t = threadIdx.x, per = (slots + LIST_THREADS - 1) / LIST_THREADS;
	const int s0 = t * per < slots ? t * per : slots;
	const int s1 = s0 + per < slots ? s0 + per : slots;
	const int mine = list_slots(rs, s0, s1, NULL, 0);

	sum[t] = mine;
	for (int h = 1; h < LIST_THREADS; h *= 2) {      /* inclusive scan */
		__syncthreads();
		const int32_t v = t >= h ? sum[t - h] : 0;
		__syncthreads();
		sum[t] += v;
	}
	list_slots(rs, s0, s1, list, sum[t] - mine);
	if (t == LIST_THREADS - 1)
		*count = sum[t];
}

/* grid (n/TF_EXL3_GEMM_COLS, items, linears), block 32·TF_EXL3_GEMM_WARPS:
 * columns blockIdx.x of linear blockIdx.z over the rows of items
 * blockIdx.y, blockIdx.y + gridDim.y, ... of the list. */
__global__ static void __launch_bounds__(32 * TF_EXL3_GEMM_WARPS)
gemm_kernel(const int32_t *count, const gemm_item *list, gemv_pass g)
{
	__shared__ tf_exl3_gemm_smem sm;
	const int z = blockIdx.z;

	for (int i = blockIdx.y; i < *count; i += gridDim.y) {
		const gemm_item it = list[i];
		const tf_moe_cuda_exl3 &l = g.lin[z][it.e];
		if (!l.trellis)
			continue;
		tf_exl3_product(sm, l.K, l.cb, l.trellis, g.k, g.n,
				(int64_t)blockIdx.x * TF_EXL3_GEMM_COLS, g.xh[z] + it.r0 * g.k,
				it.r1 - it.r0, g.yh[z] + it.r0 * g.n);
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
	const int64_t items = gemm_items(rows, m->n_experts < rows ? m->n_experts : rows);
	return (size_t)(2 * rows * (kh + ki) + 1 + items * 3);
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
	const int64_t items = gemm_items(rs.n, slots);
	const unsigned gy = (unsigned)(items < 65535 ? items : 65535);
	int32_t *count = (int32_t *)(yu + rs.n * ki);
	gemm_item *list = (gemm_item *)(count + 1);

	TF_LAUNCH(dim3(bh, slots, 2), TF_EXL3_HAD, 0, stream, in_kernel)(rs, m->gate, m->up, x,
									   m->hidden, kh, xg, xu);
	if (items)
		TF_LAUNCH(1, LIST_THREADS, 0, stream, list_kernel)(rs, (int)slots, count, list);
	TF_LAUNCH(dim3((unsigned)(ki / 16), slots, 2), 32 * TF_EXL3_GEMV_WARPS, 0, stream,
		  gemv_kernel)(rs, up);
	if (items)
		TF_LAUNCH(dim3((unsigned)(ki / TF_EXL3_GEMM_COLS), gy, 2), 32 * TF_EXL3_GEMM_WARPS, 0,
			  stream, gemm_kernel)(count, list, up);
	TF_LAUNCH(dim3(bi, slots), TF_EXL3_HAD, 0, stream, mid_kernel)(rs, *m, ki, yg, yu);
	TF_LAUNCH(dim3((unsigned)(kh / 16), slots, 1), 32 * TF_EXL3_GEMV_WARPS, 0, stream,
		  gemv_kernel)(rs, down);
	if (items)
		TF_LAUNCH(dim3((unsigned)(kh / TF_EXL3_GEMM_COLS), gy, 1), 32 * TF_EXL3_GEMM_WARPS, 0,
			  stream, gemm_kernel)(count, list, down);
	TF_LAUNCH(dim3(bh, slots), TF_EXL3_HAD, 0, stream, out_kernel)(rs, m->down, m->hidden, kh,
									xg, o);
	return cudaGetLastError();
}
