/*
 * mla_cuda_attn.c - the gated MLA attention plugin on a CUDA device
 * (layer type "mla", plugin "mla-cuda"): plugins/mla/mla.c with the
 * kernels of mla_cuda.h in place of attend.c and its worker pool.
 *
 * Everything lives in backend memory and runs on the backend's stream
 * (tf_backend_stream, ABI 1.7): the norm weights, rope frequencies and
 * kv_b_proj as a float matrix [heads, dn + dv, r] for the absorbed form,
 * uploaded at layer_init; each sequence's latent cache, in device pages
 * of MLA_PAGE_ROWS rows taken as it grows, and its page table; one
 * forward's activations, carved from an arena all layers share
 * (dev_scratch.h).  forward_batch() queues the projections (the quant
 * plugin's device linears), the norms, RoPE, and per segment the cache
 * append and the absorbed form (few rows: split-K over the cache, then
 * the combine through W_UV) or the naive form (page by page through
 * kv_b_proj's linear), then the gate and `dense`, and returns without
 * waiting; a download or the backend's sync waits.
 *
 * The cache is append-only, so snapshots, rollbacks and resets are its
 * length, as in mla.c (mla_layer.c); state_copy copies pages on the
 * device.  A backend without a device stream is refused (the mla plugin
 * serves host-memory backends).  Tensor parallel ([tp] size > 1), a rank
 * holds its heads as the mla plugin does (mla_layer.h: the device linears
 * open their parts, kv_b_proj's rows among them) and `dense` writes its
 * partial sum.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "tf/attention.h"
#include "tf/backend.h"

#include "../common/dev_scratch.h"
#include "mla_cuda.h"
#include "mla_layer.h"
#include "tf_cuda_plugin.h"

struct mlc_layer {
	struct mla_weights w;           /* first, as mla_layer.h asks */
	const tf_backend *be;
	void *bctx;
	cudaStream_t stream;            /* the backend's */
	tf_mla_cuda_dims dims;
	float *small;                   /* kv_a_norm [r], q_a_norm [rq], inv_freq [dr / 2] */
	float *kv_norm, *qa_norm, *inv_freq;
	float *wkvb;                    /* [heads, dn + dv, r] */
	int blocks;                     /* decode blocks worth a launch: twice the SMs */
	bool scratch_ref;
};

/* One sequence: its first hdr.len tokens' rows in pages [0, n_pages),
 * kept until state_free; page holds their device pointers, page_dev the
 * same table in device memory, where the kernels read it. */
struct mlc_state {
	struct mla_state_hdr hdr;
	int64_t n_pages;
	void **page;                    /* [mla_pages(max_ctx)] */
	void **page_dev;
};

/* One segment's share of a forward: absorbed (parts > 0) or naive. */
struct mlc_plan {
	int64_t part_rows;
	int parts;
};

/* One forward's activations (mlc_carve). */
struct mlc_act {
	int32_t *pos;
	float *q, *qa, *ckv, *gate, *o;
	float *qlat, *acc;              /* absorbed */
	tf_mla_cuda_run *run;
	float *cb, *kpe, *kv;           /* naive: one page */
};

static tf_dev_scratch mlc_scratch = TF_DEV_SCRATCH_INIT;

static int mlc_probe(const tf_host *h, const char **reason)
{
	return tf_cuda_plugin_probe(h, reason) ? TF_CUDA_PLUGIN_SCORE(10) : 0;
}

/* A failed CUDA call as the plugin's error, naming the layer. */
static int mlc_fail(const struct mlc_layer *L, int e, const char *what)
{
	return L->w.h->error(L->w.h, TF_ERR_DEVICE, "layer %d (mla-cuda): %s: %s", L->w.layer,
			     what, cudaGetErrorString((cudaError_t)e));
}

static int mlc_nomem(const struct mlc_layer *L, const char *what)
{
	return L->w.h->error(L->w.h, TF_ERR_NOMEM, "layer %d (mla-cuda): out of device memory for %s",
			     L->w.layer, what);
}

static void mlc_layer_fini(void *inst)
{
	struct mlc_layer *L = inst;
	if (!L)
		return;
	mla_weights_close(&L->w);
	if (L->small || L->wkvb)
		L->be->quiesce(L->bctx);
	if (L->small)
		L->be->free(L->bctx, L->small);
	if (L->wkvb)
		L->be->free(L->bctx, L->wkvb);
	if (L->scratch_ref)
		tf_dev_scratch_unref(&mlc_scratch);
	free(L);
}

