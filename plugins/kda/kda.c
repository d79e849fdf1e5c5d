/*
 * kda.c - the KDA attention plugin (layer type "kda").
 *
 * One instance per KDA layer holds its projections and the small fp32
 * tensors; each sequence's state (per-channel conv history of q, k and v,
 * and the fp32 recurrent state of every head) is a struct kda_state of its
 * own (ABI 1.5).
 *
 * forward_batch(): the input projections run through the quant plugin on
 * all rows of every sequence at once; then each (sequence, head) pair, on
 * its own worker, runs its short causal conv + SiLU, L2 norms, gates, the
 * delta rule on that sequence's state (delta.c: recurrent for a few tokens,
 * chunked WY form for longer runs) and its gated RMSNorm; o_proj over all
 * rows closes the block.  Shapes all come from config.json.
 *
 * Tensor parallel ([tp] size > 1): a rank holds the heads
 * [head0, head0 + heads) of num_attention_heads, their rows of every input
 * projection, conv, gate and bias, and o_proj's matching input columns, so
 * its output is a partial sum the runtime all-reduces.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/attention.h"
#include "tf/backend.h"
#include "tf/quant.h"

#include "../common/scratch.h"
#include "../common/tensor_util.h"
#include "delta.h"

#define KDA_SNAP_MAGIC 0x5f41444bu /* "KDA_" */

/* fla's l2norm: x / sqrt(sum x^2 + eps), eps inside the root. */
#define KDA_L2_EPS 1e-6f

enum { KDA_Q, KDA_K, KDA_V, KDA_NCONV };

/* A gate projection H -> P: full rank (Ling's f_proj, g_proj) or Kimi's
 * low-rank pair through head_dim (f_a_proj then f_b_proj). */
struct kda_gate_proj {
	tf_lin full, a, b;
	bool low_rank;
};

struct kda_layer {
	const tf_host *h;
	const tf_backend *be;
	void *bctx;
	int layer;

	int hidden, heads, dim, width;  /* dim = K = V; width = conv taps; heads: this rank's */
	int head0, heads_all;           /* this rank's first head, of all of them */
	int64_t P;                      /* heads * dim */
	bool safe_gate;
	float lower_bound, eps;

	tf_lin proj[KDA_NCONV];         /* q, k, v */
	struct kda_gate_proj f_proj, g_proj;
	tf_lin b_proj, o_proj;
	float *conv_w[KDA_NCONV];       /* [P, width] */
	float *a_exp;                   /* exp(A_log) [heads] */
	float *dt_bias;                 /* [P] */
	float *o_norm;                  /* [dim] */

	size_t work_per;                /* scratch floats per worker */
	int n_workers;
	bool scratch_ref;               /* holds a reference on kda_scratch */
};

/* Activations of one forward, carved from the shared arena. */
struct kda_act {
	float *x[KDA_NCONV];            /* q, k, v: [n, P] */
	float *f, *gate, *o;            /* [n, P] */
	float *beta;                    /* [n, heads] */
	float *low;                     /* [n, dim] low-rank gate input */
	float *work;                    /* per worker: work_per floats */
};

/* One sequence's state, in one allocation; snapshots copy S and conv as
 * one block. */
struct kda_state {
	const struct kda_layer *L;      /* the layer that made it */
	int64_t max_ctx, len;
	float *conv;                    /* [3, P, width - 1] raw inputs, oldest first,
					 * right after S */
	float S[];                      /* [heads, dim, dim] */
};

static tf_scratch kda_scratch = TF_SCRATCH_INIT;

struct kda_snap_hdr {
	uint32_t magic;
	uint32_t pad;
	int64_t len;
};

static size_t kda_state_floats(const struct kda_layer *L)
{
	return (size_t)L->heads * L->dim * L->dim +
	       (size_t)KDA_NCONV * L->P * (L->width - 1);
}

static int kda_probe(const tf_host *h, const char **reason)
{
	return tf_tu_probe_host_backend(h, reason);
}

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

static int64_t kda_state_bytes(const tf_host *h, int layer, int64_t max_ctx)
{
	const tf_model_config *c = h->model;
	int64_t heads = c->num_attention_heads / (h->tp_size > 1 ? h->tp_size : 1);
	int64_t P = heads * c->head_dim;
	return 4 * (heads * c->head_dim * c->head_dim +
		    KDA_NCONV * P * (c->short_conv_kernel_size - 1));
}

