/* kda_layer.c - what the KDA attention plugins share; see kda_layer.h. */
#include "kda_layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/tensor_util.h"

#define KDA_SNAP_MAGIC 0x5f41444bu /* "KDA_" */

struct kda_snap_hdr {
	uint32_t magic;
	uint32_t pad;
	int64_t len;
};

/* Config values the layer depends on, checked before any tensor is read. */
static int kda_check_config(const tf_host *h, int layer)
{
	const tf_model_config *c = h->model;
	if (c->hidden_size <= 0 || c->num_attention_heads <= 0 || c->head_dim <= 0)
		return h->error(h, TF_ERR_INVALID,
				"config.json: layer %d (kda): hidden_size %d, num_attention_heads %d, head_dim %d must be positive",
				layer, c->hidden_size, c->num_attention_heads, c->head_dim);
	if (c->short_conv_kernel_size < 1)
		return h->error(h, TF_ERR_INVALID,
				"config.json: short_conv_kernel_size %d must be at least 1",
				c->short_conv_kernel_size);
	if (c->kda_safe_gate && !(c->kda_lower_bound < 0.0f))
		return h->error(h, TF_ERR_INVALID,
				"config.json: kda_lower_bound %g must be negative", c->kda_lower_bound);
	return TF_OK;
}

size_t kda_state_floats(const struct kda_weights *w)
{
	return (size_t)w->heads * w->dim * w->dim + (size_t)KDA_NCONV * w->P * (w->width - 1);
}

int64_t kda_state_bytes(const tf_host *h, int layer, int64_t max_ctx)
{
	const tf_model_config *c = h->model;
	int64_t heads = c->num_attention_heads / (h->tp_size > 1 ? h->tp_size : 1);
	int64_t P = heads * c->head_dim;
	return 4 * (heads * c->head_dim * c->head_dim +
		    KDA_NCONV * P * (c->short_conv_kernel_size - 1));
}

int64_t kda_state_len(void *inst, const void *state)
{
	return ((const struct kda_state_hdr *)state)->len;
}

/* The config.json keys of a hidden -> heads x head_dim projection. */
#define KDA_KEYS_HP "in hidden_size, out num_attention_heads x head_dim"

/* This rank's heads as a part of the output features, `per` per head. */
static tf_lin_part kda_rows(const struct kda_weights *w, int64_t per)
{
	return (tf_lin_part){ .axis = TF_LIN_PART_OUT, .lo = w->head0 * per,
			      .hi = (int64_t)(w->head0 + w->heads) * per };
}

/* "<which>_proj", or with no_kda_lora false "<which>_a_proj" (H -> dim)
 * and "<which>_b_proj" (dim -> P). */
static int kda_gate_open(struct kda_weights *w, const char *prefix, const char *which,
			 struct kda_gate_proj *gp)
{
	const tf_lin_part rows = kda_rows(w, w->dim);
	const int64_t P_all = (int64_t)w->heads_all * w->dim;
	char leaf[16];
	int rc;
	gp->low_rank = !w->h->model->no_kda_lora;
	if (!gp->low_rank) {
		snprintf(leaf, sizeof(leaf), "%s_proj", which);
		return tf_tu_lin_open_part(w->h, prefix, leaf, w->hidden, P_all, KDA_KEYS_HP,
					   &rows, &gp->full);
	}
	snprintf(leaf, sizeof(leaf), "%s_a_proj", which);
	if ((rc = tf_tu_lin_open(w->h, prefix, leaf, w->hidden, w->dim,
				  "in hidden_size, out head_dim", &gp->a)))
		return rc;
	snprintf(leaf, sizeof(leaf), "%s_b_proj", which);
	return tf_tu_lin_open_part(w->h, prefix, leaf, w->dim, P_all,
				   "in head_dim, out num_attention_heads x head_dim", &rows, &gp->b);
}

static void kda_gate_close(const tf_host *h, struct kda_gate_proj *gp)
{
	tf_tu_lin_close(h, &gp->full);
	tf_tu_lin_close(h, &gp->a);
	tf_tu_lin_close(h, &gp->b);
}

static int kda_gate_forward(const struct kda_gate_proj *gp, const float *x, int64_t n,
			    float *low, float *y)
{
	int rc;
	if (!gp->low_rank)
		return tf_lin_forward(&gp->full, x, n, y);
	if ((rc = tf_lin_forward(&gp->a, x, n, low)))
		return rc;
	return tf_lin_forward(&gp->b, low, n, y);
}

void kda_weights_free_host(struct kda_weights *w)
{
	for (int s = 0; s < KDA_NCONV; s++) {
		free(w->conv_w[s]);
		w->conv_w[s] = NULL;
	}
	free(w->a_exp);
	free(w->dt_bias);
	free(w->o_norm);
	w->a_exp = w->dt_bias = w->o_norm = NULL;
}