/* kv_a_norm, q_a_norm and the rope frequencies into one allocation. */
static int mlc_upload_small(struct mlc_layer *L)
{
	const struct mla_weights *w = &L->w;
	const size_t nr = (size_t)w->d.r, nq = (size_t)w->rq, nf = (size_t)w->d.dr / 2;
	int rc;

	if (!(L->small = L->be->alloc(L->bctx, (nr + nq + nf) * sizeof(float))))
		return mlc_nomem(L, "the norm weights");
	L->kv_norm = L->small;
	L->qa_norm = L->kv_norm + nr;
	L->inv_freq = L->qa_norm + nq;
	if ((rc = L->be->upload(L->bctx, L->kv_norm, w->kv_a_norm, nr * sizeof(float))) ||
	    (nq && (rc = L->be->upload(L->bctx, L->qa_norm, w->q_a_norm, nq * sizeof(float)))))
		return rc;
	return L->be->upload(L->bctx, L->inv_freq, w->rope.inv_freq, nf * sizeof(float));
}

/*
 * kv_b_proj as the float matrix the absorbed kernels read.  The device
 * linears have no dequant, so it is their forward of the r x r identity,
 * [r, heads * (dn + dv)] = W^T (exact for plain weights: each output one
 * product), transposed on the host.  Costs heads (dn + dv) r floats of
 * device memory (Flash: 32 MiB a layer) and, once, twice that on the host.
 */
static int mlc_upload_kvb(struct mlc_layer *L)
{
	const mla_dims *d = &L->w.d;
	const int64_t r = d->r, cols = (int64_t)d->heads * (d->dn + d->dv);
	const size_t nw = (size_t)(r * cols);
	float *eye_h = calloc((size_t)(r * r), sizeof(float)), *wt = malloc(nw * sizeof(float));
	float *w = malloc(nw * sizeof(float));
	float *eye = L->be->alloc(L->bctx, (size_t)(r * r) * sizeof(float));
	float *out = L->be->alloc(L->bctx, nw * sizeof(float));
	int rc = TF_OK;

	if (!eye_h || !wt || !w) {
		rc = L->w.h->error(L->w.h, TF_ERR_NOMEM, "layer %d (mla-cuda): out of memory",
				   L->w.layer);
		goto out;
	}
	if (!eye || !out || !(L->wkvb = L->be->alloc(L->bctx, nw * sizeof(float)))) {
		rc = mlc_nomem(L, "kv_b_proj as floats");
		goto out;
	}
	for (int64_t c = 0; c < r; c++)
		eye_h[c * r + c] = 1.0f;
	if ((rc = L->be->upload(L->bctx, eye, eye_h, (size_t)(r * r) * sizeof(float))) ||
	    (rc = tf_lin_forward(&L->w.kv_b_proj, eye, r, out)) ||
	    (rc = L->be->download(L->bctx, wt, out, nw * sizeof(float))))
		goto out;
	for (int64_t c = 0; c < r; c++)
		for (int64_t j = 0; j < cols; j++)
			w[j * r + c] = wt[c * cols + j];
	rc = L->be->upload(L->bctx, L->wkvb, w, nw * sizeof(float));
out:
	L->be->quiesce(L->bctx);
	if (eye)
		L->be->free(L->bctx, eye);
	if (out)
		L->be->free(L->bctx, out);
	free(eye_h);
	free(wt);
	free(w);
	return rc;
}

/* Twice the device's SMs: enough decode blocks to fill it. */
static int mlc_blocks(struct mlc_layer *L)
{
	struct cudaDeviceProp p;
	int dev, e;
	if ((e = cudaGetDevice(&dev)) || (e = cudaGetDeviceProperties(&p, dev)))
		return mlc_fail(L, e, "device properties");
	L->blocks = 2 * (p.multiProcessorCount > 0 ? p.multiProcessorCount : 1);
	return TF_OK;
}

