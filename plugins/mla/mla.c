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
 * latents and rope the rope slices at each row's position; then per
 * segment append its rows to its sequence's cache and attend over that
 * cache (attend.c: absorbed form for a few rows, naive form for a
 * prefill); multiply each head by its sigmoid gate and project all rows
 * with `dense`.  Shapes all come from config.json.
 *
 * Tensor parallel ([tp] size > 1): a rank holds the heads
 * [head0, head0 + heads) of num_attention_heads: their rows of q (or
 * q_b_proj), kv_b_proj and g_proj, and dense's matching input columns, so
 * its output is a partial sum the runtime all-reduces.  The latent path
 * (q_a_proj, kv_a_proj_with_mqa, their norms) and so the latent cache are
 * the same on every rank.
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
#include "rope.h"

#define MLA_SNAP_MAGIC 0x5f414c4du   /* "MLA_" */
#define MLA_ROWS_MIN 64              /* fewest cache rows worth a worker (absorbed) */

struct mla_layer {
	const tf_host *h;
	const tf_backend *be;
	void *bctx;
	int layer;

	int hidden, rq, gate_w;         /* gate_w: heads (head-wise) or heads * dv */
	int head0, heads_all;           /* d.heads are this rank's, from head0 */
	int64_t lat;                    /* r + dr */
	mla_dims d;
	mla_rope rope;
	bool interleave;
	float eps;

	bool bf16;                      /* the cache's element type, from kv_cache */
	size_t page_bytes;              /* one cache page */

	tf_lin q_proj, q_a_proj, q_b_proj, kv_a_proj, kv_b_proj, g_proj, dense;
	float *q_a_norm;                /* [rq] */
	float *kv_a_norm;               /* [r] */
	float *wkvb;                    /* [heads, dn + dv, r], when kvb needs it */
	mla_kvb kvb;                    /* the absorbed form's W_UK, W_UV products */

	/* Views into the shared arena (mla_scratch), valid during one forward. */
	float *q, *qa, *ckv, *gate, *o; /* [n, heads*dq], [n, rq], [n, lat], [n, gate_w], [n, heads*dv] */
	mla_run *run;                   /* [max(n, workers), heads] */
	float *acc;                     /* [workers, heads, r] (absorbed) */
	float *qlat;                    /* [heads, lat] */
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
	int64_t max_ctx, len;
	int64_t n_pages;
	void **page;                    /* [ceil(max_ctx / MLA_PAGE_ROWS)] */
};

static tf_scratch mla_scratch = TF_SCRATCH_INIT;

struct mla_snap {
	uint32_t magic;
	uint32_t pad;
	int64_t len;
};

static int mla_probe(const tf_host *h, const char **reason)
{
	return tf_tu_probe_host_backend(h, reason);
}

static int mla_check_config(const tf_host *h, int layer)
{
	const tf_model_config *c = h->model;
	if (c->hidden_size <= 0 || c->num_attention_heads <= 0 || c->kv_lora_rank <= 0 ||
	    c->qk_nope_head_dim <= 0 || c->qk_rope_head_dim <= 0 || c->v_head_dim <= 0 ||
	    c->q_lora_rank < 0)
		return h->error(h, TF_ERR_INVALID,
				"config.json: layer %d (mla): hidden_size %d, num_attention_heads %d, kv_lora_rank %d, qk_nope_head_dim %d, qk_rope_head_dim %d, v_head_dim %d must be positive (q_lora_rank %d: 0 or positive)",
				layer, c->hidden_size, c->num_attention_heads, c->kv_lora_rank,
				c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim,
				c->q_lora_rank);
	return TF_OK;
}

/* [runtime] kv_cache: bf16 (index 0, the default, also where the host
 * has no typed enum read) or f32. */
static int mla_conf_bf16(const tf_host *h, bool *bf16)
{
	int idx = 0, rc = TF_OK;
	if (TF_HAS_SLOT(h, tf_host, conf_enum) && h->conf_enum)
		rc = h->conf_enum(h, "runtime", "kv_cache", 0, &idx);
	*bf16 = idx == 0;
	return rc;
}

