/*
 * mlp.cuh - what the expert MLP kernels share, over fp32 weights (mlp.cu)
 * and EXL3 ones (exl3_mlp.cu): which rows a block serves, and the
 * activation.
 *
 * A launch over a plan's experts has a block row (blockIdx.y) per slot of
 * the plan's active list; without a plan, one slot: expert 0 over rows
 * [0, n) (the shared expert, a dense MLP).
 */
#ifndef TF_MOE_CUDA_MLP_CUH
#define TF_MOE_CUDA_MLP_CUH

#include <math.h>

#include "moe_cuda.h"
#include "tf_launch.h"

/* Which rows, where their inputs come from. */
struct tf_moe_rows {
	const int32_t *off, *active, *n_active, *tok;   /* off NULL: expert 0, rows [0, n) */
	int64_t n;
};

/* The rows of a launch and its slots (grid.y); false for shapes the
 * kernels do not take. */
static inline bool tf_moe_rows_init(const tf_moe_cuda_plan *plan, int top_k, int64_t n,
				    int n_experts, tf_moe_rows *rs, unsigned *slots)
{
	*rs = tf_moe_rows{ NULL, NULL, NULL, NULL, n };
	*slots = 1;
	if (!plan)
		return true;
	if (top_k < 1 || n > 0x7fffffff / top_k)
		return false;
	*rs = tf_moe_rows{ plan->off, plan->active, plan->n_active, plan->tok, n * top_k };
	/* Experts with rows: at most one per row. */
	*slots = (unsigned)(n * top_k < n_experts ? n * top_k : n_experts);
	return *slots <= 65535;
}

/* The expert of slot s and its rows [*r0, *r1); false when it has none. */
__device__ static inline bool tf_moe_slot_rows(const tf_moe_rows &rs, int s, int *e,
					       int64_t *r0, int64_t *r1)
{
	if (!rs.off) {
		*e = 0;
		*r0 = 0;
		*r1 = rs.n;
		return s == 0;
	}
	if (s >= *rs.n_active)
		return false;
	*e = rs.active[s];
	*r0 = rs.off[*e];
	*r1 = rs.off[*e + 1];
	return true;
}

/* The block's expert and rows: those of slot blockIdx.y. */
__device__ static inline bool tf_moe_block_rows(const tf_moe_rows &rs, int *e, int64_t *r0,
						int64_t *r1)
{
	return tf_moe_slot_rows(rs, (int)blockIdx.y, e, r0, r1);
}

/* SwiGLU with its clamp: backend ops_ref.c's swiglu, moe.so's mlp.c. */
__device__ static inline float tf_moe_swiglu(float g, float u, float limit)
{
	float s = g / (1.0f + expf(-g));
	if (limit > 0.0f) {
		s = fminf(s, limit);
		u = fminf(fmaxf(u, -limit), limit);
	}
	return s * u;
}

#endif /* TF_MOE_CUDA_MLP_CUH */
