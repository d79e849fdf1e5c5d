/*
 * quant_cases.c - every quant plugin on the tensors of its format.
 *
 * The tensors come from sources, made once and reused for every plugin:
 * each quantizer (the quantize slot) on the path, at every bit width 1..8
 * and every variant it offers, and the suite's own writer of plain
 * `.weight` tensors (F32, F16, BF16; the format has no quantizer), each on
 * random weights and bias of two shapes: `narrow` within one 128-feature
 * block each way, padded (every width and variant: EXL3's Viterbi search
 * is slow), and `wide`, three whole blocks in and two padded out, at the
 * format's default width only.  The variants tried are the ones this
 * suite knows (EXL3's codebooks: the ABI lists none); a quantizer that
 * refuses them all is run with its default.
 *
 * A plugin runs on a source made by its own quantizer, or, without one
 * (the device linears: exl3-cuda, plain-cuda), on any source whose
 * tensors it claims as strongly as the plugin that made them: the same
 * format.  It opens them on the suite's backend (TF_TEST_BACKEND: a
 * device backend's linears are tested on it) and its forward, for each
 * of its shape's row counts into NaN-poisoned outputs, is compared with
 * the float64 product of the dequantized weight within 1e-2: fast paths
 * may round on purpose (EXL3's fused decode skips the codebook's fp16
 * rounding, 3e-4; the device GEMM's fp16 activations, 3e-4; exl3-q8's
 * 8-bit activations, 8e-3), a wrong layout is off by O(1).  Plain
 * weights within 1e-5: a plain linear rounds nothing but its fp32 sums
 * (measured at most 7e-7).
 *
 * The row counts cross the kernels' internal switches: the device EXL3
 * GEMV takes 1..8 rows (TF_EXL3_CUDA_GEMV_ROWS) and its WMMA GEMM 16-row
 * tiles above, padded; plain-cuda tiles rows and features by 16.  Every
 * source runs 1, 8, 9 and 17 rows (each side of the GEMV/GEMM switch, a
 * padded GEMM tile and two), so each width and codebook's decode runs
 * through both device paths; the wide ones also 3, 16 and 33.  The wide
 * shape's 384 inputs (a multiple of 128, not of 256) give each GEMV warp
 * several tile rows, its 200 outputs two blocks with a trimmed tail; the
 * narrow shape's 100 x 120 is no multiple of 16 either way.
 *
 * The weight is the plugin's own dequant, or without one its twin's: the
 * plugin with a dequant (not this one) that best matches the tensors, on
 * backend-cpu (for the device linears: exl3 and plain).  A plain source's
 * weight must be the stored values exactly.  With its own quantizer, the
 * weight it keeps must also be the one the quantizer reported (rel_mse),
 * within 16 * 4^-bits of the original.  A plugin with no source of its
 * format on the path, or no weight to compare with, is listed as skipped.
 *
 * On a host backend every row also has the bits it has alone, in any
 * company of 2..17 rows (a speculative verify's rows and a batch's
 * sequences must get serial decoding's logits): the CPU linears' contract.
 *
 * A plugin with a drawer too (the draw slot, ABI 1.6) draws the same
 * narrow linear at each width and variant: the tensors it lays out are
 * the quantizer's (names, dtypes, shapes; the bias aside), and filled by
 * its rules, opened and dequantized they give a weight of the RMS asked
 * for within 5% (12000 random entries: the estimate's own noise is 0.7%;
 * a wrong scale or codebook misses by far more).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "tf/backend.h"
#include "tf/quant.h"

#define PREFIX "model.layers.0.mlp.up_proj"

typedef struct lin_shape {
	int64_t in, out;
	int nrows;
	int rows[8];
} lin_shape;

static const lin_shape narrow = { 100, 120, 4, { 1, 8, 9, 17 } },
		   wide = { 384, 200, 7, { 1, 3, 8, 9, 16, 17, 33 } };

static const char *const variants[] = { "mul1", "mcg", "3inst" };
static const tf_dtype plain_dtypes[] = { TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16 };

#define FORWARD_TOL 1e-2
#define PLAIN_TOL 1e-5
#define DRAW_RMS 0.05
#define DRAW_RMS_REL 0.05

/* A linear's tensors as a source or drawer lays them out; a source keeps
 * their bytes too. */
