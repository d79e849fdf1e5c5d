/*
 * kda_cuda_attn.c - the KDA attention plugin on a CUDA device (layer type
 * "kda", plugin "kda-cuda"): plugins/kda/kda.c with the kernels of
 * kda_cuda.h in place of its per-head host loop.
 *
 * Everything lives in backend memory and runs on the backend's stream
 * (tf_backend_stream, ABI 1.7): the small tensors, uploaded at
 * layer_init; each sequence's state (S, then the conv history, as kda.c
 * lays it out), one allocation per state; one forward's activations and
 * segment array, carved from an arena all layers share (dev_scratch.h).
 * forward_batch() queues the input projections (the quant plugin's device
 * linears), prep, the recurrent kernel on the segments shorter than a
 * chunk and the chunked one on the rest, gated norm and o_proj, and
 * returns without waiting; a download or the backend's sync waits.
 *
 * Snapshots are host memory by the ABI, so snapshot and rollback copy
 * the whole state across.  A backend without a device stream is refused:
 * the kda plugin serves host-memory backends.  Tensor parallel ([tp] size
 * > 1), a rank holds its heads as the kda plugin does (kda_layer.h: the
 * device linears open their parts) and o_proj writes its partial sum.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "tf/attention.h"
#include "tf/backend.h"

#include "../common/dev_scratch.h"
#include "kda_cuda.h"
#include "kda_layer.h"
#include "tf_cuda_plugin.h"

struct kdc_layer {
	struct kda_weights w;           /* first, as kda_layer.h asks; host tensors freed */
	const tf_backend *be;
	void *bctx;
	cudaStream_t stream;            /* the backend's */
	tf_kda_cuda_layer dev;          /* the small tensors, in `small` */
	float *small;
	bool scratch_ref;
};

/* One sequence's state: S [heads, dim, dim] then conv [3, P, width - 1],
 * one device allocation. */
struct kdc_state {
	struct kda_state_hdr hdr;       /* .layer: the kdc_layer that made it */
	float *S;
};

static tf_dev_scratch kdc_scratch = TF_DEV_SCRATCH_INIT;

static int kdc_probe(const tf_host *h, const char **reason)
{
	return tf_cuda_plugin_probe(h, reason) ? TF_CUDA_PLUGIN_SCORE(10) : 0;
}

/* A failed CUDA call as the plugin's error, naming the layer. */
static int kdc_fail(const struct kdc_layer *L, int e, const char *what)
{
	return L->w.h->error(L->w.h, TF_ERR_DEVICE, "layer %d (kda-cuda): %s: %s", L->w.layer,
			     what, cudaGetErrorString((cudaError_t)e));
}

static size_t kdc_state_bytes(const struct kdc_layer *L)
{
	return kda_state_floats(&L->w) * sizeof(float);
}

static void kdc_layer_fini(void *inst)
{
	struct kdc_layer *L = inst;
	if (!L)
		return;
	kda_weights_close(&L->w);
	if (L->small) {
		L->be->quiesce(L->bctx);
		L->be->free(L->bctx, L->small);
	}
	if (L->scratch_ref)
		tf_dev_scratch_unref(&kdc_scratch);
	free(L);
}

/* conv_w, exp(A_log), dt_bias and o_norm into one device allocation. */
static int kdc_upload(struct kdc_layer *L)
{
	const struct kda_weights *w = &L->w;
	const size_t conv = (size_t)w->P * w->width;
	const float *src[6] = { w->conv_w[KDA_Q], w->conv_w[KDA_K], w->conv_w[KDA_V],
				w->a_exp, w->dt_bias, w->o_norm };
	const size_t n[6] = { conv, conv, conv, (size_t)w->heads, (size_t)w->P, (size_t)w->dim };
	float *dst[6];
	size_t total = 0;
	int rc;

	for (int i = 0; i < 6; i++)
		total += n[i];
	if (!(L->small = L->be->alloc(L->bctx, total * sizeof(float))))
		return w->h->error(w->h, TF_ERR_NOMEM,
				   "layer %d (kda-cuda): out of device memory for %zu floats",
				   w->layer, total);
	dst[0] = L->small;
	for (int i = 1; i < 6; i++)
		dst[i] = dst[i - 1] + n[i - 1];
	for (int i = 0; i < 6; i++)
		if ((rc = L->be->upload(L->bctx, dst[i], src[i], n[i] * sizeof(float))))
			return rc;
	L->dev = (tf_kda_cuda_layer){
		.heads = w->heads, .dim = w->dim, .width = w->width, .safe_gate = w->safe_gate,
		.lower_bound = w->lower_bound, .eps = w->eps,
		.conv_w = { dst[0], dst[1], dst[2] }, .a_exp = dst[3], .dt_bias = dst[4],
		.o_norm = dst[5],
	};
	return TF_OK;
}

