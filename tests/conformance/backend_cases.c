/*
 * backend_cases.c - every op of tf/backend.h on random inputs, through
 * each backend's own memory (alloc, upload, op, sync, download), against
 * the plain reference backend cpu-ref, into outputs poisoned with NaN
 * first, at ragged sizes.  Element-wise results must match within float
 * rounding (1e-5 relative); embed, convert and argmax exactly.  A backend
 * without an optional op skips its cases.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "tf/backend.h"

enum op { RMSNORM, ADD, SWIGLU, ROPE, SOFTMAX, EMBED, CONVERT, ARGMAX };

static const char *const op_name[] = {
	[RMSNORM] = "rmsnorm", [ADD] = "add", [SWIGLU] = "swiglu", [ROPE] = "rope",
	[SOFTMAX] = "softmax", [EMBED] = "embed", [CONVERT] = "convert", [ARGMAX] = "argmax",
};

/* rows x n elements; `arg`: swiglu's limit, rope's interleave, embed's
 * and convert's dtype. */
static const struct be_case {
	enum op op;
	int64_t rows, n;
	int arg;
} cases[] = {
	{ RMSNORM, 1, 7, 0 }, { RMSNORM, 5, 256, 0 }, { RMSNORM, 3, 4099, 0 },
	{ ADD, 1, 9, 0 }, { ADD, 1, 4099, 0 },
	{ SWIGLU, 1, 33, 0 }, { SWIGLU, 1, 4099, 0 }, { SWIGLU, 1, 1000, 7 },
	{ ROPE, 3, 64, 0 }, { ROPE, 5, 64, 1 }, { ROPE, 7, 76, 0 }, { ROPE, 1, 12, 1 },
	{ SOFTMAX, 1, 8, 0 }, { SOFTMAX, 4, 1000, 0 }, { SOFTMAX, 3, 4099, 0 },
	{ EMBED, 9, 100, TF_DTYPE_F32 }, { EMBED, 9, 100, TF_DTYPE_F16 },
	{ EMBED, 9, 100, TF_DTYPE_BF16 },
	{ CONVERT, 1, 1001, TF_DTYPE_F16 }, { CONVERT, 1, 1001, TF_DTYPE_BF16 },
	{ ARGMAX, 1, 7, 0 }, { ARGMAX, 6, 2048, 0 }, { ARGMAX, 5, 4099, 0 },
};

#define VOCAB 37
#define HEADS 2

/* A started backend and its context. */
struct be {
	const tf_backend *b;
	void *ctx;
};

static void *dev_copy(const struct be *e, const void *src, size_t bytes)
{
	void *d = e->b->alloc(e->ctx, bytes);
	if (d && e->b->upload(e->ctx, d, src, bytes)) {
		e->b->free(e->ctx, d);
		d = NULL;
	}
	return d;
}

static bool has_op(const tf_backend *b, enum op op)
{
	const void *slot[] = {
		[RMSNORM] = (const void *)b->rmsnorm, [ADD] = (const void *)b->add,
		[SWIGLU] = (const void *)b->swiglu, [ROPE] = (const void *)b->rope,
		[SOFTMAX] = (const void *)b->softmax, [EMBED] = (const void *)b->embed,
		[CONVERT] = (const void *)b->convert, [ARGMAX] = (const void *)b->argmax,
	};
	return slot[op] != NULL;
}

/* The case's inputs, host memory: x and y [rows * n], w [n] (rope: the
 * inverse frequencies), ids [rows], a [VOCAB * n] table. */
struct inputs {
	float *x, *y, *w;
	int32_t *ids;
	void *table;
};

/* Run case c on e, writing its result (host memory) to out; out_bytes. */
static int run(const struct be *e, const struct be_case *c, const struct inputs *in,
	       void *out, size_t out_bytes)
{
	const tf_backend *b = e->b;
	size_t nx = (size_t)(c->rows * c->n) * sizeof(float);
	void *x = dev_copy(e, in->x, nx), *y = dev_copy(e, in->y, nx);
	void *w = dev_copy(e, in->w, (size_t)c->n * sizeof(float));
	void *o = b->alloc(e->ctx, out_bytes), *nan = malloc(out_bytes);
	int rc = x && y && w && o && nan ? TF_OK : TF_ERR_NOMEM;

	if (!rc) {              /* unwritten outputs show */
		memset(nan, 0xff, out_bytes);
		rc = b->upload(e->ctx, o, nan, out_bytes);
	}
	free(nan);

	if (!rc) {
		switch (c->op) {
		case RMSNORM:
			b->rmsnorm(e->ctx, o, x, w, c->rows, c->n, 1e-6f);
			break;
		case ADD:
			b->add(e->ctx, o, x, y, c->n);
			break;
		case SWIGLU:
			b->swiglu(e->ctx, o, x, y, c->n, (float)c->arg);
			break;
		case ROPE:
			/* in place, on a copy of x: HEADS heads of n / HEADS */
			rc = b->upload(e->ctx, o, in->x, nx);
			if (!rc)
				b->rope(e->ctx, o, c->rows, HEADS, c->n, c->n / HEADS,
					c->n / HEADS, in->ids, in->w, 1.0f, c->arg);
			break;
		case SOFTMAX:
			rc = b->upload(e->ctx, o, in->x, nx);
			if (!rc)
				b->softmax(e->ctx, o, c->rows, c->n);
			break;
		case EMBED: {
			size_t tb = (size_t)VOCAB * c->n * tf_dtype_size((tf_dtype)c->arg);
			void *t = dev_copy(e, in->table, tb);
			if (!t)
				rc = TF_ERR_NOMEM;
			else
				b->embed(e->ctx, o, t, (tf_dtype)c->arg, c->n, in->ids, c->rows);
			if (t)
				b->free(e->ctx, t);
			break;
		}
		case CONVERT:
			rc = b->convert(e->ctx, o, (tf_dtype)c->arg, x, TF_DTYPE_F32, c->n);
			break;
		case ARGMAX:
			b->argmax(e->ctx, o, x, c->rows, c->n);
			break;
		}
	}
	if (!rc)
		rc = b->sync(e->ctx);
	if (!rc)
		rc = b->download(e->ctx, out, o, out_bytes);
	if (x)
		b->free(e->ctx, x);
	if (y)
		b->free(e->ctx, y);
	if (w)
		b->free(e->ctx, w);
	if (o)
		b->free(e->ctx, o);
	return rc;
}