typedef struct layout {
	int n;                          /* > LAYOUT_MAX: it wrote too many */
	struct {
		char name[128];
		tf_dtype dtype;
		int ndim;
		int64_t shape[TF_MAX_DIMS];
		void *data;             /* a source's copy; NULL when drawn */
	} t[8];
} layout;
#define LAYOUT_MAX 8

/* One set of a format's tensors, the weight and bias they came from. */
typedef struct source {
	tf_quantize_fn quantize;        /* NULL: the plain writer */
	char what[96];                  /* "exl3 4 bits mcg 100x120", for messages */
	int bits;                       /* asked of the quantizer */
	const char *variant;            /* NULL: its default */
	const lin_shape *s;
	int rc;                         /* the quantizer's status */
	char err[256];                  /* its message when rc */
	double mse;                     /* its reported rel_mse */
	float *w, *bias;                /* the original [out, in], [out] */
	float *stored;                  /* the plain writer's weight as stored */
	double tol;                     /* the forward's bound */
	layout l;
} source;

/* Every source, made at the first plugin checked (cf_quant_done frees). */
static struct {
	source *s;
	int n;
	bool made;
} sources;

typedef struct sink_ctx {
	tf_testhost *th;                /* the drawer's host */
	layout *l;
	uint64_t seed;                  /* the drawer's fills */
} sink_ctx;

static size_t elems(int ndim, const int64_t *shape)
{
	size_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	return n;
}

static void layout_add(layout *l, const char *name, tf_dtype dtype, int ndim,
		       const int64_t *shape, const void *data)
{
	if (l->n >= LAYOUT_MAX || ndim > TF_MAX_DIMS) {
		l->n = LAYOUT_MAX + 1;
		return;
	}
	snprintf(l->t[l->n].name, sizeof(l->t[l->n].name), "%s", name);
	l->t[l->n].dtype = dtype;
	l->t[l->n].ndim = ndim;
	if (ndim > 0)   /* a scalar (ndim 0) may come with no shape array */
		memcpy(l->t[l->n].shape, shape, (size_t)ndim * sizeof(*shape));
	l->t[l->n].data = NULL;
	if (data) {
		size_t bytes = elems(ndim, shape) * tf_dtype_size(dtype);
		l->t[l->n].data = malloc(bytes + 1);
		memcpy(l->t[l->n].data, data, bytes);
	}
	l->n++;
}

static void layout_free(layout *l)
{
	for (int i = 0; i < l->n && i < LAYOUT_MAX; i++)
		free(l->t[i].data);
	l->n = 0;
}

/* A source's tensors into a test host. */
static void layout_put(const layout *l, tf_testhost *th)
{
	for (int i = 0; i < l->n && i < LAYOUT_MAX; i++)
		tf_testhost_add_tensor(th, l->t[i].name, l->t[i].dtype, l->t[i].ndim,
				       l->t[i].shape, l->t[i].data);
}

static int sink_add(void *ctx, const char *name, tf_dtype dtype, int ndim,
		    const int64_t *shape, const void *data)
{
	sink_ctx *c = ctx;
	layout_add(c->l, name, dtype, ndim, shape, data);
	return TF_OK;
}

