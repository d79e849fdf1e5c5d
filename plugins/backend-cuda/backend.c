/*
 * backend.c - the CUDA backend: device memory, one stream, every op of
 * tf/backend.h (kernels.cu; RoPE: cuda-common's tf_cuda_rope.cu) and the
 * token sampler (sample.cu).  A step between graph_begin and graph_end is
 * captured from the stream and run as one CUDA graph (graph.c).  On a
 * device sharing the CPU's memory, map lets device plugins read weights
 * in host memory (unified.c).
 *
 * Every call queues work on the instance's stream and returns; sync()
 * waits for it.  The `stream` slot hands that stream to device plugins
 * (kda-cuda, plain-cuda), which queue their kernels on it too.  Ops have
 * no status to return, so the first failure is kept, logged, and returned
 * by the next sync().  download() and sample() wait: the caller reads
 * what they return.
 *
 * Pointers are device memory from alloc(), except: token ids and
 * sample()'s (seq, pos) and tokens are host memory, and an embedding
 * table, a conversion's source and rope's positions and frequencies may
 * be either (the mapped checkpoint and mla.c's positions are host memory:
 * they are then copied to the device first).
 *
 * The CUDA runtime is linked statically, so this .so loads on a machine
 * without libcudart; probe() then reports "no CUDA device".
 */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "kernels.h"
#include "tf_cuda_rope.h"
#include "tf_cuda_plugin.h"
#include "tf/version.h"

void cuda_fail(tf_cuda *c, int status, const char *op, const char *why)
{
	const tf_host *h = c->host;
	h->log(h, TF_LOG_ERROR, "backend-cuda", "%s: %s", op, why);
	if (!c->status)
		c->status = h->error(h, status, "backend-cuda: %s: %s", op, why);
}

int cuda_check(tf_cuda *c, cudaError_t e, const char *op)
{
	if (e == cudaSuccess)
		return 0;
	cuda_fail(c, TF_ERR_DEVICE, op, cudaGetErrorString(e));
	return 1;
}

void cuda_enter(tf_cuda *c)
{
	cudaSetDevice(c->device);
}

/* While a step is recorded, nothing queued has run and the host must not
 * wait for the stream: `op` is refused. */
static int cuda_recording(tf_cuda *c, const char *op)
{
	if (!c->graph.recording)
		return TF_OK;
	return c->host->error(c->host, TF_ERR_INTERNAL,
			      "backend-cuda: %s while a step is recorded as a graph "
			      "(between graph_begin and graph_end)", op);
}

static int cuda_probe(const tf_host *h, const char **reason)
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
		cudaGetLastError();
		*reason = "no CUDA device";
		return 0;
	}
	return TF_CUDA_PLUGIN_SCORE(200);
}

/* The device is the tensor-parallel rank modulo the devices present, so
 * ranks sharing a host each get their own GPU. */
static int cuda_init(const tf_host *h, void **ctx)
{
	int count = 0;
	cudaError_t e;
	tf_cuda *c;

	*ctx = NULL;
	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count < 1)
		return h->error(h, TF_ERR_DEVICE, "backend-cuda: no CUDA device (%s)",
				cudaGetErrorString(e));
	c = calloc(1, sizeof(*c));
	if (!c)
		return h->error(h, TF_ERR_NOMEM, "backend-cuda: out of memory");
	c->host = h;
	c->device = h->tp_rank % count;
	e = cudaSetDevice(c->device);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		free(c);
		return h->error(h, TF_ERR_DEVICE, "backend-cuda: device %d: %s",
				h->tp_rank % count, cudaGetErrorString(e));
	}
	h->log(h, TF_LOG_INFO, "backend-cuda", "device %d of %d", c->device, count);
	int rc = cuda_unified_init(c);
	if (rc) {
		cudaStreamDestroy(c->stream);
		free(c);
		return rc;
	}
	*ctx = c;
	return TF_OK;
}

