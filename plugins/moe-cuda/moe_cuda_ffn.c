/*
 * moe_cuda_ffn.c - the ffn plugins on a CUDA device (plugin "moe-cuda",
 * layer type "moe"; "dense-cuda", layer type "dense"): plugins/moe's
 * moe_layer.c and dense_layer.c with the kernels of moe_cuda.h in place of
 * their host loops.
 *
 * A MoE forward queues, on the backend's stream (tf_backend_stream, ABI
 * 1.7): the router (gate GEMV, group-limited top-k), the dispatch
 * (counting sort by expert), the routed experts' MLPs over their rows, the
 * shared expert over all rows into y, and the combine adding each token's
 * weighted expert outputs to it in ascending expert id; a dense forward is
 * one MLP call over all rows.  Both return without waiting; a download
 * or the backend's sync waits.  Working buffers are carved from an arena
 * every layer shares (dev_scratch.h).
 *
 * Weights: each set of MLPs (the routed experts, the shared expert, the
 * dense MLP) is stored either as F32/F16/BF16 `.weight` tensors or as EXL3
 * trellises, all its linears alike (else refused, naming the tensor):
 *
 *  - EXL3 (Ling-3.1 Flash's experts): kept as stored, each linear's trellis,
 *    suh and svh uploaded by moe_cuda_exl3.c after plugins/exl3's own
 *    checks; tf_moe_cuda_exl3_mlp runs every active expert's rows in five
 *    launches (one per step of the MLP, not one per expert; in prefill
 *    three more: its GEMM's work list and a GEMM per product for the
 *    experts past 8 rows), each linear at its own K and codebook (the
 *    shared expert at other bits than the routed ones);
 *  - plain: the kernels read fp32, and the device linears have no
 *    dequant, so layer_init reads the tensors on the host, widens them and
 *    uploads them into one allocation per layer, with device arrays of
 *    per-expert pointers.  That is for correctness, not speed or memory:
 *    twice the bytes of bf16.
 *
 * The router's gate is read the plain way (Ling keeps it unquantized).  The
 * expert bias and the routing keys are read and checked by router.so's own
 * code (gate.c).
 *
 * The router runs here on the device, not through host->router_route (whose
 * answer is host memory): the INI's [plugins] router does not apply, and
 * routing is sigmoid scoring only (Ling's); softmax scoring is refused.
 * A backend without a device stream is refused (the moe plugin serves
 * host-memory backends).  Tensor parallel ([tp] size > 1), a rank uploads
 * its share as moe.so opens it (layers.h): every MLP's intermediate
 * features [lo, hi) (plain: gate and up rows, down columns, packed; EXL3:
 * the parts exl3's open_part cuts, whole 128-feature Hadamard blocks, a
 * share that cuts a block refused naming the trellis), or with [tp] moe =
 * experts the routed experts the built-in routers place on it
 * (tf_router_place_blocks; the others' pointers NULL, or EXL3 descriptors
 * with a NULL trellis, which the expert kernels and the combine skip) and
 * the shared expert split; y is then its partial sum.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/backend.h"
#include "tf/ffn.h"
#include "tf/router.h"

#include "../common/dev_scratch.h"
#include "../common/tensor_util.h"
#include "gate.h"
#include "layers.h"
#include "moe_cuda.h"
#include "moe_cuda_exl3.h"
#include "tf_cuda_plugin.h"

/* One MLP's projections, in the order of its pointer arrays. */
enum { MCF_GATE, MCF_UP, MCF_DOWN, MCF_PROJ };

static const char *const mcf_leaf[MCF_PROJ] = { "gate_proj.weight", "up_proj.weight",
						 "down_proj.weight" };

/* One set of MLPs: the routed experts, the shared expert or the dense MLP. */
struct mcf_mlps {
	tf_moe_cuda_mlp_w f;            /* the shape; fp32 pointer arrays unless exl3 */
	tf_moe_cuda_exl3_w q;           /* exl3: the EXL3 linears */
	bool exl3;
	tf_moe_cuda_exl3_mem mem;       /* exl3: what q reads */
};

