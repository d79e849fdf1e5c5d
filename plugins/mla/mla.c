/*
 * mla.c - the gated MLA attention plugin (layer type "mla").
 *
 * One instance per MLA layer holds its projections and kv_b_proj
 * dequantised once for the absorbed form.  Each sequence's state
 * (state_new) is its latent cache: r + dr elements per token, the normed
 * latent and the roped shared key, in pages of MLA_PAGE_ROWS tokens taken
 * as the sequence grows, stored as bf16 or float ([runtime] kv_cache).
 *
 * forward_batch(): over all rows at once, project queries (q_proj, or
 * q_a_proj -> norm -> q_b_proj), the compressed kv and the gate, norm the
 * latents and rope the rope slices at each row's position; then append
 * each segment's rows to its sequence's cache and attend over that cache
 * (attend.c: a prefill in the naive form, segment by segment; a few rows
 * in the absorbed form, the queries of several segments together);
 * multiply each head by its sigmoid gate and project all rows with
 * `dense`.  state_append() runs only what the cache keeps: the
 * compressed kv, normed and roped.  Shapes all come from config.json; what mla-cuda shares
 * (weights, checks, snapshots, tensor parallelism) is in mla_layer.c.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tf/attention.h"
#include "tf/backend.h"
#include "tf/quant.h"

#include "../common/scratch.h"
#include "../common/tensor_util.h"
#include "../common/vec.h"
#include "attend.h"
#include "mla_layer.h"

#define MLA_QUERIES 16               /* queries scanning the cache together (absorbed) */

struct mla_layer {
	struct mla_weights w;           /* first, as mla_layer.h asks */
	const tf_backend *be;
	void *bctx;

	float *wkvb;                    /* [heads, dn + dv, r], when kvb needs it */
	mla_kvb kvb;                    /* the absorbed form's W_UK, W_UV products */

	/* Views into the shared arena (mla_scratch), valid during one forward. */
	float *q, *qa, *ckv, *gate, *o; /* [n, heads*dq], [n, rq], [n, lat], [n, gate_w], [n, heads*dv] */
	mla_run *run;                   /* naive [n, heads]; absorbed [queries, MLA_PARTS, heads] */
	float *acc;                     /* absorbed: [queries, MLA_PARTS, heads, r] */
	float *qlat;                    /* absorbed: [queries, heads, lat] */
	float *cblk, *kpe, *kvblk;      /* [KV_BLOCK, r], [KV_BLOCK, dr], [KV_BLOCK, heads*(dn+dv)] */
	float *work;                    /* per worker: work_per floats */
	size_t work_per;
	int n_workers;
	bool scratch_ref;               /* holds a reference on mla_scratch */
};

/*
 * One sequence: its first len tokens' rows in pages [0, n_pages), taken in
 * order as it grows and kept until state_free (a reset or a rollback
 * keeps them for the tokens that come next).
 */
struct mla_state {
	struct mla_state_hdr hdr;
	int64_t n_pages;
	void **page;                    /* [ceil(max_ctx / MLA_PAGE_ROWS)] */
};

static tf_scratch mla_scratch = TF_SCRATCH_INIT;

static int mla_probe(const tf_host *h, const char **reason)
{
	return tf_tu_probe_host_backend(h, reason);
}

/* Queries the absorbed form scans together in a forward of n rows. */
static size_t mla_queries(int64_t n)
{
	return n < MLA_QUERIES ? (size_t)n : MLA_QUERIES;
}

/* Floats of one forward's activations, as mla_act_carve lays them out
 * (a mla_run is two floats). */