static int kdc_layer_init(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
			  void **inst)
{
	int rc = tf_cuda_plugin_layer_check(h, layer, "kda-cuda");
	if (rc)
		return rc;
	struct kdc_layer *L;
	rc = kda_instance_new(h, layer, prefix, max_ctx, sizeof(*L), (void **)&L);
	if (rc)
		return rc;
	L->be = h->backend;
	L->bctx = h->backend_ctx;
	L->stream = tf_backend_stream(L->be, L->bctx);
	if (tf_kda_cuda_check(L->w.heads, L->w.dim, L->w.dim, 1) ||
	    L->w.width > KDA_CUDA_MAX_CONV) {
		rc = h->error(h, TF_ERR_UNSUPPORTED,
			      "layer %d (kda-cuda): head_dim %d, short_conv_kernel_size %d: the kernels take at most %d and %d",
			      layer, L->w.dim, L->w.width, KDA_CUDA_MAX_DIM, KDA_CUDA_MAX_CONV);
		goto fail;
	}
	if ((rc = kdc_upload(L)))
		goto fail;
	kda_weights_free_host(&L->w);
	tf_dev_scratch_ref(&kdc_scratch, L->be, L->bctx);
	L->scratch_ref = true;
	*inst = L;
	return TF_OK;
fail:
	kdc_layer_fini(L);
	return rc;
}

/* Bytes of one forward's activations and n_seg segments, as kdc_carve
 * lays them out. */
static size_t kdc_act_bytes(const struct kda_weights *w, int64_t n, int n_seg)
{
	return 6 * tf_dev_scratch_round((size_t)n * w->P * sizeof(float)) +
	       tf_dev_scratch_round((size_t)n * w->heads * sizeof(float)) +
	       tf_dev_scratch_round((size_t)n * w->dim * sizeof(float)) +
	       tf_dev_scratch_round((size_t)n_seg * sizeof(tf_kda_cuda_seg));
}

static void kdc_carve(const struct kda_weights *w, int64_t n, int n_seg, char *mem,
		      tf_kda_cuda_act *a, float **low, tf_kda_cuda_seg **seg)
{
	const size_t np = (size_t)n * w->P * sizeof(float);
	float **big[6] = { &a->q, &a->k, &a->v, &a->g, &a->gate, &a->o };
	for (int i = 0; i < 6; i++)
		*big[i] = tf_dev_scratch_take(&mem, np);
	a->beta = tf_dev_scratch_take(&mem, (size_t)n * w->heads * sizeof(float));
	*low = tf_dev_scratch_take(&mem, (size_t)n * w->dim * sizeof(float));
	*seg = tf_dev_scratch_take(&mem, (size_t)n_seg * sizeof(tf_kda_cuda_seg));
}

/* The batch's non-empty segments as the kernels take them: the ones
 * shorter than a chunk (recurrent) first, then the rest (chunked). */
