/*
 * attention_cases.c - every attention plugin on a layer of the tiny test
 * model (TF_CONF_MODEL) of the type it serves: a layer of that type when
 * the model has one, else layer 1 given that type by the INI ([model]
 * layer.1.attention), which only a weightless type can open.  There is
 * no reference attention plugin (KDA's and MLA's float64 references are
 * tests/kda and tests/mla), so the cases hold every implementation to the
 * kind's contract (tf/attention.h) on random inputs:
 *
 *   prefill      n tokens at once equal n one-token steps (1e-4)
 *   rollback     snapshot, m tokens, rollback, the same m tokens: the same
 *                bits, and the length back where it was
 *   reset        a reset sequence gives its first tokens' bits again
 *   batched      (ABI 1.5) two sequences in one forward_batch equal each
 *                alone (1e-5)
 *
 * A plugin with the ABI 1.5 state slots runs them on one state of its
 * own; one without, its pre-1.5 per-instance slots.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "diag.h"
#include "runtime.h"
#include "tf/attention.h"
#include "tf/backend.h"

#define CTX 64
#define N 13    /* prefill length */
#define M 4     /* tokens rolled back */

/* One layer instance and the host's backend for its buffers. */
struct layer {
	const tf_plugin_attention *a;
	const tf_host *h;
	void *inst;
	void *st;                       /* ABI 1.5: the sequence's state; else NULL */
	int64_t hidden;
	float *x, *y, *z;               /* backend memory, [N, hidden] */
	int32_t pos[N];
};

/* One forward_batch of n rows of x from row `from` on st, at positions pos. */
static int fwd_state(struct layer *l, void *st, int64_t from, int64_t n, const int32_t *pos,
		     float *y)
{
	const tf_attn_seg seg = { .state = st, .row0 = 0, .n = n };
	const tf_attn_batch b = { .n = n, .pos = pos, .n_seg = 1, .seg = &seg };
	return l->a->forward_batch(l->inst, l->x + from * l->hidden, &b, y);
}

/* Rows [from, from + n) continue the sequence. */
static int fwd(struct layer *l, int64_t from, int64_t n, float *y)
{
	if (l->st)
		return fwd_state(l, l->st, from, n, l->pos + from, y);
	return l->a->forward(l->inst, l->x + from * l->hidden, n, l->pos + from, y);
}

static void reset(struct layer *l)
{
	if (l->st)
		l->a->state_reset(l->inst, l->st);
	else
		l->a->reset(l->inst);
}

static int64_t seq_len(struct layer *l)
{
	return l->st ? l->a->state_len(l->inst, l->st) : l->a->seq_len(l->inst);
}

static bool can_snapshot(const struct layer *l)
{
	return l->st || (l->a->snapshot_size && l->a->snapshot && l->a->rollback);
}

static size_t snapshot_size(struct layer *l)
{
	return l->st ? l->a->state_snapshot_size(l->inst, l->st) : l->a->snapshot_size(l->inst);
}

static int snapshot(struct layer *l, void *buf)
{
	return l->st ? l->a->state_snapshot(l->inst, l->st, buf) : l->a->snapshot(l->inst, buf);
}

static int rollback(struct layer *l, const void *buf)
{
	return l->st ? l->a->state_rollback(l->inst, l->st, buf) : l->a->rollback(l->inst, buf);
}

/* The relative error of n floats at a against b, both backend memory. */
static double diff(const struct layer *l, const float *a, const float *b, size_t n)
{
	float *ha = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float));
	const tf_backend *be = l->h->backend;
	double err = INFINITY;
	if (ha && hb && !be->sync(l->h->backend_ctx) &&
	    !be->download(l->h->backend_ctx, ha, a, n * sizeof(float)) &&
	    !be->download(l->h->backend_ctx, hb, b, n * sizeof(float)))
		err = memcmp(ha, hb, n * sizeof(float)) ? cf_rel_err(ha, hb, n) : 0;
	free(ha);
	free(hb);
	return err;
}

/* Rows [0, A) one sequence, [A, N) another: alone, then in one batch. */
static void check_batched(struct layer *l, const char *name, int layer, cf_tally *t)
{
	enum { A = 5 };
	const int64_t H = l->hidden;
	int32_t pos[N];
	void *other = NULL;
	int rc = l->a->state_new(l->inst, CTX, &other);
	for (int i = 0; i < N; i++)
		pos[i] = i < A ? i : i - A;
	reset(l);
	if (!rc)
		rc = fwd_state(l, l->st, 0, A, pos, l->y);
	if (!rc)
		rc = fwd_state(l, other, A, N - A, pos + A, l->y + A * H);
	reset(l);
	if (other)
		l->a->state_reset(l->inst, other);
	const tf_attn_seg seg[2] = { { .state = l->st, .row0 = 0, .n = A },
				     { .state = other, .row0 = A, .n = N - A } };
	const tf_attn_batch b = { .n = N, .pos = pos, .n_seg = 2, .seg = seg };
	if (!rc)
		rc = l->a->forward_batch(l->inst, l->x, &b, l->z);
	double err = rc ? INFINITY : diff(l, l->z, l->y, (size_t)(N * H));
	if (cf_case(t, !rc, name, "layer %d: batched: %s", layer, tf_diag_msg()))
		cf_case(t, err <= 1e-5, name, "layer %d: two sequences batched vs alone: "
			"error %.3g", layer, err);
	if (other)
		l->a->state_free(l->inst, other);
}