static size_t mla_act_floats(const struct mla_layer *L, int64_t n)
{
	const mla_dims *d = &L->w.d;
	const size_t nn = (size_t)n, nq = mla_queries(n), parts = nq * MLA_PARTS;
	const size_t runs = nn > parts ? nn : parts;
	return tf_scratch_round(nn * d->heads * (d->dn + d->dr)) + tf_scratch_round(nn * L->w.rq) +
	       tf_scratch_round(nn * L->w.lat) + tf_scratch_round(nn * L->w.gate_w) +
	       tf_scratch_round(nn * d->heads * d->dv) + tf_scratch_round(2 * runs * d->heads) +
	       tf_scratch_round(parts * d->heads * d->r) +
	       tf_scratch_round(nq * d->heads * L->w.lat) +
	       tf_scratch_round((size_t)MLA_KV_BLOCK * d->r) +
	       tf_scratch_round((size_t)MLA_KV_BLOCK * d->dr) +
	       tf_scratch_round((size_t)MLA_KV_BLOCK * d->heads * (d->dn + d->dv)) +
	       tf_scratch_round((size_t)L->n_workers * L->work_per);
}

static void mla_act_carve(struct mla_layer *L, int64_t n, float *mem)
{
	const mla_dims *d = &L->w.d;
	const size_t nn = (size_t)n, nq = mla_queries(n), parts = nq * MLA_PARTS;
	const size_t runs = nn > parts ? nn : parts;
	L->q = tf_scratch_take(&mem, nn * d->heads * (d->dn + d->dr));
	L->qa = tf_scratch_take(&mem, nn * L->w.rq);
	L->ckv = tf_scratch_take(&mem, nn * L->w.lat);
	L->gate = tf_scratch_take(&mem, nn * L->w.gate_w);
	L->o = tf_scratch_take(&mem, nn * d->heads * d->dv);
	L->run = (mla_run *)tf_scratch_take(&mem, 2 * runs * d->heads);
	L->acc = tf_scratch_take(&mem, parts * d->heads * d->r);
	L->qlat = tf_scratch_take(&mem, nq * d->heads * L->w.lat);
	L->cblk = tf_scratch_take(&mem, (size_t)MLA_KV_BLOCK * d->r);
	L->kpe = tf_scratch_take(&mem, (size_t)MLA_KV_BLOCK * d->dr);
	L->kvblk = tf_scratch_take(&mem, (size_t)MLA_KV_BLOCK * d->heads * (d->dn + d->dv));
	L->work = tf_scratch_take(&mem, (size_t)L->n_workers * L->work_per);
}

static void mla_layer_fini(void *inst)
{
	struct mla_layer *L = inst;
	if (!L)
		return;
	mla_weights_close(&L->w);
	if (L->scratch_ref)
		tf_scratch_unref(&mla_scratch);
	free(L->wkvb);
	free(L);
}

/* The absorbed form multiplies by one head's slice of kv_b_proj at a
 * time: through the linear where its plugin can, else as a matrix. */
static int mla_kvb_init(struct mla_layer *L, const char *prefix)
{
	const tf_host *h = L->w.h;
	const mla_dims *d = &L->w.d;
	int rc;

	L->kvb.lin = &L->w.kv_b_proj;
	if (tf_lin_has_slices(&L->w.kv_b_proj, d->dn) && tf_lin_has_slices(&L->w.kv_b_proj, d->dv))
		return TF_OK;
	L->wkvb = malloc((size_t)d->heads * (d->dn + d->dv) * d->r * sizeof(float));
	if (!L->wkvb)
		return h->error(h, TF_ERR_NOMEM, "%s.kv_b_proj: out of memory", prefix);
	rc = tf_lin_dequant(&L->w.kv_b_proj, L->wkvb);
	if (rc == TF_ERR_UNSUPPORTED)
		return h->error(h, rc,
				"%s.kv_b_proj: its format (%s) cannot be dequantised for the absorbed form",
				prefix, L->w.kv_b_proj.info.format ? L->w.kv_b_proj.info.format : "?");
	if (rc)
		return rc;
	L->kvb.w = L->wkvb;
	return TF_OK;
}