struct mcf_layer {
	const tf_host *h;
	const char *name;               /* the plugin's, for errors */
	int layer;
	char prefix[TF_TU_NAME_MAX - 32]; /* short enough to take ".shared_experts" */
	const tf_backend *be;
	void *bctx;
	cudaStream_t stream;            /* the backend's */
	int64_t hidden;
	tf_moe_cuda_router router;      /* gate NULL: a dense layer */
	struct mcf_mlps routed;         /* the experts (the dense MLP) */
	struct mcf_mlps shared;         /* f.inter 0: no shared expert */
	/* Tensor parallel: each MLP's features [lo, lo + inter) of `all`
	 * here, and the routed experts' ranks (NULL: all of them here). */
	int64_t routed_lo, routed_all, shared_lo, shared_all;
	int32_t *rank_of;
	float *weights;                 /* every fp32 weight above, one allocation */
	const float **ptrs;             /* the pointer arrays, one allocation */
	bool scratch_ref;
};

static tf_dev_scratch mcf_scratch = TF_DEV_SCRATCH_INIT;

static int mcf_probe(const tf_host *h, const char **reason)
{
	return tf_cuda_plugin_probe(h, reason) ? TF_CUDA_PLUGIN_SCORE(10) : 0;
}

/* A failed CUDA call as the plugin's error, naming the layer. */
static int mcf_fail(const struct mcf_layer *L, int e, const char *what)
{
	return L->h->error(L->h, TF_ERR_DEVICE, "layer %d (%s): %s: %s", L->layer, L->name, what,
			   cudaGetErrorString((cudaError_t)e));
}

static void mcf_layer_fini(void *inst)
{
	struct mcf_layer *L = inst;
	if (!L)
		return;
	if (L->weights || L->ptrs || L->routed.mem.dev || L->shared.mem.dev)
		L->be->quiesce(L->bctx);
	if (L->weights)
		L->be->free(L->bctx, L->weights);
	if (L->ptrs)
		L->be->free(L->bctx, (void *)L->ptrs);
	tf_moe_cuda_exl3_free(L->h, &L->routed.mem);
	tf_moe_cuda_exl3_free(L->h, &L->shared.mem);
	if (L->scratch_ref)
		tf_dev_scratch_unref(&mcf_scratch);
	free(L->rank_of);
	free(L);
}

/* rows x cols floats of tensor `<prefix>.<leaf>` widened, and the whole
 * or its `part` (rows or columns, packed) uploaded to dst. */
static int mcf_put(const struct mcf_layer *L, const char *prefix, const char *leaf,
		   int64_t rows, int64_t cols, const tf_lin_part *part, float *dst)
{
	char name[TF_TU_NAME_MAX];
	tf_tensor t;
	float *v;
	int rc = tf_tu_name(L->h, name, prefix, leaf);
	if (rc)
		return rc;
	if (L->h->weight_get(L->h, name, &t) != TF_OK)
		return L->h->error(L->h, TF_ERR_UNSUPPORTED,
				   "%s: missing; %s takes a set of MLPs (the experts, the shared expert) all F32/F16/BF16 or all EXL3",
				   name, L->name);
	rc = tf_tu_load_f32(L->h, name, 2, (int64_t[]){ rows, cols }, &v);
	if (rc)
		return rc;
	const float *src = v;
	if (part && part->axis == TF_LIN_PART_OUT) {
		src += part->lo * cols;
		rows = part->hi - part->lo;
	} else if (part) {
		for (int64_t r = 0; r < rows; r++)
			memmove(v + r * (part->hi - part->lo), v + r * cols + part->lo,
				(size_t)(part->hi - part->lo) * sizeof(float));
		cols = part->hi - part->lo;
	}
	rc = L->be->upload(L->bctx, dst, src, (size_t)(rows * cols) * sizeof(float));
	free(v);
	/* The device copy is all the kernels read: the host may drop the pages. */
	if (!rc && TF_HAS_SLOT(L->h, tf_host, weight_release) && L->h->weight_release)
		L->h->weight_release(L->h, name);
	return rc;
}

/* The n MLPs `<prefix>.<i>` (n 1 and no index: `<prefix>` itself) of m's
 * shape into w, their pointers into host arrays p[proj][n]: the features
 * [lo, lo + m->inter) of `all`, and with rank_of only this rank's experts
 * (the others' pointers NULL). */