/* Floats of one forward's activations, laid out as kda_act_carve does. */
static size_t kda_act_floats(const struct kda_layer *L, int64_t n)
{
	return 6 * tf_scratch_round((size_t)n * L->P) +
	       tf_scratch_round((size_t)n * L->heads) + tf_scratch_round((size_t)n * L->dim) +
	       tf_scratch_round((size_t)L->n_workers * L->work_per);
}

static void kda_act_carve(const struct kda_layer *L, int64_t n, float *mem,
			  struct kda_act *a)
{
	for (int s = 0; s < KDA_NCONV; s++)
		a->x[s] = tf_scratch_take(&mem, (size_t)n * L->P);
	a->f = tf_scratch_take(&mem, (size_t)n * L->P);
	a->gate = tf_scratch_take(&mem, (size_t)n * L->P);
	a->o = tf_scratch_take(&mem, (size_t)n * L->P);
	a->beta = tf_scratch_take(&mem, (size_t)n * L->heads);
	a->low = tf_scratch_take(&mem, (size_t)n * L->dim);
	a->work = tf_scratch_take(&mem, (size_t)L->n_workers * L->work_per);
}

/* This rank's heads as a part of the output features, `per` per head. */
static tf_lin_part kda_rows(const struct kda_layer *L, int64_t per)
{
	return (tf_lin_part){ .axis = TF_LIN_PART_OUT, .lo = L->head0 * per,
			      .hi = (int64_t)(L->head0 + L->heads) * per };
}

/* The config.json keys of a hidden -> heads x head_dim projection. */
#define KDA_KEYS_HP "in hidden_size, out num_attention_heads x head_dim"

/* "<which>_proj", or with no_kda_lora false "<which>_a_proj" (H -> dim)
 * and "<which>_b_proj" (dim -> P). */