static int mlc_layer_init(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
			  void **inst)
{
	int rc = tf_cuda_plugin_layer_check(h, layer, "mla-cuda");
	if (rc)
		return rc;
	struct mlc_layer *L = calloc(1, sizeof(*L));
	if (!L)
		return h->error(h, TF_ERR_NOMEM, "layer %d (mla-cuda): out of memory", layer);
	if ((rc = mla_weights_open(h, layer, prefix, max_ctx, &L->w))) {
		free(L);
		return rc;
	}
	const mla_dims *d = &L->w.d;
	L->be = h->backend;
	L->bctx = h->backend_ctx;
	L->stream = tf_backend_stream(L->be, L->bctx);
	L->dims = (tf_mla_cuda_dims){ .heads = d->heads, .dn = d->dn, .dr = d->dr, .dv = d->dv,
				      .r = d->r, .scale = d->scale };
	if (tf_mla_cuda_check(&L->dims)) {
		rc = h->error(h, TF_ERR_UNSUPPORTED,
			      "layer %d (mla-cuda): kv_lora_rank %d, qk_rope_head_dim %d, qk_nope_head_dim + qk_rope_head_dim %d: the kernels take at most %d, an even %d and %d",
			      layer, d->r, d->dr, d->dn + d->dr, MLA_CUDA_MAX_R, MLA_CUDA_MAX_DR,
			      MLA_CUDA_MAX_DQ);
		goto fail;
	}
	if ((rc = mlc_blocks(L)) || (rc = mlc_upload_small(L)) || (rc = mlc_upload_kvb(L)))
		goto fail;
	tf_dev_scratch_ref(&mlc_scratch, L->be, L->bctx);
	L->scratch_ref = true;
	*inst = L;
	return TF_OK;
fail:
	mlc_layer_fini(L);
	return rc;
}

/* --- sequence state --- */

static void mlc_state_free(void *inst, void *state)
{
	const struct mlc_layer *L = inst;
	struct mlc_state *S = state;
	if (!S)
		return;
	L->be->quiesce(L->bctx);        /* work queued on its pages may still run */
	for (int64_t p = 0; p < S->n_pages; p++)
		L->be->free(L->bctx, S->page[p]);
	if (S->page_dev)
		L->be->free(L->bctx, S->page_dev);
	free(S->page);
	free(S);
}

/* Only the page tables now: pages come as the sequence grows. */
static int mlc_state_new(void *inst, int64_t max_ctx, void **state)
{
	struct mlc_layer *L = inst;
	int rc = mla_check_ctx(&L->w, max_ctx);
	if (rc)
		return rc;
	const size_t table = (size_t)mla_pages(max_ctx) * sizeof(void *);
	struct mlc_state *S = calloc(1, sizeof(*S));
	if (S && (S->page = calloc(1, table)))
		S->page_dev = L->be->alloc(L->bctx, table);
	if (!S || !S->page_dev) {
		if (S)
			free(S->page);
		free(S);
		return L->w.h->error(L->w.h, TF_ERR_NOMEM,
				     "layer %d (mla-cuda): out of memory for a %lld-token page table",
				     L->w.layer, (long long)max_ctx);
	}
	S->hdr.max_ctx = max_ctx;
	*state = S;
	return TF_OK;
}

/* Device pages for the first `rows` tokens, their pointers uploaded to
 * the device table.  Pages taken before a failure stay as spare room:
 * the tokens held are unchanged. */
static int mlc_state_reserve(const struct mlc_layer *L, struct mlc_state *S, int64_t rows)
{
	const int64_t from = S->n_pages;
	int rc = TF_OK;
	for (int64_t need = mla_pages(rows); S->n_pages < need; S->n_pages++) {
		if (!(S->page[S->n_pages] = L->be->alloc(L->bctx, L->w.page_bytes))) {
			rc = L->w.h->error(L->w.h, TF_ERR_NOMEM,
					   "layer %d (mla-cuda): out of device memory for a cache of %lld tokens",
					   L->w.layer, (long long)rows);
			break;
		}
	}
	if (S->n_pages > from) {
		int up = L->be->upload(L->bctx, S->page_dev + from, S->page + from,
				       (size_t)(S->n_pages - from) * sizeof(void *));
		if (!rc)
			rc = up;
	}
	return rc;
}

/* The pages stay for the tokens that come next. */
static void mlc_state_reset(void *inst, void *state)
{
	((struct mlc_state *)state)->hdr.len = 0;
}