static size_t out_bytes(const struct be_case *c)
{
	switch (c->op) {
	case EMBED:
		return (size_t)(c->rows * c->n) * sizeof(float);
	case CONVERT:
		return (size_t)c->n * tf_dtype_size((tf_dtype)c->arg);
	case ARGMAX:
		return (size_t)c->rows * sizeof(int32_t);
	default:
		return (size_t)(c->rows * c->n) * sizeof(float);
	}
}

static void fill(struct inputs *in, const struct be_case *c, uint64_t seed)
{
	size_t nx = (size_t)(c->rows * c->n);
	in->x = malloc(nx * sizeof(float));
	in->y = malloc(nx * sizeof(float));
	in->w = malloc((size_t)c->n * sizeof(float));
	in->ids = malloc((size_t)c->rows * sizeof(int32_t));
	in->table = malloc((size_t)VOCAB * c->n * sizeof(float));
	tf_test_fill_uniform(in->x, nx, 3.0f, &seed);
	tf_test_fill_uniform(in->y, nx, 3.0f, &seed);
	tf_test_fill_uniform(in->w, (size_t)c->n, 1.0f, &seed);
	for (int64_t r = 0; r < c->rows; r++)
		in->ids[r] = (int32_t)((seed >> 7) % VOCAB + r * 11) % VOCAB;
	/* The table holds VOCAB x n values of the case's dtype. */
	float *tf = malloc((size_t)VOCAB * c->n * sizeof(float));
	tf_test_fill_uniform(tf, (size_t)VOCAB * c->n, 2.0f, &seed);
	for (int64_t i = 0; i < VOCAB * c->n; i++) {
		if (c->arg == TF_DTYPE_F16)
			((uint16_t *)in->table)[i] = tf_f32_to_f16(tf[i]);
		else if (c->arg == TF_DTYPE_BF16)
			((uint16_t *)in->table)[i] = tf_f32_to_bf16(tf[i]);
		else
			((float *)in->table)[i] = tf[i];
	}
	free(tf);
}

static void inputs_free(struct inputs *in)
{
	free(in->x);
	free(in->y);
	free(in->w);
	free(in->ids);
	free(in->table);
}

/* Every case on impl against ref. */
static void check_backend(const struct be *impl, const struct be *ref, cf_tally *t)
{
	const char *name = impl->b->hdr.name;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct be_case *c = &cases[i];
		if (!has_op(impl->b, c->op)) {
			t->skip++;
			continue;
		}
		struct inputs in;
		size_t ob = out_bytes(c);
		void *got = malloc(ob), *want = malloc(ob);
		fill(&in, c, 1000 + i);
		int rc = run(impl, c, &in, got, ob), rr = run(ref, c, &in, want, ob);
		if (cf_case(t, !rc && !rr, name, "%s %lldx%lld: status %d (reference %d)",
			    op_name[c->op], (long long)c->rows, (long long)c->n, rc, rr)) {
			bool exact = c->op == EMBED || c->op == CONVERT || c->op == ARGMAX;
			double err = exact ? (memcmp(got, want, ob) ? 1 : 0) :
				     cf_rel_err(got, want, ob / sizeof(float));
			cf_case(t, err <= (exact ? 0 : 1e-5), name,
				"%s %lldx%lld (arg %d): error %.3g against cpu-ref",
				op_name[c->op], (long long)c->rows, (long long)c->n, c->arg, err);
		}
		inputs_free(&in);
		free(got);
		free(want);
	}
}

static int be_start(const tf_candidate *c, const tf_host *h, struct be *e)
{
	e->b = (const tf_backend *)c->desc;
	e->ctx = NULL;
	return e->b->init(h, &e->ctx);
}

static void be_stop(struct be *e)
{
	e->b->quiesce(e->ctx);
	e->b->fini(e->ctx);
}

void cf_check_backend(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		      const tf_host *h, cf_tally *t)
{
	struct be ie, re;
	if (!cf_case(t, !be_start(impl, h, &ie), impl->name, "init failed"))
		return;
	if (cf_case(t, !be_start(ref, h, &re), impl->name, "reference init failed")) {
		check_backend(&ie, &re, t);
		be_stop(&re);
	}
	be_stop(&ie);
}