static int64_t mla_pages(int64_t rows)
{
	return (rows + MLA_PAGE_ROWS - 1) / MLA_PAGE_ROWS;
}

/* Every page of a full context, and its page table. */
static int64_t mla_state_bytes(const tf_host *h, int layer, int64_t max_ctx)
{
	const tf_model_config *c = h->model;
	bool bf16;
	if (mla_conf_bf16(h, &bf16))
		bf16 = false;           /* layer_init will refuse; count the larger */
	int64_t page = (int64_t)MLA_PAGE_ROWS * (c->kv_lora_rank + c->qk_rope_head_dim) *
		       (bf16 ? 2 : 4);
	return mla_pages(max_ctx) * (page + (int64_t)sizeof(void *));
}

/* Floats of one forward's activations, as mla_act_carve lays them out
 * (a mla_run is two floats). */
static size_t mla_act_floats(const struct mla_layer *L, int64_t n)
{
	const mla_dims *d = &L->d;
	size_t nn = (size_t)n, runs = nn > (size_t)L->n_workers ? nn : (size_t)L->n_workers;
	return tf_scratch_round(nn * d->heads * (d->dn + d->dr)) + tf_scratch_round(nn * L->rq) +
	       tf_scratch_round(nn * L->lat) + tf_scratch_round(nn * L->gate_w) +
	       tf_scratch_round(nn * d->heads * d->dv) + tf_scratch_round(2 * runs * d->heads) +
	       tf_scratch_round((size_t)L->n_workers * d->heads * d->r) +
	       tf_scratch_round((size_t)d->heads * L->lat) +
	       tf_scratch_round((size_t)MLA_KV_BLOCK * d->r) +
	       tf_scratch_round((size_t)MLA_KV_BLOCK * d->dr) +
	       tf_scratch_round((size_t)MLA_KV_BLOCK * d->heads * (d->dn + d->dv)) +
	       tf_scratch_round((size_t)L->n_workers * L->work_per);
}

static void mla_act_carve(struct mla_layer *L, int64_t n, float *mem)
{
	const mla_dims *d = &L->d;
	size_t nn = (size_t)n, runs = nn > (size_t)L->n_workers ? nn : (size_t)L->n_workers;
	L->q = tf_scratch_take(&mem, nn * d->heads * (d->dn + d->dr));
	L->qa = tf_scratch_take(&mem, nn * L->rq);
	L->ckv = tf_scratch_take(&mem, nn * L->lat);
	L->gate = tf_scratch_take(&mem, nn * L->gate_w);
	L->o = tf_scratch_take(&mem, nn * d->heads * d->dv);
	L->run = (mla_run *)tf_scratch_take(&mem, 2 * runs * d->heads);
	L->acc = tf_scratch_take(&mem, (size_t)L->n_workers * d->heads * d->r);
	L->qlat = tf_scratch_take(&mem, (size_t)d->heads * L->lat);
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
	tf_lin *lins[] = { &L->q_proj, &L->q_a_proj, &L->q_b_proj, &L->kv_a_proj,
			   &L->kv_b_proj, &L->g_proj, &L->dense };
	for (size_t i = 0; i < sizeof(lins) / sizeof(lins[0]); i++)
		tf_tu_lin_close(L->h, lins[i]);
	if (L->scratch_ref)
		tf_scratch_unref(&mla_scratch);
	mla_rope_free(&L->rope);
	free(L->q_a_norm);
	free(L->kv_a_norm);
	free(L->wkvb);
	free(L);
}

/* The config.json keys of q_proj's and q_b_proj's output features. */
#define MLA_KEYS_Q "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)"

/* This rank's heads as a part of a layer's features, `per` per head. */
static tf_lin_part mla_part(const struct mla_layer *L, tf_lin_axis axis, int64_t per)
{
	return (tf_lin_part){ .axis = axis, .lo = L->head0 * per,
			      .hi = (int64_t)(L->head0 + L->d.heads) * per };
}