/* While recording, nothing is in flight that a free could race: the
 * stream was drained at graph_begin and frees wait for the step. */
static void cuda_quiesce(void *ctx)
{
	tf_cuda *c = ctx;
	if (c->graph.recording)
		return;
	cuda_enter(c);
	if (cudaStreamSynchronize(c->stream) == cudaSuccess)
		cuda_graph_settle(c);
}

static void cuda_fini(void *ctx)
{
	tf_cuda *c = ctx;
	if (!c)
		return;
	cuda_enter(c);
	cudaStreamSynchronize(c->stream);
	cuda_graph_fini(c);
	cuda_unified_fini(c);
	cudaFree(c->ids_dev);
	cudaFree(c->rows_dev);
	cudaFreeHost(c->staging);
	cudaFree(c->rope_dev);
	cudaFree(c->draw_dev);
	cudaStreamDestroy(c->stream);
	free(c);
}

/* cudaMalloc aligns to at least 256 bytes. */
static void *cuda_alloc(void *ctx, size_t bytes)
{
	tf_cuda *c = ctx;
	void *p = NULL;
	cuda_enter(c);
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	return p;
}

static void cuda_free(void *ctx, void *p)
{
	tf_cuda *c = ctx;
	cuda_enter(c);
	cuda_release(c, p, false);
}

/* Ordered on the stream; the source may be reused on return (while
 * recording, the graph copies from a pinned copy of it). */
static int cuda_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
	tf_cuda *c = ctx;
	cuda_enter(c);
	if (c->graph.recording && !(src = cuda_graph_stage(c, src, bytes)))
		return c->host->error(c->host, TF_ERR_NOMEM,
				      "backend-cuda: upload of %zu bytes: no pinned memory to record it",
				      bytes);
	cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream);
	if (e != cudaSuccess)
		return c->host->error(c->host, TF_ERR_DEVICE, "backend-cuda: upload of %zu bytes: %s",
				      bytes, cudaGetErrorString(e));
	return TF_OK;
}

/* Returns once the bytes are in dst: the caller is about to read them. */
static int cuda_download(void *ctx, void *dst, const void *src, size_t bytes)
{
	tf_cuda *c = ctx;
	int rc = cuda_recording(c, "download");
	if (rc)
		return rc;
	cuda_enter(c);
	cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->stream);
	if (e != cudaSuccess)
		return c->host->error(c->host, TF_ERR_DEVICE, "backend-cuda: download of %zu bytes: %s",
				      bytes, cudaGetErrorString(e));
	cuda_graph_settle(c);
	return TF_OK;
}

static int cuda_sync(void *ctx)
{
	tf_cuda *c = ctx;
	int rc = cuda_recording(c, "sync");
	if (rc)
		return rc;
	cuda_enter(c);
	if (!cuda_check(c, cudaStreamSynchronize(c->stream), "sync"))
		cuda_graph_settle(c);
	int status = c->status;
	c->status = TF_OK;
	return status;
}

/* Device plugins queue on this stream, behind the ops and copies above. */
static void *cuda_stream(void *ctx)
{
	return ((tf_cuda *)ctx)->stream;
}

static void cuda_rmsnorm(void *ctx, float *y, const float *x, const float *w,
			 int64_t rows, int64_t dim, float eps)
{
	tf_cuda *c = ctx;
	cuda_enter(c);
	cuda_check(c, tf_cuda_rmsnorm(c->stream, y, x, w, rows, dim, eps), "rmsnorm");
}

static void cuda_add(void *ctx, float *y, const float *a, const float *b, int64_t n)
{
	tf_cuda *c = ctx;
	cuda_enter(c);
	cuda_check(c, tf_cuda_add(c->stream, y, a, b, n), "add");
}