static void check_layer(struct layer *l, const char *name, int layer, cf_tally *t)
{
	int64_t H = l->hidden;

	/* prefill against steps */
	int rc = fwd(l, 0, N, l->y);
	reset(l);
	for (int64_t i = 0; !rc && i < N; i++)
		rc = fwd(l, i, 1, l->z + i * H);
	double err = rc ? INFINITY : diff(l, l->z, l->y, (size_t)(N * H));
	if (cf_case(t, !rc, name, "layer %d: forward: %s", layer, tf_diag_msg()))
		cf_case(t, err <= 1e-4, name, "layer %d: %d tokens at once vs one by one: "
			"error %.3g", layer, N, err);

	/* snapshot after N - M, M tokens, rollback, the same M tokens */
	if (!can_snapshot(l)) {
		t->skip++;
	} else {
		size_t sb = snapshot_size(l);
		void *snap = malloc(sb ? sb : 1);
		reset(l);
		rc = fwd(l, 0, N - M, l->y);
		if (!rc)
			rc = snapshot(l, snap);
		if (!rc)
			rc = fwd(l, N - M, M, l->y);
		if (!rc)
			rc = rollback(l, snap);
		bool back = !rc && seq_len(l) == N - M;
		if (!rc)
			rc = fwd(l, N - M, M, l->z);
		if (cf_case(t, !rc && back, name, "layer %d: rollback: status %d, length %lld",
			    layer, rc, (long long)seq_len(l)))
			cf_case(t, diff(l, l->z, l->y, (size_t)(M * H)) == 0, name,
				"layer %d: tokens after a rollback differ from before", layer);
		free(snap);
	}

	/* reset: the first tokens again */
	reset(l);
	rc = fwd(l, 0, 3, l->y);
	reset(l);
	cf_case(t, seq_len(l) == 0, name, "layer %d: length after reset", layer);
	if (!rc)
		rc = fwd(l, 0, 3, l->z);
	cf_case(t, !rc && diff(l, l->z, l->y, (size_t)(3 * H)) == 0, name,
		"layer %d: a reset sequence differs from the first", layer);

	if (l->st)
		check_batched(l, name, layer, t);
	else
		t->skip++;
}

/* The first layer of `type` in rt's model, or -1. */
static int layer_of(const tf_runtime *rt, const char *type)
{
	const tf_model_config *m = tf_runtime_model(rt);
	for (int i = 0; i < m->num_hidden_layers; i++)
		if (!strcmp(m->attn_type[i], type))
			return i;
	return -1;
}

void cf_check_attention(const tf_candidate *impl, const tf_candidate *ref, const tf_host *th,
			cf_tally *t)
{
	const tf_plugin_attention *a = (const tf_plugin_attention *)impl->desc;
	char path[4200], as[96];
	const char *ov[] = { path, as };
	tf_runtime *rt = NULL;
	int layer;

	snprintf(path, sizeof(path), "model.path=%s", TF_CONF_MODEL);
	snprintf(as, sizeof(as), "model.layer.1.attention=%s", a->layer_type);
	if (tf_runtime_open(NULL, ov, 1, &rt)) {
		cf_case(t, false, impl->name, "test model: %s", tf_diag_msg());
		return;
	}
	if ((layer = layer_of(rt, a->layer_type)) < 0) {
		tf_runtime_close(rt);
		layer = 1;
		if (tf_runtime_open(NULL, ov, 2, &rt)) {
			cf_case(t, false, impl->name, "test model: %s", tf_diag_msg());
			return;
		}
	}
	const tf_host *h = tf_runtime_host(rt);
	struct layer l = { .a = a, .h = h, .hidden = h->model->hidden_size };
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "model.layers.%d.attention", layer);
	if (a->layer_init(h, layer, prefix, CTX, &l.inst)) {
		/* a type with weights of its own has none in the test model */
		printf("  %s: skipped: layer %d cannot open: %s\n", impl->name, layer,
		       tf_diag_msg());
		t->skip++;
		tf_runtime_close(rt);
		return;
	}
	size_t bytes = (size_t)(N * l.hidden) * sizeof(float);
	float *host = malloc(bytes);
	uint64_t seed = 77;
	l.x = h->backend->alloc(h->backend_ctx, bytes);
	l.y = h->backend->alloc(h->backend_ctx, bytes);
	l.z = h->backend->alloc(h->backend_ctx, bytes);
	tf_test_fill_uniform(host, (size_t)(N * l.hidden), 1.0f, &seed);
	for (int i = 0; i < N; i++)
		l.pos[i] = i;
	int rc = a->state_new ? a->state_new(l.inst, CTX, &l.st) : TF_OK;
	if (cf_case(t, !rc, impl->name, "layer %d: state_new: %s", layer, tf_diag_msg()) &&
	    cf_case(t, host && l.x && l.y && l.z &&
			!h->backend->upload(h->backend_ctx, l.x, host, bytes),
		    impl->name, "out of memory"))
		check_layer(&l, impl->name, layer, t);
	if (l.st)
		a->state_free(l.inst, l.st);
	a->layer_fini(l.inst);
	float *bufs[] = { l.x, l.y, l.z };
	for (int i = 0; i < 3; i++)
		if (bufs[i])
			h->backend->free(h->backend_ctx, bufs[i]);
	free(host);
	tf_runtime_close(rt);
}