static int mla_layer_init(const tf_host *h, int layer, const char *prefix,
			  int64_t max_ctx, void **inst)
{
	struct mla_layer *L = calloc(1, sizeof(*L));
	if (!L)
		return h->error(h, TF_ERR_NOMEM, "layer %d (mla): out of memory", layer);
	int rc = mla_weights_open(h, layer, prefix, max_ctx, &L->w);
	if (rc) {
		free(L);
		return rc;
	}
	L->be = h->backend;
	L->bctx = h->backend_ctx;
	L->n_workers = L->be->n_threads(L->bctx);
	if (L->n_workers < 1)
		L->n_workers = 1;
	if ((rc = mla_kvb_init(L, prefix)))
		goto fail;

	const mla_dims *d = &L->w.d;
	/* per worker: the naive block's scratch, the absorbed tile's, one
	 * latent */
	L->work_per = mla_naive_work(d);
	if (L->work_per < mla_absorbed_work(d))
		L->work_per = mla_absorbed_work(d);
	if (L->work_per < (size_t)d->r)
		L->work_per = (size_t)d->r;
	tf_scratch_ref(&mla_scratch);
	L->scratch_ref = true;
	*inst = L;
	return TF_OK;
fail:
	mla_layer_fini(L);
	return rc;
}

/* --- sequence state --- */

static void mla_state_free(void *inst, void *state)
{
	struct mla_state *S = state;
	if (!S)
		return;
	for (int64_t p = 0; p < S->n_pages; p++)
		free(S->page[p]);
	free(S->page);
	free(S);
}

/* Only the page table now: pages come as the sequence grows. */
static int mla_state_new(void *inst, int64_t max_ctx, void **state)
{
	struct mla_layer *L = inst;
	int rc = mla_check_ctx(&L->w, max_ctx);
	if (rc)
		return rc;
	struct mla_state *S = calloc(1, sizeof(*S));
	if (S)
		S->page = calloc((size_t)mla_pages(max_ctx), sizeof(void *));
	if (!S || !S->page) {
		free(S);
		return L->w.h->error(L->w.h, TF_ERR_NOMEM,
				   "layer %d (mla): out of memory for a %lld-token page table",
				   L->w.layer, (long long)max_ctx);
	}
	S->hdr.max_ctx = max_ctx;
	*state = S;
	return TF_OK;
}

/* Pages for the first `rows` tokens.  Pages taken before a failure stay
 * as spare room: the tokens held are unchanged. */
static int mla_state_reserve(const struct mla_layer *L, struct mla_state *S, int64_t rows)
{
	for (int64_t need = mla_pages(rows); S->n_pages < need; S->n_pages++) {
		S->page[S->n_pages] = malloc(L->w.page_bytes);
		if (!S->page[S->n_pages])
			return L->w.h->error(L->w.h, TF_ERR_NOMEM,
					   "layer %d (mla): out of memory for a cache of %lld tokens",
					   L->w.layer, (long long)rows);
	}
	return TF_OK;
}

/* The pages stay for the tokens that come next. */
static void mla_state_reset(void *inst, void *state)
{
	((struct mla_state *)state)->hdr.len = 0;
}

static int mla_state_copy(void *inst, void *dst, const void *src)
{
	struct mla_layer *L = inst;
	struct mla_state *D = dst;
	const struct mla_state *S = src;
	const size_t row_bytes = L->w.page_bytes / MLA_PAGE_ROWS;
	int rc;

	if (D == S)
		return TF_OK;
	if ((rc = mla_check_copy(&L->w, &D->hdr, &S->hdr)) ||
	    (rc = mla_state_reserve(L, D, S->hdr.len)))
		return rc;
	for (int64_t t = 0; t < S->hdr.len; t += MLA_PAGE_ROWS) {
		int64_t rows = S->hdr.len - t < MLA_PAGE_ROWS ? S->hdr.len - t : MLA_PAGE_ROWS;
		memcpy(D->page[t / MLA_PAGE_ROWS], S->page[t / MLA_PAGE_ROWS],
		       (size_t)rows * row_bytes);
	}
	D->hdr.len = S->hdr.len;
	return TF_OK;
}

/* --- attention of the segments over their sequences' caches --- */

/* Segment g's cache as the kernels read it. */
static mla_cache mla_seg_cache(const struct mla_layer *L, const tf_attn_seg *g)
{
	const struct mla_state *S = g->state;
	return (mla_cache){ .page = S->page, .bf16 = L->w.bf16 };
}