static int mla_load(struct mla_layer *L, const char *prefix)
{
	const tf_host *h = L->h;
	const mla_dims *d = &L->d;
	const int64_t H = L->hidden, dq = d->dn + d->dr, dkv = d->dn + d->dv;
	const int64_t A = L->heads_all, gper = L->gate_w / d->heads;
	const tf_lin_part q_rows = mla_part(L, TF_LIN_PART_OUT, dq);
	const tf_lin_part kv_rows = mla_part(L, TF_LIN_PART_OUT, dkv);
	const tf_lin_part g_rows = mla_part(L, TF_LIN_PART_OUT, gper);
	const tf_lin_part o_cols = mla_part(L, TF_LIN_PART_IN, d->dv);
	int rc;

	if (L->rq) {
		const int64_t rq_shape[1] = { L->rq };
		if ((rc = tf_tu_lin_open(h, prefix, "q_a_proj", H, L->rq,
					 "in hidden_size, out q_lora_rank", &L->q_a_proj)) ||
		    (rc = tf_tu_load_leaf_f32(h, prefix, "q_a_layernorm.weight", 1, rq_shape,
					      &L->q_a_norm)) ||
		    (rc = tf_tu_lin_open_part(h, prefix, "q_b_proj", L->rq, A * dq,
					      "in q_lora_rank, out " MLA_KEYS_Q, &q_rows,
					      &L->q_b_proj)))
			return rc;
	} else if ((rc = tf_tu_lin_open_part(h, prefix, "q_proj", H, A * dq,
					     "in hidden_size, out " MLA_KEYS_Q, &q_rows,
					     &L->q_proj))) {
		return rc;
	}
	const int64_t r_shape[1] = { d->r };
	if ((rc = tf_tu_lin_open(h, prefix, "kv_a_proj_with_mqa", H, L->lat,
				 "in hidden_size, out kv_lora_rank + qk_rope_head_dim",
				 &L->kv_a_proj)) ||
	    (rc = tf_tu_load_leaf_f32(h, prefix, "kv_a_layernorm.weight", 1, r_shape,
				      &L->kv_a_norm)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "kv_b_proj", d->r, A * dkv,
				      "in kv_lora_rank, out num_attention_heads x "
				      "(qk_nope_head_dim + v_head_dim)", &kv_rows, &L->kv_b_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "g_proj", H, A * gper,
				      "in hidden_size, out num_attention_heads (x v_head_dim "
				      "unless gate_head_wise)", &g_rows, &L->g_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "dense", A * d->dv, H,
				      "in num_attention_heads x v_head_dim, out hidden_size", &o_cols,
				      &L->dense)))
		return rc;

	/* The absorbed form multiplies by one head's slice of kv_b_proj at a
	 * time: through the linear where its plugin can, else as a matrix. */
	L->kvb.lin = &L->kv_b_proj;
	if (tf_lin_has_slices(&L->kv_b_proj, d->dn) && tf_lin_has_slices(&L->kv_b_proj, d->dv))
		return TF_OK;
	L->wkvb = malloc((size_t)d->heads * dkv * d->r * sizeof(float));
	if (!L->wkvb)
		return h->error(h, TF_ERR_NOMEM, "%s.kv_b_proj: out of memory", prefix);
	rc = tf_lin_dequant(&L->kv_b_proj, L->wkvb);
	if (rc == TF_ERR_UNSUPPORTED)
		return h->error(h, rc,
				"%s.kv_b_proj: its format (%s) cannot be dequantised for the absorbed form",
				prefix, L->kv_b_proj.info.format ? L->kv_b_proj.info.format : "?");
	if (rc)
		return rc;
	L->kvb.w = L->wkvb;
	return TF_OK;
}

