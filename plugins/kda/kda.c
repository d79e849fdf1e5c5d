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
 * rows closes the block.  Shapes all come from config.json; what the
 * device plugin (kda-cuda) shares with this one is in kda_layer.c, the
 * tensor-parallel head sharding among it: with [tp] size > 1 a rank
 * holds only its heads, and its output is a partial sum the runtime
 * all-reduces.
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
#include "../common/vec.h"
#include "delta.h"
#include "kda_layer.h"

/* fla's l2norm: x / sqrt(sum x^2 + eps), eps inside the root. */
#define KDA_L2_EPS 1e-6f

struct kda_layer {
	struct kda_weights w;           /* first, as kda_layer.h asks */
	const tf_backend *be;
	void *bctx;

	float *conv_wt[KDA_NCONV];      /* [width, P]: conv_w's taps, a tap's channels adjacent */
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
	struct kda_state_hdr hdr;       /* .layer: the kda_layer that made it */
	float *conv;                    /* [3, P, width - 1] raw inputs, oldest first,
					 * right after S */
	float S[];                      /* [heads, dim, dim] */
};

static tf_scratch kda_scratch = TF_SCRATCH_INIT;

static int kda_probe(const tf_host *h, const char **reason)
{
	return tf_tu_probe_host_backend(h, reason);
}

/* Floats of one forward's activations, laid out as kda_act_carve does. */
static size_t kda_act_floats(const struct kda_layer *L, int64_t n)
{
	return 6 * tf_scratch_round((size_t)n * L->w.P) +
	       tf_scratch_round((size_t)n * L->w.heads) + tf_scratch_round((size_t)n * L->w.dim) +
	       tf_scratch_round((size_t)L->n_workers * L->work_per);
}

static void kda_act_carve(const struct kda_layer *L, int64_t n, float *mem,
			  struct kda_act *a)
{
	const struct kda_weights *w = &L->w;
	for (int s = 0; s < KDA_NCONV; s++)
		a->x[s] = tf_scratch_take(&mem, (size_t)n * w->P);
	a->f = tf_scratch_take(&mem, (size_t)n * w->P);
	a->gate = tf_scratch_take(&mem, (size_t)n * w->P);
	a->o = tf_scratch_take(&mem, (size_t)n * w->P);
	a->beta = tf_scratch_take(&mem, (size_t)n * w->heads);
	a->low = tf_scratch_take(&mem, (size_t)n * w->dim);
	a->work = tf_scratch_take(&mem, (size_t)L->n_workers * L->work_per);
}

static void kda_layer_fini(void *inst)
{
	struct kda_layer *L = inst;
	if (!L)
		return;
	kda_weights_close(&L->w);
	free(L->conv_wt[0]);
	if (L->scratch_ref)
		tf_scratch_unref(&kda_scratch);
	free(L);
}

static int kda_layer_init(const tf_host *h, int layer, const char *prefix,
			  int64_t max_ctx, void **inst)
{
	struct kda_layer *L;
	int rc = kda_instance_new(h, layer, prefix, max_ctx, sizeof(*L), (void **)&L);
	if (rc)
		return rc;
	L->be = h->backend;
	L->bctx = h->backend_ctx;
	L->n_workers = L->be->n_threads(L->bctx);
	if (L->n_workers < 1)
		L->n_workers = 1;
	const struct kda_weights *w = &L->w;
	const size_t conv_work = (size_t)w->width * w->dim;   /* kda_conv_rows' tmp */
	L->work_per = kda_delta_chunk_work(w->dim, w->dim);
	if (L->work_per < conv_work)
		L->work_per = conv_work;
	float *wt = malloc((size_t)KDA_NCONV * w->width * w->P * sizeof(float));
	if (!wt) {
		kda_layer_fini(L);
		return h->error(h, TF_ERR_NOMEM, "layer %d (kda): out of memory", layer);
	}
	for (int s = 0; s < KDA_NCONV; s++) {
		L->conv_wt[s] = wt + (size_t)s * w->width * w->P;
		for (int64_t c = 0; c < w->P; c++)
			for (int j = 0; j < w->width; j++)
				L->conv_wt[s][j * w->P + c] = w->conv_w[s][c * w->width + j];
	}
	tf_scratch_ref(&kda_scratch);
	L->scratch_ref = true;
	*inst = L;
	return TF_OK;
}