static int mcf_put_mlps(const struct mcf_layer *L, const char *prefix, bool indexed,
			const tf_moe_cuda_mlp_w *m, int64_t lo, int64_t all,
			const int32_t *rank_of, float **w, const float **p[MCF_PROJ])
{
	char name[TF_TU_NAME_MAX];
	const int64_t H = m->hidden, I = m->inter;
	const tf_lin_part rows = { .axis = TF_LIN_PART_OUT, .lo = lo, .hi = lo + I };
	const tf_lin_part cols = { .axis = TF_LIN_PART_IN, .lo = lo, .hi = lo + I };
	int rc;

	for (int e = 0; e < m->n_experts; e++) {
		if (rank_of && rank_of[e] != L->h->tp_rank) {
			for (int k = 0; k < MCF_PROJ; k++)
				p[k][e] = NULL;
			continue;
		}
		if (indexed)
			snprintf(name, sizeof(name), "%s.%d", prefix, e);
		else
			snprintf(name, sizeof(name), "%s", prefix);
		for (int k = 0; k < MCF_PROJ; k++) {
			rc = mcf_put(L, name, mcf_leaf[k], k == MCF_DOWN ? H : all,
				     k == MCF_DOWN ? all : H, k == MCF_DOWN ? &cols : &rows, *w);
			if (rc)
				return rc;
			p[k][e] = *w;
			*w += H * I;
		}
	}
	return TF_OK;
}

/* A set of EXL3 MLPs `<prefix>` (indexed: `<prefix>.<e>`) of m's shape,
 * as mcf_put_mlps shares them out. */
static int mcf_put_exl3(const struct mcf_layer *L, const char *prefix, bool indexed, int64_t lo,
			int64_t all, const int32_t *rank_of, struct mcf_mlps *m)
{
	m->q = (tf_moe_cuda_exl3_w){ .hidden = m->f.hidden, .inter = m->f.inter,
				     .n_experts = m->f.n_experts, .limit = m->f.limit };
	return tf_moe_cuda_exl3_load(L->h, L->name, prefix, indexed, lo, all, rank_of, &m->q,
				     &m->mem);
}

/*
 * The gate, its bias, the routed experts and the shared expert (or the
 * dense MLP: `routed` alone, one expert, no gate) into device memory: each
 * set of MLPs EXL3 as stored when its first gate_proj is, else widened to
 * fp32 with the gate, then the pointer arrays, routed experts' first.
 */
