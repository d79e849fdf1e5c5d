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
 * routes the same tokens to the same experts; which rank runs an expert is
 * the ffn plugin's business today.  Slots that place experts across ranks
 * will be appended here by the tensor-parallel work.
 */
#ifndef TF_ROUTER_H
#define TF_ROUTER_H

#include <math.h>

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

const tf_plugin_router *tf_plugin_router_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_ROUTER_H */