/* The drawer's rules filled in, as tfsynth fills them from its own draws. */
static int draw_add(void *ctx, const char *name, tf_dtype dtype, int ndim,
		    const int64_t *shape, tf_draw_fill fill, double a, double b)
{
	sink_ctx *c = ctx;
	size_t n = elems(ndim, shape), es = tf_dtype_size(dtype);
	uint8_t *data = malloc(n * es + 1);
	float *u = malloc(n * sizeof(float) + 1);
	tf_test_fill_uniform(u, n, 1.0f, &c->seed);
	for (size_t i = 0; i < n; i++) {
		float v = fill == TF_DRAW_SIGNS ? ((double)i < b ? (u[i] < 0 ? -a : a) : 0) :
			  fill == TF_DRAW_CONST ? (float)a : u[i] * 32767.0f;
		if (dtype == TF_DTYPE_F16)
			((uint16_t *)data)[i] = tf_f32_to_f16(v);
		else if (dtype == TF_DTYPE_I16)
			((int16_t *)data)[i] = (int16_t)v;
		else if (dtype == TF_DTYPE_I32)
			((int32_t *)data)[i] = (int32_t)v;
		else
			((float *)data)[i] = v;
	}
	layout_add(c->l, name, dtype, ndim, shape, NULL);
	tf_testhost_add_tensor(c->th, name, dtype, ndim, shape, data);
	free(data);
	free(u);
	return TF_OK;
}

/* Whether every drawn tensor is one the quantizer wrote, alike, and the
 * quantizer wrote no other but a bias. */
static bool layout_same(const layout *drawn, const layout *quant)
{
	int matched = 0, bias = 0;
	if (drawn->n > LAYOUT_MAX || quant->n > LAYOUT_MAX)
		return false;
	for (int j = 0; j < quant->n; j++)
		bias += strstr(quant->t[j].name, ".bias") != NULL;
	for (int i = 0; i < drawn->n; i++)
		for (int j = 0; j < quant->n; j++)
			matched += !strcmp(drawn->t[i].name, quant->t[j].name) &&
				   drawn->t[i].dtype == quant->t[j].dtype &&
				   drawn->t[i].ndim == quant->t[j].ndim &&
				   !memcmp(drawn->t[i].shape, quant->t[j].shape,
					   (size_t)quant->t[j].ndim * sizeof(int64_t));
	return matched == drawn->n && drawn->n + bias == quant->n;
}

/* A host on backend-cpu, where the quantizers and the twins run. */
static tf_testhost *cpu_host(const lin_shape *s)
{
	tf_model_config cfg = { .hidden_size = (int)s->in };
	return tf_testhost_new_with(&cfg, 2, NULL, NULL);
}

/* A new source of shape s: random weight and bias (the seed follows the
 * sources' count, so each is fresh and a run repeats). */
static source *source_new(const lin_shape *s)
{
	source *src;
	sources.s = realloc(sources.s, (size_t)(sources.n + 1) * sizeof(*sources.s));
	src = &sources.s[sources.n];
	memset(src, 0, sizeof(*src));
	uint64_t seed = 900 + 7 * (uint64_t)sources.n++;
	src->s = s;
	src->w = malloc(sizeof(float) * (size_t)(s->out * s->in));
	src->bias = malloc(sizeof(float) * (size_t)s->out);
	tf_test_fill_uniform(src->w, (size_t)(s->out * s->in), 0.05f, &seed);
	tf_test_fill_uniform(src->bias, (size_t)s->out, 0.5f, &seed);
	return src;
}

static void source_drop_last(void)
{
	source *src = &sources.s[--sources.n];
	free(src->w);
	free(src->bias);
	free(src->stored);
	layout_free(&src->l);
}

/* q's quantizer at bits and variant on shape s; false (and no source)
 * when it does not offer them. */
static bool source_quantize(const tf_plugin_quant *q, int bits, const char *variant,
			    const lin_shape *s)
{
	tf_testhost *th = cpu_host(s);
	source *src = source_new(s);
	const tf_quantize_opts o = { .bits = bits, .seed = 1, .threads = 2, .variant = variant };
	sink_ctx sc = { .l = &src->l };
	const tf_tensor_sink sink = { .ctx = &sc, .add = sink_add };
	char width[24] = "default bits";     /* room for any int */

	src->quantize = tf_quant_quantizer(q);
	src->tol = FORWARD_TOL;
	src->bits = bits;
	src->variant = variant;
	if (bits)
		snprintf(width, sizeof(width), "%d bits", bits);
	snprintf(src->what, sizeof(src->what), "%s %s %s %lldx%lld", q->hdr.name, width,
		 variant ? variant : "default variant", (long long)s->in, (long long)s->out);
	src->rc = src->quantize(tf_testhost_host(th), PREFIX, src->w, s->out, s->in, src->bias,
				&o, &sink, &src->mse);
	snprintf(src->err, sizeof(src->err), "%s", tf_testhost_last_error(th));
	tf_testhost_free(th);
	if (src->rc == TF_ERR_UNSUPPORTED) {
		source_drop_last();
		return false;
	}
	return true;
}

