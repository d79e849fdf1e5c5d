/* emit.c - see emit.h. */
#include "emit.h"

#include <stdio.h>
#include <stdlib.h>

static int add(const tf_tensor_sink *sink, const char *prefix, const char *leaf,
	       tf_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
	char name[512];
	snprintf(name, sizeof(name), "%s.%s", prefix, leaf);
	return sink->add(sink->ctx, name, dtype, ndim, shape, data);
}

int tf_exl3_emit(const tf_exl3_qtensor *q, const char *prefix, const float *bias,
		 int64_t out, const tf_tensor_sink *sink)
{
	static const int32_t mcg = TF_EXL3_MCG_MARKER, mul1 = TF_EXL3_MUL1_MARKER;
	int64_t ts[3] = { q->k / 16, q->n / 16, 16 * q->K };
	int rc = add(sink, prefix, "trellis", TF_DTYPE_I16, 3, ts, q->trellis);

	if (!rc)
		rc = add(sink, prefix, "suh", TF_DTYPE_F16, 1, &q->k, q->suh);
	if (!rc)
		rc = add(sink, prefix, "svh", TF_DTYPE_F16, 1, &q->n, q->svh);
	if (!rc && q->cb != TF_EXL3_CB_3INST)
		rc = add(sink, prefix, q->cb == TF_EXL3_CB_MCG ? "mcg" : "mul1", TF_DTYPE_I32, 0,
			 NULL, q->cb == TF_EXL3_CB_MCG ? &mcg : &mul1);
	if (rc || !bias)
		return rc;
	uint16_t *b = calloc((size_t)q->n, sizeof(uint16_t));
	if (!b)
		return TF_ERR_NOMEM;
	for (int64_t i = 0; i < out; i++)
		b[i] = tf_f32_to_f16(bias[i]);
	rc = add(sink, prefix, "bias", TF_DTYPE_F16, 1, &q->n, b);
	free(b);
	return rc;
}