/* Every segment's latents (L->ckv) to its cache, whose pages are taken,
 * after the rows it holds; the states' lengths move once the batch is done. */
static void mla_write_latents(struct mla_layer *L, const tf_attn_batch *b)
{
	for (int k = 0; k < b->n_seg; k++) {
		const tf_attn_seg *g = &b->seg[k];
		const mla_cache c = mla_seg_cache(L, g);
		mla_cache_write(&L->w.d, &c, ((const struct mla_state *)g->state)->hdr.len, g->n,
				L->ckv + g->row0 * L->w.lat);
	}
}

/*
 * Absorbed form: the queries of the segments that take it, MLA_QUERIES at
 * a time (a round), whichever segments they come from: each folded into
 * the latent space, then every part of each cache scanned once for the
 * queries reading it, then each query's parts merged and projected.  Three
 * hand-outs to the workers a round, so a decode step of several sequences
 * pays them once, not once a sequence.  Work items of the first and last
 * steps are (query, head) pairs, of the middle one parts.
 */

/* A run of one segment's queries that split their cache rows alike. */
struct mla_group {
	mla_cache c;
	int64_t seen;                   /* rows its first query sees */
	int64_t row;                    /* its first query's row in the batch */
	int q0, nq;                     /* its queries in the round */
	int64_t part, parts;            /* their part length, and the parts they cover */
	int64_t item0;                  /* its first part among the round's */
};

struct mla_round {
	struct mla_layer *L;
	struct mla_group g[MLA_QUERIES];
	int group_of[MLA_QUERIES];      /* each query's group */
	int n_groups, nq;
	int64_t items, flops;           /* parts of every group; their flops */
	atomic_int rc;                  /* a slice product's failure */
};

/* Work items [a, b) of (query, head) pairs, as runs of one query's heads
 * through fn; a failure is kept in the round. */
typedef int (*mla_heads_fn)(struct mla_round *u, int64_t q, int h0, int h1, int worker);

static void round_heads(struct mla_round *u, int64_t a, int64_t b, int worker, mla_heads_fn fn)
{
	const int64_t heads = u->L->w.d.heads;
	for (int64_t e = a; e < b;) {
		const int64_t q = e / heads, h0 = e % heads;
		const int64_t h1 = b - q * heads < heads ? b - q * heads : heads;
		int rc = fn(u, q, (int)h0, (int)h1, worker);
		if (rc)
			atomic_store(&u->rc, rc);
		e += h1 - h0;
	}
}

/* Query q folded into the latent space, heads [h0, h1). */
static int absorb_query(struct mla_round *u, int64_t q, int h0, int h1, int worker)
{
	struct mla_layer *L = u->L;
	const mla_dims *d = &L->w.d;
	const struct mla_group *g = &u->g[u->group_of[q]];
	const int64_t row = g->row + q - g->q0;
	(void)worker;
	return mla_absorb_query(d, &L->kvb, L->q + row * d->heads * (d->dn + d->dr), h0, h1,
				L->qlat + q * d->heads * L->w.lat);
}

static void absorb_query_fn(void *arg, int64_t a, int64_t b, int worker)
{
	round_heads(arg, a, b, worker, absorb_query);
}

static void absorbed_rows_fn(void *arg, int64_t p0, int64_t p1, int worker)
{
	struct mla_round *u = arg;
	struct mla_layer *L = u->L;
	const mla_dims *d = &L->w.d;
	int k = 0;
	for (int64_t p = p0; p < p1; p++) {
		while (p >= u->g[k].item0 + u->g[k].parts)
			k++;
		const struct mla_group *g = &u->g[k];
		const int64_t part = p - g->item0, first = (int64_t)g->q0 * MLA_PARTS + part;
		mla_absorbed_rows(d, L->qlat + (int64_t)g->q0 * d->heads * L->w.lat, g->nq, g->seen,
				  &g->c, part * g->part, (part + 1) * g->part,
				  L->run + first * d->heads, L->acc + first * d->heads * d->r,
				  (int64_t)MLA_PARTS * d->heads, L->work + (size_t)worker * L->work_per);
	}
}