static int kdc_segments(const struct kda_weights *w, const tf_attn_batch *b,
			tf_kda_cuda_seg *seg, int *n_rec)
{
	const size_t S = (size_t)w->heads * w->dim * w->dim;
	int n = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < b->n_seg; k++) {
			const tf_attn_seg *sg = &b->seg[k];
			const struct kdc_state *st = sg->state;
			if (!sg->n || (sg->n < KDA_CUDA_CHUNK) != (pass == 0))
				continue;
			seg[n++] = (tf_kda_cuda_seg){ .row0 = sg->row0, .n = sg->n, .S = st->S,
						      .conv = st->S + S };
		}
		if (pass == 0)
			*n_rec = n;
	}
	return n;
}

/* prep, the delta rule and gated norm of n rows, queued on the stream. */
static int kdc_queue(const struct kdc_layer *L, const tf_kda_cuda_act *a, int64_t n,
		     const tf_kda_cuda_seg *seg, int n_seg, int n_rec)
{
	const struct kda_weights *w = &L->w;
	const tf_kda_cuda_io io = tf_kda_cuda_act_io(&L->dev, a);
	int e = tf_kda_cuda_prep(L->stream, &L->dev, a, seg, n_seg);
	if (e)
		return kdc_fail(L, e, "prep");
	if (n_rec && (e = tf_kda_cuda_recurrent(L->stream, &io, seg, n_rec, w->heads, w->dim,
						w->dim)))
		return kdc_fail(L, e, "recurrent delta rule");
	if (n_seg > n_rec && (e = tf_kda_cuda_chunked(L->stream, &io, seg + n_rec, n_seg - n_rec,
						      w->heads, w->dim, w->dim)))
		return kdc_fail(L, e, "chunked delta rule");
	if ((e = tf_kda_cuda_gated_norm(L->stream, &L->dev, a, n)))
		return kdc_fail(L, e, "gated norm");
	return TF_OK;
}

static int kdc_forward_batch(void *inst, const float *x, const tf_attn_batch *b, float *y)
{
	struct kdc_layer *L = inst;
	const struct kda_weights *w = &L->w;
	const int64_t n = b->n;
	tf_kda_cuda_seg *seg = NULL, *seg_dev;
	tf_kda_cuda_act a;
	float *low;
	int n_seg, n_rec = 0;
	int rc = kda_check_batch(w, L, b);
	if (rc || n == 0)
		return rc;
	if (b->n_seg > 65535)
		return w->h->error(w->h, TF_ERR_UNSUPPORTED,
				   "layer %d (kda-cuda): %d sequences in one batch; the kernels take 65535",
				   w->layer, b->n_seg);
	if (!(seg = malloc((size_t)b->n_seg * sizeof(*seg))))
		return w->h->error(w->h, TF_ERR_NOMEM, "layer %d (kda-cuda): out of memory",
				   w->layer);
	char *mem = tf_dev_scratch_acquire(&kdc_scratch, kdc_act_bytes(w, n, b->n_seg));
	if (!mem) {
		free(seg);
		return w->h->error(w->h, TF_ERR_NOMEM,
				   "layer %d (kda-cuda): out of device memory for %lld tokens of activations",
				   w->layer, (long long)n);
	}
	kdc_carve(w, n, b->n_seg, mem, &a, &low, &seg_dev);
	n_seg = kdc_segments(w, b, seg, &n_rec);

	const struct kda_proj_out po = { .x = { a.q, a.k, a.v }, .f = a.g, .beta = a.beta,
					 .gate = a.gate, .low = low };
	if ((rc = kda_project(w, x, n, &po)) ||
	    (rc = L->be->upload(L->bctx, seg_dev, seg, (size_t)n_seg * sizeof(*seg))) ||
	    (rc = kdc_queue(L, &a, n, seg_dev, n_seg, n_rec)) ||
	    (rc = tf_lin_forward(&w->o_proj, a.o, n, y)))
		goto out;
	for (int k = 0; k < b->n_seg; k++)
		((struct kdc_state *)b->seg[k].state)->hdr.len += b->seg[k].n;
out:
	tf_dev_scratch_release(&kdc_scratch);
	free(seg);
	return rc;
}

