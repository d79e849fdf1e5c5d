/*
 * moe_layer.c - the MoE block: y = sum_j w_j * expert_{idx_j}(x) + shared(x).
 *
 * Tokens are batched per expert: the router's choices are sorted by
 * expert, each expert with work gathers its rows, runs once over all of
 * them, and its weighted output is added back to each row.  A decode step
 * (n = 1) is the same loop with only top_k experts holding a row.
 *
 * Experts are visited in ascending index, so every token's output sums its
 * experts in the same order whether it was routed alone or in a batch of
 * any size.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "mlp.h"
#include "router.h"
#include "tf/backend.h"

struct moe_layer {
	const tf_host *host;
	char prefix[256];
	tf_router router;
	tf_mlp *experts;                /* [num_experts]; only this rank's are open */
	tf_mlp shared;                  /* open when present and on rank 0 */
	int64_t hidden;
	int64_t scratch_per_row;        /* floats, for the widest open MLP; 0: none open */
};

/* The clamp for this layer from a per-layer list: 0 (none) when absent. */
static int layer_limit(const tf_host *h, const float *list, const char *key,
		       int layer, float *limit)
{
	*limit = list && layer < h->model->n_layers_total ? list[layer] : 0.0f;
	if (!(*limit >= 0) || isinf(*limit))
		return h->error(h, TF_ERR_INVALID, "config.json: %s[%d] = %g is not a limit >= 0",
				key, layer, (double)*limit);
	return TF_OK;
}

static bool owns_expert(const tf_host *h, int e)
{
	return h->tp_size <= 1 || e % h->tp_size == h->tp_rank;
}

int tf_moe_layer_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	const tf_model_config *c = h->model;
	struct moe_layer *L;
	char name[512];
	int rc;

	if (layer < 0 || (c->n_layers_total > 0 && layer >= c->n_layers_total))
		return h->error(h, TF_ERR_INVALID, "%s: layer %d outside the model's %d layers",
				prefix, layer, c->n_layers_total);
	L = calloc(1, sizeof(*L));
	if (!L)
		return h->error(h, TF_ERR_NOMEM, "%s: no memory", prefix);
	L->host = h;
	L->hidden = c->hidden_size;
	snprintf(L->prefix, sizeof(L->prefix), "%s", prefix);

	rc = tf_router_init(&L->router, h, prefix);
	if (rc)
		goto fail;
	if (c->moe_intermediate_size <= 0) {
		rc = h->error(h, TF_ERR_INVALID, "config.json: moe_intermediate_size %d must be positive",
			      c->moe_intermediate_size);
		goto fail;
	}
	L->experts = calloc((size_t)c->num_experts, sizeof(*L->experts));
	if (!L->experts) {
		rc = h->error(h, TF_ERR_NOMEM, "%s: no memory for %d experts", prefix,
			      c->num_experts);
		goto fail;
	}
	float limit;
	rc = layer_limit(h, c->expert_swiglu_limit, "expert_swiglu_limit_list", layer, &limit);
	if (rc)
		goto fail;
	for (int e = 0; e < c->num_experts; e++) {
		if (!owns_expert(h, e))
			continue;
		snprintf(name, sizeof(name), "%s.experts.%d", prefix, e);
		rc = tf_mlp_init(&L->experts[e], h, name, c->hidden_size,
				 c->moe_intermediate_size, limit);
		if (rc)
			goto fail;
		L->scratch_per_row = tf_mlp_scratch(&L->experts[e], 1);
	}

	if (c->num_shared_experts > 0 && tf_ffn_rank0(h)) {
		if (c->moe_shared_expert_intermediate_size <= 0) {
			rc = h->error(h, TF_ERR_INVALID,
				      "config.json: moe_shared_expert_intermediate_size %d must be positive with num_shared_experts %d",
				      c->moe_shared_expert_intermediate_size, c->num_shared_experts);
			goto fail;
		}
		rc = layer_limit(h, c->shared_swiglu_limit, "share_expert_swiglu_limit_list",
				 layer, &limit);
		if (rc)
			goto fail;
		/* n shared experts are stored fused into one wider MLP. */
		snprintf(name, sizeof(name), "%s.shared_experts", prefix);
		rc = tf_mlp_init(&L->shared, h, name, c->hidden_size,
				 (int64_t)c->moe_shared_expert_intermediate_size * c->num_shared_experts,
				 limit);
		if (rc)
			goto fail;
		if (tf_mlp_scratch(&L->shared, 1) > L->scratch_per_row)
			L->scratch_per_row = tf_mlp_scratch(&L->shared, 1);
	}
	*inst = L;
	return TF_OK;
fail:
	tf_moe_layer_fini(L);
	return rc;
}

void tf_moe_layer_fini(void *inst)
{
	struct moe_layer *L = inst;

	if (!L)
		return;
	if (L->experts)
		for (int e = 0; e < L->router.n_experts; e++)
			tf_mlp_free(&L->experts[e], L->host);
	tf_mlp_free(&L->shared, L->host);
	tf_router_free(&L->router);
	free(L->experts);
	free(L);
}