static void cuda_swiglu(void *ctx, float *y, const float *gate, const float *up,
			int64_t n, float limit)
{
	tf_cuda *c = ctx;
	cuda_enter(c);
	cuda_check(c, tf_cuda_swiglu(c->stream, y, gate, up, n, limit), "swiglu");
}

/* Grow a scratch buffer (device, or pinned host) to `need` bytes for op.
 * Work queued earlier may still use the old one, so wait for it first
 * (while recording, the old one is released once the step has run). */
static int cuda_grow(tf_cuda *c, void **p, size_t *cap, size_t need, int pinned,
		     const char *op)
{
	if (need <= *cap)
		return 0;
	if (!c->graph.recording && cuda_check(c, cudaStreamSynchronize(c->stream), op))
		return 1;
	cuda_release(c, *p, pinned);
	*p = NULL;
	*cap = 0;
	if (cuda_check(c, pinned ? cudaMallocHost(p, need) : cudaMalloc(p, need), op))
		return 1;
	*cap = need;
	return 0;
}

/* The kernels' name for a float dtype; false for any other. */
static bool cuda_elem(tf_dtype dtype, tf_cuda_elem *elem)
{
	switch (dtype) {
	case TF_DTYPE_F32: *elem = TF_CUDA_F32; return true;
	case TF_DTYPE_F16: *elem = TF_CUDA_F16; return true;
	case TF_DTYPE_BF16: *elem = TF_CUDA_BF16; return true;
	default: return false;
	}
}

/* The device's address of [p, p + bytes), or NULL when it is plain host
 * memory, or host memory whose first pages only were registered for the
 * weights mapped beside it (unified.c). */
static const void *cuda_device_view(tf_cuda *c, const void *p, size_t bytes)
{
	struct cudaPointerAttributes attr;
	if (!cuda_unified_covers(c, p, bytes))
		return NULL;
	if (cudaPointerGetAttributes(&attr, p) == cudaSuccess &&
	    attr.type != cudaMemoryTypeUnregistered && attr.devicePointer)
		return attr.devicePointer;
	cudaGetLastError();             /* plain host memory is not an error */
	return NULL;
}

/* p as the device reads it: p itself when it is device-accessible, else
 * its bytes copied (on the stream) to *scratch + at, grown as needed;
 * NULL on failure, recorded for op. */
static const void *cuda_on_device(tf_cuda *c, const void *p, size_t bytes, void **scratch,
				  size_t *cap, size_t at, size_t need, const char *op)
{
	const void *d = cuda_device_view(c, p, bytes);
	if (d)
		return d;
	/* A recorded step's graph reads pinned copies only. */
	if (c->graph.recording && !(p = cuda_graph_stage(c, p, bytes))) {
		cuda_fail(c, TF_ERR_NOMEM, op, "no pinned memory to record a host source");
		return NULL;
	}
	if (cuda_grow(c, scratch, cap, need, 0, op) ||
	    cuda_check(c, cudaMemcpyAsync((char *)*scratch + at, p, bytes, cudaMemcpyHostToDevice,
					  c->stream), op))
		return NULL;
	return (char *)*scratch + at;
}

/* The positions and frequencies are small: copied per call when they are
 * host memory (backend-cpu's callers pass host arrays). */
static void cuda_rope(void *ctx, float *x, int64_t rows, int64_t n_heads, int64_t row_stride,
		      int64_t head_stride, int64_t rot_dim, const int32_t *pos,
		      const float *inv_freq, float attn_factor, int interleaved)
{
	tf_cuda *c = ctx;
	if (rows <= 0 || n_heads <= 0 || rot_dim < 2)
		return;
	size_t pb = ((size_t)rows * sizeof(int32_t) + 255) & ~(size_t)255;
	size_t fb = (size_t)(rot_dim / 2) * sizeof(float);
	cuda_enter(c);
	const void *dpos = cuda_on_device(c, pos, (size_t)rows * sizeof(int32_t), &c->rope_dev,
					  &c->rope_cap, 0, pb + fb, "rope");
	const void *dfreq = dpos ? cuda_on_device(c, inv_freq, fb, &c->rope_dev, &c->rope_cap, pb,
						  pb + fb, "rope") : NULL;
	if (dfreq)
		cuda_check(c, tf_cuda_rope(c->stream, x, rows, n_heads, row_stride, head_stride,
					   rot_dim, dpos, dfreq, attn_factor, interleaved), "rope");
}

