/*
 * attention_cases.c - every attention plugin on a layer of the tiny test
 * model (TF_CONF_MODEL) of the type it serves: a layer of that type when
 * the model has one, else layer 1 given that type by the INI ([model]
 * layer.1.attention), which only a weightless type can open.  There is
 * no reference attention plugin: a plugin of a type with a float64
 * reference in the tree (tests/kda, tests/mla) is checked against it on
 * a random layer of its own (check_reference; other types are skipped
 * there), and every implementation is held to the kind's contract
 * (tf/attention.h) on random inputs:
 *
 *   reference    a prefill in pieces, then decode steps, against the
 *                float64 layer (the unit tests' tolerance)
 *   prefill      n tokens at once equal n one-token steps (1e-4)
 *   rollback     snapshot, m tokens, rollback, the same m tokens: the same
 *                bits, and the length back where it was
 *   reset        a reset sequence gives its first tokens' bits again
 *   batched      (ABI 1.5) two sequences in one forward_batch equal each
 *                alone (1e-5)
 *   append       (ABI 1.8, where filled) state_append of a prefill, then
 *                decode steps: the same bits as after forward_batch
 *
 * A plugin with the ABI 1.5 state slots runs them on one state of its
 * own; one without, its pre-1.5 per-instance slots.  The contract cases
 * run on the plugin's random reference layer too, and on the test model
 * opened on the backend the plugin was probed with; a device backend
 * (cuda-sim: the test host's TF_TEST_BACKEND) that cannot run the whole
 * model yet skips the latter, naming what is missing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "kda/kda_case.h"
#include "mla/mla_case.h"
#include "engine/runtime.h"
#include "tf/attention.h"
#include "tf/backend.h"
#include "tf/diag.h"

#define CTX 64
#define N 21    /* prefill length: the batched case's second sequence (16 rows) is a
		 * whole KDA chunk, so a device plugin splits the batch in two launches */
#define M 4     /* tokens rolled back */