static int mla_layer_init(const tf_host *h, int layer, const char *prefix,
			  int64_t max_ctx, void **inst)
{
	const tf_model_config *c = h->model;
	int rc = mla_check_config(h, layer);
	if (rc)
		return rc;
	if (max_ctx <= 0)
		return h->error(h, TF_ERR_INVALID, "layer %d (mla): context %lld must be positive",
				layer, (long long)max_ctx);

	struct mla_layer *L = calloc(1, sizeof(*L));
	if (!L)
		return h->error(h, TF_ERR_NOMEM, "layer %d (mla): out of memory", layer);
	L->h = h;
	L->be = h->backend;
	L->bctx = h->backend_ctx;
	L->layer = layer;
	L->hidden = c->hidden_size;
	L->rq = c->q_lora_rank;
	L->d = (mla_dims){
		.heads = c->num_attention_heads, .dn = c->qk_nope_head_dim,
		.dr = c->qk_rope_head_dim, .dv = c->v_head_dim, .r = c->kv_lora_rank,
	};
	int64_t h0 = 0, h1 = 0;
	if ((rc = tf_tu_shard(h, c->num_attention_heads, prefix, "num_attention_heads", &h0,
			      &h1)))
		goto fail;
	L->heads_all = c->num_attention_heads;
	L->head0 = (int)h0;
	L->d.heads = (int)(h1 - h0);
	L->lat = L->d.r + L->d.dr;
	L->gate_w = c->gate_head_wise ? L->d.heads : L->d.heads * L->d.dv;
	L->interleave = c->rope_interleave;
	L->eps = c->rms_norm_eps;
	L->n_workers = L->be->n_threads(L->bctx);
	if (L->n_workers < 1)
		L->n_workers = 1;

	if ((rc = mla_conf_bf16(h, &L->bf16)) || (rc = mla_rope_init(h, L->d.dr, &L->rope)) ||
	    (rc = mla_load(L, prefix)))
		goto fail;
	L->d.scale = L->rope.scale_mult / sqrtf((float)(L->d.dn + L->d.dr));
	L->page_bytes = (size_t)MLA_PAGE_ROWS * L->lat * (L->bf16 ? 2 : 4);

	const mla_dims *d = &L->d;
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
	if (max_ctx <= 0)
		return L->h->error(L->h, TF_ERR_INVALID,
				   "layer %d (mla): context %lld must be positive", L->layer,
				   (long long)max_ctx);
	struct mla_state *S = calloc(1, sizeof(*S));
	if (S)
		S->page = calloc((size_t)mla_pages(max_ctx), sizeof(void *));
	if (!S || !S->page) {
		free(S);
		return L->h->error(L->h, TF_ERR_NOMEM,
				   "layer %d (mla): out of memory for a %lld-token page table",
				   L->layer, (long long)max_ctx);
	}
	S->max_ctx = max_ctx;
	*state = S;
	return TF_OK;
}

/* Pages for the first `rows` tokens.  Pages taken before a failure stay
 * as spare room: the tokens held are unchanged. */
static int mla_state_reserve(const struct mla_layer *L, struct mla_state *S, int64_t rows)
{
	for (int64_t need = mla_pages(rows); S->n_pages < need; S->n_pages++) {
		S->page[S->n_pages] = malloc(L->page_bytes);
		if (!S->page[S->n_pages])
			return L->h->error(L->h, TF_ERR_NOMEM,
					   "layer %d (mla): out of memory for a cache of %lld tokens",
					   L->layer, (long long)rows);
	}
	return TF_OK;
}

/* The pages stay for the tokens that come next. */
static void mla_state_reset(void *inst, void *state)
{
	((struct mla_state *)state)->len = 0;
}

static int64_t mla_state_len(void *inst, const void *state)
{
	return ((const struct mla_state *)state)->len;
}

static int mla_state_copy(void *inst, void *dst, const void *src)
{
	struct mla_layer *L = inst;
	struct mla_state *D = dst;
	const struct mla_state *S = src;
	const size_t row_bytes = L->page_bytes / MLA_PAGE_ROWS;
	int rc;

	if (D == S)
		return TF_OK;
	if (S->len > D->max_ctx)
		return L->h->error(L->h, TF_ERR_RANGE,
				   "layer %d (mla): a copy of %lld tokens exceeds the context of %lld",
				   L->layer, (long long)S->len, (long long)D->max_ctx);
	if ((rc = mla_state_reserve(L, D, S->len)))
		return rc;
	for (int64_t t = 0; t < S->len; t += MLA_PAGE_ROWS) {
		int64_t rows = S->len - t < MLA_PAGE_ROWS ? S->len - t : MLA_PAGE_ROWS;
		memcpy(D->page[t / MLA_PAGE_ROWS], S->page[t / MLA_PAGE_ROWS],
		       (size_t)rows * row_bytes);
	}
	D->len = S->len;
	return TF_OK;
}

