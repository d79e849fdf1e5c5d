/*
 * synth_exl3.c - a tensor plan as an EXL3 checkpoint (synth.h), drawn
 * directly instead of searched: the benchmark needs the format's size and
 * decode work, not a faithful quantization of weights that are random
 * anyway.  tfquant's own recipe decides which tensors are quantized and to
 * how many bits, so the two routes give the same tensor set; the exl3
 * plugin's draw slot (tf/quant.h) says which tensors stand for a linear.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fail.h"              /* tools/lib */
#include "synth.h"
#include "tf/checkpoint.h"

/* The host a drawer is given: it reports failures, nothing more. */
static int host_error(const tf_host *h, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	(void)h;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tfq_fail(status, "%s", msg);
}

/* The drawer's tensors become plan entries that tf_synth_fill draws. */
static int plan_sink_add(void *ctx, const char *name, tf_dtype dt, int ndim,
			 const int64_t *shape, tf_draw_fill fill, double a, double b)
{
	static const tf_synth_init init[] = {
		[TF_DRAW_BITS] = TF_SYNTH_BITS, [TF_DRAW_SIGNS] = TF_SYNTH_SIGNS,
		[TF_DRAW_CONST] = TF_SYNTH_CONST,
	};
	if (fill < TF_DRAW_BITS || fill > TF_DRAW_CONST)
		return tfq_fail(TF_ERR_INVALID, "%s: the drawer asked for fill %d", name, fill);
	return tf_synth_plan_add(ctx, dt, init[fill], a, b, ndim, shape, "%s", name);
}

/* Every tensor of src, the quantized ones as the drawer lays them out. */
static int exl3_plan(const tf_synth_plan *src, const tfq_recipe *r, const tf_model_config *cfg,
		     tf_quant_draw_fn draw, tf_synth_plan *out, tfq_meta *meta)
{
	const tf_host host = { .struct_size = sizeof(host), .error = host_error };
	const tf_draw_sink sink = { .ctx = out, .add = plan_sink_add };
	double bits = 0, numel = 0;
	char prefix[sizeof(src->t->name)];
	int rc = TF_OK;

	for (size_t i = 0; i < src->n && !rc; i++) {
		tf_synth_tensor t = src->t[i];
		tf_tensor desc = { .name = t.name, .dtype = t.dtype, .ndim = t.ndim };
		memcpy(desc.shape, t.shape, sizeof(t.shape));
		int K = tfq_recipe_bits(r, cfg, &desc);

		if (!K) {
			if (t.dtype == TF_DTYPE_F32)
				t.dtype = TF_DTYPE_F16;
			rc = tf_synth_plan_add(out, t.dtype, t.init, t.a, t.b, t.ndim, t.shape,
					       "%s", t.name);
			continue;
		}
		const tf_quantize_opts o = { .bits = K };
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(strlen(t.name) - strlen(".weight")),
			 t.name);
		rc = draw(&host, prefix, t.shape[0], t.shape[1], sqrt(t.a * t.a + t.b * t.b), &o,
			  &sink);
		if (strcmp(t.name, "lm_head.weight")) {     /* "bits" leaves the head out */
			bits += (double)K * t.shape[0] * t.shape[1];
			numel += (double)t.shape[0] * t.shape[1];
		}
	}
	*meta = (tfq_meta){ .bits = numel > 0 ? bits / numel : 0, .format = "exl3",
			    .variant = "mul1", .head_bits = r->bits[TF_WCLASS_HEAD],
			    .mtp_bits = r->bits[TF_WCLASS_MTP] };
	return rc;
}

int tf_synth_exl3_plan(const tf_synth_plan *src, const tfq_recipe *r, const char *dir,
		       tf_synth_plan *out, tfq_meta *meta)
{
	tf_model_config *cfg = NULL;
	tf_quantizer *q = NULL;
	tf_quant_draw_fn draw;
	int rc;

	*out = (tf_synth_plan){ 0 };
	if ((rc = tf_checkpoint_config(dir, &cfg)) || (rc = tf_quantizer_open("exl3", &q)))
		goto out;
	if (!(draw = tf_quantizer_draw_fn(q))) {
		rc = tfq_fail(TF_ERR_UNSUPPORTED, "the exl3 quant plugin has no draw slot "
			      "(built before plugin ABI 1.6?)");
		goto out;
	}
	rc = exl3_plan(src, r, cfg, draw, out, meta);
out:
	tf_quantizer_close(q);
	tf_checkpoint_config_free(cfg);
	if (rc)
		tf_synth_plan_free(out);
	return rc;
}
