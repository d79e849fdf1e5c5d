/*
 * exl3_cuda_lin.c - the "exl3-cuda" linear: the EXL3 layer of exl3_lin.c
 * with weights and activations in GPU memory (cuda_kernels.cu).
 *
 * open() validates the tensors exactly as the CPU descriptor does
 * (exl3_load.c) and uploads trellis (or reads it in the checkpoint where
 * the backend maps host memory: tf_cuda_weight.h), suh, svh and bias.  forward() takes
 * device pointers from the CUDA backend: 1..8 rows go through the fused
 * decode GEMV; more rows through the WMMA GEMM, which decodes each tile
 * into shared memory once per 64 rows (cuda_kernels.h says why 8).
 *
 * open_part() cuts the loaded layer as the CPU descriptor does
 * (tf_exl3_parts_cut: whole 128-feature Hadamard blocks) and uploads only
 * the part.
 *
 * forward() queues its kernels and its stream-ordered scratch on the
 * backend's stream (tf_backend_stream, ABI 1.7), behind the backend's ops
 * and the other device plugins' kernels, and returns without waiting.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "exl3_load.h"
#include "lin.h"
#include "tf_cuda_plugin.h"
#include "tf_cuda_weight.h"

typedef struct tf_exl3_cuda_lin {
	const tf_host *h;
	int64_t in, out, k, n;
	int K;
	tf_exl3_cb cb;
	tf_cuda_weight trellis;         /* mapped, or a device copy */
	float *suh, *svh, *bias;        /* device copies */
} tf_exl3_cuda_lin;

static int cuda_status(const tf_host *h, cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return TF_OK;
	return h->error(h, TF_ERR_DEVICE, "exl3-cuda: %s: %s", what, cudaGetErrorString(e));
}

static void exl3_cuda_close(void *lin)
{
	tf_exl3_cuda_lin *l = lin;
	if (!l)
		return;
	tf_cuda_weight_drop(l->h, &l->trellis);
	cudaFree(l->suh);
	cudaFree(l->svh);
	cudaFree(l->bias);
	free(l);
}

/* The whole layer (part NULL) or one rank's part of it. */
static int exl3_cuda_open_as(const tf_host *h, const char *prefix, int64_t in, int64_t out,
			     const tf_lin_part *part, void **lin, tf_lin_info *info)
{
	tf_exl3_parts p;
	tf_exl3_cuda_lin *l;
	uint16_t *owned = NULL;
	cudaError_t e;
	int rc = tf_exl3_parts_load(h, prefix, in, out, &p);

	if (!rc && part)
		rc = tf_exl3_parts_cut(h, prefix, part, &p, &owned);
	if (rc) {
		tf_exl3_parts_free(&p);
		return rc;
	}
	if (part && part->axis == TF_LIN_PART_IN)
		in = part->hi - part->lo;
	else if (part)
		out = part->hi - part->lo;
	l = calloc(1, sizeof(*l));
	if (!l) {
		free(owned);
		tf_exl3_parts_free(&p);
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);
	}
	*l = (tf_exl3_cuda_lin){ .h = h, .in = in, .out = out, .k = p.k, .n = p.n,
				 .K = p.K, .cb = p.cb };
	/* A part cut across the inputs is a copy of ours: copied. */
	rc = tf_cuda_weight_get(h, prefix, p.trellis, p.trellis_bytes, !owned, &l->trellis);
	e = rc ? cudaSuccess
	       : tf_cuda_upload((void **)&l->suh, p.suh, (size_t)l->k * sizeof(float));
	if (e == cudaSuccess)
		e = tf_cuda_upload((void **)&l->svh, p.svh, (size_t)l->n * sizeof(float));
	if (e == cudaSuccess && p.bias)
		e = tf_cuda_upload((void **)&l->bias, p.bias, (size_t)l->n * sizeof(float));
	*info = tf_exl3_parts_info(&p, in, out);
	free(owned);
	tf_exl3_parts_free(&p);
	if (!rc)
		rc = cuda_status(h, e, prefix);
	if (rc) {
		exl3_cuda_close(l);
		return rc;
	}
	/* A device copy is all forward() reads. */
	if (!tf_cuda_weight_mapped(&l->trellis))
		tf_lin_release(h, prefix, "trellis");
	*lin = l;
	return TF_OK;
}

static int exl3_cuda_open(const tf_host *h, const char *prefix, int64_t in,
			  int64_t out, void **lin, tf_lin_info *info)
{
	return exl3_cuda_open_as(h, prefix, in, out, NULL, lin, info);
}

static int exl3_cuda_open_part(const tf_host *h, const char *prefix, int64_t in,
			       int64_t out, const tf_lin_part *part, void **lin,
			       tf_lin_info *info)
{
	return exl3_cuda_open_as(h, prefix, in, out, part, lin, info);
}

static int exl3_cuda_forward(void *lin, const float *x, int64_t rows, float *y)
{
	const tf_exl3_cuda_lin *l = lin;
	const tf_host *h = l->h;
	cudaStream_t st = tf_backend_stream(h->backend, h->backend_ctx);
	float *xh = NULL, *yh;
	cudaError_t e;

	if (rows <= 0)
		return rows ? h->error(h, TF_ERR_INVALID, "exl3-cuda: %lld rows", (long long)rows)
			    : TF_OK;
	e = cudaMallocAsync((void **)&xh, (size_t)rows * (size_t)(l->k + l->n) * sizeof(float), st);
	if (e == cudaSuccess) {
		yh = xh + rows * l->k;
		e = tf_exl3_cuda_input(st, x, rows, l->in, l->k, l->suh, xh);
	}
	if (e == cudaSuccess)
		e = (rows <= TF_EXL3_CUDA_GEMV_ROWS ? tf_exl3_cuda_gemv : tf_exl3_cuda_gemm)(
			st, l->trellis.dev, l->k, l->n, l->K, l->cb, xh, rows, yh);
	if (e == cudaSuccess)
		e = tf_exl3_cuda_output(st, yh, rows, l->n, l->out, l->svh, l->bias, y);
	if (xh)
		cudaFreeAsync(xh, st);
	return cuda_status(h, e, "forward");
}

/* Only on backend-cuda: the activations are in its memory. */
static int exl3_cuda_probe(const tf_host *h, const char **reason)
{
	return tf_cuda_plugin_probe(h, reason) ? TF_CUDA_PLUGIN_SCORE(2) : 0;
}

const tf_plugin_quant tf_exl3_cuda_lin_ops = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, TF_CUDA_PLUGIN_NAME("exl3-cuda"),
				"0.1.0",
				"EXL3 trellis linear on CUDA: fused decode GEMV (1-8 rows), decode-once WMMA GEMM above",
				exl3_cuda_probe),
	.match = tf_exl3_match,
	.open = exl3_cuda_open,
	.close = exl3_cuda_close,
	.forward = exl3_cuda_forward,
	.open_part = exl3_cuda_open_part,
};