static int kdc_state_new(void *inst, int64_t max_ctx, void **state)
{
	const struct kdc_layer *L = inst;
	const struct kda_weights *w = &L->w;
	struct kdc_state *st;
	cudaError_t e;
	int rc = kda_check_ctx(w, max_ctx);
	if (rc)
		return rc;
	if (!(st = calloc(1, sizeof(*st))) ||
	    !(st->S = L->be->alloc(L->bctx, kdc_state_bytes(L)))) {
		free(st);
		return w->h->error(w->h, TF_ERR_NOMEM,
				   "layer %d (kda-cuda): out of device memory for a state", w->layer);
	}
	st->hdr = (struct kda_state_hdr){ .layer = L, .max_ctx = max_ctx };
	if ((e = cudaMemsetAsync(st->S, 0, kdc_state_bytes(L), L->stream))) {
		L->be->free(L->bctx, st->S);
		free(st);
		return kdc_fail(L, e, "state_new");
	}
	*state = st;
	return TF_OK;
}

/* Work queued on the state may still run: wait for it first. */
static void kdc_state_free(void *inst, void *state)
{
	const struct kdc_layer *L = inst;
	struct kdc_state *st = state;
	if (!st)
		return;
	L->be->quiesce(L->bctx);
	L->be->free(L->bctx, st->S);
	free(st);
}

/* The slot has no status: a failure shows at the backend's next sync. */
static void kdc_state_reset(void *inst, void *state)
{
	const struct kdc_layer *L = inst;
	struct kdc_state *st = state;
	cudaMemsetAsync(st->S, 0, kdc_state_bytes(L), L->stream);
	st->hdr.len = 0;
}

static int kdc_state_copy(void *inst, void *dst, const void *src)
{
	const struct kdc_layer *L = inst;
	const struct kda_weights *w = &L->w;
	struct kdc_state *d = dst;
	const struct kdc_state *s = src;
	int e, rc = kda_check_copy(w, L, &d->hdr, &s->hdr);
	if (rc)
		return rc;
	if (d != s && (e = cudaMemcpyAsync(d->S, s->S, kdc_state_bytes(L),
					   cudaMemcpyDeviceToDevice, L->stream)))
		return kdc_fail(L, e, "state_copy");
	d->hdr.len = s->hdr.len;
	return TF_OK;
}

/* download() waits for the state's queued updates and the copy. */
static int kdc_state_snapshot(void *inst, const void *state, void *buf)
{
	const struct kdc_layer *L = inst;
	const struct kdc_state *st = state;
	kda_snap_header(&st->hdr, buf);
	return L->be->download(L->bctx, kda_snap_data(buf), st->S, kdc_state_bytes(L));
}

static int kdc_state_rollback(void *inst, void *state, const void *buf)
{
	const struct kdc_layer *L = inst;
	struct kdc_state *st = state;
	int64_t len;
	int rc = kda_snap_len(&L->w, &st->hdr, buf, &len);
	if (rc || (rc = L->be->upload(L->bctx, st->S, kda_snap_data((void *)buf),
				      kdc_state_bytes(L))))
		return rc;
	st->hdr.len = len;
	return TF_OK;
}

static const tf_plugin_attention kdc_plugin = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_attention, TF_KIND_ATTENTION,
				TF_CUDA_PLUGIN_NAME("kda-cuda"), "0.1.0",
				"Kimi Delta Attention on CUDA: recurrent decode, chunked WY prefill kernels",
				kdc_probe),
	.layer_type = "kda",
	.state_bytes = kda_state_bytes,
	.layer_init = kdc_layer_init,
	.layer_fini = kdc_layer_fini,
	.state_new = kdc_state_new,
	.state_free = kdc_state_free,
	.state_reset = kdc_state_reset,
	.state_len = kda_state_len,
	.state_copy = kdc_state_copy,
	.state_snapshot_size = kda_state_snapshot_size,
	.state_snapshot = kdc_state_snapshot,
	.state_rollback = kdc_state_rollback,
	.forward_batch = kdc_forward_batch,
};

TF_EXPORT const tf_plugin_attention *tf_plugin_attention_v1(unsigned index)
{
	return index == 0 ? &kdc_plugin : NULL;
}
