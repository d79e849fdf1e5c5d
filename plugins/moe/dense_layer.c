/*
 * dense_layer.c - the plain SwiGLU MLP of the first first_k_dense_replace
 * layers (ling-arch.md §1.7).  No clamp: the reference implementations
 * apply the limit lists to expert MLPs only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "mlp.h"
#include "tf/backend.h"

struct dense_layer {
	const tf_host *host;
	char prefix[256];
	tf_mlp mlp;                     /* open on rank 0 only */
	int64_t hidden;
};

int tf_dense_layer_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	const tf_model_config *c = h->model;
	struct dense_layer *L;
	int rc;

	if (c->hidden_size <= 0 || c->intermediate_size <= 0)
		return h->error(h, TF_ERR_INVALID,
				"config.json: hidden_size %d and intermediate_size %d must be positive",
				c->hidden_size, c->intermediate_size);
	L = calloc(1, sizeof(*L));
	if (!L)
		return h->error(h, TF_ERR_NOMEM, "%s: no memory", prefix);
	L->host = h;
	L->hidden = c->hidden_size;
	snprintf(L->prefix, sizeof(L->prefix), "%s", prefix);
	rc = tf_mlp_init(&L->mlp, h, prefix, c->hidden_size, c->intermediate_size,
			 "intermediate_size", 0.0f, true);
	if (rc) {
		free(L);
		return rc;
	}
	*inst = L;
	return TF_OK;
}

void tf_dense_layer_fini(void *inst)
{
	struct dense_layer *L = inst;

	if (!L)
		return;
	tf_mlp_free(&L->mlp, L->host);
	free(L);
}

int tf_dense_layer_forward(void *inst, const float *x, int64_t n, float *y)
{
	struct dense_layer *L = inst;
	const tf_host *h = L->host;
	const tf_backend *be = h->backend;
	int rc;

	rc = tf_ffn_check_io(h, L->prefix, x, n, y);
	if (rc || n == 0)
		return rc;
	if (!L->mlp.inter) {
		memset(y, 0, (size_t)(n * L->hidden) * sizeof(float));
		return TF_OK;
	}
	float *scratch = be->alloc(h->backend_ctx,
				   (size_t)tf_mlp_scratch(&L->mlp, n) * sizeof(float));
	if (!scratch)
		return h->error(h, TF_ERR_NOMEM, "%s: no memory for %lld tokens",
				L->prefix, (long long)n);
	rc = tf_mlp_forward(&L->mlp, h, x, n, y, scratch);
	be->free(h->backend_ctx, scratch);
	return rc;
}
