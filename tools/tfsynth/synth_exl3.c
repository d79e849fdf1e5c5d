/*
 * synth_exl3.c - a tensor plan as an EXL3 checkpoint (synth.h), drawn
 * directly instead of searched: the benchmark needs the format's size and
 * decode work, not a faithful quantization of weights that are random
 * anyway.  tfquant's own recipe decides which tensors are quantized and to
 * how many bits, so the two routes give the same tensor set.
 */
#include <math.h>
#include <string.h>

#include "codebook.h"
#include "config.h"
#include "diag.h"
#include "synth.h"

#define PAD128(x) (((x) + 127) / 128 * 128)

/* RMS of the codebook over its 65536 states: random trellis bits make every
 * state equally likely, so this is exactly Ŵ's RMS. */
static double codebook_rms(tf_exl3_cb cb)
{
	double sum = 0;
	for (uint32_t s = 0; s < 65536; s++) {
		double w = tf_exl3_cb_f32((uint16_t)s, cb);
		sum += w * w;
	}
	return sqrt(sum / 65536);
}

/* trellis, suh, svh and the MUL1 marker standing for t at K bits. */
static int add_quantized(tf_synth_plan *out, const tf_synth_tensor *t, int K, double cb_rms)
{
	int n = (int)(strlen(t->name) - strlen(".weight"));
	int64_t k = PAD128(t->shape[1]), nn = PAD128(t->shape[0]);
	int64_t ts[3] = { k / 16, nn / 16, 16 * K };
	double rms = sqrt(t->a * t->a + t->b * t->b);
	int rc;

	if ((rc = tf_synth_plan_add(out, TF_DTYPE_I16, TF_SYNTH_BITS, 0, 0, 3, ts,
				    "%.*s.trellis", n, t->name)) ||
	    (rc = tf_synth_plan_add(out, TF_DTYPE_F16, TF_SYNTH_SIGNS, rms / cb_rms,
				    (double)t->shape[1], 1, &k, "%.*s.suh", n, t->name)) ||
	    (rc = tf_synth_plan_add(out, TF_DTYPE_F16, TF_SYNTH_SIGNS, 1.0,
				    (double)t->shape[0], 1, &nn, "%.*s.svh", n, t->name)))
		return rc;
	return tf_synth_plan_add(out, TF_DTYPE_I32, TF_SYNTH_CONST, TF_EXL3_MUL1_MARKER, 0,
				 0, NULL, "%.*s.mul1", n, t->name);
}

int tf_synth_exl3_plan(const tf_synth_plan *src, const tfq_recipe *r, const char *dir,
		       tf_synth_plan *out, tfq_meta *meta)
{
	tf_model_config cfg = { .struct_size = sizeof(cfg) };
	double cb_rms = codebook_rms(TF_EXL3_CB_MUL1), bits = 0, numel = 0;
	char path[4096];
	int rc;

	*out = (tf_synth_plan){ 0 };
	snprintf(path, sizeof(path), "%s/config.json", dir);
	if ((rc = tf_config_load(path, &cfg)))
		return rc;
	for (size_t i = 0; i < src->n && !rc; i++) {
		tf_synth_tensor t = src->t[i];
		tf_tensor desc = { .name = t.name, .dtype = t.dtype, .ndim = t.ndim };
		memcpy(desc.shape, t.shape, sizeof(t.shape));
		int K = tfq_recipe_bits(r, &cfg, &desc);

		if (!K) {
			if (t.dtype == TF_DTYPE_F32)
				t.dtype = TF_DTYPE_F16;
			rc = tf_synth_plan_add(out, t.dtype, t.init, t.a, t.b, t.ndim, t.shape,
					       "%s", t.name);
			continue;
		}
		rc = add_quantized(out, &t, K, cb_rms);
		if (strcmp(t.name, "lm_head.weight")) {     /* "bits" leaves the head out */
			bits += (double)K * t.shape[0] * t.shape[1];
			numel += (double)t.shape[0] * t.shape[1];
		}
	}
	*meta = (tfq_meta){ .bits = numel > 0 ? bits / numel : 0, .format = "exl3",
			    .variant = "mul1", .head_bits = r->bits[TF_WCLASS_HEAD],
			    .mtp_bits = r->bits[TF_WCLASS_MTP] };
	tf_config_free(&cfg);
	if (rc)
		tf_synth_plan_free(out);
	return rc;
}