static int mcf_upload(struct mcf_layer *L, const float *bias)
{
	struct mcf_mlps *rt = &L->routed, *sh = &L->shared;
	const int E = rt->f.n_experts, S = sh->f.inter ? 1 : 0;
	const int64_t H = L->hidden;
	const bool moe = L->router.n_experts > 0;
	int here = 0;
	for (int e = 0; e < E; e++)
		here += !L->rank_of || L->rank_of[e] == L->h->tp_rank;
	const float **host = NULL;
	char rname[TF_TU_NAME_MAX], sname[TF_TU_NAME_MAX];
	int rc;

	snprintf(rname, sizeof(rname), moe ? "%s.experts" : "%s", L->prefix);
	snprintf(sname, sizeof(sname), "%s.shared_experts", L->prefix);
	if ((rt->exl3 = tf_moe_cuda_exl3_match(L->h, rname, moe)) &&
	    (rc = mcf_put_exl3(L, rname, moe, L->routed_lo, L->routed_all, L->rank_of, rt)))
		return rc;
	if ((sh->exl3 = S && tf_moe_cuda_exl3_match(L->h, sname, false)) &&
	    (rc = mcf_put_exl3(L, sname, false, L->shared_lo, L->shared_all, NULL, sh)))
		return rc;
	size_t floats = (size_t)(3 * ((rt->exl3 ? 0 : here * rt->f.inter) +
				      (S && !sh->exl3 ? sh->f.inter : 0)) * H);
	if (moe)
		floats += (size_t)(E * H + E);
	if ((floats && !(L->weights = L->be->alloc(L->bctx, floats * sizeof(float)))) ||
	    !(L->ptrs = L->be->alloc(L->bctx, (size_t)MCF_PROJ * (E + S) * sizeof(float *))) ||
	    !(host = calloc((size_t)MCF_PROJ * (E + S), sizeof(float *))))
		return L->h->error(L->h, TF_ERR_NOMEM,
				   "layer %d (%s): out of memory for %zu floats of fp32 weights",
				   L->layer, L->name, floats);
	float *w = L->weights;
	const float **p[MCF_PROJ] = { host, host + E, host + 2 * E };
	const float **q[MCF_PROJ] = { host + 3 * E, host + 3 * E + 1, host + 3 * E + 2 };
	if (moe) {
		L->router.gate = w;
		if ((rc = mcf_put(L, L->prefix, "gate.weight", E, H, NULL, w)))
			goto out;
		w += E * H;
		if (bias) {
			L->router.bias = w;
			if ((rc = L->be->upload(L->bctx, w, bias, (size_t)E * sizeof(float))))
				goto out;
		}
		w += E;
	}
	if (!rt->exl3 && (rc = mcf_put_mlps(L, rname, moe, &rt->f, L->routed_lo, L->routed_all,
					     L->rank_of, &w, p)))
		goto out;
	if (S && !sh->exl3 && (rc = mcf_put_mlps(L, sname, false, &sh->f, L->shared_lo,
						  L->shared_all, NULL, &w, q)))
		goto out;
	rc = L->be->upload(L->bctx, (void *)L->ptrs, host,
			   (size_t)MCF_PROJ * (E + S) * sizeof(float *));
	/* EXL3 sets keep NULL arrays: the combine reads their descriptors. */
	if (!rt->exl3) {
		rt->f.gate = L->ptrs;
		rt->f.up = L->ptrs + E;
		rt->f.down = L->ptrs + 2 * E;
	}
	if (!sh->exl3) {
		sh->f.gate = L->ptrs + 3 * E;
		sh->f.up = sh->f.gate + 1;
		sh->f.down = sh->f.gate + 2;
	}
	/* The upload may read `host` until the stream gets there. */
	if (!rc)
		rc = L->be->sync(L->bctx);
out:
	free(host);
	return rc;
}

static int mcf_new(const tf_host *h, int layer, const char *prefix, const char *name,
		   struct mcf_layer **out)
{
	int rc = tf_cuda_plugin_layer_check(h, layer, name);
	if (rc)
		return rc;
	struct mcf_layer *L = calloc(1, sizeof(*L));
	if (!L)
		return h->error(h, TF_ERR_NOMEM, "%s: no memory", prefix);
	*L = (struct mcf_layer){ .h = h, .name = name, .layer = layer, .be = h->backend,
				 .bctx = h->backend_ctx, .hidden = h->model->hidden_size };
	L->stream = tf_backend_stream(L->be, L->bctx);
	snprintf(L->prefix, sizeof(L->prefix), "%s", prefix);
	*out = L;
	return TF_OK;
}

/* m's features: this rank's share of `all` (all of them with one rank or
 * without `split`), as moe.so's tf_mlp_init takes it; *lo its first. */
static int mcf_share(const struct mcf_layer *L, const char *leaf, const char *key, int64_t all,
		     bool split, tf_moe_cuda_mlp_w *m, int64_t *lo)
{
	char what[TF_TU_NAME_MAX];
	int64_t hi = all;
	int rc = TF_OK;
	*lo = 0;
	snprintf(what, sizeof(what), "%s%s", L->prefix, leaf);
	if (split)
		rc = tf_tu_shard(L->h, all, what, key, lo, &hi);
	m->inter = (int)(hi - *lo);
	return rc;
}

/* [tp] moe = experts: the rank of each routed expert, as the built-in
 * routers place them (contiguous blocks, tf_router_place). */
static int mcf_place(struct mcf_layer *L, int n_experts)
{
	const tf_host *h = L->h;
	if (h->tp_size > n_experts)
		return h->error(h, TF_ERR_INVALID,
				"layer %d (%s): cannot place %d experts on %d ranks ([tp] moe = experts)",
				L->layer, L->name, n_experts, h->tp_size);
	if (!(L->rank_of = malloc((size_t)n_experts * sizeof(*L->rank_of))))
		return h->error(h, TF_ERR_NOMEM, "%s: no memory", L->prefix);
	tf_router_place_blocks(n_experts, h->tp_size, L->rank_of);
	return TF_OK;
}