/* The plain writer: `.weight` as dtype and a float `.bias`. */
static void source_plain(tf_dtype dtype, const lin_shape *s)
{
	source *src = source_new(s);
	const size_t n = (size_t)(s->out * s->in);
	const int64_t wshape[2] = { s->out, s->in };
	void *data = malloc(n * tf_dtype_size(dtype));

	snprintf(src->what, sizeof(src->what), "plain %s %lldx%lld", tf_dtype_name(dtype),
		 (long long)s->in, (long long)s->out);
	src->stored = malloc(sizeof(float) * n);
	src->tol = PLAIN_TOL;
	for (size_t i = 0; i < n; i++) {
		float v = src->w[i];
		if (dtype == TF_DTYPE_F16)
			v = tf_f16_to_f32(((uint16_t *)data)[i] = tf_f32_to_f16(v));
		else if (dtype == TF_DTYPE_BF16)
			v = tf_bf16_to_f32(((uint16_t *)data)[i] = tf_f32_to_bf16(v));
		else
			((float *)data)[i] = v;
		src->stored[i] = v;
	}
	layout_add(&src->l, PREFIX ".weight", dtype, 2, wshape, data);
	layout_add(&src->l, PREFIX ".bias", TF_DTYPE_F32, 1, &s->out, src->bias);
	free(data);
}

/* Every quantizer on the path (each slot once: exl3.so's descriptors
 * share one) at each width and variant, then the plain writer. */
static void sources_make(const tf_registry *r)
{
	tf_quantize_fn seen[16];
	int nseen = 0;

	sources.made = true;
	for (size_t i = 0; i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		const tf_plugin_quant *q = (const tf_plugin_quant *)c->desc;
		tf_quantize_fn f = c->kind == TF_KIND_QUANT && q ? tf_quant_quantizer(q) : NULL;
		bool dup = false;
		for (int j = 0; j < nseen; j++)
			dup |= seen[j] == f;
		if (!f || dup || nseen == (int)(sizeof(seen) / sizeof(seen[0])))
			continue;
		seen[nseen++] = f;
		for (int bits = 1; bits <= 8; bits++) {
			int named = 0;
			for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++)
				named += source_quantize(q, bits, variants[v], &narrow);
			if (!named)
				source_quantize(q, bits, NULL, &narrow);
		}
		source_quantize(q, 0, NULL, &wide);
	}
	for (size_t d = 0; d < sizeof(plain_dtypes) / sizeof(plain_dtypes[0]); d++) {
		source_plain(plain_dtypes[d], &narrow);
		source_plain(plain_dtypes[d], &wide);
	}
}

void cf_quant_done(void)
{
	while (sources.n)
		source_drop_last();
	free(sources.s);
	memset(&sources, 0, sizeof(sources));
}

/* The highest match() score on h's tensors of the quant plugins with
 * quantizer f (0: none, or f NULL). */
static int maker_score(const tf_registry *r, tf_quantize_fn f, const tf_host *h)
{
	int best = 0;
	for (size_t i = 0; f && i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		const tf_plugin_quant *q = (const tf_plugin_quant *)c->desc;
		if (c->kind == TF_KIND_QUANT && q && tf_quant_quantizer(q) == f) {
			int m = q->match(h, PREFIX);
			best = m > best ? m : best;
		}
	}
	return best;
}

/* The weight of src through its best-matching quant plugin with a
 * dequant other than `self`, on backend-cpu (*name NULL: none; err: its
 * error). */