/* Query q's parts merged and projected, heads [h0, h1). */
static int absorbed_out(struct mla_round *u, int64_t q, int h0, int h1, int worker)
{
	struct mla_layer *L = u->L;
	const mla_dims *d = &L->w.d;
	const struct mla_group *g = &u->g[u->group_of[q]];
	const int64_t first = q * MLA_PARTS * d->heads, seen = g->seen + q - g->q0;
	return mla_absorbed_out(d, &L->kvb, L->run + first, L->acc + first * d->r,
				(int)((seen + g->part - 1) / g->part), h0, h1,
				L->o + (g->row + q - g->q0) * d->heads * d->dv,
				L->work + (size_t)worker * L->work_per);
}

static void absorbed_out_fn(void *arg, int64_t a, int64_t b, int worker)
{
	round_heads(arg, a, b, worker, absorbed_out);
}

static int mla_round_run(struct mla_round *u)
{
	struct mla_layer *L = u->L;
	const mla_dims *d = &L->w.d;
	if (!u->nq)
		return TF_OK;
	L->be->parallel_for(L->bctx, (int64_t)u->nq * d->heads, tf_tu_grain(2 * d->dn * d->r),
			    absorb_query_fn, u);
	L->be->parallel_for(L->bctx, u->items, tf_tu_grain(u->flops / u->items), absorbed_rows_fn,
			    u);
	L->be->parallel_for(L->bctx, (int64_t)u->nq * d->heads, tf_tu_grain(2 * d->dv * d->r),
			    absorbed_out_fn, u);
	u->n_groups = u->nq = 0;
	u->items = u->flops = 0;
	return atomic_load(&u->rc);
}

/* Add segment g's queries to the round, running it whenever it fills. */
static int mla_round_add(struct mla_round *u, const tf_attn_seg *g)
{
	struct mla_layer *L = u->L;
	const mla_dims *d = &L->w.d;
	const struct mla_state *S = g->state;
	int rc = TF_OK;

	for (int64_t i = 0; i < g->n && !rc;) {
		struct mla_group *r = &u->g[u->n_groups++];
		*r = (struct mla_group){ .c = mla_seg_cache(L, g), .seen = S->hdr.len + i + 1,
					 .row = g->row0 + i, .q0 = u->nq, .item0 = u->items };
		r->part = mla_part_rows(r->seen);
		/* the next queries that split their rows alike, while the round has room */
		for (r->nq = 1; u->nq + r->nq < MLA_QUERIES && i + r->nq < g->n; r->nq++)
			if (mla_part_rows(r->seen + r->nq) != r->part)
				break;
		r->parts = (r->seen + r->nq - 1 + r->part - 1) / r->part;
		for (int q = 0; q < r->nq; q++)
			u->group_of[u->nq + q] = u->n_groups - 1;
		u->nq += r->nq;
		u->items += r->parts;
		/* a part's flops: each query's scores and accumulation per head */
		u->flops += r->parts * r->part * r->nq * d->heads * 2 * (L->w.lat + d->r);
		i += r->nq;
		if (u->nq == MLA_QUERIES)
			rc = mla_round_run(u);
	}
	return rc;
}

/* Naive form, one segment: expand a block (page) of cache rows, every
 * head attends to it. */

struct mla_naive_job {
	struct mla_layer *L;
	mla_cache c;
	int64_t len, n;                 /* cache rows before the segment; its rows */
	const float *q;                 /* the segment's queries [n, heads * (dn + dr)] */
	float *o;                       /* its outputs [n, heads * dv] */
	int64_t t0, tb;                 /* the expanded block */
};

static void naive_fn(void *arg, int64_t h0, int64_t h1, int worker)
{
	struct mla_naive_job *j = arg;
	struct mla_layer *L = j->L;
	for (int64_t h = h0; h < h1; h++)
		mla_naive_block(&L->w.d, (int)h, j->q, j->n, j->len, L->kvblk, L->kpe, j->t0,
				j->tb, L->run, j->o, L->work + (size_t)worker * L->work_per);
}

