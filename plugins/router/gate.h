/*
 * gate.h - one MoE layer's routing (ling-arch.md §1.8, DeepSeek-V3
 * "noaux_tc" routing), shared by the router plugins of router.so.
 *
 * For each token:
 *
 *     logits = x · Wᵀ                     fp32 (see below)
 *     s      = sigmoid(logits)            (softmax over experts if configured)
 *     sb     = s + expert_bias            selection only, never the weights
 *     groups: split sb into n_group equal groups, score each group by the
 *             sum of its two largest sb (by its largest s when there is
 *             no expert bias: vLLM's grouped_topk, DeepSeek-V2's rule),
 *             keep the topk_group best groups, and set sb of every
 *             expert outside them to -inf
 *     idx    = the top_k experts by sb
 *     w      = s[idx] / (sum s[idx] + 1e-20)   when norm_topk_prob and top_k > 1
 *     w     *= routed_scaling_factor
 *
 * Ties everywhere (groups and experts) go to the lower index, so selection
 * is a pure function of the scores.  idx is listed best first.  The router
 * plugins differ only in how they pick the largest values (topk.h).
 *
 * The gate is opened through host->lin_open like any projection: a plain
 * F32/BF16/F16 weight is widened exactly and accumulated in fp32 against
 * fp32 activations, which is the fp32 router the reference runs, without
 * keeping a second fp32 copy of the weight.
 */
#ifndef TF_ROUTER_GATE_H
#define TF_ROUTER_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include "tf/quant.h"
#include "topk.h"

typedef struct tf_gate {
	const tf_host *host;
	char prefix[256];               /* "model.layers.<i>.mlp", for errors */
	int64_t hidden;
	int n_experts, top_k;
	int n_group, topk_group;        /* n_group 1: no group rule */
	bool sigmoid;                   /* else softmax scoring */
	bool norm_topk;
	float scaling;
	tf_lin gate;                    /* hidden -> n_experts */
	float *bias;                    /* [n_experts], NULL without expert bias */
} tf_gate;

/* Validate the routing keys of host->model, open `<prefix>.gate` and, when
 * the config enables it, load `<prefix>.gate.expert_bias` (or its other
 * name `gate.e_score_correction_bias`).  `prefix` is the layer's
 * "model.layers.<i>.mlp".  Errors name the config key or the tensor. */
int tf_gate_init(tf_gate *g, const tf_host *h, const char *prefix);
void tf_gate_free(tf_gate *g);

/* Route n tokens x[n, hidden] (backend memory), picking with `top`:
 * idx[n, top_k] and w[n, top_k] (host memory). */
int tf_gate_route(const tf_gate *g, tf_topk_fn top, const float *x, int64_t n,
		  int32_t *idx, float *w);

#endif /* TF_ROUTER_GATE_H */
