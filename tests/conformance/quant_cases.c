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

static int sink_add(void *ctx, const char *name, tf_dtype dtype, int ndim,
		    const int64_t *shape, const void *data)
{
	tf_testhost_add_tensor(ctx, name, dtype, ndim, shape, data);
	return TF_OK;
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
	tf_tensor_sink sink = { .ctx = th, .add = sink_add };
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