/*
 * Causal depthwise conv + SiLU of n rows (ld apart) over D adjacent
 * channels, in place in x.  wt holds tap j of channel c at wt[j·ldw + c],
 * oldest tap first; hist each channel's width-1 raw inputs before row 0,
 * oldest first, and is advanced past row n-1.  Rows go last first, so the
 * raw inputs a row reads are still there when it is overwritten, and a
 * tap's channels are adjacent: the channel loops are vector loops.
 * tmp: width·D floats (hist as rows, and a row's sums).
 */
static void kda_conv_rows(float *x, int64_t n, int64_t ld, int D, const float *wt,
			  int64_t ldw, int width, float *hist, float *tmp)
{
	const int back = width - 1;
	float *acc = tmp + (size_t)back * D;

	for (int c = 0; c < D; c++)
		for (int j = 0; j < back; j++)
			tmp[j * D + c] = hist[c * back + j];
	/* The new history, the last back raw inputs, before rows overwrite them. */
	for (int c = 0; c < D; c++)
		for (int j = 0; j < back; j++) {
			const int64_t u = n - back + j;
			hist[c * back + j] = u >= 0 ? x[u * ld + c] : tmp[(u + back) * D + c];
		}
	for (int64_t t = n - 1; t >= 0; t--) {
		memset(acc, 0, (size_t)D * sizeof(float));
		for (int j = 0; j < width; j++) {
			const int64_t u = t - back + j;
			tf_vec_mul_acc(acc, wt + j * ldw, u >= 0 ? x + u * ld : tmp + (u + back) * D, D);
		}
		tf_vec_silu(x + t * ld, acc, D);
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
static void kda_head(const struct kda_layer *KL, const struct kda_act *A, struct kda_state *st,
		     int hd, int64_t row0, int64_t n, float *work)
{
	const struct kda_weights *L = &KL->w;
	const int D = L->dim, W = L->width;
	const int64_t P = L->P, off = (int64_t)hd * D, r0 = row0 * P;

	for (int s = 0; s < KDA_NCONV; s++)
		kda_conv_rows(A->x[s] + r0 + off, n, P, D, KL->conv_wt[s] + off, P, W,
			      st->conv + ((size_t)s * P + off) * (W - 1), work);

	const float a = L->a_exp[hd], qscale = 1.0f / sqrtf((float)D);
	float *beta = A->beta + row0 * L->heads + hd;
	for (int64_t t = 0; t < n; t++) {
		kda_l2norm(A->x[KDA_Q] + r0 + t * P + off, D, qscale);
		kda_l2norm(A->x[KDA_K] + r0 + t * P + off, D, 1.0f);
		float *g = A->f + r0 + t * P + off;
		const float *bias = L->dt_bias + off;
		if (L->safe_gate) {
			for (int c = 0; c < D; c++)
				g[c] = a * (g[c] + bias[c]);
			tf_vec_sigmoid(g, g, D);
			tf_vec_scale(g, L->lower_bound, D);
		} else {
			for (int c = 0; c < D; c++)
				g[c] = -a * tf_tu_softplus(g[c] + bias[c]);
		}
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
		float *gt = A->gate + r0 + t * P + off;   /* read here alone */
		float ss = 0.0f;
		for (int c = 0; c < D; c++)
			ss += o[c] * o[c];
		float r = 1.0f / sqrtf(ss / (float)D + L->eps);
		tf_vec_sigmoid(gt, gt, D);
		for (int c = 0; c < D; c++)
			o[c] = o[c] * r * L->o_norm[c] * gt[c];
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
	const int heads = j->L->w.heads;
	for (int64_t i = begin; i < end; i++) {
		const tf_attn_seg *sg = &j->b->seg[i / heads];
		if (sg->n)
			kda_head(j->L, j->A, sg->state, (int)(i % heads), sg->row0, sg->n,
				 j->A->work + (size_t)worker * j->L->work_per);
	}
}

static int kda_forward_batch(void *inst, const float *x, const tf_attn_batch *b, float *y)
{
	struct kda_layer *L = inst;
	const struct kda_weights *w = &L->w;
	const int64_t n = b->n;
	int rc = kda_check_batch(w, L, b);
	if (rc || n == 0)
		return rc;
	float *mem = tf_scratch_acquire(&kda_scratch, kda_act_floats(L, n));
	if (!mem)
		return w->h->error(w->h, TF_ERR_NOMEM,
				   "layer %d (kda): out of memory for %lld tokens of activations",
				   w->layer, (long long)n);
	struct kda_act A;
	kda_act_carve(L, n, mem, &A);
	const struct kda_proj_out po = { .x = { A.x[KDA_Q], A.x[KDA_K], A.x[KDA_V] }, .f = A.f,
					 .beta = A.beta, .gate = A.gate, .low = A.low };
	if ((rc = kda_project(w, x, n, &po)))
		goto out;

	/* Grain from the mean segment: items differ only in their rows. */
	struct kda_job job = { .L = L, .A = &A, .b = b };
	int64_t rows = (n + b->n_seg - 1) / b->n_seg;
	L->be->parallel_for(L->bctx, (int64_t)b->n_seg * w->heads,
			    tf_tu_grain(4 * rows * w->dim * w->dim), kda_heads_fn, &job);
	for (int k = 0; k < b->n_seg; k++)
		((struct kda_state *)b->seg[k].state)->hdr.len += b->seg[k].n;
	rc = tf_lin_forward(&w->o_proj, A.o, n, y);
out:
	tf_scratch_release(&kda_scratch);
	return rc;
}

static int kda_state_new(void *inst, int64_t max_ctx, void **state)
{
	const struct kda_layer *L = inst;
	const struct kda_weights *w = &L->w;
	int rc = kda_check_ctx(w, max_ctx);
	if (rc)
		return rc;
	struct kda_state *st = calloc(1, sizeof(*st) + kda_state_floats(w) * sizeof(float));
	if (!st)
		return w->h->error(w->h, TF_ERR_NOMEM, "layer %d (kda): out of memory for a state",
				   w->layer);
	st->hdr = (struct kda_state_hdr){ .layer = L, .max_ctx = max_ctx };
	st->conv = st->S + (size_t)w->heads * w->dim * w->dim;
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
	memset(st->S, 0, kda_state_floats(&((struct kda_layer *)inst)->w) * sizeof(float));
	st->hdr.len = 0;
}

static int kda_state_copy(void *inst, void *dst, const void *src)
{
	const struct kda_layer *L = inst;
	const struct kda_weights *w = &L->w;
	struct kda_state *d = dst;
	const struct kda_state *s = src;
	int rc = kda_check_copy(w, L, &d->hdr, &s->hdr);
	if (rc)
		return rc;
	if (d != s)
		memcpy(d->S, s->S, kda_state_floats(w) * sizeof(float));
	d->hdr.len = s->hdr.len;
	return TF_OK;
}

static int kda_state_snapshot(void *inst, const void *state, void *buf)
{
	const struct kda_state *st = state;
	kda_snap_header(&st->hdr, buf);
	memcpy(kda_snap_data(buf), st->S,
	       kda_state_floats(&((struct kda_layer *)inst)->w) * sizeof(float));
	return TF_OK;
}

static int kda_state_rollback(void *inst, void *state, const void *buf)
{
	const struct kda_weights *w = &((struct kda_layer *)inst)->w;
	struct kda_state *st = state;
	int64_t len;
	int rc = kda_snap_len(w, &st->hdr, buf, &len);
	if (rc)
		return rc;
	memcpy(st->S, kda_snap_data((void *)buf), kda_state_floats(w) * sizeof(float));
	st->hdr.len = len;
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
