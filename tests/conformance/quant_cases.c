/*
 * quant_cases.c - every quant plugin with a quantizer (the quantize slot),
 * at every bit width 1..8 it offers: random weights and bias quantized
 * through it into the test host, opened by it, and its forward compared
 * with the float64 product of its own dequantized weight (the kind's
 * reference is plain arithmetic) within 1e-2: fast paths may round on
 * purpose (EXL3's fused decode skips the codebook's fp16 rounding, 2e-4;
 * exl3-q8's 8-bit activations, 6e-3), a wrong layout is off by O(1).  The
 * weight it keeps must also be the one its quantizer reported (rel_mse),
 * within 16 * 4^-bits of the original.  A plugin
 * without a quantizer, or without dequant, is listed as skipped: the suite
 * cannot make its tensors or know its weight.
 *
 * A plugin with a drawer too (the draw slot, ABI 1.6) draws the same linear
 * at each of those widths: the tensors it lays out are the quantizer's
 * (names, dtypes, shapes; the bias aside), and filled by its rules, opened
 * and dequantized they give a weight of the RMS asked for within 5% (16384
 * random entries: the estimate's own noise is 0.6%; a wrong scale or
 * codebook misses by far more).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "tf/backend.h"
#include "tf/quant.h"

#define PREFIX "model.layers.0.mlp.up_proj"
/* One 128-wide block each way: EXL3's Viterbi search at 8 bits is slow. */
#define IN 128
#define OUT 128
#define ROWS 5

#define DRAW_RMS 0.05
#define DRAW_RMS_REL 0.05

/* A linear's tensors as its quantizer or drawer lays them out. */
typedef struct layout {
	int n;                          /* > LAYOUT_MAX: it wrote too many */
	struct {
		char name[128];
		tf_dtype dtype;
		int ndim;
		int64_t shape[TF_MAX_DIMS];
	} t[8];
} layout;
#define LAYOUT_MAX 8

typedef struct sink_ctx {
	tf_testhost *th;
	layout *l;
	uint64_t seed;                  /* the drawer's fills */
} sink_ctx;

static void layout_add(layout *l, const char *name, tf_dtype dtype, int ndim,
		       const int64_t *shape)
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
	l->n++;
}

static int sink_add(void *ctx, const char *name, tf_dtype dtype, int ndim,
		    const int64_t *shape, const void *data)
{
	sink_ctx *c = ctx;
	layout_add(c->l, name, dtype, ndim, shape);
	tf_testhost_add_tensor(c->th, name, dtype, ndim, shape, data);
	return TF_OK;
}

