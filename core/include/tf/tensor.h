/*
 * tf/tensor.h - a named, typed, shaped view of weight bytes.
 *
 * Weights are mapped read-only from safetensors files into host memory; a
 * tf_tensor never owns its data.  Shapes are in the file's order (Hugging Face [out, in] for
 * linear weights).
 */
#ifndef TF_TENSOR_H
#define TF_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "tf/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_MAX_DIMS 8

typedef struct tf_tensor {
	const char *name;              /* full checkpoint name */
	const char *file;              /* file it was mapped from (for errors) */
	tf_dtype dtype;
	int ndim;                      /* 0 for a scalar */
	int64_t shape[TF_MAX_DIMS];
	const void *data;              /* host-visible, read-only */
	size_t nbytes;                 /* == numel * dtype size, checked at load */
} tf_tensor;

static inline int64_t tf_tensor_numel(const tf_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

#ifdef __cplusplus
}
#endif
#endif /* TF_TENSOR_H */
