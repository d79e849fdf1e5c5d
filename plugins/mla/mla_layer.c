/* mla_layer.c - see mla_layer.h. */
#include "mla_layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/tensor_util.h"

#define MLA_SNAP_MAGIC 0x5f414c4du   /* "MLA_" */

struct mla_snap {
	uint32_t magic;
	uint32_t pad;
	int64_t len;
};

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

int64_t mla_pages(int64_t rows)
{
	return (rows + MLA_PAGE_ROWS - 1) / MLA_PAGE_ROWS;
}

int64_t mla_state_bytes(const tf_host *h, int layer, int64_t max_ctx)
{
	const tf_model_config *c = h->model;
	bool bf16;
	if (mla_conf_bf16(h, &bf16))
		bf16 = false;           /* layer_init will refuse; count the larger */
	int64_t page = (int64_t)MLA_PAGE_ROWS * (c->kv_lora_rank + c->qk_rope_head_dim) *
		       (bf16 ? 2 : 4);
	return mla_pages(max_ctx) * (page + (int64_t)sizeof(void *));
}

/* The config.json keys of q_proj's and q_b_proj's output features. */
#define MLA_KEYS_Q "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)"

/* This rank's heads as a part of a layer's features, `per` per head. */
static tf_lin_part mla_part(const struct mla_weights *w, tf_lin_axis axis, int64_t per)
{
	return (tf_lin_part){ .axis = axis, .lo = w->head0 * per,
			      .hi = (int64_t)(w->head0 + w->d.heads) * per };
}

static int mla_load(struct mla_weights *w, const char *prefix)
{
	const tf_host *h = w->h;
	const mla_dims *d = &w->d;
	const int64_t H = w->hidden, dq = d->dn + d->dr, dkv = d->dn + d->dv;
	const int64_t A = w->heads_all, gper = w->gate_w / d->heads;
	const tf_lin_part q_rows = mla_part(w, TF_LIN_PART_OUT, dq);
	const tf_lin_part kv_rows = mla_part(w, TF_LIN_PART_OUT, dkv);
	const tf_lin_part g_rows = mla_part(w, TF_LIN_PART_OUT, gper);
	const tf_lin_part o_cols = mla_part(w, TF_LIN_PART_IN, d->dv);
	const int64_t r_shape[1] = { d->r };
	int rc;

	if (w->rq) {
		const int64_t rq_shape[1] = { w->rq };
		if ((rc = tf_tu_lin_open(h, prefix, "q_a_proj", H, w->rq,
					 "in hidden_size, out q_lora_rank", &w->q_a_proj)) ||
		    (rc = tf_tu_load_leaf_f32(h, prefix, "q_a_layernorm.weight", 1, rq_shape,
					      &w->q_a_norm)) ||
		    (rc = tf_tu_lin_open_part(h, prefix, "q_b_proj", w->rq, A * dq,
					      "in q_lora_rank, out " MLA_KEYS_Q, &q_rows,
					      &w->q_b_proj)))
			return rc;
	} else if ((rc = tf_tu_lin_open_part(h, prefix, "q_proj", H, A * dq,
					     "in hidden_size, out " MLA_KEYS_Q, &q_rows,
					     &w->q_proj))) {
		return rc;
	}
	if ((rc = tf_tu_lin_open(h, prefix, "kv_a_proj_with_mqa", H, w->lat,
				 "in hidden_size, out kv_lora_rank + qk_rope_head_dim",
				 &w->kv_a_proj)) ||
	    (rc = tf_tu_load_leaf_f32(h, prefix, "kv_a_layernorm.weight", 1, r_shape,
				      &w->kv_a_norm)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "kv_b_proj", d->r, A * dkv,
				      "in kv_lora_rank, out num_attention_heads x "
				      "(qk_nope_head_dim + v_head_dim)", &kv_rows, &w->kv_b_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "g_proj", H, A * gper,
				      "in hidden_size, out num_attention_heads (x v_head_dim "
				      "unless gate_head_wise)", &g_rows, &w->g_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "dense", A * d->dv, H,
				      "in num_attention_heads x v_head_dim, out hidden_size", &o_cols,
				      &w->dense)))
		return rc;
	return TF_OK;
}

int mla_weights_open(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
		     struct mla_weights *w)
{
	const tf_model_config *c = h->model;
	int64_t h0 = 0, h1 = 0;
	int rc;