/* Ready to run: the arena joined. */
static void mcf_ready(struct mcf_layer *L, void **inst)
{
	tf_dev_scratch_ref(&mcf_scratch, L->be, L->bctx);
	L->scratch_ref = true;
	*inst = L;
}

static int mcf_moe_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	const tf_model_config *c = h->model;
	struct mcf_layer *L;
	tf_gate g = { 0 };
	float limit;
	int rc = mcf_new(h, layer, prefix, TF_CUDA_PLUGIN_NAME("moe-cuda"), &L);
	if (rc)
		return rc;
	/* router.so's checks of the routing keys and its expert bias; its
	 * gate linear is not what the route kernel reads. */
	if ((rc = tf_gate_init(&g, h, prefix)))
		goto fail;
	tf_tu_lin_close(h, &g.gate);
	L->router = (tf_moe_cuda_router){ .hidden = (int)g.hidden, .n_experts = g.n_experts,
					  .top_k = g.top_k, .n_group = g.n_group,
					  .topk_group = g.topk_group, .norm_topk = g.norm_topk,
					  .scaling = g.scaling };
	/* The shape, before the upload: the gate's place stands in for it. */
	L->router.gate = (const float *)&L->router;
	bool takes = g.sigmoid && !tf_moe_cuda_router_check(&L->router);
	L->router.gate = NULL;
	if (!takes) {
		rc = h->error(h, TF_ERR_UNSUPPORTED,
			      "layer %d (%s): score_function %s, num_experts %d, n_group %d, num_experts_per_tok %d: the kernels take sigmoid scoring and at most %d, %d and %d",
			      layer, L->name, g.sigmoid ? "sigmoid" : "softmax", g.n_experts,
			      g.n_group, g.top_k, TF_MOE_CUDA_MAX_EXPERTS, TF_MOE_CUDA_MAX_GROUPS,
			      TF_MOE_CUDA_MAX_TOPK);
		goto fail;
	}
	if (c->moe_intermediate_size <= 0) {
		rc = h->error(h, TF_ERR_INVALID, "config.json: moe_intermediate_size %d must be positive",
			      c->moe_intermediate_size);
		goto fail;
	}
	if ((rc = tf_ffn_layer_limit(h, c->expert_swiglu_limit, "expert_swiglu_limit_list", layer,
				      &limit)))
		goto fail;
	int mode = 0;                   /* [tp] moe: split (0) or experts (1), as moe.so */
	if (h->tp_size > 1 && (rc = h->conf_enum(h, "tp", "moe", 0, &mode)))
		goto fail;
	if (mode == 1 && (rc = mcf_place(L, g.n_experts)))
		goto fail;
	L->routed.f = (tf_moe_cuda_mlp_w){ .hidden = (int)L->hidden, .n_experts = g.n_experts,
					   .limit = limit };
	L->routed_all = c->moe_intermediate_size;
	if ((rc = mcf_share(L, ".experts", "moe_intermediate_size", L->routed_all, mode == 0,
			    &L->routed.f, &L->routed_lo)))
		goto fail;
	int64_t shared;
	if ((rc = tf_ffn_shared(h, layer, &shared, &limit)))
		goto fail;
	if (shared) {
		L->shared.f = (tf_moe_cuda_mlp_w){ .hidden = (int)L->hidden, .n_experts = 1,
						   .limit = limit };
		L->shared_all = shared;
		if ((rc = mcf_share(L, ".shared_experts",
				    "moe_shared_expert_intermediate_size x num_shared_experts",
				    shared, true, &L->shared.f, &L->shared_lo)))
			goto fail;
	}
	if ((rc = mcf_upload(L, g.bias)))
		goto fail;
	tf_gate_free(&g);
	mcf_ready(L, inst);
	return TF_OK;
fail:
	tf_gate_free(&g);
	mcf_layer_fini(L);
	return rc;
}

