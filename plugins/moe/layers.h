/*
 * layers.h - the two layer types this plugin serves (tf/ffn.h): the MoE
 * block and the dense MLP.  plugin.c wraps them in descriptors.
 *
 * Tensor parallel: the runtime sums every rank's block output, so each
 * rank computes a partial sum.  The dense MLP and the shared expert split
 * their intermediate features over the ranks; routed experts do too with
 * [tp] moe = split (the default), while with moe = experts each routed
 * expert belongs whole to the rank the router places it on
 * (tf_router_place).  The router runs everywhere (every rank must agree on
 * routing).
 *
 * An instance keeps no state between calls; forward allocates its
 * working buffers per call, so sizing needs no knowledge of the prefill
 * chunk.  x and y must not overlap.
 */
#ifndef TF_MOE_LAYERS_H
#define TF_MOE_LAYERS_H

#include <math.h>
#include <stdbool.h>

#include "tf/ffn.h"

int tf_moe_layer_init(const tf_host *h, int layer, const char *prefix, void **inst);
void tf_moe_layer_fini(void *inst);
int tf_moe_layer_forward(void *inst, const float *x, int64_t n, float *y);

int tf_dense_layer_init(const tf_host *h, int layer, const char *prefix, void **inst);
void tf_dense_layer_fini(void *inst);
int tf_dense_layer_forward(void *inst, const float *x, int64_t n, float *y);

/* The arguments every forward checks first. */
static inline int tf_ffn_check_io(const tf_host *h, const char *prefix,
				  const float *x, int64_t n, const float *y)
{
	if (n < 0 || (n > 0 && (!x || !y || x == y)))
		return h->error(h, TF_ERR_INVALID,
				"%s: forward needs separate x and y buffers and n >= 0 (n = %lld)",
				prefix, (long long)n);
	return TF_OK;
}

/* The clamp for `layer` from a per-layer list: 0 (none) when absent. */
static inline int tf_ffn_layer_limit(const tf_host *h, const float *list, const char *key,
				     int layer, float *limit)
{
	*limit = list && layer < h->model->n_layers_total ? list[layer] : 0.0f;
	if (!(*limit >= 0) || isinf(*limit))
		return h->error(h, TF_ERR_INVALID, "config.json: %s[%d] = %g is not a limit >= 0",
				key, layer, (double)*limit);
	return TF_OK;
}

/* The shared expert's width and clamp: n shared experts are stored fused
 * into one MLP of n times the width; *inter 0 when there is none. */
static inline int tf_ffn_shared(const tf_host *h, int layer, int64_t *inter, float *limit)
{
	const tf_model_config *c = h->model;
	*inter = 0;
	*limit = 0.0f;
	if (c->num_shared_experts <= 0)
		return TF_OK;
	if (c->moe_shared_expert_intermediate_size <= 0)
		return h->error(h, TF_ERR_INVALID,
				"config.json: moe_shared_expert_intermediate_size %d must be positive with num_shared_experts %d",
				c->moe_shared_expert_intermediate_size, c->num_shared_experts);
	*inter = (int64_t)c->moe_shared_expert_intermediate_size * c->num_shared_experts;
	return tf_ffn_layer_limit(h, c->shared_swiglu_limit, "share_expert_swiglu_limit_list",
				  layer, limit);
}

#endif /* TF_MOE_LAYERS_H */