static int twin_weight(const tf_registry *r, const tf_plugin_quant *self, const source *src,
		       float *w, const char **name, char *err, size_t errlen)
{
	tf_testhost *th = cpu_host(src->s);
	const tf_host *h = tf_testhost_host(th);
	const tf_plugin_quant *twin = NULL;
	int best = 0, rc = TF_ERR_NOT_FOUND;
	void *lin = NULL;
	tf_lin_info info;

	layout_put(&src->l, th);
	for (size_t i = 0; i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		const tf_plugin_quant *q = (const tf_plugin_quant *)c->desc;
		const char *why = NULL;
		int m;
		if (c->kind != TF_KIND_QUANT || !q || q == self || !q->dequant ||
		    q->hdr.probe(h, &why) <= 0 || (m = q->match(h, PREFIX)) <= best)
			continue;
		best = m;
		twin = q;
	}
	*name = twin ? twin->hdr.name : NULL;
	if (twin) {
		rc = twin->open(h, PREFIX, src->s->in, src->s->out, &lin, &info);
		if (!rc)
			rc = twin->dequant(lin, w);
		if (lin)
			twin->close(lin);
	}
	snprintf(err, errlen, "%s", tf_testhost_last_error(th));
	tf_testhost_free(th);
	return rc;
}

/* The drawn linear at the source's shape, width and variant against the
 * quantizer's layout. */
static void check_draw(const tf_plugin_quant *q, const source *src, cf_tally *t)
{
	const char *name = q->hdr.name;
	const int64_t in = src->s->in, out = src->s->out;
	tf_model_config cfg = { .hidden_size = (int)in };
	tf_testhost *th = tf_testhost_new(&cfg, 2);
	layout drawn = { 0 };
	sink_ctx c = { .th = th, .l = &drawn, .seed = 700 + (uint64_t)src->bits };
	const tf_draw_sink sink = { .ctx = &c, .add = draw_add };
	const tf_quantize_opts o = { .bits = src->bits, .variant = src->variant };
	const tf_host *h = tf_testhost_host(th);
	float *w = malloc(sizeof(float) * (size_t)(out * in));
	void *lin = NULL;
	tf_lin_info info;

	int rc = tf_quant_drawer(q)(h, PREFIX, out, in, DRAW_RMS, &o, &sink);
	if (!cf_case(t, !rc, name, "%s: draw: %s", src->what, tf_testhost_last_error(th)) ||
	    !cf_case(t, layout_same(&drawn, &src->l), name, "%s: draw lays out %d tensors, "
		     "unlike quantize's %d", src->what, drawn.n, src->l.n) ||
	    !cf_case(t, !q->open(h, PREFIX, in, out, &lin, &info) && q->dequant &&
		     !q->dequant(lin, w), name, "%s: the drawn tensors do not open: %s",
		     src->what, tf_testhost_last_error(th)))
		goto out;
	double ss = 0;
	for (int64_t i = 0; i < out * in; i++)
		ss += (double)w[i] * w[i];
	double rms = sqrt(ss / (double)(out * in));
	cf_case(t, fabs(rms / DRAW_RMS - 1) <= DRAW_RMS_REL, name,
		"%s: the drawn weight's RMS is %.4g, not %.4g", src->what, rms, DRAW_RMS);
out:
	if (lin)
		q->close(lin);
	free(w);
	tf_testhost_free(th);
}

/* ||a - b||² / ||b||² over n. */
static double rel_mse(const float *a, const float *b, size_t n)
{
	double e = 0, s = 0;
	for (size_t i = 0; i < n; i++) {
		e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		s += (double)b[i] * b[i];
	}
	return e / s;
}

/* rows of fresh random x through the open linear into a NaN-poisoned y
 * on h's backend, against bias + x · wqᵀ in float64. */
