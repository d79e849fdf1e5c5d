/*
 * moe_cuda.h - a Ling MoE block on a CUDA device, callable from C.
 *
 * A MoE block on the device is five calls on one stream:
 *
 *     tf_moe_cuda_route      x[n, hidden] -> idx[n, k], w[n, k] (two kernels)
 *     tf_moe_cuda_dispatch   idx -> each expert's rows (tf_moe_cuda_plan)
 *     tf_moe_cuda_mlp        the routed experts over their rows -> o[n * k, hidden]
 *     tf_moe_cuda_mlp        the shared expert over all rows    -> y[n, hidden]
 *     tf_moe_cuda_combine    y[t] += w * o over t's experts, ascending expert id
 *
 * and a dense MLP layer is tf_moe_cuda_mlp alone; tf_moe_cuda_exl3_mlp
 * is tf_moe_cuda_mlp over EXL3 weights.  Each computes what
 * plugins/router (gate.c, topk.c) and plugins/moe (moe_layer.c, mlp.c)
 * compute on the CPU, in the same order where the order decides the
 * result: the same experts (ties to the lower index), weights summed and
 * renormalised slot by slot, each token's expert outputs added to the
 * shared expert's in ascending expert id.  Nothing depends on how blocks
 * are scheduled, so a launch repeats to the bit.
 *
 *
 * Each launcher queues its kernels on `stream` and returns a cudaError_t as
 * an int: cudaErrorInvalidValue for shapes the kernels do not take.  All
 * pointers are device memory unless a parameter says otherwise.
 */
#ifndef TF_MOE_CUDA_H
#define TF_MOE_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most experts, groups and experts per token the router takes (Flash:
 * 512, 8, 8). */
#define TF_MOE_CUDA_MAX_EXPERTS 1024
#define TF_MOE_CUDA_MAX_GROUPS 64
#define TF_MOE_CUDA_MAX_TOPK 32

/* A layer's router: the gate [n_experts, hidden] fp32, its expert bias
 * [n_experts] (NULL: none) and config.json's keys.  Sigmoid scoring only
 * (Ling's); n_group 1 is no group rule. */
typedef struct tf_moe_cuda_router {
	const float *gate, *bias;
	int hidden, n_experts, top_k, n_group, topk_group;
	int norm_topk;
	float scaling;
} tf_moe_cuda_router;

/* 0 when the kernels take this router, else cudaErrorInvalidValue. */
int tf_moe_cuda_router_check(const tf_moe_cuda_router *r);

/* Rows [0, n) of x (row stride hidden): idx[n, top_k] best first, w[n, top_k];
 * logits is scratch of [n, n_experts] floats.  n at most 262140. */
int tf_moe_cuda_route(cudaStream_t stream, const tf_moe_cuda_router *r, const float *x,
		      int64_t n, float *logits, int32_t *idx, float *w);

/*
 * Which rows each expert serves, built by tf_moe_cuda_dispatch from n
 * tokens' choices: expert e's rows are [off[e], off[e + 1]) of the n * k
 * sorted rows, tokens ascending; row p is token tok[p] with weight tok_w[p];
 * choice j of token t went to row pos[t * k + j].  active[0 .. *n_active)
 * lists the experts with rows, ascending.  All device memory, sized by
 * tf_moe_cuda_plan_bytes; chunk_base is the dispatch's own scratch.
 */
typedef struct tf_moe_cuda_plan {
	int32_t *off;                   /* [n_experts + 1] */
	int32_t *tok, *pos;             /* [n * k] each */
	float *tok_w;                   /* [n * k] */
	int32_t *active;                /* [n_experts] */
	int32_t *n_active;              /* [1] */
	int32_t *chunk_base;            /* [chunks(n), n_experts] */
} tf_moe_cuda_plan;

/* Bytes of device memory a plan for n tokens needs; tf_moe_cuda_plan_init
 * lays a plan out in `mem`, that many bytes. */
size_t tf_moe_cuda_plan_bytes(int n_experts, int top_k, int64_t n);
void tf_moe_cuda_plan_init(tf_moe_cuda_plan *p, void *mem, int n_experts, int top_k,
			   int64_t n);

/* Bucket idx[n, k] (ids in 0 .. n_experts - 1, distinct per token) and
 * their weights w[n, k] by expert: a counting sort whose order is fixed. */
int tf_moe_cuda_dispatch(cudaStream_t stream, const tf_moe_cuda_plan *p, const int32_t *idx,
			 const float *w, int64_t n, int n_experts, int top_k);

