/*
 * exl3_quantize.c - the quantize slot of the exl3 descriptors: quantize.h's
 * identity-Hessian recipe, written through emit.h.  bits 1..8 (0: 4);
 * variant "mul1" (the default, exllamav3's), "mcg" or "3inst".
 */
#include <string.h>

#include "emit.h"
#include "lin.h"

int tf_exl3_quantize_slot(const tf_host *h, const char *prefix, const float *w, int64_t out,
			  int64_t in, const float *bias, const tf_quantize_opts *o,
			  const tf_tensor_sink *sink, double *rel_mse)
{
	tf_exl3_qopts qo = { .K = o->bits ? o->bits : 4, .cb = TF_EXL3_CB_MUL1, .seed = o->seed,
			     .threads = o->threads > 0 ? o->threads : 1 };
	tf_exl3_qtensor q;

	if (qo.K < 1 || qo.K > 8)
		return h->error(h, TF_ERR_UNSUPPORTED, "%s: EXL3 stores 1..8 bits per weight, "
				"not %d", prefix, qo.K);
	if (o->variant) {
		for (qo.cb = 0; qo.cb < TF_EXL3_CB_COUNT; qo.cb++)
			if (!strcmp(o->variant, tf_exl3_cb_name(qo.cb)))
				break;
		if (qo.cb == TF_EXL3_CB_COUNT)
			return h->error(h, TF_ERR_UNSUPPORTED, "%s: EXL3 has no codebook '%s' "
					"(mul1, mcg, 3inst)", prefix, o->variant);
	}
	int rc = tf_exl3_quantize(w, out, in, &qo, &q);
	if (rc)
		return h->error(h, rc, "%s: EXL3 quantization failed", prefix);
	*rel_mse = q.rel_mse;
	rc = tf_exl3_emit(&q, prefix, bias, out, sink);
	tf_exl3_qtensor_free(&q);
	return rc ? h->error(h, rc, "%s: the quantized tensors could not be stored", prefix) : TF_OK;
}