static void check_rows(const tf_plugin_quant *q, void *lin, const tf_host *h,
		       tf_testhost *th, const source *src, const float *wq, int rows,
		       uint64_t *seed, cf_tally *t)
{
	const tf_backend *be = h->backend;
	const int64_t in = src->s->in, out = src->s->out;
	const size_t nx = (size_t)(rows * in), ny = (size_t)(rows * out);
	float *x = malloc(sizeof(float) * nx), *yh = malloc(sizeof(float) * ny);
	float *want = malloc(sizeof(float) * ny);
	float *xd = be->alloc(h->backend_ctx, sizeof(float) * nx);
	float *y = be->alloc(h->backend_ctx, sizeof(float) * ny);

	tf_test_fill_uniform(x, nx, 1.0f, seed);
	for (size_t i = 0; i < ny; i++)
		yh[i] = NAN;
	int rc = be->upload(h->backend_ctx, xd, x, sizeof(float) * nx);
	if (!rc)
		rc = be->upload(h->backend_ctx, y, yh, sizeof(float) * ny);
	if (!rc)
		rc = q->forward(lin, xd, rows, y);
	if (!rc)
		rc = be->sync(h->backend_ctx);
	if (!rc)
		rc = be->download(h->backend_ctx, yh, y, sizeof(float) * ny);
	if (cf_case(t, !rc, q->hdr.name, "%s, %d rows: forward: %s", src->what, rows,
		    tf_testhost_last_error(th))) {
		for (int r = 0; r < rows; r++)
			for (int64_t c = 0; c < out; c++) {
				double acc = src->bias[c];
				for (int64_t i = 0; i < in; i++)
					acc += (double)x[r * in + i] * wq[c * in + i];
				want[r * out + c] = (float)acc;
			}
		double err = cf_rel_err(yh, want, ny);
		cf_case(t, err <= src->tol, q->hdr.name, "%s, %d rows: forward vs the weight: "
			"error %.3g > %.0e", src->what, rows, err, src->tol);
	}
	be->free(h->backend_ctx, xd);
	be->free(h->backend_ctx, y);
	free(x);
	free(yh);
	free(want);
}

/* Row invariance, on a host backend (the CPU linears' contract; a device
 * linear's tiles may differ): ALONE_ROWS fresh random rows, each forward
 * alone, then 2..ALONE_ROWS of them together, starting at several places:
 * every row's outputs must have the bits it has alone. */
#define ALONE_ROWS 17

static float *forward_host(const tf_plugin_quant *q, void *lin, const float *x, int rows,
			   int64_t out)
{
	float *y = malloc(sizeof(float) * (size_t)(rows * out));
	for (int64_t i = 0; y && i < rows * out; i++)
		y[i] = NAN;
	if (y && q->forward(lin, x, rows, y)) {
		free(y);
		return NULL;
	}
	return y;
}

static void check_alone(const tf_plugin_quant *q, void *lin, tf_testhost *th,
			const source *src, uint64_t *seed, cf_tally *t)
{
	const int64_t in = src->s->in, out = src->s->out;
	float *x = malloc(sizeof(float) * (size_t)(ALONE_ROWS * in));
	float *alone = malloc(sizeof(float) * (size_t)(ALONE_ROWS * out));
	int bad = 0, ok = x && alone;

	if (ok)
		tf_test_fill_uniform(x, (size_t)(ALONE_ROWS * in), 1.0f, seed);
	for (int r = 0; ok && r < ALONE_ROWS; r++) {
		float *y = forward_host(q, lin, x + r * in, 1, out);
		if (!(ok = y != NULL))
			break;
		memcpy(alone + r * out, y, sizeof(float) * (size_t)out);
		free(y);
	}
	for (int rr = 2; ok && rr <= ALONE_ROWS; rr++) {
		const int at = (5 * rr) % (ALONE_ROWS - rr + 1);   /* rows at .. at + rr */
		float *y = forward_host(q, lin, x + at * in, rr, out);
		if (!(ok = y != NULL))
			break;
		if (!bad && memcmp(y, alone + at * out, sizeof(float) * (size_t)(rr * out)))
			bad = rr;
		free(y);
	}
	if (cf_case(t, ok, q->hdr.name, "%s: forward, rows alone: %s", src->what,
		    tf_testhost_last_error(th)))
		cf_case(t, !bad, q->hdr.name, "%s: %d rows together differ from each alone",
			src->what, bad);
	free(x);
	free(alone);
}