static void cuda_softmax(void *ctx, float *x, int64_t rows, int64_t n)
{
	tf_cuda *c = ctx;
	cuda_enter(c);
	cuda_check(c, tf_cuda_softmax(c->stream, x, rows, n), "softmax");
}

static void cuda_argmax(void *ctx, int32_t *out, const float *x, int64_t rows, int64_t n)
{
	tf_cuda *c = ctx;
	cuda_enter(c);
	cuda_check(c, tf_cuda_argmax(c->stream, out, x, rows, n), "argmax");
}

/* What the kernels cannot reproduce is TF_ERR_UNSUPPORTED with nothing
 * queued and nothing recorded: the caller samples on the host instead.
 * A top_k of the whole vocabulary is among it: core's sampler then sums
 * the softmax in token order, the kernels in candidate order. */
static int cuda_sample(void *ctx, const tf_sampler_params *par, const float *logits,
		       int64_t rows, int64_t n_vocab, int64_t ld, const uint64_t *seq,
		       const uint64_t *pos, int32_t *token)
{
	tf_cuda *c = ctx;
	const tf_host *h = c->host;
	const tf_cuda_sample_par kp = { .temperature = par->temperature, .top_p = par->top_p,
					.min_p = par->min_p, .top_k = par->top_k,
					.seed = par->seed };
	bool draw = par->temperature > 0;

	if (par->repeat_penalty != 1.0f || par->presence_penalty != 0.0f ||
	    (draw && (par->top_k < 1 || par->top_k > TF_CUDA_SAMPLE_MAX_K ||
		      par->top_k >= n_vocab)) ||
	    rows > 65535 || n_vocab > 0x7fffffff)
		return TF_ERR_UNSUPPORTED;
	if (rows <= 0)
		return TF_OK;
	size_t ids = (size_t)rows * sizeof(uint64_t);
	size_t at_tok = 2 * ids, at_scr = (at_tok + (size_t)rows * sizeof(int32_t) + 255) &
					  ~(size_t)255;
	cuda_enter(c);
	if (cuda_grow(c, &c->draw_dev, &c->draw_cap, at_scr + tf_cuda_sample_scratch_bytes(rows),
		      0, "sample"))
		goto fail;
	char *d = c->draw_dev;
	cudaError_t e = cudaMemcpyAsync(d, seq, ids, cudaMemcpyHostToDevice, c->stream);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(d + ids, pos, ids, cudaMemcpyHostToDevice, c->stream);
	if (e == cudaSuccess)
		e = (cudaError_t)tf_cuda_sample(c->stream, &kp, logits, rows, (int)n_vocab, ld,
						(const uint64_t *)d, (const uint64_t *)(d + ids),
						d + at_scr, (int32_t *)(d + at_tok));
	if (e == cudaErrorInvalidValue)
		return h->error(h, TF_ERR_INVALID,
				"backend-cuda: sample: %lld rows of %lld (stride %lld), temperature %g, top_p %g, min_p %g",
				(long long)rows, (long long)n_vocab, (long long)ld,
				(double)par->temperature, (double)par->top_p, (double)par->min_p);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(token, d + at_tok, (size_t)rows * sizeof(int32_t),
				    cudaMemcpyDeviceToHost, c->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->stream);
	if (!cuda_check(c, e, "sample"))
		return TF_OK;
fail:;
	int rc = c->status;     /* returned here, not at sync */
	c->status = TF_OK;
	return rc;
}

