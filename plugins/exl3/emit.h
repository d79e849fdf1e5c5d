/*
 * emit.h - a quantized EXL3 linear as the tensors exllamav3 stores under its
 * prefix: <prefix>.trellis (I16 [k/16, n/16, 16·K]), .suh (F16 [k]), .svh
 * (F16 [n]), the codebook's marker (.mcg or .mul1, I32 scalar; none for
 * 3INST) and, with a bias, .bias (F16 [n], zero past out).  tfquant and the
 * plugin's quantizer both write through it.
 */
#ifndef TF_EXL3_EMIT_H
#define TF_EXL3_EMIT_H

#include "quantize.h"
#include "tf/quant.h"

/* bias: float [out] or NULL.  Returns the sink's first failure. */
int tf_exl3_emit(const tf_exl3_qtensor *q, const char *prefix, const float *bias,
		 int64_t out, const tf_tensor_sink *sink);

#endif /* TF_EXL3_EMIT_H */
