/*
 * moe_layer.c - the MoE block: y = sum_j w_j * expert_{idx_j}(x) + shared(x).
 *
 * Tokens are batched per expert: the router's choices are sorted by
 * expert, each expert with work gathers its rows, runs once over all of
 * them, and its weighted output is added back to each row.  A decode step
 * (n = 1) is the same with only top_k experts holding a row.
 *
 * Outputs are added in ascending expert index, so every token's output
 * sums its experts in the same order whether it was routed alone or in a
 * batch of any size, on any number of threads.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "mlp.h"
#include "tf/backend.h"
#include "tf/router.h"

struct moe_layer {
	const tf_host *host;
	char prefix[256];
	tf_router router;
	tf_mlp *experts;                /* [num_experts]; only this rank's are open */
	tf_mlp shared;                  /* open when present: this rank's share */
	int64_t hidden;
};

/* [tp] moe: each expert's intermediate features split over the ranks,
 * or whole experts on the rank the router places them (tf_router_place,
 * as the memory plan counts them). */
enum { MOE_TP_SPLIT, MOE_TP_EXPERTS };

/* rank_of[e] for every expert: this rank for all of them unless whole
 * experts are dealt out. */
static int place_experts(const tf_host *h, const tf_router *r, int mode, int32_t *rank_of)
{
	int rc;

	if (h->tp_size <= 1 || mode == MOE_TP_SPLIT) {
		for (int e = 0; e < r->n_experts; e++)
			rank_of[e] = h->tp_rank;
		return TF_OK;
	}
	rc = tf_router_place(r, h->tp_size, rank_of);
	if (rc)
		return h->error(h, rc, "router %s cannot place %d experts on %d ranks "
				"([tp] moe = experts)", r->ops->hdr.name, r->n_experts, h->tp_size);
	return TF_OK;
}

int tf_moe_layer_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	const tf_model_config *c = h->model;
	struct moe_layer *L;
	int32_t *rank_of = NULL;
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

	rc = h->router_open(h, layer, prefix, &L->router);
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
	int mode = MOE_TP_SPLIT;
	rc = tf_ffn_layer_limit(h, c->expert_swiglu_limit, "expert_swiglu_limit_list", layer,
				&limit);
	if (!rc && h->tp_size > 1)
		rc = h->conf_enum(h, "tp", "moe", MOE_TP_SPLIT, &mode);
	if (!rc) {
		rank_of = malloc((size_t)L->router.n_experts * sizeof(*rank_of));
		rc = rank_of ? place_experts(h, &L->router, mode, rank_of)
			     : h->error(h, TF_ERR_NOMEM, "%s: no memory", prefix);
	}
	if (rc)
		goto fail;
	for (int e = 0; e < c->num_experts; e++) {
		if (rank_of[e] != h->tp_rank)
			continue;
		snprintf(name, sizeof(name), "%s.experts.%d", prefix, e);
		rc = tf_mlp_init(&L->experts[e], h, name, c->hidden_size,
				 c->moe_intermediate_size, "moe_intermediate_size", limit,
				 mode == MOE_TP_SPLIT);
		if (rc)
			goto fail;
	}

	int64_t shared;
	rc = tf_ffn_shared(h, layer, &shared, &limit);
	if (rc)
		goto fail;
	if (shared) {
		snprintf(name, sizeof(name), "%s.shared_experts", prefix);
		rc = tf_mlp_init(&L->shared, h, name, c->hidden_size, shared,
				 "moe_shared_expert_intermediate_size x num_shared_experts", limit,
				 true);
		if (rc)
			goto fail;
	}
	free(rank_of);
	*inst = L;
	return TF_OK;
fail:
	free(rank_of);
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
	L->host->router_close(L->host, &L->router);
	free(L->experts);
	free(L);
}

/*
 * Experts run side by side, one whole expert per worker, when there are
 * enough of them to keep every worker busy (prefill); otherwise (decode,
 * a few experts) one after another, each spreading its linears over the
 * workers.  Side by side keeps every expert's output until the end, so it
 * is also capped in memory.
 */
#define MOE_EXPERTS_PER_WORKER 4
#define MOE_PARALLEL_MAX_BYTES ((size_t)256 << 20)

/* Which rows each expert serves: rows of expert e are [off[e], off[e+1]). */
struct moe_plan {
	int32_t *idx;                   /* [n, top_k] router choices */
	float *w;                       /* [n, top_k] their weights */
	int32_t *off;                   /* [E + 1] */
	int32_t *tok;                   /* [n * top_k] token of each row */
	float *tok_w;                   /* [n * top_k] its weight */
	int32_t *active;                /* experts with rows here, ascending */
	int32_t n_active, rows_max;     /* how many; the most rows of one */
};