static void cuda_embed(void *ctx, float *y, const void *table, tf_dtype dtype,
		       int64_t dim, const int32_t *ids, int64_t n)
{
	tf_cuda *c = ctx;
	size_t row = (size_t)dim * tf_dtype_size(dtype);
	tf_cuda_elem elem;

	if (n <= 0 || dim <= 0)
		return;
	if (!cuda_elem(dtype, &elem)) {
		cuda_fail(c, TF_ERR_UNSUPPORTED, "embed", "table dtype is not F32, F16 or BF16");
		return;
	}
	/* As in backend-cpu: the table holds at least vocab_size rows. */
	int64_t vocab = c->host->model ? c->host->model->vocab_size : 0;
	for (int64_t i = 0; i < n; i++)
		if (ids[i] < 0 || (vocab > 0 && ids[i] >= vocab)) {
			cuda_fail(c, TF_ERR_INVALID, "embed", "token id outside the vocabulary");
			return;
		}
	cuda_enter(c);
	int64_t held = vocab;   /* the rows the device may read */
	for (int64_t i = 0; i < n && vocab <= 0; i++)
		held = ids[i] >= held ? ids[i] + 1 : held;
	const void *dtable = cuda_device_view(c, table, (size_t)held * row);
	if (dtable) {
		/* The device can read the table: gather there. */
		const void *src = ids;
		if (c->graph.recording &&
		    !(src = cuda_graph_stage(c, ids, (size_t)n * sizeof(int32_t)))) {
			cuda_fail(c, TF_ERR_NOMEM, "embed", "no pinned memory to record the ids");
			return;
		}
		if (cuda_grow(c, &c->ids_dev, &c->ids_cap, (size_t)n * sizeof(int32_t), 0,
			      "embed") ||
		    cuda_check(c, cudaMemcpyAsync(c->ids_dev, src, (size_t)n * sizeof(int32_t),
						  cudaMemcpyHostToDevice, c->stream), "embed"))
			return;
		cuda_check(c, tf_cuda_embed(c->stream, y, dtable, elem, dim, c->ids_dev, n), "embed");
		return;
	}

	/* A host table: gather the rows into pinned memory (after the last
	 * copy out of it finished; while recording, memory of the step's
	 * own), send them, widen on the device. */
	char *rows = NULL;
	if (c->graph.recording) {
		if (!(rows = cuda_graph_stage(c, NULL, (size_t)n * row))) {
			cuda_fail(c, TF_ERR_NOMEM, "embed", "no pinned memory to record the rows");
			return;
		}
	} else if (cuda_grow(c, &c->staging, &c->staging_cap, (size_t)n * row, 1, "embed") ||
		   cuda_check(c, cudaStreamSynchronize(c->stream), "embed")) {
		return;
	} else {
		rows = c->staging;
	}
	if (cuda_grow(c, &c->rows_dev, &c->rows_cap, (size_t)n * row, 0, "embed"))
		return;
	for (int64_t i = 0; i < n; i++)
		memcpy(rows + (size_t)i * row, (const char *)table + (size_t)ids[i] * row, row);
	if (cuda_check(c, cudaMemcpyAsync(c->rows_dev, rows, (size_t)n * row,
					  cudaMemcpyHostToDevice, c->stream), "embed"))
		return;
	cuda_check(c, tf_cuda_embed(c->stream, y, c->rows_dev, elem, dim, NULL, n), "embed");
}

/* dst is device memory; src device or host memory (the engine converts
 * norm weights straight from the mapped checkpoint): a host source is
 * copied to the device first, so it may be reused on return. */