void kda_weights_close(struct kda_weights *w)
{
	for (int s = 0; s < KDA_NCONV; s++)
		tf_tu_lin_close(w->h, &w->proj[s]);
	kda_gate_close(w->h, &w->f_proj);
	kda_gate_close(w->h, &w->g_proj);
	tf_tu_lin_close(w->h, &w->b_proj);
	tf_tu_lin_close(w->h, &w->o_proj);
	kda_weights_free_host(w);
}

static int kda_load(struct kda_weights *w, const char *prefix)
{
	static const char *const proj_name[KDA_NCONV] = { "q_proj", "k_proj", "v_proj" };
	static const char *const conv_name[KDA_NCONV] = {
		"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"
	};
	const tf_host *h = w->h;
	const int64_t H = w->hidden, P_all = (int64_t)w->heads_all * w->dim;
	const int64_t conv_shape[3] = { P_all, 1, w->width };
	const tf_lin_part rows = kda_rows(w, w->dim), head_rows = kda_rows(w, 1);
	const tf_lin_part cols = { .axis = TF_LIN_PART_IN, .lo = rows.lo, .hi = rows.hi };
	int rc;

	for (int s = 0; s < KDA_NCONV; s++) {
		if ((rc = tf_tu_lin_open_part(h, prefix, proj_name[s], H, P_all, KDA_KEYS_HP,
					      &rows, &w->proj[s])) ||
		    (rc = tf_tu_load_leaf_f32(h, prefix, conv_name[s], 3, conv_shape,
					      &w->conv_w[s])))
			return rc;
		tf_tu_keep_rows(w->conv_w[s], w->width, rows.lo, rows.hi);
	}
	if ((rc = kda_gate_open(w, prefix, "f", &w->f_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "b_proj", H, w->heads_all,
				      "in hidden_size, out num_attention_heads", &head_rows,
				      &w->b_proj)) ||
	    (rc = kda_gate_open(w, prefix, "g", &w->g_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "o_proj", P_all, H,
				      "in num_attention_heads x head_dim, out hidden_size", &cols,
				      &w->o_proj)))
		return rc;

	const int64_t heads_shape[1] = { w->heads_all }, p_shape[1] = { P_all };
	const int64_t dim_shape[1] = { w->dim };
	if ((rc = tf_tu_load_leaf_f32(h, prefix, "A_log", 1, heads_shape, &w->a_exp)) ||
	    (rc = tf_tu_load_leaf_f32(h, prefix, "dt_bias", 1, p_shape, &w->dt_bias)) ||
	    (rc = tf_tu_load_leaf_f32(h, prefix, "o_norm.weight", 1, dim_shape, &w->o_norm)))
		return rc;
	tf_tu_keep_rows(w->a_exp, 1, head_rows.lo, head_rows.hi);
	tf_tu_keep_rows(w->dt_bias, 1, rows.lo, rows.hi);
	for (int i = 0; i < w->heads; i++)
		w->a_exp[i] = expf(w->a_exp[i]);
	return TF_OK;
}

int kda_weights_open(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
		     struct kda_weights *w)
{
	const tf_model_config *c = h->model;
	int64_t h0 = 0, h1 = 0;
	int rc = kda_check_config(h, layer);
	memset(w, 0, sizeof(*w));
	if (rc || (rc = tf_tu_shard(h, c->num_attention_heads, prefix, "num_attention_heads",
				    &h0, &h1)))
		return rc;
	*w = (struct kda_weights){
		.h = h, .layer = layer, .hidden = c->hidden_size,
		.heads = (int)(h1 - h0), .head0 = (int)h0, .heads_all = c->num_attention_heads,
		.dim = c->head_dim, .width = c->short_conv_kernel_size,
		.P = (h1 - h0) * c->head_dim,
		.safe_gate = c->kda_safe_gate, .lower_bound = c->kda_lower_bound,
		.eps = c->rms_norm_eps,
	};
	if ((rc = kda_check_ctx(w, max_ctx)))
		return rc;
	if ((rc = kda_load(w, prefix)))
		kda_weights_close(w);
	return rc;
}

int kda_instance_new(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
		     size_t bytes, void **inst)
{
	struct kda_weights *w = calloc(1, bytes);
	if (!w)
		return h->error(h, TF_ERR_NOMEM, "layer %d (kda): out of memory", layer);
	int rc = kda_weights_open(h, layer, prefix, max_ctx, w);
	if (rc) {
		free(w);
		return rc;
	}
	*inst = w;
	return TF_OK;
}