static void plan_free(struct moe_plan *p)
{
	free(p->idx);
	free(p->w);
	free(p->off);
	free(p->tok);
	free(p->tok_w);
	free(p->active);
}

/* Route x and bucket the choices by expert, tokens ascending in a bucket;
 * list the experts this rank runs. */
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
		.active = malloc((size_t)E * sizeof(int32_t)),
	};
	if (!p->idx || !p->w || !p->off || !p->tok || !p->tok_w || !p->active)
		return L->host->error(L->host, TF_ERR_NOMEM, "%s: no memory to route %lld tokens",
				      L->prefix, (long long)n);
	rc = L->host->router_route(L->host, r, x, n, p->idx, p->w);
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

	for (int e = 0; e < E; e++) {
		int32_t rows = p->off[e + 1] - p->off[e];
		if (!rows || !L->experts[e].inter)
			continue;       /* idle, or another rank's */
		p->active[p->n_active++] = e;
		if (rows > p->rows_max)
			p->rows_max = rows;
	}
	return TF_OK;
}

/* o[rows, hidden] = expert e over its rows of x, gathered into xg. */
static int expert_run(const struct moe_layer *L, int e, const struct moe_plan *p,
		      const float *x, float *xg, float *o, float *scratch)
{
	int32_t first = p->off[e], rows = p->off[e + 1] - first;
	int64_t H = L->hidden;

	for (int32_t j = 0; j < rows; j++)
		memcpy(xg + j * H, x + p->tok[first + j] * H, (size_t)H * sizeof(float));
	return tf_mlp_forward(&L->experts[e], L->host, xg, rows, o, scratch);
}

/* y[t] += w * o[j] over expert e's rows j. */
static void expert_scatter(const struct moe_layer *L, int e, const struct moe_plan *p,
			   const float *o, float *y)
{
	int32_t first = p->off[e], rows = p->off[e + 1] - first;
	int64_t H = L->hidden;

	for (int32_t j = 0; j < rows; j++) {
		float *yt = y + p->tok[first + j] * H;
		const float *ot = o + j * H;
		float wt = p->tok_w[first + j];
		for (int64_t c = 0; c < H; c++)
			yt[c] += wt * ot[c];
	}
}

/* Per-worker gather and MLP scratch buffers, for rows_max rows each. */
struct expert_bufs {
	float *xg, *scratch;
	int64_t xg_stride, scratch_stride;      /* floats per worker */
};

static int bufs_alloc(struct expert_bufs *b, const struct moe_layer *L,
		      const struct moe_plan *p, int workers)
{
	const tf_host *h = L->host;
	const tf_mlp *m = &L->experts[p->active[0]];

	b->xg_stride = p->rows_max * L->hidden;
	b->scratch_stride = tf_mlp_scratch(m, p->rows_max);
	b->xg = h->backend->alloc(h->backend_ctx, (size_t)(workers * b->xg_stride) * sizeof(float));
	b->scratch = h->backend->alloc(h->backend_ctx,
				       (size_t)(workers * b->scratch_stride) * sizeof(float));
	if (!b->xg || !b->scratch)
		return h->error(h, TF_ERR_NOMEM, "%s: no memory for %d experts' rows",
				L->prefix, p->n_active);
	return TF_OK;
}

static void bufs_free(struct expert_bufs *b, const struct moe_layer *L)
{
	const tf_host *h = L->host;

	if (b->xg)
		h->backend->free(h->backend_ctx, b->xg);
	if (b->scratch)
		h->backend->free(h->backend_ctx, b->scratch);
}

/* The reference path: experts one after another, in ascending index. */
static int experts_serial(const struct moe_layer *L, const struct moe_plan *p,
			  const float *x, float *y)
{
	const tf_host *h = L->host;
	struct expert_bufs b = { 0 };
	float *o = h->backend->alloc(h->backend_ctx,
				     (size_t)(p->rows_max * L->hidden) * sizeof(float));
	int rc = o ? bufs_alloc(&b, L, p, 1)
		   : h->error(h, TF_ERR_NOMEM, "%s: no memory for expert output", L->prefix);

	for (int32_t i = 0; !rc && i < p->n_active; i++) {
		rc = expert_run(L, p->active[i], p, x, b.xg, o, b.scratch);
		if (!rc)
			expert_scatter(L, p->active[i], p, o, y);
	}
	bufs_free(&b, L);
	if (o)
		h->backend->free(h->backend_ctx, o);
	return rc;
}