/* The drawer's rules filled in, as tfsynth fills them from its own draws. */
static int draw_add(void *ctx, const char *name, tf_dtype dtype, int ndim,
		    const int64_t *shape, tf_draw_fill fill, double a, double b)
{
	sink_ctx *c = ctx;
	size_t n = 1, es = tf_dtype_size(dtype);
	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
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
	layout_add(c->l, name, dtype, ndim, shape);
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

/* The drawn linear at `bits` against the quantizer's layout. */
static void check_draw(const tf_plugin_quant *q, int bits, const layout *quant, cf_tally *t)
{
	const char *name = q->hdr.name;
	tf_model_config cfg = { .hidden_size = IN };
	tf_testhost *th = tf_testhost_new(&cfg, 2);
	layout drawn = { 0 };
	sink_ctx c = { .th = th, .l = &drawn, .seed = 700 + (uint64_t)bits };
	const tf_draw_sink sink = { .ctx = &c, .add = draw_add };
	const tf_quantize_opts o = { .bits = bits };
	const tf_host *h = tf_testhost_host(th);
	float *w = malloc(sizeof(float) * OUT * IN);
	void *lin = NULL;
	tf_lin_info info;

	int rc = tf_quant_drawer(q)(h, PREFIX, OUT, IN, DRAW_RMS, &o, &sink);
	if (!cf_case(t, !rc, name, "%d bits: draw: %s", bits, tf_testhost_last_error(th)) ||
	    !cf_case(t, layout_same(&drawn, quant), name, "%d bits: draw lays out %d tensors, "
		     "unlike quantize's %d", bits, drawn.n, quant->n) ||
	    !cf_case(t, !q->open(h, PREFIX, IN, OUT, &lin, &info) && !q->dequant(lin, w), name,
		     "%d bits: the drawn tensors do not open: %s", bits,
		     tf_testhost_last_error(th)))
		goto out;
	double ss = 0;
	for (int i = 0; i < OUT * IN; i++)
		ss += (double)w[i] * w[i];
	double rms = sqrt(ss / (OUT * IN));
	cf_case(t, fabs(rms / DRAW_RMS - 1) <= DRAW_RMS_REL, name,
		"%d bits: the drawn weight's RMS is %.4g, not %.4g", bits, rms, DRAW_RMS);
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

/* One bit width: 1 when the case ran, 0 when the format does not offer it. */
static int check_bits(const tf_plugin_quant *q, int bits, cf_tally *t)
{
	const char *name = q->hdr.name;
	tf_model_config cfg = { .hidden_size = IN };
	tf_testhost *th = tf_testhost_new(&cfg, 2);
	const tf_host *h = tf_testhost_host(th);
	float *w = malloc(sizeof(float) * OUT * IN), *wq = malloc(sizeof(float) * OUT * IN);
	float *bias = malloc(sizeof(float) * OUT), *x = malloc(sizeof(float) * ROWS * IN);
	float *y = h->backend->alloc(h->backend_ctx, sizeof(float) * ROWS * OUT);
	float *xd = h->backend->alloc(h->backend_ctx, sizeof(float) * ROWS * IN);
	float *yh = malloc(sizeof(float) * ROWS * OUT), *want = malloc(sizeof(float) * ROWS * OUT);
	uint64_t seed = 900 + (uint64_t)bits;
	tf_quantize_opts o = { .bits = bits, .seed = 1, .threads = 2 };
	layout written = { 0 };
	sink_ctx sc = { .th = th, .l = &written };
	tf_tensor_sink sink = { .ctx = &sc, .add = sink_add };
	void *lin = NULL;
	tf_lin_info info;
	double mse = -1;
	int ran = 1;

	tf_test_fill_uniform(w, OUT * IN, 0.05f, &seed);
	tf_test_fill_uniform(bias, OUT, 0.5f, &seed);
	tf_test_fill_uniform(x, ROWS * IN, 1.0f, &seed);
	int rc = tf_quant_quantizer(q)(h, PREFIX, w, OUT, IN, bias, &o, &sink, &mse);
	if (rc == TF_ERR_UNSUPPORTED) {
		ran = 0;
		goto out;
	}
	if (!cf_case(t, !rc, name, "%d bits: quantize: %s", bits, tf_testhost_last_error(th)) ||
	    !cf_case(t, q->match(h, PREFIX) > 0, name, "%d bits: match() refuses what "
		     "quantize() wrote", bits) ||
	    !cf_case(t, !q->open(h, PREFIX, IN, OUT, &lin, &info), name, "%d bits: open: %s",
		     bits, tf_testhost_last_error(th)))
		goto out;
	rc = q->dequant(lin, wq);
	if (!rc)
		rc = h->backend->upload(h->backend_ctx, xd, x, sizeof(float) * ROWS * IN);
	if (!rc)
		rc = q->forward(lin, xd, ROWS, y);
	if (!rc)
		rc = h->backend->sync(h->backend_ctx);
	if (!rc)
		rc = h->backend->download(h->backend_ctx, yh, y, sizeof(float) * ROWS * OUT);
	if (!cf_case(t, !rc, name, "%d bits: dequant/forward: %s", bits,
		     tf_testhost_last_error(th)))
		goto out;
	for (int r = 0; r < ROWS; r++)
		for (int c = 0; c < OUT; c++) {
			double acc = bias[c];
			for (int i = 0; i < IN; i++)
				acc += (double)x[r * IN + i] * wq[c * IN + i];
			want[r * OUT + c] = (float)acc;
		}
	double err = cf_rel_err(yh, want, ROWS * OUT), kept = rel_mse(wq, w, OUT * IN);
	cf_case(t, err <= 1e-2, name, "%d bits: forward vs its own weight: error %.3g", bits, err);
	cf_case(t, fabs(kept - mse) <= 1e-3 * mse + 1e-12, name,
		"%d bits: reported rel_mse %.4g, kept weight's %.4g", bits, mse, kept);
	/* one more bit halves the step: a budget of 16 * 4^-bits */
	cf_case(t, kept <= 16.0 * pow(4.0, -bits), name, "%d bits: rel_mse %.4g", bits, kept);
	if (tf_quant_drawer(q))
		check_draw(q, bits, &written, t);
out:
	if (lin)
		q->close(lin);
	h->backend->free(h->backend_ctx, y);
	h->backend->free(h->backend_ctx, xd);
	free(w);
	free(wq);
	free(bias);
	free(x);
	free(yh);
	free(want);
	tf_testhost_free(th);
	return ran;
}

void cf_check_quant(const tf_candidate *impl, const tf_candidate *ref, const tf_host *h,
		    cf_tally *t)
{
	const tf_plugin_quant *q = (const tf_plugin_quant *)impl->desc;
	int offered = 0;

	if (!tf_quant_quantizer(q) || !q->dequant) {
		t->skip++;
		return;
	}
	for (int bits = 1; bits <= 8; bits++)
		offered += check_bits(q, bits, t);
	cf_case(t, offered > 0, impl->name, "its quantizer offers no bit width 1..8");
}