/*
 * SwiGLU MLPs over row lists: for each expert e, act(x Wg^T, x Wu^T) Wd^T,
 * act(g, u) = min(silu(g), limit) * clamp(u, -limit, limit) (limit 0: silu(g) u),
 * fp32 weights gate/up [inter, hidden] and down [hidden, inter] (row-major,
 * as stored).  The pointer arrays are device memory holding one device
 * pointer per expert; an expert with NULL gate is not served here (another
 * rank's) and its rows are left alone.  A rank's share of each MLP's
 * intermediate features [lo, hi) (moe.so's [tp] moe = split) is inter =
 * hi - lo, gate and up pointing at row lo, down at column lo with down_ld
 * the whole MLP's inter; the output is then this rank's partial sum.
 */
typedef struct tf_moe_cuda_mlp_w {
	const float *const *gate, *const *up, *const *down;
	int hidden, inter, n_experts;
	float limit;
	int64_t down_ld;                /* floats between rows of down; 0: inter */
} tf_moe_cuda_mlp_w;

/* Which rows each expert runs: a plan's (routed experts, input row p is
 * x[tok[p]], output row p), or with plan NULL expert 0 over rows [0, n) of
 * x (the shared expert, a dense MLP).  h is scratch of [rows, inter]
 * floats, rows = n * top_k with a plan, else n. */
int tf_moe_cuda_mlp(cudaStream_t stream, const tf_moe_cuda_mlp_w *m, const tf_moe_cuda_plan *plan,
		    int top_k, const float *x, int64_t n, float *h, float *o);

/*
 * One EXL3 linear in device memory (plugins/exl3's format, spec exl3.md
 * §2): the trellis [k/16, n/16, 16 K] as stored, suh [k], svh [n]; K bits
 * per weight (1..8), cb its codebook (tf_exl3_cb: 0 3inst, 1 mcg, 2 mul1).
 */
typedef struct tf_moe_cuda_exl3 {
	const uint16_t *trellis;
	const float *suh, *svh;
	int K, cb;
} tf_moe_cuda_exl3;

/* Features of an EXL3 linear padded to its Hadamard blocks: k and n. */
#define TF_MOE_CUDA_EXL3_PAD(f) (((int64_t)(f) + 127) / 128 * 128)

/*
 * tf_moe_cuda_mlp_w's MLPs with EXL3 weights: device arrays of one
 * tf_moe_cuda_exl3 per expert, gate and up hidden -> inter, down inter ->
 * hidden, each padded to TF_MOE_CUDA_EXL3_PAD of its features; K and the
 * codebook are each linear's own.  An expert whose linears' trellis is
 * NULL is another rank's ([tp] moe = experts): not served, its rows left
 * alone.  A rank's share of each MLP's features ([tp] moe = split) is
 * inter = hi - lo in whole Hadamard blocks, gate and up cut to their
 * output blocks [lo, hi) and down to its input blocks (plugins/exl3's
 * tf_exl3_parts_cut); the output is then this rank's partial sum.
 */
typedef struct tf_moe_cuda_exl3_w {
	const tf_moe_cuda_exl3 *gate, *up, *down;
	int hidden, inter, n_experts;
	float limit;
} tf_moe_cuda_exl3_w;

/* Floats of scratch tf_moe_cuda_exl3_mlp needs over `rows` rows (n * top_k
 * with a plan, else n). */
size_t tf_moe_cuda_exl3_scratch(const tf_moe_cuda_exl3_w *m, int64_t rows);

/* tf_moe_cuda_mlp with EXL3 weights: an expert with up to 8 rows takes
 * exl3_cuda.cuh's GEMV, decoding each trellis tile once; one with more its
 * WMMA GEMM, decoding each tile once per 64 rows (exl3_mlp.cu); h is
 * tf_moe_cuda_exl3_scratch floats of scratch. */
int tf_moe_cuda_exl3_mlp(cudaStream_t stream, const tf_moe_cuda_exl3_w *m,
			 const tf_moe_cuda_plan *plan, int top_k, const float *x, int64_t n,
			 float *h, float *o);

/* y[t] += tok_w * o[row] for each of token t's rows, in ascending expert
 * id, skipping the experts another rank serves: with routed_q (the routed
 * experts are EXL3; routed is then unused) those whose gate trellis is
 * NULL, else those whose routed->gate pointer is NULL (the array NULL:
 * every expert's rows were computed). */
int tf_moe_cuda_combine(cudaStream_t stream, const tf_moe_cuda_plan *p,
			const tf_moe_cuda_mlp_w *routed, const tf_moe_cuda_exl3_w *routed_q,
			const int32_t *idx, int64_t n, int top_k, const float *o, float *y);

#ifdef __cplusplus
}
#endif
#endif /* TF_MOE_CUDA_H */
