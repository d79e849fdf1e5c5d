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


#endif /* TF_MOE_LAYERS_H */