/* The cache is append-only: a snapshot is its length. */
static size_t mla_state_snapshot_size(void *inst, const void *state)
{
	return sizeof(struct mla_snap);
}

static int mla_state_snapshot(void *inst, const void *state, void *buf)
{
	struct mla_snap s = { .magic = MLA_SNAP_MAGIC,
			      .len = ((const struct mla_state *)state)->len };
	memcpy(buf, &s, sizeof(s));
	return TF_OK;
}

/* Only backwards: rows past the current length may have been overwritten
 * since the snapshot. */
static int mla_state_rollback(void *inst, void *state, const void *buf)
{
	struct mla_layer *L = inst;
	struct mla_state *S = state;
	struct mla_snap s;
	memcpy(&s, buf, sizeof(s));
	if (s.magic != MLA_SNAP_MAGIC || s.len < 0)
		return L->h->error(L->h, TF_ERR_INVALID,
				   "layer %d (mla): rollback buffer is not an mla snapshot", L->layer);
	if (s.len > S->len)
		return L->h->error(L->h, TF_ERR_INVALID,
				   "layer %d (mla): cannot roll forward from %lld to %lld tokens",
				   L->layer, (long long)S->len, (long long)s.len);
	S->len = s.len;
	return TF_OK;
}

/* --- attention of one segment over its sequence's cache --- */

struct mla_job {
	struct mla_layer *L;
	mla_cache c;
	int64_t len, n;                 /* cache rows before the segment; its rows */
	const float *q;                 /* the segment's queries [n, heads * (dn + dr)] */
	float *o;                       /* its outputs [n, heads * dv] */
	int64_t i;                      /* absorbed: the current query */
	int64_t rows, parts;            /* absorbed: rows seen, parts they are split in */
	int64_t t0, tb;                 /* naive: the expanded block */
	atomic_int rc;                  /* absorbed: a slice product's failure */
};

/* absorbed form: one query at a time, cache rows split over workers */

static void absorb_query_fn(void *arg, int64_t h0, int64_t h1, int worker)
{
	struct mla_job *j = arg;
	const mla_dims *d = &j->L->d;
	int rc = mla_absorb_query(d, &j->L->kvb, j->q + j->i * d->heads * (d->dn + d->dr),
				  (int)h0, (int)h1, j->L->qlat);
	if (rc)
		atomic_store(&j->rc, rc);
}

static void absorbed_rows_fn(void *arg, int64_t p0, int64_t p1, int worker)
{
	struct mla_job *j = arg;
	struct mla_layer *L = j->L;
	for (int64_t p = p0; p < p1; p++)
		mla_absorbed_rows(&L->d, L->qlat, &j->c, j->rows * p / j->parts,
				  j->rows * (p + 1) / j->parts, L->run + p * L->d.heads,
				  L->acc + p * L->d.heads * L->d.r,
				  L->work + (size_t)worker * L->work_per);
}

static void absorbed_out_fn(void *arg, int64_t h0, int64_t h1, int worker)
{
	struct mla_job *j = arg;
	struct mla_layer *L = j->L;
	int rc = mla_absorbed_out(&L->d, &L->kvb, L->run, L->acc, (int)j->parts, (int)h0,
				  (int)h1, j->o + j->i * L->d.heads * L->d.dv,
				  L->work + (size_t)worker * L->work_per);
	if (rc)
		atomic_store(&j->rc, rc);
}

static int mla_attend_absorbed(struct mla_layer *L, struct mla_job *j)
{
	for (j->i = 0; j->i < j->n && !atomic_load(&j->rc); j->i++) {
		j->rows = j->len + j->i + 1;
		j->parts = (j->rows + MLA_ROWS_MIN - 1) / MLA_ROWS_MIN;
		if (j->parts > L->n_workers)
			j->parts = L->n_workers;
		L->be->parallel_for(L->bctx, L->d.heads, tf_tu_grain(2 * L->d.dn * L->d.r),
				    absorb_query_fn, j);
		L->be->parallel_for(L->bctx, j->parts, 1, absorbed_rows_fn, j);
		L->be->parallel_for(L->bctx, L->d.heads, tf_tu_grain(2 * L->d.dv * L->d.r),
				    absorbed_out_fn, j);
	}
	return atomic_load(&j->rc);
}

