/*
 * plain_cuda_lin.c - the "plain-cuda" linear: the plain linear of
 * plain_lin.c (F16/BF16/F32 `.weight`, optional `.bias`) with weights and
 * activations in GPU memory (plain_cuda.cu).
 *
 * open() validates the tensors as the CPU descriptor does (lin.c) and
 * uploads the weight as stored (2 bytes an element for F16 and BF16), or
 * reads it in the checkpoint where the backend maps host memory
 * (tf_cuda_weight.h), and uploads the bias widened to float.  forward() queues one kernel on the
 * backend's stream (tf_backend_stream) behind whatever the backend and
 * the other device plugins queued, and returns without waiting.
 *
 * A part (tensor parallelism, tf_lin_part) uploads only its rank's
 * weights, compact: an output range is a run of stored rows, an input
 * range is packed row by row on the host first, so the kernel sees a
 * whole [out, in] matrix either way.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "lin.h"
#include "plain_cuda.h"
#include "tf_cuda_plugin.h"
#include "tf_cuda_weight.h"

typedef struct tf_plain_cuda_lin {
	const tf_host *h;
	int64_t in, out;
	tf_plain_cuda_elem elem;
	tf_cuda_weight w;               /* as stored: mapped, or a device copy */
	float *bias;                    /* device copy */
} tf_plain_cuda_lin;

static void plain_cuda_close(void *lin)
{
	tf_plain_cuda_lin *l = lin;
	if (!l)
		return;
	tf_cuda_weight_drop(l->h, &l->w);
	cudaFree(l->bias);
	free(l);
}

/* The part's weights [info->out, info->in] as stored: a view into the
 * checkpoint for an output range (*packed NULL), else packed into
 * *packed (free()). */
static int plain_cuda_part_rows(const tf_host *h, const char *prefix, const tf_tensor *w,
				int64_t in, const tf_lin_part *part, const tf_lin_info *info,
				const void **src, void **packed)
{
	const size_t es = tf_dtype_size(w->dtype);
	*packed = NULL;
	if (part->axis == TF_LIN_PART_OUT) {
		*src = (const char *)w->data + (size_t)(part->lo * in) * es;
		return TF_OK;
	}
	char *p = malloc((size_t)(info->out * info->in) * es);
	if (!p)
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory for a part", prefix);
	for (int64_t o = 0; o < info->out; o++)
		memcpy(p + (size_t)(o * info->in) * es,
		       (const char *)w->data + (size_t)(o * in + part->lo) * es,
		       (size_t)info->in * es);
	*src = *packed = p;
	return TF_OK;
}

static int plain_cuda_open_part(const tf_host *h, const char *prefix, int64_t in,
				int64_t out, const tf_lin_part *part, void **lin,
				tf_lin_info *info)
{
	tf_tensor w;
	float *bias;
	const void *src = NULL;
	void *packed = NULL;
	tf_plain_cuda_lin *l = NULL;
	cudaError_t e;
	int rc = tf_lin_plain_load(h, prefix, in, out, part, &w, &bias, info);

	if (rc || (rc = plain_cuda_part_rows(h, prefix, &w, in, part, info, &src, &packed)))
		goto out;
	if (!(l = calloc(1, sizeof(*l)))) {
		rc = h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);
		goto out;
	}
	*l = (tf_plain_cuda_lin){
		.h = h, .in = info->in, .out = info->out,
		.elem = w.dtype == TF_DTYPE_F16 ? TF_PLAIN_CUDA_F16
		      : w.dtype == TF_DTYPE_BF16 ? TF_PLAIN_CUDA_BF16 : TF_PLAIN_CUDA_F32,
	};
	/* A packed part is ours for now only: copied. */
	if ((rc = tf_cuda_weight_get(h, prefix, src, (size_t)(l->out * l->in) *
				     tf_dtype_size(w.dtype), !packed, &l->w)))
		goto out;
	e = bias ? tf_cuda_upload((void **)&l->bias, bias, (size_t)l->out * sizeof(float))
		 : cudaSuccess;
	if (e != cudaSuccess) {
		rc = h->error(h, TF_ERR_DEVICE, "plain-cuda: %s: %s", prefix, cudaGetErrorString(e));
		goto out;
	}
	/* A device copy is all forward() reads. */
	if (!tf_cuda_weight_mapped(&l->w))
		tf_lin_release(h, prefix, "weight");
	*lin = l;
	l = NULL;
out:
	plain_cuda_close(l);
	free(packed);
	free(bias);
	return rc;
}

/* The whole layer is the part of all its output features. */
static int plain_cuda_open(const tf_host *h, const char *prefix, int64_t in,
			   int64_t out, void **lin, tf_lin_info *info)
{
	const tf_lin_part all = { .axis = TF_LIN_PART_OUT, .lo = 0, .hi = out };
	return plain_cuda_open_part(h, prefix, in, out, &all, lin, info);
}

static int plain_cuda_forward(void *lin, const float *x, int64_t rows, float *y)
{
	const tf_plain_cuda_lin *l = lin;
	const tf_host *h = l->h;
	if (rows <= 0)
		return rows ? h->error(h, TF_ERR_INVALID, "plain-cuda: %lld rows", (long long)rows)
			    : TF_OK;
	int e = tf_plain_cuda_matmul(tf_backend_stream(h->backend, h->backend_ctx), x, rows,
				     l->in, l->w.dev, l->elem, l->out, l->bias, y);
	if (e)
		return h->error(h, TF_ERR_DEVICE, "plain-cuda: forward of %lld rows: %s",
				(long long)rows, cudaGetErrorString((cudaError_t)e));
	return TF_OK;
}

/* Only on backend-cuda: the activations are in its memory. */
static int plain_cuda_probe(const tf_host *h, const char **reason)
{
	return tf_cuda_plugin_probe(h, reason) ? TF_CUDA_PLUGIN_SCORE(2) : 0;
}

const tf_plugin_quant tf_plain_cuda_lin_ops = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, TF_CUDA_PLUGIN_NAME("plain-cuda"),
				"0.1.0",
				"unquantized F16/BF16/F32 linear (y = x·Wᵀ + b) on CUDA: tiled, fp32 sums",
				plain_cuda_probe),
	.match = tf_lin_plain_match,
	.open = plain_cuda_open,
	.close = plain_cuda_close,
	.forward = plain_cuda_forward,
	.open_part = plain_cuda_open_part,
};