int kda_project(const struct kda_weights *w, const float *x, int64_t n,
		const struct kda_proj_out *o)
{
	int rc = TF_OK;
	for (int s = 0; s < KDA_NCONV && !rc; s++)
		rc = tf_lin_forward(&w->proj[s], x, n, o->x[s]);
	if (rc || (rc = kda_gate_forward(&w->f_proj, x, n, o->low, o->f)) ||
	    (rc = tf_lin_forward(&w->b_proj, x, n, o->beta)))
		return rc;
	return kda_gate_forward(&w->g_proj, x, n, o->low, o->gate);
}

size_t kda_snap_size(const struct kda_weights *w)
{
	return sizeof(struct kda_snap_hdr) + kda_state_floats(w) * sizeof(float);
}

size_t kda_state_snapshot_size(void *inst, const void *state)
{
	return kda_snap_size(inst);
}

void kda_snap_header(const struct kda_state_hdr *st, void *buf)
{
	struct kda_snap_hdr hdr = { .magic = KDA_SNAP_MAGIC, .len = st->len };
	memcpy(buf, &hdr, sizeof(hdr));
}

int kda_snap_len(const struct kda_weights *w, const struct kda_state_hdr *st,
		 const void *buf, int64_t *len)
{
	struct kda_snap_hdr hdr;
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.magic != KDA_SNAP_MAGIC || hdr.len < 0 || hdr.len > st->max_ctx)
		return w->h->error(w->h, TF_ERR_INVALID,
				   "layer %d (kda): rollback buffer is not a kda snapshot of this state",
				   w->layer);
	*len = hdr.len;
	return TF_OK;
}

void *kda_snap_data(void *buf)
{
	return (char *)buf + sizeof(struct kda_snap_hdr);
}

/* st was made by `layer`; else TF_ERR_INVALID naming the layer. */
static int kda_check_state(const struct kda_weights *w, const void *layer,
			   const struct kda_state_hdr *st, const char *what)
{
	if (st && st->layer == layer)
		return TF_OK;
	return w->h->error(w->h, TF_ERR_INVALID, "layer %d (kda): %s: not a state of this layer",
			   w->layer, what);
}

int kda_check_ctx(const struct kda_weights *w, int64_t max_ctx)
{
	if (max_ctx > 0)
		return TF_OK;
	return w->h->error(w->h, TF_ERR_INVALID, "layer %d (kda): context %lld must be positive",
			   w->layer, (long long)max_ctx);
}

int kda_check_copy(const struct kda_weights *w, const void *layer,
		   const struct kda_state_hdr *dst, const struct kda_state_hdr *src)
{
	int rc;
	if ((rc = kda_check_state(w, layer, dst, "state_copy")) ||
	    (rc = kda_check_state(w, layer, src, "state_copy")))
		return rc;
	if (src->len > dst->max_ctx)
		return w->h->error(w->h, TF_ERR_RANGE,
				   "layer %d (kda): state_copy: %lld tokens exceed the context of %lld",
				   w->layer, (long long)src->len, (long long)dst->max_ctx);
	return TF_OK;
}

int kda_check_batch(const struct kda_weights *w, const void *layer, const tf_attn_batch *b)
{
	const tf_host *h = w->h;
	int64_t next = 0;
	int rc;
	if (b->n < 0 || b->n_seg < 1 || !b->seg)
		return h->error(h, TF_ERR_INVALID, "layer %d (kda): batch of %lld rows in %d segments",
				w->layer, (long long)b->n, b->n_seg);
	for (int k = 0; k < b->n_seg; k++) {
		const tf_attn_seg *sg = &b->seg[k];
		const struct kda_state_hdr *st = sg->state;
		if (sg->row0 != next || sg->n < 0 || sg->n > b->n - next)
			return h->error(h, TF_ERR_INVALID,
					"layer %d (kda): segment %d (rows %lld + %lld) does not continue row %lld of %lld",
					w->layer, k, (long long)sg->row0, (long long)sg->n,
					(long long)next, (long long)b->n);
		next += sg->n;
		if ((rc = kda_check_state(w, layer, st, "forward_batch")))
			return rc;
		for (int o = 0; o < k; o++)
			if (b->seg[o].state == st)
				return h->error(h, TF_ERR_INVALID,
						"layer %d (kda): segments %d and %d share a state",
						w->layer, o, k);
		if ((rc = tf_tu_check_room(h, w->layer, "kda", sg->n, st->len, st->max_ctx)))
			return rc;
	}
	if (next != b->n)
		return h->error(h, TF_ERR_INVALID, "layer %d (kda): segments cover %lld of %lld rows",
				w->layer, (long long)next, (long long)b->n);
	return TF_OK;
}