static int mlc_state_copy(void *inst, void *dst, const void *src)
{
	const struct mlc_layer *L = inst;
	struct mlc_state *D = dst;
	const struct mlc_state *S = src;
	const size_t row_bytes = L->w.page_bytes / MLA_PAGE_ROWS;
	int e, rc;

	if (D == S)
		return TF_OK;
	if ((rc = mla_check_copy(&L->w, &D->hdr, &S->hdr)) ||
	    (rc = mlc_state_reserve(L, D, S->hdr.len)))
		return rc;
	for (int64_t t = 0; t < S->hdr.len; t += MLA_PAGE_ROWS) {
		const int64_t rows = S->hdr.len - t < MLA_PAGE_ROWS ? S->hdr.len - t : MLA_PAGE_ROWS;
		if ((e = cudaMemcpyAsync(D->page[t / MLA_PAGE_ROWS], S->page[t / MLA_PAGE_ROWS],
					 (size_t)rows * row_bytes, cudaMemcpyDeviceToDevice,
					 L->stream)))
			return mlc_fail(L, e, "state_copy");
	}
	D->hdr.len = S->hdr.len;
	return TF_OK;
}

/* --- forward --- */

/* Each segment's form; the absorbed ones' largest row count and split
 * scratch (runs), the naive ones' largest row count. */
static void mlc_plan_batch(const struct mlc_layer *L, const tf_attn_batch *b,
			   struct mlc_plan *plan, int64_t *abs_n, int64_t *abs_runs,
			   int64_t *naive_n)
{
	*abs_n = *abs_runs = *naive_n = 0;
	for (int k = 0; k < b->n_seg; k++) {
		const tf_attn_seg *g = &b->seg[k];
		const int64_t rows = ((const struct mlc_state *)g->state)->hdr.len + g->n;
		plan[k] = (struct mlc_plan){ 0 };
		if (!g->n)
			continue;
		if (!mla_use_absorbed(&L->w, g->n)) {
			if (g->n > *naive_n)
				*naive_n = g->n;
			continue;
		}
		plan[k].part_rows = tf_mla_cuda_part_rows(&L->dims, rows, g->n, L->blocks);
		plan[k].parts = tf_mla_cuda_parts(rows, plan[k].part_rows);
		if (g->n > *abs_n)
			*abs_n = g->n;
		if (plan[k].parts * g->n > *abs_runs)
			*abs_runs = plan[k].parts * g->n;
	}
}

/* Bytes of one forward's activations as mlc_carve lays them out (or,
 * with mem, carves them). */
static size_t mlc_carve(const struct mlc_layer *L, int64_t n, int64_t abs_n, int64_t abs_runs,
			int64_t naive_n, char *mem, struct mlc_act *a)
{
	const struct mla_weights *w = &L->w;
	const mla_dims *d = &w->d;
	const size_t f = sizeof(float), nn = (size_t)n, H = (size_t)d->heads;
	const size_t runs = (size_t)(abs_runs > naive_n ? abs_runs : naive_n) * H;
	const size_t page = naive_n ? MLA_PAGE_ROWS : 0;
	const size_t bytes[] = {
		nn * sizeof(int32_t), nn * H * (d->dn + d->dr) * f, nn * w->rq * f,
		nn * w->lat * f, nn * w->gate_w * f, nn * H * d->dv * f,
		(size_t)abs_n * H * w->lat * f, (size_t)abs_runs * H * d->r * f,
		runs * sizeof(tf_mla_cuda_run), page * d->r * f, page * d->dr * f,
		page * H * (d->dn + d->dv) * f,
	};
	void **at[] = { (void **)&a->pos, (void **)&a->q, (void **)&a->qa, (void **)&a->ckv,
			(void **)&a->gate, (void **)&a->o, (void **)&a->qlat, (void **)&a->acc,
			(void **)&a->run, (void **)&a->cb, (void **)&a->kpe, (void **)&a->kv };
	size_t total = 0;
	for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
		total += tf_dev_scratch_round(bytes[i]);
		if (mem)
			*at[i] = tf_dev_scratch_take(&mem, bytes[i]);
	}
	return total;
}