static int mla_attend_naive(struct mla_layer *L, const tf_attn_seg *g)
{
	const mla_dims *d = &L->w.d;
	const struct mla_state *S = g->state;
	struct mla_naive_job j = {
		.L = L, .c = mla_seg_cache(L, g), .len = S->hdr.len, .n = g->n,
		.q = L->q + g->row0 * d->heads * (d->dn + d->dr),
		.o = L->o + g->row0 * d->heads * d->dv,
	};
	const int64_t end = j.len + j.n;
	int rc;

	for (int64_t i = 0; i < j.n * d->heads; i++)
		L->run[i] = (mla_run){ .m = -INFINITY, .l = 0.0f };
	memset(j.o, 0, (size_t)j.n * d->heads * d->dv * sizeof(float));
	for (j.t0 = 0; j.t0 < end; j.t0 += MLA_KV_BLOCK) {
		j.tb = end - j.t0 < MLA_KV_BLOCK ? end - j.t0 : MLA_KV_BLOCK;
		mla_naive_split(d, &j.c, j.t0, j.tb, L->cblk, L->kpe);
		if ((rc = tf_lin_forward(&L->w.kv_b_proj, L->cblk, j.tb, L->kvblk)))
			return rc;
		L->be->parallel_for(L->bctx, d->heads,
				    tf_tu_grain(2 * j.n * j.tb * (d->dn + d->dr + d->dv)),
				    naive_fn, &j);
	}
	for (int64_t i = 0; i < j.n * d->heads; i++)
		tf_vec_scale(j.o + i * d->dv, 1.0f / L->run[i].l, d->dv);
	return TF_OK;
}

/* Append every segment's latents to its cache and attend over it:
 * prefills one by one in the naive form, the rest in rounds of the
 * absorbed form. */
static int mla_attend(struct mla_layer *L, const tf_attn_batch *b)
{
	struct mla_round u = { .L = L };
	int rc = TF_OK;

	atomic_init(&u.rc, TF_OK);
	mla_write_latents(L, b);
	for (int k = 0; k < b->n_seg && !rc; k++) {
		const tf_attn_seg *g = &b->seg[k];
		if (g->n)
			rc = mla_use_absorbed(&L->w, g->n) ? mla_round_add(&u, g) : mla_attend_naive(L, g);
	}
	return rc ? rc : mla_round_run(&u);
}

/* The rows' compressed kv into L->ckv: the latent normed, k_pe (behind
 * it) roped. */
static int mla_latents(struct mla_layer *L, const float *x, const tf_attn_batch *b)
{
	const mla_dims *d = &L->w.d;
	int rc = tf_lin_forward(&L->w.kv_a_proj, x, b->n, L->ckv);
	if (rc)
		return rc;
	for (int64_t i = 0; i < b->n; i++)
		L->be->rmsnorm(L->bctx, L->ckv + i * L->w.lat, L->ckv + i * L->w.lat, L->w.kv_a_norm,
			       1, d->r, L->w.eps);
	L->be->rope(L->bctx, L->ckv + d->r, b->n, 1, L->w.lat, 0, d->dr, b->pos, L->w.rope.inv_freq,
		    L->w.rope.attn_factor, L->w.interleave);
	return TF_OK;
}

