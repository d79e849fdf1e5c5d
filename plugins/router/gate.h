/*
 * router.h - the MoE router: which experts each token visits, and with
 * what weight (ling-arch.md §1.8, DeepSeek-V3 "noaux_tc" routing).
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
 * is a pure function of the scores.  idx is listed best first.
 *
 * The gate is opened through host->lin_open like any projection: a plain
 * F32/BF16/F16 weight is widened exactly and accumulated in fp32 against
 * fp32 activations, which is the fp32 router the reference runs, without
 * keeping a second fp32 copy of the weight.
 */
#ifndef TF_MOE_ROUTER_H
#define TF_MOE_ROUTER_H

#include <stdbool.h>
#include <stdint.h>

#include "tf/quant.h"

typedef struct tf_router {
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
} tf_router;

/* Validate the routing keys of host->model, open `<prefix>.gate` and, when
 * the config enables it, load `<prefix>.gate.expert_bias` (or its other
 * name `gate.e_score_correction_bias`).  `prefix` is the layer's
 * "model.layers.<i>.mlp".  Errors name the config key or the tensor. */
int tf_router_init(tf_router *r, const tf_host *h, const char *prefix);
void tf_router_free(tf_router *r);

/* Floats of scratch that tf_router_select needs. */
int64_t tf_router_scratch(const tf_router *r);

/* Route one token from its fp32 logits [n_experts]: idx[top_k], w[top_k]. */
void tf_router_select(const tf_router *r, const float *logits, float *scratch,
		      int32_t *idx, float *w);

/* Route n tokens x[n, hidden] (backend memory): idx[n, top_k] and
 * w[n, top_k] (host memory). */
int tf_router_route(const tf_router *r, const float *x, int64_t n,
		    int32_t *idx, float *w);

#endif /* TF_MOE_ROUTER_H */