/* Projections, norms and RoPE of all n rows. */
static int mlc_project(const struct mlc_layer *L, const float *x, int64_t n,
		       const struct mlc_act *a)
{
	const struct mla_weights *w = &L->w;
	const mla_dims *d = &w->d;
	const int64_t dq = d->dn + d->dr;
	int rc, e;

	if (w->rq) {
		if ((rc = tf_lin_forward(&w->q_a_proj, x, n, a->qa)))
			return rc;
		if ((e = tf_mla_cuda_rmsnorm(L->stream, a->qa, n, w->rq, w->rq, L->qa_norm, w->eps)))
			return mlc_fail(L, e, "q_a_layernorm");
		rc = tf_lin_forward(&w->q_b_proj, a->qa, n, a->q);
	} else {
		rc = tf_lin_forward(&w->q_proj, x, n, a->q);
	}
	if (rc || (rc = tf_lin_forward(&w->kv_a_proj, x, n, a->ckv)) ||
	    (rc = tf_lin_forward(&w->g_proj, x, n, a->gate)))
		return rc;
	/* The latent is normed in place; k_pe, behind it, is not. */
	if ((e = tf_mla_cuda_rmsnorm(L->stream, a->ckv, n, d->r, w->lat, L->kv_norm, w->eps)))
		return mlc_fail(L, e, "kv_a_layernorm");
	if ((e = tf_cuda_rope(L->stream, a->q + d->dn, n, d->heads, d->heads * dq, dq, d->dr,
				  a->pos, L->inv_freq, w->rope.attn_factor, w->interleave)) ||
	    (e = tf_cuda_rope(L->stream, a->ckv + d->r, n, 1, w->lat, 0, d->dr, a->pos,
				  L->inv_freq, w->rope.attn_factor, w->interleave)))
		return mlc_fail(L, e, "rope");
	return TF_OK;
}

/* The naive form of segment g: page by page, expanded through kv_b_proj. */
static int mlc_naive(const struct mlc_layer *L, const tf_mla_cuda_cache *c, int64_t len,
		     int64_t n, const float *q, const struct mlc_act *a, float *o)
{
	const tf_mla_cuda_dims *d = &L->dims;
	int rc, e = tf_mla_cuda_naive_begin(L->stream, d, n, a->run, o);
	for (int64_t t0 = 0; !e && t0 < len + n; t0 += MLA_PAGE_ROWS) {
		const int64_t tb = len + n - t0 < MLA_PAGE_ROWS ? len + n - t0 : MLA_PAGE_ROWS;
		if ((e = tf_mla_cuda_naive_split(L->stream, d, c, t0, tb, a->cb, a->kpe)))
			break;
		if ((rc = tf_lin_forward(&L->w.kv_b_proj, a->cb, tb, a->kv)))
			return rc;
		e = tf_mla_cuda_naive_block(L->stream, d, q, n, len, a->kv, a->kpe, t0, tb, a->run, o);
	}
	if (e || (e = tf_mla_cuda_naive_end(L->stream, d, n, a->run, o)))
		return mlc_fail(L, e, "naive attention");
	return TF_OK;
}

/* Append segment g's latents to its cache (pages taken) and attend over it. */
static int mlc_attend_seg(const struct mlc_layer *L, const tf_attn_seg *g,
			  const struct mlc_plan *p, const struct mlc_act *a)
{
	const tf_mla_cuda_dims *d = &L->dims;
	const struct mlc_state *S = g->state;
	const tf_mla_cuda_cache c = { .page = S->page_dev, .bf16 = L->w.bf16 };
	const int64_t len = S->hdr.len, n = g->n;
	const float *q = a->q + g->row0 * d->heads * (d->dn + d->dr);
	float *o = a->o + g->row0 * d->heads * d->dv;
	int e = tf_mla_cuda_cache_write(L->stream, d, &c, len, n, a->ckv + g->row0 * L->w.lat);
	if (e)
		return mlc_fail(L, e, "cache append");
	if (!p->parts)
		return mlc_naive(L, &c, len, n, q, a, o);
	if ((e = tf_mla_cuda_absorb_query(L->stream, d, L->wkvb, q, n, a->qlat)) ||
	    (e = tf_mla_cuda_decode_split(L->stream, d, a->qlat, n, &c, len, p->part_rows, p->parts,
					  a->run, a->acc)) ||
	    (e = tf_mla_cuda_decode_combine(L->stream, d, L->wkvb, a->run, a->acc, p->parts, n, o)))
		return mlc_fail(L, e, "absorbed attention");
	return TF_OK;
}