/* Which rows each expert serves: rows of expert e are [off[e], off[e+1]). */
struct moe_plan {
	int32_t *idx;                   /* [n, top_k] router choices */
	float *w;                       /* [n, top_k] their weights */
	int32_t *off;                   /* [E + 1] */
	int32_t *tok;                   /* [n * top_k] token of each row */
	float *tok_w;                   /* [n * top_k] its weight */
};

static void plan_free(struct moe_plan *p)
{
	free(p->idx);
	free(p->w);
	free(p->off);
	free(p->tok);
	free(p->tok_w);
}

/* Route x and bucket the choices by expert, tokens ascending in a bucket. */
static int plan_build(struct moe_plan *p, const struct moe_layer *L,
		      const float *x, int64_t n)
{
	const tf_router *r = &L->router;
	int64_t nk = n * r->top_k;
	int E = r->n_experts;
	int rc;

	*p = (struct moe_plan){
		.idx = malloc((size_t)nk * sizeof(int32_t)),
		.w = malloc((size_t)nk * sizeof(float)),
		.off = calloc((size_t)E + 1, sizeof(int32_t)),
		.tok = malloc((size_t)nk * sizeof(int32_t)),
		.tok_w = malloc((size_t)nk * sizeof(float)),
	};
	if (!p->idx || !p->w || !p->off || !p->tok || !p->tok_w)
		return L->host->error(L->host, TF_ERR_NOMEM, "%s: no memory to route %lld tokens",
				      L->prefix, (long long)n);
	rc = tf_router_route(r, x, n, p->idx, p->w);
	if (rc)
		return rc;

	for (int64_t i = 0; i < nk; i++)
		p->off[p->idx[i] + 1]++;
	for (int e = 0; e < E; e++)
		p->off[e + 1] += p->off[e];
	/* Fill each bucket from its start; off[e] ends at the next start. */
	for (int64_t i = 0; i < nk; i++) {
		int32_t at = p->off[p->idx[i]]++;
		p->tok[at] = (int32_t)(i / r->top_k);
		p->tok_w[at] = p->w[i];
	}
	for (int e = E; e > 0; e--)
		p->off[e] = p->off[e - 1];
	p->off[0] = 0;
	return TF_OK;
}

/* y[t] += w * expert_e(x[t]) for the rows routed to e, run as one batch
 * through the buffers xg, o [rows, hidden] and the MLP scratch. */
static int expert_apply(const struct moe_layer *L, int e, const struct moe_plan *p,
			const float *x, float *y, float *xg, float *o, float *scratch)
{
	int32_t first = p->off[e], rows = p->off[e + 1] - first;
	int64_t H = L->hidden;
	int rc;

	for (int32_t j = 0; j < rows; j++)
		memcpy(xg + j * H, x + p->tok[first + j] * H, (size_t)H * sizeof(float));
	rc = tf_mlp_forward(&L->experts[e], L->host, xg, rows, o, scratch);
	for (int32_t j = 0; !rc && j < rows; j++) {
		float *yt = y + p->tok[first + j] * H;
		const float *ot = o + j * H;
		float wt = p->tok_w[first + j];
		for (int64_t c = 0; c < H; c++)
			yt[c] += wt * ot[c];
	}
	return rc;
}

int tf_moe_layer_forward(void *inst, const float *x, int64_t n, float *y)
{
	struct moe_layer *L = inst;
	const tf_host *h = L->host;
	const tf_backend *be = h->backend;
	int64_t H = L->hidden;
	struct moe_plan plan = { 0 };
	float *xg = NULL, *o = NULL, *scratch = NULL;
	int rc;

	rc = tf_ffn_check_io(h, L->prefix, x, n, y);
	if (rc || n == 0)
		return rc;
	if (n > INT32_MAX / L->router.top_k)
		return h->error(h, TF_ERR_RANGE, "%s: %lld tokens in one forward",
				L->prefix, (long long)n);
	rc = plan_build(&plan, L, x, n);
	if (rc)
		goto out;

	/* An MLP runs over at most n rows. */
	xg = be->alloc(h->backend_ctx, (size_t)(n * H) * sizeof(float));
	o = be->alloc(h->backend_ctx, (size_t)(n * H) * sizeof(float));
	if (L->scratch_per_row)
		scratch = be->alloc(h->backend_ctx,
				    (size_t)(n * L->scratch_per_row) * sizeof(float));
	if (!xg || !o || (L->scratch_per_row && !scratch)) {
		rc = h->error(h, TF_ERR_NOMEM, "%s: no memory for %lld tokens",
			      L->prefix, (long long)n);
		goto out;
	}

	if (L->shared.inter)
		rc = tf_mlp_forward(&L->shared, h, x, n, y, scratch);
	else
		memset(y, 0, (size_t)(n * H) * sizeof(float));

	for (int e = 0; !rc && e < L->router.n_experts; e++)
		if (L->experts[e].inter && plan.off[e + 1] > plan.off[e])
			rc = expert_apply(L, e, &plan, x, y, xg, o, scratch);
out:
	if (xg)
		be->free(h->backend_ctx, xg);
	if (o)
		be->free(h->backend_ctx, o);
	if (scratch)
		be->free(h->backend_ctx, scratch);
	plan_free(&plan);
	return rc;
}