/* naive form: expand a block (page) of cache rows, every head attends to it */

static void naive_fn(void *arg, int64_t h0, int64_t h1, int worker)
{
	struct mla_job *j = arg;
	struct mla_layer *L = j->L;
	for (int64_t h = h0; h < h1; h++)
		mla_naive_block(&L->d, (int)h, j->q, j->n, j->len, L->kvblk, L->kpe, j->t0,
				j->tb, L->run, j->o, L->work + (size_t)worker * L->work_per);
}

static int mla_attend_naive(struct mla_layer *L, struct mla_job *j)
{
	const mla_dims *d = &L->d;
	const int64_t end = j->len + j->n;
	int rc;

	for (int64_t i = 0; i < j->n * d->heads; i++)
		L->run[i] = (mla_run){ .m = -INFINITY, .l = 0.0f };
	memset(j->o, 0, (size_t)j->n * d->heads * d->dv * sizeof(float));
	for (j->t0 = 0; j->t0 < end; j->t0 += MLA_KV_BLOCK) {
		j->tb = end - j->t0 < MLA_KV_BLOCK ? end - j->t0 : MLA_KV_BLOCK;
		mla_naive_split(d, &j->c, j->t0, j->tb, L->cblk, L->kpe);
		if ((rc = tf_lin_forward(&L->kv_b_proj, L->cblk, j->tb, L->kvblk)))
			return rc;
		L->be->parallel_for(L->bctx, d->heads,
				    tf_tu_grain(2 * j->n * j->tb * (d->dn + d->dr + d->dv)),
				    naive_fn, j);
	}
	for (int64_t i = 0; i < j->n * d->heads; i++)
		tf_vec_scale(j->o + i * d->dv, 1.0f / L->run[i].l, d->dv);
	return TF_OK;
}

/*
 * Which form: per query, the absorbed form reads each cache row twice over
 * (scores against [c ; k_pe], then the c accumulation: ~2 lat per row and
 * head), the naive form expands each row once per forward through kv_b
 * (r (dn + dv) per row and head).  Absorbed wins while n 2 lat < r (dn + dv),
 * i.e. for decode and verify runs, naive for prefill.
 */
static bool mla_use_absorbed(const struct mla_layer *L, int64_t n)
{
	return n * 2 * L->lat < (int64_t)L->d.r * (L->d.dn + L->d.dv);
}

/* Append a segment's latents to its cache, whose pages are taken, and
 * attend over it; the state's length moves only once the batch is done. */
static int mla_attend_seg(struct mla_layer *L, const tf_attn_seg *g)
{
	const mla_dims *d = &L->d;
	const struct mla_state *S = g->state;
	struct mla_job j = {
		.L = L, .c = { .page = S->page, .bf16 = L->bf16 }, .len = S->len, .n = g->n,
		.q = L->q + g->row0 * d->heads * (d->dn + d->dr),
		.o = L->o + g->row0 * d->heads * d->dv,
	};
	atomic_init(&j.rc, TF_OK);
	mla_cache_write(d, &j.c, S->len, g->n, L->ckv + g->row0 * L->lat);
	return mla_use_absorbed(L, g->n) ? mla_attend_absorbed(L, &j) : mla_attend_naive(L, &j);
}