struct experts_job {
	const struct moe_layer *L;
	const struct moe_plan *p;
	const float *x;
	float *o;                       /* [n * top_k, hidden], rows as in the plan */
	struct expert_bufs *b;
	int *status;                    /* [n_active] */
};

static void experts_range(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct experts_job *j = arg;
	int64_t H = j->L->hidden;

	for (int64_t i = begin; i < end; i++) {
		int e = j->p->active[i];
		j->status[i] = expert_run(j->L, e, j->p, j->x,
					  j->b->xg + worker * j->b->xg_stride,
					  j->o + j->p->off[e] * H,
					  j->b->scratch + worker * j->b->scratch_stride);
	}
}

/*
 * Experts side by side, then scattered in ascending index: each token sums
 * the same values in the same order as experts_serial, so the two paths
 * agree to the bit.  Relies on linears of different experts running
 * concurrently, and their own parallel_for running inline on the worker.
 */
static int experts_parallel(const struct moe_layer *L, const struct moe_plan *p,
			    const float *x, float *y, int workers)
{
	const tf_host *h = L->host;
	int64_t rows = p->off[L->router.n_experts];
	struct expert_bufs b = { 0 };
	struct experts_job job = {
		.L = L, .p = p, .x = x, .b = &b,
		.o = h->backend->alloc(h->backend_ctx, (size_t)(rows * L->hidden) * sizeof(float)),
		.status = calloc((size_t)p->n_active, sizeof(int)),
	};
	int rc = job.o && job.status ? bufs_alloc(&b, L, p, workers)
		 : h->error(h, TF_ERR_NOMEM, "%s: no memory for %lld expert rows",
			    L->prefix, (long long)rows);

	if (!rc)
		h->backend->parallel_for(h->backend_ctx, p->n_active, 1, experts_range, &job);
	for (int32_t i = 0; !rc && i < p->n_active; i++)
		rc = job.status[i];
	for (int32_t i = 0; !rc && i < p->n_active; i++) {
		int e = p->active[i];
		expert_scatter(L, e, p, job.o + p->off[e] * L->hidden, y);
	}
	bufs_free(&b, L);
	if (job.o)
		h->backend->free(h->backend_ctx, job.o);
	free(job.status);
	return rc;
}

/* y = shared(x), or zeros where this rank has no shared expert. */
static int shared_run(const struct moe_layer *L, const float *x, int64_t n, float *y)
{
	const tf_host *h = L->host;
	float *scratch;
	int rc;

	if (!L->shared.inter) {
		memset(y, 0, (size_t)(n * L->hidden) * sizeof(float));
		return TF_OK;
	}
	scratch = h->backend->alloc(h->backend_ctx,
				    (size_t)tf_mlp_scratch(&L->shared, n) * sizeof(float));
	if (!scratch)
		return h->error(h, TF_ERR_NOMEM, "%s.shared_experts: no memory for %lld tokens",
				L->prefix, (long long)n);
	rc = tf_mlp_forward(&L->shared, h, x, n, y, scratch);
	h->backend->free(h->backend_ctx, scratch);
	return rc;
}

int tf_moe_layer_forward(void *inst, const float *x, int64_t n, float *y)
{
	struct moe_layer *L = inst;
	const tf_host *h = L->host;
	struct moe_plan plan = { 0 };
	int rc;

	rc = tf_ffn_check_io(h, L->prefix, x, n, y);
	if (rc || n == 0)
		return rc;
	if (n > INT32_MAX / L->router.top_k)
		return h->error(h, TF_ERR_RANGE, "%s: %lld tokens in one forward",
				L->prefix, (long long)n);
	rc = plan_build(&plan, L, x, n);
	if (!rc)
		rc = shared_run(L, x, n, y);
	if (rc || !plan.n_active)
		goto out;

	int workers = h->backend->n_threads(h->backend_ctx);
	size_t kept = (size_t)(n * L->router.top_k * L->hidden) * sizeof(float);
	if (workers > 1 && plan.n_active >= MOE_EXPERTS_PER_WORKER * workers &&
	    kept <= MOE_PARALLEL_MAX_BYTES)
		rc = experts_parallel(L, &plan, x, y, workers);
	else
		rc = experts_serial(L, &plan, x, y);
out:
	plan_free(&plan);
	return rc;
}