static int mcf_dense_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	const tf_model_config *c = h->model;
	struct mcf_layer *L;
	int rc;

	if (c->hidden_size <= 0 || c->intermediate_size <= 0)
		return h->error(h, TF_ERR_INVALID,
				"config.json: hidden_size %d and intermediate_size %d must be positive",
				c->hidden_size, c->intermediate_size);
	if ((rc = mcf_new(h, layer, prefix, TF_CUDA_PLUGIN_NAME("dense-cuda"), &L)))
		return rc;
	/* No clamp: the limit lists apply to expert MLPs only (dense_layer.c). */
	L->routed.f = (tf_moe_cuda_mlp_w){ .hidden = c->hidden_size, .n_experts = 1 };
	L->routed_all = c->intermediate_size;
	if ((rc = mcf_share(L, "", "intermediate_size", L->routed_all, true, &L->routed.f,
			    &L->routed_lo)) ||
	    (rc = mcf_upload(L, NULL))) {
		mcf_layer_fini(L);
		return rc;
	}
	mcf_ready(L, inst);
	return TF_OK;
}

/* tf_ffn_check_io, and the router's bound (which keeps the plan's rows
 * in int32). */
static int mcf_check_io(const struct mcf_layer *L, const float *x, int64_t n, const float *y)
{
	if (n > 262140)
		return L->h->error(L->h, TF_ERR_RANGE,
				   "layer %d (%s): %lld tokens in one forward; the kernels take 262140",
				   L->layer, L->name, (long long)n);
	return tf_ffn_check_io(L->h, L->prefix, x, n, y);
}

/* The arena, locked, with `bytes` for n tokens; NULL (unlocked) after
 * reporting the error. */
static char *mcf_acquire(const struct mcf_layer *L, int64_t n, size_t bytes)
{
	char *mem = tf_dev_scratch_acquire(&mcf_scratch, bytes);
	if (!mem)
		L->h->error(L->h, TF_ERR_NOMEM,
			    "layer %d (%s): out of device memory for %lld tokens of activations",
			    L->layer, L->name, (long long)n);
	return mem;
}

/* Floats of scratch a set's MLPs need over `rows` rows. */
static int64_t mcf_mlps_scratch(const struct mcf_mlps *m, int64_t rows)
{
	return m->exl3 ? (int64_t)tf_moe_cuda_exl3_scratch(&m->q, rows) : rows * m->f.inter;
}

/* A set's MLPs over rows (tf_moe_cuda_mlp's arguments), queued. */
static int mcf_mlps_run(const struct mcf_layer *L, const struct mcf_mlps *m,
			const tf_moe_cuda_plan *plan, int top_k, const float *x, int64_t n,
			float *h, float *o)
{
	return m->exl3 ? tf_moe_cuda_exl3_mlp(L->stream, &m->q, plan, top_k, x, n, h, o)
		       : tf_moe_cuda_mlp(L->stream, &m->f, plan, top_k, x, n, h, o);
}

/* One MoE forward's buffers, as mcf_moe_forward carves them. */
struct mcf_act {
	float *logits, *w, *h, *o;
	int32_t *idx;
	tf_moe_cuda_plan plan;
};

static size_t mcf_act_bytes(const struct mcf_layer *L, int64_t n)
{
	const int E = L->router.n_experts, k = L->router.top_k;
	const int64_t hs = mcf_mlps_scratch(&L->routed, n * k);
	const int64_t hsh = mcf_mlps_scratch(&L->shared, n);
	return tf_dev_scratch_round((size_t)(n * E) * sizeof(float)) +
	       2 * tf_dev_scratch_round((size_t)(n * k) * sizeof(float)) +
	       tf_dev_scratch_round((size_t)(hs > hsh ? hs : hsh) * sizeof(float)) +
	       tf_dev_scratch_round((size_t)(n * k * L->hidden) * sizeof(float)) +
	       tf_dev_scratch_round(tf_moe_cuda_plan_bytes(E, k, n));
}

static void mcf_carve(const struct mcf_layer *L, int64_t n, char *mem, struct mcf_act *a)
{
	const int E = L->router.n_experts, k = L->router.top_k;
	const int64_t hs = mcf_mlps_scratch(&L->routed, n * k);
	const int64_t hsh = mcf_mlps_scratch(&L->shared, n);
	a->logits = tf_dev_scratch_take(&mem, (size_t)(n * E) * sizeof(float));
	a->idx = tf_dev_scratch_take(&mem, (size_t)(n * k) * sizeof(int32_t));
	a->w = tf_dev_scratch_take(&mem, (size_t)(n * k) * sizeof(float));
	a->h = tf_dev_scratch_take(&mem, (size_t)(hs > hsh ? hs : hsh) * sizeof(float));
	a->o = tf_dev_scratch_take(&mem, (size_t)(n * k * L->hidden) * sizeof(float));
	tf_moe_cuda_plan_init(&a->plan, mem, E, k, n);
}