	memset(w, 0, sizeof(*w));
	w->h = h;
	w->layer = layer;
	if ((rc = mla_check_config(h, layer)) || (rc = mla_check_ctx(w, max_ctx)))
		return rc;
	w->hidden = c->hidden_size;
	w->rq = c->q_lora_rank;
	w->d = (mla_dims){
		.heads = c->num_attention_heads, .dn = c->qk_nope_head_dim,
		.dr = c->qk_rope_head_dim, .dv = c->v_head_dim, .r = c->kv_lora_rank,
	};
	if ((rc = tf_tu_shard(h, c->num_attention_heads, prefix, "num_attention_heads", &h0,
			      &h1)))
		goto fail;
	w->heads_all = c->num_attention_heads;
	w->head0 = (int)h0;
	w->d.heads = (int)(h1 - h0);
	w->lat = w->d.r + w->d.dr;
	w->gate_w = c->gate_head_wise ? w->d.heads : w->d.heads * w->d.dv;
	w->interleave = c->rope_interleave;
	w->eps = c->rms_norm_eps;
	if ((rc = mla_conf_bf16(h, &w->bf16)) || (rc = mla_rope_init(h, w->d.dr, &w->rope)) ||
	    (rc = mla_load(w, prefix)))
		goto fail;
	w->d.scale = w->rope.scale_mult / sqrtf((float)(w->d.dn + w->d.dr));
	w->page_bytes = (size_t)MLA_PAGE_ROWS * w->lat * (w->bf16 ? 2 : 4);
	return TF_OK;
fail:
	mla_weights_close(w);
	return rc;
}

void mla_weights_close(struct mla_weights *w)
{
	tf_lin *lins[] = { &w->q_proj, &w->q_a_proj, &w->q_b_proj, &w->kv_a_proj,
			   &w->kv_b_proj, &w->g_proj, &w->dense };
	for (size_t i = 0; i < sizeof(lins) / sizeof(lins[0]); i++)
		tf_tu_lin_close(w->h, lins[i]);
	mla_rope_free(&w->rope);
	free(w->q_a_norm);
	free(w->kv_a_norm);
	w->q_a_norm = w->kv_a_norm = NULL;
}

int mla_check_ctx(const struct mla_weights *w, int64_t max_ctx)
{
	if (max_ctx <= 0)
		return w->h->error(w->h, TF_ERR_INVALID,
				   "layer %d (mla): context %lld must be positive", w->layer,
				   (long long)max_ctx);
	return TF_OK;
}

int mla_check_batch(const struct mla_weights *w, const tf_attn_batch *b)
{
	const tf_host *h = w->h;
	int64_t row = 0;
	int rc;

	if (b->n < 0 || b->n_seg < 0 || (b->n > 0 && !b->pos) || (b->n_seg > 0 && !b->seg))
		return h->error(h, TF_ERR_INVALID,
				"layer %d (mla): a batch of %lld rows in %d segments, positions %s",
				w->layer, (long long)b->n, b->n_seg, b->pos ? "given" : "missing");
	for (int k = 0; k < b->n_seg; k++) {
		const tf_attn_seg *g = &b->seg[k];
		const struct mla_state_hdr *S = g->state;
		if (!S || g->row0 != row || g->n < 0)
			return h->error(h, TF_ERR_INVALID,
					"layer %d (mla): batch segment %d (rows %lld + %lld%s) does not continue at row %lld",
					w->layer, k, (long long)g->row0, (long long)g->n,
					S ? "" : ", no state", (long long)row);
		if ((rc = tf_tu_check_room(h, w->layer, "mla", g->n, S->len, S->max_ctx)))
			return rc;
		row += g->n;
	}
	if (row != b->n)
		return h->error(h, TF_ERR_INVALID,
				"layer %d (mla): batch segments cover %lld of its %lld rows",
				w->layer, (long long)row, (long long)b->n);
	return TF_OK;
}

int mla_check_copy(const struct mla_weights *w, const struct mla_state_hdr *dst,
		   const struct mla_state_hdr *src)
{
	if (src->len > dst->max_ctx)
		return w->h->error(w->h, TF_ERR_RANGE,
				   "layer %d (mla): a copy of %lld tokens exceeds the context of %lld",
				   w->layer, (long long)src->len, (long long)dst->max_ctx);
	return TF_OK;
}

bool mla_use_absorbed(const struct mla_weights *w, int64_t n)
{
	return n * 2 * w->lat < (int64_t)w->d.r * (w->d.dn + w->d.dv);
}

int64_t mla_state_len(void *inst, const void *state)
{
	return ((const struct mla_state_hdr *)state)->len;
}

size_t mla_state_snapshot_size(void *inst, const void *state)
{
	return sizeof(struct mla_snap);
}

int mla_state_snapshot(void *inst, const void *state, void *buf)
{
	struct mla_snap s = { .magic = MLA_SNAP_MAGIC,
			      .len = ((const struct mla_state_hdr *)state)->len };
	memcpy(buf, &s, sizeof(s));
	return TF_OK;
}

int mla_state_rollback(void *inst, void *state, const void *buf)
{
	const struct mla_weights *w = inst;
	struct mla_state_hdr *S = state;
	struct mla_snap s;
	memcpy(&s, buf, sizeof(s));
	if (s.magic != MLA_SNAP_MAGIC || s.len < 0)
		return w->h->error(w->h, TF_ERR_INVALID,
				   "layer %d (mla): rollback buffer is not an mla snapshot", w->layer);
	if (s.len > S->len)
		return w->h->error(w->h, TF_ERR_INVALID,
				   "layer %d (mla): cannot roll forward from %lld to %lld tokens",
				   w->layer, (long long)S->len, (long long)s.len);
	S->len = s.len;
	return TF_OK;
}