/* The forward proper, while this layer holds the arena. */
static int mla_forward_locked(struct mla_layer *L, const float *x, const tf_attn_batch *b,
			      float *y)
{
	const mla_dims *d = &L->w.d;
	const int64_t n = b->n, dq = d->dn + d->dr;
	int rc;

	if (L->w.rq) {
		if ((rc = tf_lin_forward(&L->w.q_a_proj, x, n, L->qa)))
			return rc;
		L->be->rmsnorm(L->bctx, L->qa, L->qa, L->w.q_a_norm, n, L->w.rq, L->w.eps);
		rc = tf_lin_forward(&L->w.q_b_proj, L->qa, n, L->q);
	} else {
		rc = tf_lin_forward(&L->w.q_proj, x, n, L->q);
	}
	if (rc || (rc = mla_latents(L, x, b)) || (rc = tf_lin_forward(&L->w.g_proj, x, n, L->gate)))
		return rc;
	L->be->rope(L->bctx, L->q + d->dn, n, d->heads, d->heads * dq, dq, d->dr, b->pos,
		    L->w.rope.inv_freq, L->w.rope.attn_factor, L->w.interleave);

	if ((rc = mla_attend(L, b)))
		return rc;

	/* Sigmoid gate: one scalar per head, or one per output channel. */
	const int per = L->w.gate_w == d->heads ? d->dv : 1;
	for (int64_t i = 0; i < n * d->heads * d->dv; i++)
		L->o[i] *= tf_tu_sigmoid(L->gate[i / per]);

	return tf_lin_forward(&L->w.dense, L->o, n, y);
}

/* Only the latents, written to each segment's cache. */
static int mla_append_locked(struct mla_layer *L, const float *x, const tf_attn_batch *b,
			     float *y)
{
	(void)y;
	int rc = mla_latents(L, x, b);
	if (!rc)
		mla_write_latents(L, b);
	return rc;
}

typedef int (*mla_body_fn)(struct mla_layer *L, const float *x, const tf_attn_batch *b,
			   float *y);

/* Check, take pages and the arena, run body, move the lengths on. */
static int mla_batch(struct mla_layer *L, const float *x, const tf_attn_batch *b, float *y,
		     mla_body_fn body)
{
	int rc = mla_check_batch(&L->w, b);
	if (rc || b->n == 0)
		return rc;
	/* Every page first: an out-of-memory leaves each sequence as it was. */
	for (int k = 0; k < b->n_seg; k++) {
		struct mla_state *S = b->seg[k].state;
		if ((rc = mla_state_reserve(L, S, S->hdr.len + b->seg[k].n)))
			return rc;
	}
	float *mem = tf_scratch_acquire(&mla_scratch, mla_act_floats(L, b->n));
	if (!mem)
		return L->w.h->error(L->w.h, TF_ERR_NOMEM,
				   "layer %d (mla): out of memory for %lld tokens of activations",
				   L->w.layer, (long long)b->n);
	mla_act_carve(L, b->n, mem);
	rc = body(L, x, b, y);
	tf_scratch_release(&mla_scratch);
	if (rc)
		return rc;
	for (int k = 0; k < b->n_seg; k++)
		((struct mla_state *)b->seg[k].state)->hdr.len += b->seg[k].n;
	return TF_OK;
}

static int mla_forward_batch(void *inst, const float *x, const tf_attn_batch *b, float *y)
{
	return mla_batch(inst, x, b, y, mla_forward_locked);
}

static int mla_state_append(void *inst, const float *x, const tf_attn_batch *b)
{
	return mla_batch(inst, x, b, NULL, mla_append_locked);
}

static const tf_plugin_attention mla_plugin = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_attention, TF_KIND_ATTENTION, "mla", "0.2.0",
				"Gated MLA: absorbed decode, naive prefill over a paged latent cache (CPU)",
				mla_probe),
	.layer_type = "mla",
	.state_bytes = mla_state_bytes,
	.layer_init = mla_layer_init,
	.layer_fini = mla_layer_fini,
	.state_new = mla_state_new,
	.state_free = mla_state_free,
	.state_reset = mla_state_reset,
	.state_len = mla_state_len,
	.state_copy = mla_state_copy,
	.state_snapshot_size = mla_state_snapshot_size,
	.state_snapshot = mla_state_snapshot,
	.state_rollback = mla_state_rollback,
	.forward_batch = mla_forward_batch,
	.state_append = mla_state_append,
};

TF_EXPORT const tf_plugin_attention *tf_plugin_attention_v1(unsigned index)
{
	return index == 0 ? &mla_plugin : NULL;
}