/* One layer instance and the host's backend for its buffers. */
struct layer {
	const tf_plugin_attention *a;
	const tf_host *h;
	void *inst;
	void *st;                       /* ABI 1.5: the sequence's state; else NULL */
	int64_t hidden;
	float *x, *y, *z;               /* backend memory, [rows, hidden] */
	const int32_t *pos;             /* [rows] */
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

/* N - M rows by state_append, then M steps: as after forward_batch. */
static void check_append(struct layer *l, const char *name, int layer, cf_tally *t)
{
	const tf_plugin_attention *a = l->a;
	if (a->hdr.struct_size < offsetof(tf_plugin_attention, state_append) +
				 sizeof(a->state_append) || !a->state_append) {
		t->skip++;
		return;
	}
	const tf_attn_seg seg = { .state = l->st, .row0 = 0, .n = N - M };
	const tf_attn_batch b = { .n = N - M, .pos = l->pos, .n_seg = 1, .seg = &seg };
	reset(l);
	int rc = fwd(l, 0, N - M, l->y);
	for (int64_t i = N - M; !rc && i < N; i++)
		rc = fwd(l, i, 1, l->y + i * l->hidden);
	reset(l);
	if (!rc)
		rc = a->state_append(l->inst, l->x, &b);
	bool len = !rc && seq_len(l) == N - M;
	for (int64_t i = N - M; !rc && i < N; i++)
		rc = fwd(l, i, 1, l->z + i * l->hidden);
	if (cf_case(t, !rc && len, name, "layer %d: state_append: status %d, length %lld: %s",
		    layer, rc, (long long)seq_len(l), tf_diag_msg()))
		cf_case(t, diff(l, l->z + (N - M) * l->hidden, l->y + (N - M) * l->hidden,
				(size_t)(M * l->hidden)) == 0, name,
			"layer %d: steps after state_append differ from after forward_batch", layer);
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

	if (l->st) {
		check_batched(l, name, layer, t);
		check_append(l, name, layer, t);
	} else {
		t->skip += 2;
	}
}

/*
 * The reference case: a random layer of the plugin's type, built as the
 * unit tests build it (tests/kda/kda_case.c, tests/mla/mla_case.c), fed a
 * prefill in pieces that cross the forms a plugin may switch between (mla:
 * absorbed under 11 rows, naive above; kda: one chunk and two), then
 * decode steps; every row against the type's float64 reference.
 */
static const int ref_pieces[] = { 9, 70, 21, 1, 1, 1, 1, 1, 1 };
#define REF_ROWS 106    /* their sum */

union ref_case {
	struct kda_case kda;
	struct mla_case mla;
};

static tf_testhost *kda_init(union ref_case *c)
{
	kda_case_init(&c->kda, true, 0.0f, 11);
	return kda_case_host(&c->kda, NULL);
}

static void kda_reference(const union ref_case *c, const float *x, int64_t n, float *yd)
{
	kda_ref_state rs;
	kda_ref_state_init(&rs, &c->kda.w);
	kda_case_reference(&c->kda, &rs, x, n, yd);
	kda_ref_state_free(&rs);
}

static void kda_fini(union ref_case *c)
{
	kda_case_free(&c->kda);
}

static tf_testhost *mla_init(union ref_case *c)
{
	mla_case_init(&c->mla, false, true, YARN_NONE, 31);
	/* the reference keeps its cache exact; a bf16 one errs by its rounding */
	c->mla.kv_cache = "f32";
	return mla_case_host(&c->mla, NULL);
}

static void mla_reference(const union ref_case *c, const float *x, int64_t n, float *yd)
{
	mla_case_reference(&c->mla, x, n, yd);
}

static void mla_fini(union ref_case *c)
{
	mla_case_free(&c->mla);
}

/* Each layer type with a reference; tol: its unit test's bound on the
 * relative error (tf_test_rel_err, floor 1e-3). */
static const struct ref_type {
	const char *type, *prefix;
	double tol;
	tf_testhost *(*init)(union ref_case *c);
	void (*reference)(const union ref_case *c, const float *x, int64_t n, float *yd);
	void (*fini)(union ref_case *c);
} ref_types[] = {
	{ "kda", KDA_CASE_PREFIX, 2e-5, kda_init, kda_reference, kda_fini },
	{ "mla", MLA_CASE_PREFIX, 1e-5, mla_init, mla_reference, mla_fini },
};

/* The pieces of ref_pieces through l: its outputs in host memory yh. */
static int run_pieces(struct layer *l, float *yh)
{
	const tf_backend *be = l->h->backend;
	const size_t bytes = (size_t)(REF_ROWS * l->hidden) * sizeof(float);
	int rc = be->upload(l->h->backend_ctx, l->x, yh, bytes);
	for (int64_t r = 0, i = 0; !rc && r < REF_ROWS; r += ref_pieces[i++])
		rc = fwd(l, r, ref_pieces[i], l->y + r * l->hidden);
	if (!rc)
		rc = be->sync(l->h->backend_ctx);
	return rc ? rc : be->download(l->h->backend_ctx, yh, l->y, bytes);
}

static void check_reference(const tf_plugin_attention *a, const char *name, cf_tally *t)
{
	const struct ref_type *rt = NULL;
	for (size_t i = 0; i < sizeof(ref_types) / sizeof(ref_types[0]); i++)
		if (!strcmp(ref_types[i].type, a->layer_type))
			rt = &ref_types[i];
	if (!rt) {
		printf("  %s: skipped: no float64 reference for layer type \"%s\"\n", name,
		       a->layer_type);
		t->skip++;
		return;
	}
	union ref_case c;
	tf_testhost *th = rt->init(&c);
	const tf_host *h = tf_testhost_host(th);
	struct layer l = { .a = a, .h = h, .hidden = h->model->hidden_size };
	const size_t n = (size_t)(REF_ROWS * l.hidden);
	float *y = malloc(n * sizeof(float)), *yd = malloc(n * sizeof(float));
	int32_t pos[REF_ROWS];
	const char *why = "";
	uint64_t seed = 78;
	int rc = TF_ERR_NOMEM;

	for (int i = 0; i < REF_ROWS; i++)
		pos[i] = i;
	l.pos = pos;
	l.x = h->backend->alloc(h->backend_ctx, n * sizeof(float));
	l.y = h->backend->alloc(h->backend_ctx, n * sizeof(float));
	l.z = h->backend->alloc(h->backend_ctx, n * sizeof(float));
	if (y && yd && l.x && l.y && l.z) {
		/* y holds the inputs until the outputs replace them */
		tf_test_fill_uniform(y, n, 1.0f, &seed);
		rt->reference(&c, y, REF_ROWS, yd);
		rc = a->hdr.probe(h, &why) > 0 ? TF_OK : TF_ERR_UNSUPPORTED;
	}
	if (!rc)
		rc = a->layer_init(h, 0, rt->prefix, REF_ROWS, &l.inst);
	if (!rc && a->state_new)
		rc = a->state_new(l.inst, REF_ROWS, &l.st);
	if (!rc)
		rc = run_pieces(&l, y);
	double err = rc ? INFINITY : tf_test_rel_err(y, yd, n, 1e-3);
	if (cf_case(t, !rc, name, "%s reference layer: status %d: %s%s", rt->type, rc,
		    why ? why : "", tf_testhost_last_error(th))) {
		printf("  %s: %d rows against the float64 %s reference: rel err %.3g\n", name,
		       REF_ROWS, rt->type, err);
		cf_case(t, err < rt->tol, name, "%d rows against the float64 %s reference: "
			"rel err %.3g, over %.0e", REF_ROWS, rt->type, err, rt->tol);
		/* the contract on this layer: x still holds the inputs */
		reset(&l);
		check_layer(&l, name, 0, t);
	}
	if (l.st)
		a->state_free(l.inst, l.st);
	if (l.inst)
		a->layer_fini(l.inst);
	if (l.x)
		h->backend->free(h->backend_ctx, l.x);
	if (l.y)
		h->backend->free(h->backend_ctx, l.y);
	if (l.z)
		h->backend->free(h->backend_ctx, l.z);
	free(y);
	free(yd);
	tf_testhost_free(th);
	rt->fini(&c);
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

void cf_check_attention(const tf_registry *r, const tf_candidate *impl,
			const tf_candidate *ref, const tf_host *th, cf_tally *t)
{
	const tf_plugin_attention *a = (const tf_plugin_attention *)impl->desc;
	char path[4200], as[96], be[96];
	const char *ov[] = { path, be, as };
	tf_runtime *rt = NULL;
	int layer;

	check_reference(a, impl->name, t);
	snprintf(path, sizeof(path), "model.path=%s", TF_CONF_MODEL);
	snprintf(be, sizeof(be), "plugins.backend=%s", th->backend->hdr.name);
	snprintf(as, sizeof(as), "model.layer.1.attention=%s", a->layer_type);
	if (tf_runtime_open(NULL, ov, 2, &rt)) {
		if (th->backend->parallel_for) {
			cf_case(t, false, impl->name, "test model: %s", tf_diag_msg());
		} else {
			/* the device plugins do not yet cover the whole model */
			printf("  %s: skipped: the test model on backend %s: %s\n", impl->name,
			       th->backend->hdr.name, tf_diag_msg());
			t->skip++;
		}
		return;
	}
	if ((layer = layer_of(rt, a->layer_type)) < 0) {
		tf_runtime_close(rt);
		layer = 1;
		if (tf_runtime_open(NULL, ov, 3, &rt)) {
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
	int32_t pos[N];
	l.pos = pos;
	l.x = h->backend->alloc(h->backend_ctx, bytes);
	l.y = h->backend->alloc(h->backend_ctx, bytes);
	l.z = h->backend->alloc(h->backend_ctx, bytes);
	tf_test_fill_uniform(host, (size_t)(N * l.hidden), 1.0f, &seed);
	for (int i = 0; i < N; i++)
		pos[i] = i;
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