/* The five launches of moe_cuda.h, queued on the stream. */
static int mcf_moe_queue(const struct mcf_layer *L, const struct mcf_act *a, const float *x,
			 int64_t n, float *y)
{
	const int E = L->router.n_experts, k = L->router.top_k;
	int e;
	if ((e = tf_moe_cuda_route(L->stream, &L->router, x, n, a->logits, a->idx, a->w)))
		return mcf_fail(L, e, "route");
	if ((e = tf_moe_cuda_dispatch(L->stream, &a->plan, a->idx, a->w, n, E, k)))
		return mcf_fail(L, e, "dispatch");
	if ((e = mcf_mlps_run(L, &L->routed, &a->plan, k, x, n, a->h, a->o)))
		return mcf_fail(L, e, "routed experts");
	if (L->shared.f.inter)
		e = mcf_mlps_run(L, &L->shared, NULL, 1, x, n, a->h, y);
	else
		e = cudaMemsetAsync(y, 0, (size_t)(n * L->hidden) * sizeof(float), L->stream);
	if (e)
		return mcf_fail(L, e, "shared expert");
	if ((e = tf_moe_cuda_combine(L->stream, &a->plan, &L->routed.f,
				       L->routed.exl3 ? &L->routed.q : NULL, a->idx, n, k, a->o, y)))
		return mcf_fail(L, e, "combine");
	return TF_OK;
}

static int mcf_moe_forward(void *inst, const float *x, int64_t n, float *y)
{
	const struct mcf_layer *L = inst;
	struct mcf_act a;
	int rc = mcf_check_io(L, x, n, y);
	if (rc || n == 0)
		return rc;
	char *mem = mcf_acquire(L, n, mcf_act_bytes(L, n));
	if (!mem)
		return TF_ERR_NOMEM;
	mcf_carve(L, n, mem, &a);
	rc = mcf_moe_queue(L, &a, x, n, y);
	tf_dev_scratch_release(&mcf_scratch);
	return rc;
}

static int mcf_dense_forward(void *inst, const float *x, int64_t n, float *y)
{
	const struct mcf_layer *L = inst;
	int rc = mcf_check_io(L, x, n, y), e;
	if (rc || n == 0)
		return rc;
	float *hbuf = (float *)mcf_acquire(L, n,
					   (size_t)mcf_mlps_scratch(&L->routed, n) * sizeof(float));
	if (!hbuf)
		return TF_ERR_NOMEM;
	if ((e = mcf_mlps_run(L, &L->routed, NULL, 1, x, n, hbuf, y)))
		rc = mcf_fail(L, e, "MLP");
	tf_dev_scratch_release(&mcf_scratch);
	return rc;
}

static const tf_plugin_ffn mcf_moe = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_ffn, TF_KIND_FFN, TF_CUDA_PLUGIN_NAME("moe-cuda"),
				"0.1.0",
				"MoE on CUDA: device router, expert MLPs over EXL3 or fp32 weights, shared expert",
				mcf_probe),
	.layer_type = "moe",
	.layer_init = mcf_moe_init,
	.layer_fini = mcf_layer_fini,
	.forward = mcf_moe_forward,
};

static const tf_plugin_ffn mcf_dense = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_ffn, TF_KIND_FFN, TF_CUDA_PLUGIN_NAME("dense-cuda"),
				"0.1.0", "dense SwiGLU MLP on CUDA over EXL3 or fp32 weights", mcf_probe),
	.layer_type = "dense",
	.layer_init = mcf_dense_init,
	.layer_fini = mcf_layer_fini,
	.forward = mcf_dense_forward,
};

TF_EXPORT const tf_plugin_ffn *tf_plugin_ffn_v1(unsigned index)
{
	static const tf_plugin_ffn *const all[] = { &mcf_moe, &mcf_dense };

	return index < sizeof(all) / sizeof(all[0]) ? all[index] : NULL;
}