/* The forward proper, while this layer holds the arena. */
static int mlc_forward_locked(const struct mlc_layer *L, const float *x, const tf_attn_batch *b,
			      const struct mlc_plan *plan, const struct mlc_act *a, float *y)
{
	const int64_t n = b->n;
	int rc, e;

	if ((rc = L->be->upload(L->bctx, a->pos, b->pos, (size_t)n * sizeof(int32_t))) ||
	    (rc = mlc_project(L, x, n, a)))
		return rc;
	for (int k = 0; k < b->n_seg; k++)
		if (b->seg[k].n && (rc = mlc_attend_seg(L, &b->seg[k], &plan[k], a)))
			return rc;
	if ((e = tf_mla_cuda_gate(L->stream, &L->dims, a->o, a->gate, n,
				  L->w.gate_w == L->w.d.heads)))
		return mlc_fail(L, e, "gate");
	return tf_lin_forward(&L->w.dense, a->o, n, y);
}

static int mlc_forward_batch(void *inst, const float *x, const tf_attn_batch *b, float *y)
{
	struct mlc_layer *L = inst;
	struct mlc_plan *plan;
	struct mlc_act a;
	int64_t abs_n, abs_runs, naive_n;
	int rc = mla_check_batch(&L->w, b);
	if (rc || b->n == 0)
		return rc;
	for (int k = 0; k < b->n_seg; k++)
		if (b->seg[k].n > 65535)
			return L->w.h->error(L->w.h, TF_ERR_UNSUPPORTED,
					     "layer %d (mla-cuda): a segment of %lld rows; the kernels take 65535",
					     L->w.layer, (long long)b->seg[k].n);
	/* Every page first: an out-of-memory leaves each sequence as it was. */
	for (int k = 0; k < b->n_seg; k++) {
		struct mlc_state *S = b->seg[k].state;
		if ((rc = mlc_state_reserve(L, S, S->hdr.len + b->seg[k].n)))
			return rc;
	}
	if (!(plan = malloc((size_t)b->n_seg * sizeof(*plan))))
		return L->w.h->error(L->w.h, TF_ERR_NOMEM, "layer %d (mla-cuda): out of memory",
				     L->w.layer);
	mlc_plan_batch(L, b, plan, &abs_n, &abs_runs, &naive_n);
	char *mem = tf_dev_scratch_acquire(
		&mlc_scratch, mlc_carve(L, b->n, abs_n, abs_runs, naive_n, NULL, &a));
	if (!mem) {
		free(plan);
		return L->w.h->error(L->w.h, TF_ERR_NOMEM,
				     "layer %d (mla-cuda): out of device memory for %lld tokens of activations",
				     L->w.layer, (long long)b->n);
	}
	mlc_carve(L, b->n, abs_n, abs_runs, naive_n, mem, &a);
	rc = mlc_forward_locked(L, x, b, plan, &a, y);
	tf_dev_scratch_release(&mlc_scratch);
	free(plan);
	if (rc)
		return rc;
	for (int k = 0; k < b->n_seg; k++)
		((struct mlc_state *)b->seg[k].state)->hdr.len += b->seg[k].n;
	return TF_OK;
}

static const tf_plugin_attention mlc_plugin = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_attention, TF_KIND_ATTENTION,
				TF_CUDA_PLUGIN_NAME("mla-cuda"), "0.1.0",
				"Gated MLA on CUDA: absorbed split-K decode, naive prefill over a paged latent cache",
				mlc_probe),
	.layer_type = "mla",
	.state_bytes = mla_state_bytes,
	.layer_init = mlc_layer_init,
	.layer_fini = mlc_layer_fini,
	.state_new = mlc_state_new,
	.state_free = mlc_state_free,
	.state_reset = mlc_state_reset,
	.state_len = mla_state_len,
	.state_copy = mlc_state_copy,
	.state_snapshot_size = mla_state_snapshot_size,
	.state_snapshot = mla_state_snapshot,
	.state_rollback = mla_state_rollback,
	.forward_batch = mlc_forward_batch,
};

TF_EXPORT const tf_plugin_attention *tf_plugin_attention_v1(unsigned index)
{
	return index == 0 ? &mlc_plugin : NULL;
}
