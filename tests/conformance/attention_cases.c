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
 *                bits, and seq_len back where it was
 *   reset        a reset sequence gives its first tokens' bits again
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
	int64_t hidden;
	float *x, *y, *z;               /* backend memory, [N, hidden] */
	int32_t pos[N];
};

static int fwd(struct layer *l, int64_t from, int64_t n, float *y)
{
	return l->a->forward(l->inst, l->x + from * l->hidden, n, l->pos + from, y);
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

static void check_layer(struct layer *l, const char *name, int layer, cf_tally *t)
{
	int64_t H = l->hidden;

	/* prefill against steps */
	int rc = fwd(l, 0, N, l->y);
	l->a->reset(l->inst);
	for (int64_t i = 0; !rc && i < N; i++)
		rc = fwd(l, i, 1, l->z + i * H);
	double err = rc ? INFINITY : diff(l, l->z, l->y, (size_t)(N * H));
	if (cf_case(t, !rc, name, "layer %d: forward: %s", layer, tf_diag_msg()))
		cf_case(t, err <= 1e-4, name, "layer %d: %d tokens at once vs one by one: "
			"error %.3g", layer, N, err);

	/* snapshot after N - M, M tokens, rollback, the same M tokens */
	if (!l->a->snapshot_size || !l->a->snapshot || !l->a->rollback) {
		t->skip++;
	} else {
		size_t sb = l->a->snapshot_size(l->inst);
		void *snap = malloc(sb ? sb : 1);
		l->a->reset(l->inst);
		rc = fwd(l, 0, N - M, l->y);
		if (!rc)
			rc = l->a->snapshot(l->inst, snap);
		if (!rc)
			rc = fwd(l, N - M, M, l->y);
		if (!rc)
			rc = l->a->rollback(l->inst, snap);
		bool back = !rc && l->a->seq_len(l->inst) == N - M;
		if (!rc)
			rc = fwd(l, N - M, M, l->z);
		if (cf_case(t, !rc && back, name, "layer %d: rollback: status %d, seq_len %lld",
			    layer, rc, (long long)l->a->seq_len(l->inst)))
			cf_case(t, diff(l, l->z, l->y, (size_t)(M * H)) == 0, name,
				"layer %d: tokens after a rollback differ from before", layer);
		free(snap);
	}

	/* reset: the first tokens again */
	l->a->reset(l->inst);
	rc = fwd(l, 0, 3, l->y);
	l->a->reset(l->inst);
	cf_case(t, l->a->seq_len(l->inst) == 0, name, "layer %d: seq_len after reset", layer);
	if (!rc)
		rc = fwd(l, 0, 3, l->z);
	cf_case(t, !rc && diff(l, l->z, l->y, (size_t)(3 * H)) == 0, name,
		"layer %d: a reset sequence differs from the first", layer);
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
	if (cf_case(t, host && l.x && l.y && l.z &&
			!h->backend->upload(h->backend_ctx, l.x, host, bytes),
		    impl->name, "out of memory"))
		check_layer(&l, impl->name, layer, t);
	a->layer_fini(l.inst);
	float *bufs[] = { l.x, l.y, l.z };
	for (int i = 0; i < 3; i++)
		if (bufs[i])
			h->backend->free(h->backend_ctx, bufs[i]);
	free(host);
	tf_runtime_close(rt);
}
