/*
 * tf_cuda_weight.h - a weight as a device plugin's kernels read it: the
 * host's bytes in place where the backend maps host memory (its map slot,
 * ABI 1.11: a device sharing the CPU's memory, `[runtime]
 * unified_memory`), else a copy in device memory, as before.  On GB10 the
 * copy would hold the weight twice in one DRAM.
 *
 *     tf_cuda_weight w;
 *     rc = tf_cuda_weight_get(h, prefix, view, bytes, true, &w);  // w.dev
 *     ...
 *     tf_cuda_weight_drop(h, &w);
 *
 * A mapped weight reads the host bytes until it is dropped: they must
 * stay, unchanged (the checkpoint's view, or a buffer the plugin keeps),
 * so the plugin does not release its tensor (tf_cuda_weight_mapped).
 */
#ifndef TF_CUDA_WEIGHT_H
#define TF_CUDA_WEIGHT_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "tf/backend.h"

typedef struct tf_cuda_weight {
	const void *dev;                /* what kernels read; NULL for 0 bytes */
	const void *host;               /* mapped: the host bytes; NULL: dev is cudaMalloc'd */
	size_t bytes;
} tf_cuda_weight;

/* A device copy of `bytes` at host in new cudaMalloc memory (*dst; free
 * it with cudaFree, also after a failed copy). */
static inline cudaError_t tf_cuda_upload(void **dst, const void *host, size_t bytes)
{
	cudaError_t e = cudaMalloc(dst, bytes);
	return e == cudaSuccess ? cudaMemcpy(*dst, host, bytes, cudaMemcpyHostToDevice) : e;
}

/* Whether the backend maps host memory (a map of 0 bytes asks). */
static inline bool tf_cuda_weight_maps(const tf_host *h)
{
	const void *dev;
	return tf_backend_has_map(h->backend) &&
	       h->backend->map(h->backend_ctx, NULL, 0, &dev) == TF_OK;
}

/*
 * `bytes` at `host` for the device: mapped when `lasting` (the bytes stay
 * until the drop) and the backend maps, else copied into cudaMalloc
 * memory (host may go on return).  Failures name `what`.
 */
static inline int tf_cuda_weight_get(const tf_host *h, const char *what, const void *host,
				     size_t bytes, bool lasting, tf_cuda_weight *w)
{
	const tf_backend *be = h->backend;
	void *d = NULL;

	*w = (tf_cuda_weight){ .bytes = bytes };
	if (!bytes)
		return TF_OK;
	if (lasting && tf_backend_has_map(be)) {
		int rc = be->map(h->backend_ctx, host, bytes, &w->dev);
		if (!rc)
			w->host = host;
		if (rc != TF_ERR_UNSUPPORTED)
			return rc;
	}
	cudaError_t e = tf_cuda_upload(&d, host, bytes);
	if (e != cudaSuccess) {
		cudaFree(d);
		cudaGetLastError();
		return h->error(h, TF_ERR_DEVICE, "%s: %zu bytes to the device: %s", what, bytes,
				cudaGetErrorString(e));
	}
	w->dev = d;
	return TF_OK;
}

/* Whether the weight reads the host's bytes in place. */
static inline bool tf_cuda_weight_mapped(const tf_cuda_weight *w)
{
	return w->host != NULL;
}

/* Unmap or free; w is empty after (a second drop does nothing). */
static inline void tf_cuda_weight_drop(const tf_host *h, tf_cuda_weight *w)
{
	if (w->host)
		h->backend->unmap(h->backend_ctx, w->host, w->bytes);
	else
		cudaFree((void *)w->dev);
	*w = (tf_cuda_weight){ 0 };
}

#endif /* TF_CUDA_WEIGHT_H */