static int cuda_convert(void *ctx, void *dst, tf_dtype dst_type, const void *src,
			tf_dtype src_type, int64_t n)
{
	tf_cuda *c = ctx;
	const tf_host *h = c->host;
	tf_cuda_elem de, se;
	size_t sbytes = (size_t)(n > 0 ? n : 0) * tf_dtype_size(src_type);

	if (!cuda_elem(dst_type, &de) || !cuda_elem(src_type, &se))
		return h->error(h, TF_ERR_UNSUPPORTED,
				"backend-cuda: convert %s -> %s: only F32, F16 and BF16",
				tf_dtype_name(src_type), tf_dtype_name(dst_type));
	if (n < 0)
		return h->error(h, TF_ERR_INVALID,
				"backend-cuda: convert %s -> %s: negative count %lld",
				tf_dtype_name(src_type), tf_dtype_name(dst_type), (long long)n);
	if (!n)
		return TF_OK;
	cuda_enter(c);
	const void *dsrc = cuda_device_view(c, src, sbytes);
	if (!dsrc && c->graph.recording)        /* the engine converts at load only */
		return h->error(h, TF_ERR_UNSUPPORTED,
				"backend-cuda: convert %s -> %s from host memory while a step is "
				"recorded as a graph", tf_dtype_name(src_type), tf_dtype_name(dst_type));
	cudaError_t e = cudaSuccess;
	if (src_type == dst_type)
		e = cudaMemcpyAsync(dst, src, sbytes, dsrc ? cudaMemcpyDeviceToDevice :
			    cudaMemcpyHostToDevice, c->stream);
	else {
		/* One thread's element may overlap another's: refused, as on
		 * backend-cpu. */
		const char *d = dst, *s = dsrc;
		if (s && d < s + sbytes && s < d + (size_t)n * tf_dtype_size(dst_type))
			return h->error(h, TF_ERR_INVALID,
					"backend-cuda: convert %s -> %s: source and destination overlap",
					tf_dtype_name(src_type), tf_dtype_name(dst_type));
		if (!dsrc) {
			if (cuda_grow(c, &c->rows_dev, &c->rows_cap, sbytes, 0, "convert")) {
				int rc = c->status;     /* returned here, not at sync */
				c->status = TF_OK;
				return rc;
			}
			e = cudaMemcpyAsync(c->rows_dev, src, sbytes, cudaMemcpyHostToDevice,
					    c->stream);
			dsrc = c->rows_dev;
		}
		if (e == cudaSuccess)
			e = (cudaError_t)tf_cuda_convert(c->stream, dst, de, dsrc, se, n);
	}
	if (e != cudaSuccess)
		return h->error(h, TF_ERR_DEVICE, "backend-cuda: convert %s -> %s of %lld: %s",
				tf_dtype_name(src_type), tf_dtype_name(dst_type), (long long)n,
				cudaGetErrorString(e));
	return TF_OK;
}

static const tf_backend cuda_backend = {
	.hdr = TF_PLUGIN_HEADER(tf_backend, TF_KIND_BACKEND, TF_CUDA_PLUGIN_NAME("cuda"),
				TF_VERSION_STRING,
				"CUDA device memory, one stream, every op and the token sampler as "
				"kernels, weights read in place on unified memory",
				cuda_probe),
	.init = cuda_init,
	.quiesce = cuda_quiesce,
	.fini = cuda_fini,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.upload = cuda_upload,
	.download = cuda_download,
	.sync = cuda_sync,
	.rmsnorm = cuda_rmsnorm,
	.add = cuda_add,
	.swiglu = cuda_swiglu,
	.rope = cuda_rope,
	.softmax = cuda_softmax,
	.embed = cuda_embed,
	.convert = cuda_convert,
	.argmax = cuda_argmax,
	.stream = cuda_stream,
	.sample = cuda_sample,
	.graph_begin = cuda_graph_begin,
	.graph_end = cuda_graph_end,
	.map = cuda_unified_map,
	.unmap = cuda_unified_unmap,
};

TF_EXPORT const tf_backend *tf_plugin_backend_v1(unsigned index)
{
	return index == 0 ? &cuda_backend : NULL;
}