/* The forward proper, while this layer holds the arena. */
static int mla_forward_locked(struct mla_layer *L, const float *x, const tf_attn_batch *b,
			      float *y)
{
	const mla_dims *d = &L->d;
	const int64_t n = b->n, dq = d->dn + d->dr;
	int rc;

	if (L->rq) {
		if ((rc = tf_lin_forward(&L->q_a_proj, x, n, L->qa)))
			return rc;
		L->be->rmsnorm(L->bctx, L->qa, L->qa, L->q_a_norm, n, L->rq, L->eps);
		rc = tf_lin_forward(&L->q_b_proj, L->qa, n, L->q);
	} else {
		rc = tf_lin_forward(&L->q_proj, x, n, L->q);
	}
	if (rc || (rc = tf_lin_forward(&L->kv_a_proj, x, n, L->ckv)) ||
	    (rc = tf_lin_forward(&L->g_proj, x, n, L->gate)))
		return rc;

	/* The latent is normed in place; k_pe, behind it, is not. */
	for (int64_t i = 0; i < n; i++)
		L->be->rmsnorm(L->bctx, L->ckv + i * L->lat, L->ckv + i * L->lat, L->kv_a_norm,
			       1, d->r, L->eps);
	L->be->rope(L->bctx, L->q + d->dn, n, d->heads, d->heads * dq, dq, d->dr, b->pos,
		    L->rope.inv_freq, L->rope.attn_factor, L->interleave);
	L->be->rope(L->bctx, L->ckv + d->r, n, 1, L->lat, 0, d->dr, b->pos, L->rope.inv_freq,
		    L->rope.attn_factor, L->interleave);

	for (int k = 0; k < b->n_seg; k++)
		if (b->seg[k].n && (rc = mla_attend_seg(L, &b->seg[k])))
			return rc;

	/* Sigmoid gate: one scalar per head, or one per output channel. */
	const int per = L->gate_w == d->heads ? d->dv : 1;
	for (int64_t i = 0; i < n * d->heads * d->dv; i++)
		L->o[i] *= tf_tu_sigmoid(L->gate[i / per]);

	return tf_lin_forward(&L->dense, L->o, n, y);
}

/* Segments tile the rows in order, each with a state that has room for
 * them; checked before any state changes. */
static int mla_batch_check(const struct mla_layer *L, const tf_attn_batch *b)
{
	const tf_host *h = L->h;
	int64_t row = 0;
	int rc;

	if (b->n < 0 || b->n_seg < 0 || (b->n > 0 && !b->pos) || (b->n_seg > 0 && !b->seg))
		return h->error(h, TF_ERR_INVALID,
				"layer %d (mla): a batch of %lld rows in %d segments, positions %s",
				L->layer, (long long)b->n, b->n_seg, b->pos ? "given" : "missing");
	for (int k = 0; k < b->n_seg; k++) {
		const tf_attn_seg *g = &b->seg[k];
		const struct mla_state *S = g->state;
		if (!S || g->row0 != row || g->n < 0)
			return h->error(h, TF_ERR_INVALID,
					"layer %d (mla): batch segment %d (rows %lld + %lld%s) does not continue at row %lld",
					L->layer, k, (long long)g->row0, (long long)g->n,
					S ? "" : ", no state", (long long)row);
		if ((rc = tf_tu_check_room(h, L->layer, "mla", g->n, S->len, S->max_ctx)))
			return rc;
		row += g->n;
	}
	if (row != b->n)
		return h->error(h, TF_ERR_INVALID,
				"layer %d (mla): batch segments cover %lld of its %lld rows",
				L->layer, (long long)row, (long long)b->n);
	return TF_OK;
}

static int mla_forward_batch(void *inst, const float *x, const tf_attn_batch *b, float *y)
{
	struct mla_layer *L = inst;
	int rc = mla_batch_check(L, b);
	if (rc || b->n == 0)
		return rc;
	/* Every page first: an out-of-memory leaves each sequence as it was. */
	for (int k = 0; k < b->n_seg; k++) {
		struct mla_state *S = b->seg[k].state;
		if ((rc = mla_state_reserve(L, S, S->len + b->seg[k].n)))
			return rc;
	}
	float *mem = tf_scratch_acquire(&mla_scratch, mla_act_floats(L, b->n));
	if (!mem)
		return L->h->error(L->h, TF_ERR_NOMEM,
				   "layer %d (mla): out of memory for %lld tokens of activations",
				   L->layer, (long long)b->n);
	mla_act_carve(L, b->n, mem);
	rc = mla_forward_locked(L, x, b, y);
	tf_scratch_release(&mla_scratch);
	if (rc)
		return rc;
	for (int k = 0; k < b->n_seg; k++)
		((struct mla_state *)b->seg[k].state)->len += b->seg[k].n;
	return TF_OK;
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
};

TF_EXPORT const tf_plugin_attention *tf_plugin_attention_v1(unsigned index)
{
	return index == 0 ? &mla_plugin : NULL;
}