/* q on src: 1 when it ran, 0 when src is not of q's format (or has no
 * weight to compare with: *noweight set). */
static int check_source(const tf_registry *r, const tf_plugin_quant *q, const source *src,
			bool *noweight, cf_tally *t)
{
	const char *name = q->hdr.name, *twin = name;
	const bool own = src->quantize && src->quantize == tf_quant_quantizer(q);
	const int64_t in = src->s->in, out = src->s->out;
	tf_model_config cfg = { .hidden_size = (int)in };
	tf_testhost *th = tf_testhost_new(&cfg, 2);
	const tf_host *h = tf_testhost_host(th);
	float *wq = malloc(sizeof(float) * (size_t)(out * in));
	uint64_t seed = 4000 + (uint64_t)(src - sources.s);
	void *lin = NULL;
	tf_lin_info info;
	char err[256] = "";
	int ran = 1, rc;

	if (own && !cf_case(t, !src->rc, name, "%s: quantize: %s", src->what, src->err))
		goto out;
	layout_put(&src->l, th);
	if (!own) {
		int m = q->match(h, PREFIX);
		if (src->rc || m <= 0 || m < maker_score(r, src->quantize, h)) {
			ran = 0;
			goto out;
		}
	} else if (!cf_case(t, q->match(h, PREFIX) > 0, name, "%s: match() refuses what "
			    "quantize() wrote", src->what)) {
		goto out;
	}
	if (!cf_case(t, !q->open(h, PREFIX, in, out, &lin, &info), name, "%s: open: %s",
		     src->what, tf_testhost_last_error(th)))
		goto out;
	if (q->dequant) {
		rc = q->dequant(lin, wq);
		snprintf(err, sizeof(err), "%s", tf_testhost_last_error(th));
	} else {
		rc = twin_weight(r, q, src, wq, &twin, err, sizeof(err));
	}
	if (!twin) {
		*noweight = true;
		ran = 0;
		goto out;
	}
	if (!cf_case(t, !rc, name, "%s: dequant (%s): %s", src->what, twin, err))
		goto out;
	if (src->stored)
		cf_case(t, !memcmp(wq, src->stored, sizeof(float) * (size_t)(out * in)), name,
			"%s: the weight (%s's dequant) is not the one stored", src->what, twin);
	for (int i = 0; i < src->s->nrows; i++)
		check_rows(q, lin, h, th, src, wq, src->s->rows[i], &seed, t);
	if (h->backend->parallel_for)           /* a host backend */
		check_alone(q, lin, th, src, &seed, t);
	if (!own)
		goto out;
	double kept = rel_mse(wq, src->w, (size_t)(out * in));
	cf_case(t, fabs(kept - src->mse) <= 1e-3 * src->mse + 1e-12, name,
		"%s: reported rel_mse %.4g, kept weight's %.4g", src->what, src->mse, kept);
	/* one more bit halves the step: a budget of 16 * 4^-bits */
	if (src->bits)
		cf_case(t, kept <= 16.0 * pow(4.0, -src->bits), name, "%s: rel_mse %.4g",
			src->what, kept);
	if (tf_quant_drawer(q) && src->bits)
		check_draw(q, src, t);
out:
	if (lin)
		q->close(lin);
	free(wq);
	tf_testhost_free(th);
	return ran;
}

void cf_check_quant(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		    const tf_host *h, cf_tally *t)
{
	const tf_plugin_quant *q = (const tf_plugin_quant *)impl->desc;
	const tf_quantize_fn own = tf_quant_quantizer(q);
	int ran = 0, widths = 0;
	bool noweight = false;

	if (!sources.made)
		sources_make(r);
	for (int i = 0; i < sources.n; i++) {
		int one = check_source(r, q, &sources.s[i], &noweight, t);
		ran += one;
		widths += one && sources.s[i].quantize == own && sources.s[i].bits;
	}
	if (noweight || (!own && !ran))
		t->skip++;
	else if (own)
		cf_case(t, widths > 0, impl->name, "its quantizer offers no bit width 1..8");
}