static int kda_gate_open(struct kda_layer *L, const char *prefix, const char *which,
			 struct kda_gate_proj *gp)
{
	const tf_lin_part rows = kda_rows(L, L->dim);
	const int64_t P_all = (int64_t)L->heads_all * L->dim;
	char leaf[16];
	int rc;
	gp->low_rank = !L->h->model->no_kda_lora;
	if (!gp->low_rank) {
		snprintf(leaf, sizeof(leaf), "%s_proj", which);
		return tf_tu_lin_open_part(L->h, prefix, leaf, L->hidden, P_all, KDA_KEYS_HP,
					   &rows, &gp->full);
	}
	snprintf(leaf, sizeof(leaf), "%s_a_proj", which);
	if ((rc = tf_tu_lin_open(L->h, prefix, leaf, L->hidden, L->dim,
				  "in hidden_size, out head_dim", &gp->a)))
		return rc;
	snprintf(leaf, sizeof(leaf), "%s_b_proj", which);
	return tf_tu_lin_open_part(L->h, prefix, leaf, L->dim, P_all,
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

static void kda_layer_fini(void *inst)
{
	struct kda_layer *L = inst;
	if (!L)
		return;
	for (int s = 0; s < KDA_NCONV; s++) {
		tf_tu_lin_close(L->h, &L->proj[s]);
		free(L->conv_w[s]);
	}
	kda_gate_close(L->h, &L->f_proj);
	kda_gate_close(L->h, &L->g_proj);
	tf_tu_lin_close(L->h, &L->b_proj);
	tf_tu_lin_close(L->h, &L->o_proj);
	free(L->a_exp);
	free(L->dt_bias);
	free(L->o_norm);
	if (L->scratch_ref)
		tf_scratch_unref(&kda_scratch);
	free(L);
}

static int kda_load(struct kda_layer *L, const char *prefix)
{
	static const char *const proj_name[KDA_NCONV] = { "q_proj", "k_proj", "v_proj" };
	static const char *const conv_name[KDA_NCONV] = {
		"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"
	};
	const tf_host *h = L->h;
	const int64_t H = L->hidden, P_all = (int64_t)L->heads_all * L->dim;
	const int64_t conv_shape[3] = { P_all, 1, L->width };
	const tf_lin_part rows = kda_rows(L, L->dim), head_rows = kda_rows(L, 1);
	const tf_lin_part cols = { .axis = TF_LIN_PART_IN, .lo = rows.lo, .hi = rows.hi };
	int rc;

	for (int s = 0; s < KDA_NCONV; s++) {
		if ((rc = tf_tu_lin_open_part(h, prefix, proj_name[s], H, P_all, KDA_KEYS_HP,
					      &rows, &L->proj[s])) ||
		    (rc = tf_tu_load_leaf_f32(h, prefix, conv_name[s], 3, conv_shape,
					      &L->conv_w[s])))
			return rc;
		tf_tu_keep_rows(L->conv_w[s], L->width, rows.lo, rows.hi);
	}
	if ((rc = kda_gate_open(L, prefix, "f", &L->f_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "b_proj", H, L->heads_all,
				      "in hidden_size, out num_attention_heads", &head_rows,
				      &L->b_proj)) ||
	    (rc = kda_gate_open(L, prefix, "g", &L->g_proj)) ||
	    (rc = tf_tu_lin_open_part(h, prefix, "o_proj", P_all, H,
				      "in num_attention_heads x head_dim, out hidden_size", &cols,
				      &L->o_proj)))
		return rc;

	const int64_t heads_shape[1] = { L->heads_all }, p_shape[1] = { P_all };
	const int64_t dim_shape[1] = { L->dim };
	if ((rc = tf_tu_load_leaf_f32(h, prefix, "A_log", 1, heads_shape, &L->a_exp)) ||
	    (rc = tf_tu_load_leaf_f32(h, prefix, "dt_bias", 1, p_shape, &L->dt_bias)) ||
	    (rc = tf_tu_load_leaf_f32(h, prefix, "o_norm.weight", 1, dim_shape, &L->o_norm)))
		return rc;
	tf_tu_keep_rows(L->a_exp, 1, head_rows.lo, head_rows.hi);
	tf_tu_keep_rows(L->dt_bias, 1, rows.lo, rows.hi);
	for (int i = 0; i < L->heads; i++)
		L->a_exp[i] = expf(L->a_exp[i]);
	return TF_OK;
}

static int kda_layer_init(const tf_host *h, int layer, const char *prefix,
			  int64_t max_ctx, void **inst)
{
	const tf_model_config *c = h->model;
	int rc = kda_check_config(h, layer);
	if (rc)
		return rc;
	if (max_ctx <= 0)
		return h->error(h, TF_ERR_INVALID, "layer %d (kda): context %lld must be positive",
				layer, (long long)max_ctx);

	struct kda_layer *L = calloc(1, sizeof(*L));
	if (!L)
		return h->error(h, TF_ERR_NOMEM, "layer %d (kda): out of memory", layer);
	L->h = h;
	L->be = h->backend;
	L->bctx = h->backend_ctx;
	L->layer = layer;
	L->hidden = c->hidden_size;
	L->heads_all = c->num_attention_heads;
	L->dim = c->head_dim;
	L->width = c->short_conv_kernel_size;
	int64_t h0 = 0, h1 = 0;
	if ((rc = tf_tu_shard(h, L->heads_all, prefix, "num_attention_heads", &h0, &h1)))
		goto fail;
	L->head0 = (int)h0;
	L->heads = (int)(h1 - h0);
	L->P = (int64_t)L->heads * L->dim;
	L->safe_gate = c->kda_safe_gate;
	L->lower_bound = c->kda_lower_bound;
	L->eps = c->rms_norm_eps;

	if ((rc = kda_load(L, prefix)))
		goto fail;

	L->n_workers = L->be->n_threads(L->bctx);
	if (L->n_workers < 1)
		L->n_workers = 1;
	L->work_per = kda_delta_chunk_work(L->dim, L->dim);
	tf_scratch_ref(&kda_scratch);
	L->scratch_ref = true;
	*inst = L;
	return TF_OK;
fail:
	kda_layer_fini(L);
	return rc;
}

/*
 * Causal depthwise conv + SiLU of one token over `channels` adjacent
 * channels, in place in x.  w holds each channel's `width` taps, oldest
 * first; hist each channel's width-1 raw inputs before this token, oldest
 * first, and is advanced past it.  Prefill calls it token after token:
 * the history keeps the raw inputs an output has overwritten, and a row's
 * channels are adjacent in memory.
 */
static void kda_conv_step(float *x, int64_t channels, const float *w, int width, float *hist)
{
	const int back = width - 1;
	for (int64_t c = 0; c < channels; c++, w += width, hist += back) {
		float s = 0.0f, next = x[c];
		for (int j = 0; j < back; j++)
			s += w[j] * hist[j];
		s += w[back] * next;
		/* Each input one place older, newest first: written as a
		 * rotation, not a copy the compiler would make a memmove call. */
		for (int j = back - 1; j >= 0; j--) {
			const float h = hist[j];
			hist[j] = next;
			next = h;
		}
		x[c] = tf_tu_silu(s);
	}
}

/* q <- q / |q| * scale (norm eps inside the root, as fla). */
static void kda_l2norm(float *x, int n, float scale)
{
	float ss = 0.0f;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	float r = scale / sqrtf(ss + KDA_L2_EPS);
	for (int i = 0; i < n; i++)
		x[i] *= r;
}

/*
 * Everything of one head of one sequence between the projections and
 * o_proj: rows [row0, row0 + n) of the activations, on state st.
 */
static void kda_head(const struct kda_layer *L, const struct kda_act *A, struct kda_state *st,
		     int hd, int64_t row0, int64_t n, float *work)
{
	const int D = L->dim, W = L->width;
	const int64_t P = L->P, off = (int64_t)hd * D, r0 = row0 * P;

	for (int s = 0; s < KDA_NCONV; s++)
		for (int64_t t = 0; t < n; t++)
			kda_conv_step(A->x[s] + r0 + t * P + off, D, L->conv_w[s] + off * W, W,
				      st->conv + ((size_t)s * P + off) * (W - 1));

	const float a = L->a_exp[hd], qscale = 1.0f / sqrtf((float)D);
	float *beta = A->beta + row0 * L->heads + hd;
	for (int64_t t = 0; t < n; t++) {
		kda_l2norm(A->x[KDA_Q] + r0 + t * P + off, D, qscale);
		kda_l2norm(A->x[KDA_K] + r0 + t * P + off, D, 1.0f);
		float *g = A->f + r0 + t * P + off;
		const float *bias = L->dt_bias + off;
		for (int c = 0; c < D; c++)
			g[c] = L->safe_gate ? L->lower_bound * tf_tu_sigmoid(a * (g[c] + bias[c]))
					    : -a * tf_tu_softplus(g[c] + bias[c]);
		beta[t * L->heads] = tf_tu_sigmoid(beta[t * L->heads]);
	}

	kda_head_io io = {
		.q = A->x[KDA_Q] + r0 + off, .k = A->x[KDA_K] + r0 + off, .g = A->f + r0 + off,
		.v = A->x[KDA_V] + r0 + off, .beta = beta, .o = A->o + r0 + off,
		.ld = P, .ldb = L->heads,
	};
	float *S = st->S + (size_t)hd * D * D;
	/* Below one sub-block the chunk set-up costs more than it saves. */
	if (n < KDA_SUBCHUNK)
		kda_delta_recurrent(S, D, D, n, &io, work);
	else
		kda_delta_chunked(S, D, D, n, &io, work);

	/* Gated RMSNorm: normalise, weight, then multiply by sigmoid(gate). */
	for (int64_t t = 0; t < n; t++) {
		float *o = A->o + r0 + t * P + off;
		const float *gt = A->gate + r0 + t * P + off;
		float ss = 0.0f;
		for (int c = 0; c < D; c++)
			ss += o[c] * o[c];
		float r = 1.0f / sqrtf(ss / (float)D + L->eps);
		for (int c = 0; c < D; c++)
			o[c] = o[c] * r * L->o_norm[c] * tf_tu_sigmoid(gt[c]);
	}
}

struct kda_job {
	const struct kda_layer *L;
	const struct kda_act *A;
	const tf_attn_batch *b;
};

/* Item i is head i % heads of segment i / heads. */
static void kda_heads_fn(void *arg, int64_t begin, int64_t end, int worker)
{
	struct kda_job *j = arg;
	const int heads = j->L->heads;
	for (int64_t i = begin; i < end; i++) {
		const tf_attn_seg *sg = &j->b->seg[i / heads];
		if (sg->n)
			kda_head(j->L, j->A, sg->state, (int)(i % heads), sg->row0, sg->n,
				 j->A->work + (size_t)worker * j->L->work_per);
	}
}

/* st is a state this layer made; else TF_ERR_INVALID naming the layer. */
static int kda_check_state(const struct kda_layer *L, const struct kda_state *st,
			   const char *what)
{
	if (st && st->L == L)
		return TF_OK;
	return L->h->error(L->h, TF_ERR_INVALID, "layer %d (kda): %s: not a state of this layer",
			   L->layer, what);
}

/* Segments well-formed (tf_attn_batch) and every state with room for its
 * rows, checked before any state is touched. */
static int kda_check_batch(const struct kda_layer *L, const tf_attn_batch *b)
{
	const tf_host *h = L->h;
	int64_t next = 0;
	int rc;
	if (b->n < 0 || b->n_seg < 1 || !b->seg)
		return h->error(h, TF_ERR_INVALID, "layer %d (kda): batch of %lld rows in %d segments",
				L->layer, (long long)b->n, b->n_seg);
	for (int k = 0; k < b->n_seg; k++) {
		const tf_attn_seg *sg = &b->seg[k];
		const struct kda_state *st = sg->state;
		if (sg->row0 != next || sg->n < 0 || sg->n > b->n - next)
			return h->error(h, TF_ERR_INVALID,
					"layer %d (kda): segment %d (rows %lld + %lld) does not continue row %lld of %lld",
					L->layer, k, (long long)sg->row0, (long long)sg->n,
					(long long)next, (long long)b->n);
		next += sg->n;
		if ((rc = kda_check_state(L, st, "forward_batch")))
			return rc;
		for (int o = 0; o < k; o++)
			if (b->seg[o].state == st)
				return h->error(h, TF_ERR_INVALID,
						"layer %d (kda): segments %d and %d share a state",
						L->layer, o, k);
		if ((rc = tf_tu_check_room(h, L->layer, "kda", sg->n, st->len, st->max_ctx)))
			return rc;
	}
	if (next != b->n)
		return h->error(h, TF_ERR_INVALID, "layer %d (kda): segments cover %lld of %lld rows",
				L->layer, (long long)next, (long long)b->n);
	return TF_OK;
}

static int kda_forward_batch(void *inst, const float *x, const tf_attn_batch *b, float *y)
{
	struct kda_layer *L = inst;
	const int64_t n = b->n;
	int rc = kda_check_batch(L, b);
	if (rc || n == 0)
		return rc;
	float *mem = tf_scratch_acquire(&kda_scratch, kda_act_floats(L, n));
	if (!mem)
		return L->h->error(L->h, TF_ERR_NOMEM,
				   "layer %d (kda): out of memory for %lld tokens of activations",
				   L->layer, (long long)n);
	struct kda_act A;
	kda_act_carve(L, n, mem, &A);

	for (int s = 0; s < KDA_NCONV && !rc; s++)
		rc = tf_lin_forward(&L->proj[s], x, n, A.x[s]);
	if (rc || (rc = kda_gate_forward(&L->f_proj, x, n, A.low, A.f)) ||
	    (rc = tf_lin_forward(&L->b_proj, x, n, A.beta)) ||
	    (rc = kda_gate_forward(&L->g_proj, x, n, A.low, A.gate)))
		goto out;

	/* Grain from the mean segment: items differ only in their rows. */
	struct kda_job job = { .L = L, .A = &A, .b = b };
	int64_t rows = (n + b->n_seg - 1) / b->n_seg;
	L->be->parallel_for(L->bctx, (int64_t)b->n_seg * L->heads,
			    tf_tu_grain(4 * rows * L->dim * L->dim), kda_heads_fn, &job);
	for (int k = 0; k < b->n_seg; k++)
		((struct kda_state *)b->seg[k].state)->len += b->seg[k].n;
	rc = tf_lin_forward(&L->o_proj, A.o, n, y);
out:
	tf_scratch_release(&kda_scratch);
	return rc;
}

static int kda_state_new(void *inst, int64_t max_ctx, void **state)
{
	const struct kda_layer *L = inst;
	if (max_ctx <= 0)
		return L->h->error(L->h, TF_ERR_INVALID, "layer %d (kda): context %lld must be positive",
				   L->layer, (long long)max_ctx);
	struct kda_state *st = calloc(1, sizeof(*st) + kda_state_floats(L) * sizeof(float));
	if (!st)
		return L->h->error(L->h, TF_ERR_NOMEM, "layer %d (kda): out of memory for a state",
				   L->layer);
	st->L = L;
	st->max_ctx = max_ctx;
	st->conv = st->S + (size_t)L->heads * L->dim * L->dim;
	*state = st;
	return TF_OK;
}

static void kda_state_free(void *inst, void *state)
{
	free(state);
}

static void kda_state_reset(void *inst, void *state)
{
	struct kda_state *st = state;
	memset(st->S, 0, kda_state_floats(inst) * sizeof(float));
	st->len = 0;
}

static int64_t kda_state_len(void *inst, const void *state)
{
	return ((const struct kda_state *)state)->len;
}

static int kda_state_copy(void *inst, void *dst, const void *src)
{
	const struct kda_layer *L = inst;
	struct kda_state *d = dst;
	const struct kda_state *s = src;
	int rc;
	if ((rc = kda_check_state(L, d, "state_copy")) || (rc = kda_check_state(L, s, "state_copy")))
		return rc;
	if (s->len > d->max_ctx)
		return L->h->error(L->h, TF_ERR_RANGE,
				   "layer %d (kda): state_copy: %lld tokens exceed the context of %lld",
				   L->layer, (long long)s->len, (long long)d->max_ctx);
	if (d != s)
		memcpy(d->S, s->S, kda_state_floats(L) * sizeof(float));
	d->len = s->len;
	return TF_OK;
}

/* A snapshot is the header and the whole state: KDA state is not append-only. */
static size_t kda_state_snapshot_size(void *inst, const void *state)
{
	return sizeof(struct kda_snap_hdr) + kda_state_floats(inst) * sizeof(float);
}

static int kda_state_snapshot(void *inst, const void *state, void *buf)
{
	const struct kda_state *st = state;
	struct kda_snap_hdr hdr = { .magic = KDA_SNAP_MAGIC, .len = st->len };
	memcpy(buf, &hdr, sizeof(hdr));
	memcpy((char *)buf + sizeof(hdr), st->S, kda_state_floats(inst) * sizeof(float));
	return TF_OK;
}

static int kda_state_rollback(void *inst, void *state, const void *buf)
{
	const struct kda_layer *L = inst;
	struct kda_state *st = state;
	struct kda_snap_hdr hdr;
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.magic != KDA_SNAP_MAGIC || hdr.len < 0 || hdr.len > st->max_ctx)
		return L->h->error(L->h, TF_ERR_INVALID,
				   "layer %d (kda): rollback buffer is not a kda snapshot of this state",
				   L->layer);
	memcpy(st->S, (const char *)buf + sizeof(hdr), kda_state_floats(L) * sizeof(float));
	st->len = hdr.len;
	return TF_OK;
}

static const tf_plugin_attention kda_plugin = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_attention, TF_KIND_ATTENTION, "kda", "0.1.0",
				"Kimi Delta Attention: recurrent decode, chunked WY prefill (CPU)",
				kda_probe),
	.layer_type = "kda",
	.state_bytes = kda_state_bytes,
	.layer_init = kda_layer_init,
	.layer_fini = kda_layer_fini,
	.state_new = kda_state_new,
	.state_free = kda_state_free,
	.state_reset = kda_state_reset,
	.state_len = kda_state_len,
	.state_copy = kda_state_copy,
	.state_snapshot_size = kda_state_snapshot_size,
	.state_snapshot = kda_state_snapshot,
	.state_rollback = kda_state_rollback,
	.forward_batch = kda_forward_batch,
};

TF_EXPORT const tf_plugin_attention *tf_plugin_attention_v1(unsigned index)
{
	return index == 0 ? &kda_plugin : NULL;
}
