/*
 * tf/router.h - the router kind (since ABI 1.4): which experts each token
 * of a MoE layer visits, and with what weight.
 *
 * A router instance serves one MoE layer.  It owns everything routing reads
 * from the checkpoint under the layer's prefix (the gate projection
 * `<prefix>.gate`, the expert bias) and everything config.json says about
 * it (scoring function, expert bias, groups, top-k, renormalisation,
 * scaling: tf_model_config's MoE fields), and turns hidden states into
 * expert ids and weights.
 *
 * An ffn plugin never calls a router directly: it asks the host
 * (tf_host.router_open), which picks the router the INI pins for the layer
 * ([plugins] layer.<i>.router, else router) or the best-scoring one, and
 * routes through tf_host.router_route, which checks every answer.
 *
 * Expert ids are global (0 .. num_experts-1) and every tensor-parallel rank
 * routes the same tokens to the same experts.  When tensor parallelism
 * gives each rank whole experts ([tp] moe = experts), the router also says
 * which rank holds each expert (place, ABI 1.6; tf_router_place): an ffn
 * plugin loads and runs the experts tf_router_rank_experts lists for its
 * rank, and the memory plan counts the same split.
 */
#ifndef TF_ROUTER_H
#define TF_ROUTER_H

#include <math.h>
#include <stddef.h>

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_plugin_router {
	tf_plugin_header hdr;

	/* `prefix` is "model.layers.<layer>.mlp".  Validates the MoE keys of
	 * h->model and the router's tensors, failing naming the key or tensor. */
	int (*layer_init)(const tf_host *h, int layer, const char *prefix, void **inst);
	void (*layer_fini)(void *inst);

	/* Route n tokens: x[n, hidden_size] in backend memory; idx[n, top_k]
	 * (expert ids, distinct per token, best first) and w[n, top_k] (their
	 * weights, finite) in host memory, top_k = num_experts_per_tok.
	 * Deterministic: the same x gives the same bits. */
	int (*route)(void *inst, const float *x, int64_t n, int32_t *idx, float *w);

	/* Optional: the INI keys this router reads (tf/plugin.h). */
	const tf_plugin_key *keys;

	/*
	 * Optional, ABI 1.6: expert placement over tp_size ranks (1 ..
	 * num_experts).  Fill rank_of[num_experts] (host memory) with the rank
	 * holding each expert, each rank holding at least one; the same answer
	 * on every rank and every call.  Without it experts go to ranks in
	 * contiguous blocks (tf_router_place_blocks).
	 */
	int (*place)(void *inst, int tp_size, int32_t *rank_of);
} tf_plugin_router;

/* An opened router, as ffn plugins hold it (tf_host.router_open). */
typedef struct tf_router {
	const tf_plugin_router *ops;
	void *impl;
	int layer;
	int n_experts, top_k;           /* bounds of what route may answer */
} tf_router;

/*
 * Whether n tokens' answer idx/w obeys the contract above: TF_OK, or
 * TF_ERR_INTERNAL with *token and *slot set at the first fault.  Hosts call
 * it after every route; a router's own tests may too.
 */
static inline int tf_router_check(const tf_router *r, const int32_t *idx,
				  const float *w, int64_t n, int64_t *token, int *slot)
{
	for (int64_t t = 0; t < n; t++)
		for (int j = 0; j < r->top_k; j++) {
			int32_t e = idx[t * r->top_k + j];
			int bad = e < 0 || e >= r->n_experts || !isfinite(w[t * r->top_k + j]);
			for (int i = 0; !bad && i < j; i++)
				bad = idx[t * r->top_k + i] == e;
			if (bad) {
				*token = t;
				*slot = j;
				return TF_ERR_INTERNAL;
			}
		}
	return TF_OK;
}

/* Contiguous, balanced blocks: expert e on rank e * tp_size / n_experts
 * (sizes differ by at most one).  tp_size 1 .. n_experts. */
static inline int tf_router_block_rank(int e, int n_experts, int tp_size)
{
	return (int)((int64_t)e * tp_size / n_experts);
}

static inline void tf_router_place_blocks(int n_experts, int tp_size, int32_t *rank_of)
{
	for (int e = 0; e < n_experts; e++)
		rank_of[e] = tf_router_block_rank(e, n_experts, tp_size);
}

/*
 * Where r's experts live on tp_size ranks: its place slot, else blocks.
 * TF_ERR_INVALID when tp_size is not 1 .. n_experts; TF_ERR_INTERNAL when
 * the answer names a rank out of range or leaves a rank empty (hosts and
 * tests call this, never the slot, so every answer is checked).
 */
static inline int tf_router_place(const tf_router *r, int tp_size, int32_t *rank_of)
{
	const tf_plugin_router *o = r->ops;
	int has = o && o->hdr.struct_size >= offsetof(tf_plugin_router, place) + sizeof(void *) &&
		  o->place;
	int rc = 0;

	if (tp_size < 1 || tp_size > r->n_experts)
		return TF_ERR_INVALID;
	if (has)
		rc = o->place(r->impl, tp_size, rank_of);
	else
		tf_router_place_blocks(r->n_experts, tp_size, rank_of);
	if (rc)
		return rc;
	for (int k = 0; k < tp_size; k++) {
		int held = 0;
		for (int e = 0; e < r->n_experts; e++) {
			if (rank_of[e] < 0 || rank_of[e] >= tp_size)
				return TF_ERR_INTERNAL;
			held += rank_of[e] == k;
		}
		if (!held)
			return TF_ERR_INTERNAL;
	}
	return TF_OK;
}

/* The experts rank_of puts on `rank`, ascending, into out (room for
 * n_experts); returns how many. */
static inline int tf_router_rank_experts(const int32_t *rank_of, int n_experts, int rank,
					 int32_t *out)
{
	int n = 0;
	for (int e = 0; e < n_experts; e++)
		if (rank_of[e] == rank)
			out[n++] = e;
	return n;
}

const tf_plugin_router *tf_plugin_router_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_ROUTER_H */
