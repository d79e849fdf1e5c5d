/*
 * tf/backend.h - the backend kind: memory, threads and the basic ops.
 *
 * A backend owns where activations live (host memory for backend-cpu,
 * device memory for backend-cuda) and the elementwise/norm/rope/softmax ops
 * the pipeline and the layer plugins share.  Activations are float32,
 * row-major, in memory from alloc(); weight tables (embeddings) are read
 * from the mapped checkpoint in their stored dtype.  A device sharing the
 * CPU's memory may read weights where they are (map, ABI 1.11).
 *
 * Every op has a plain reference in the CPU backend; fast paths (AVX2, NEON,
 * CUDA) are tested against it.
 */
#ifndef TF_BACKEND_H
#define TF_BACKEND_H

#include "tf/plugin.h"
#include "tf/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Work item for parallel_for: process [begin, end) on worker `worker`. */
typedef void (*tf_range_fn)(void *arg, int64_t begin, int64_t end, int worker);

typedef struct tf_backend {
	tf_plugin_header hdr;

	/* Lifecycle (required).  init reads [runtime] threads from the INI. */
	int (*init)(const tf_host *h, void **ctx);
	void (*quiesce)(void *ctx);     /* wait until no work is in flight */
	void (*fini)(void *ctx);

	/* Memory (required).  alloc returns 64-byte aligned memory or NULL. */
	void *(*alloc)(void *ctx, size_t bytes);
	void (*free)(void *ctx, void *p);
	int (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
	int (*download)(void *ctx, void *dst, const void *src, size_t bytes);
	int (*sync)(void *ctx);

	/* Host parallelism: split [0, n) into chunks of whole multiples of
	 * `grain` items (only the last may be shorter) over the worker threads
	 * and wait for all of them.  Workers are numbered 0..n_threads-1.
	 * NULL on device backends. */
	int (*n_threads)(void *ctx);
	void (*parallel_for)(void *ctx, int64_t n, int64_t grain, tf_range_fn fn,
			     void *arg);

	/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for each of `rows` rows
	 * of `dim`; y may alias x. */
	void (*rmsnorm)(void *ctx, float *y, const float *x, const float *w,
			int64_t rows, int64_t dim, float eps);
	/* y = a + b over n elements; y may alias a or b. */
	void (*add)(void *ctx, float *y, const float *a, const float *b, int64_t n);
	/* y = silu(gate) * up, or with limit > 0 the clamped form
	 * min(silu(gate), limit) * clamp(up, -limit, limit). */
	void (*swiglu)(void *ctx, float *y, const float *gate, const float *up,
		       int64_t n, float limit);
	/* Rotate the first rot_dim values of each head in place.  Row r, head
	 * h starts at x + r*row_stride + h*head_stride.  Pair j is (2j, 2j+1)
	 * when interleaved (GPT-J), else (j, j + rot_dim/2) (NeoX).  The angle
	 * is pos[r] * inv_freq[j]; cos and sin are scaled by attn_factor
	 * (YaRN's attention factor, 1 otherwise). */
	void (*rope)(void *ctx, float *x, int64_t rows, int64_t n_heads,
		     int64_t row_stride, int64_t head_stride, int64_t rot_dim,
		     const int32_t *pos, const float *inv_freq, float attn_factor,
		     int interleaved);
	/* In-place softmax over each of `rows` rows of n. */
	void (*softmax)(void *ctx, float *x, int64_t rows, int64_t n);
	/* y[i] = table[ids[i]] widened to float32; table is [vocab, dim]. */
	void (*embed)(void *ctx, float *y, const void *table, tf_dtype dtype,
		      int64_t dim, const int32_t *ids, int64_t n);
	/* Convert n elements between F32, F16 and BF16 (round to nearest even). */
	int (*convert)(void *ctx, void *dst, tf_dtype dst_type, const void *src,
		       tf_dtype src_type, int64_t n);
	/* out[r] = index of the largest of row r (the first on ties). */
	void (*argmax)(void *ctx, int32_t *out, const float *x, int64_t rows,
		       int64_t n);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;

	/* Since ABI 1.7, optional: the device stream every op and copy above
	 * is queued on (a cudaStream_t on backend-cuda), so device plugins
	 * queue their kernels behind them with no host wait, and a decode
	 * step can be captured as one graph.  NULL on host-memory backends;
	 * read it with tf_backend_stream. */
	void *(*stream)(void *ctx);

	/* Since ABI 1.9, optional: sampling where the logits live.  token[r]
	 * (host memory) for rows r of logits (backend memory, ld floats
	 * apart, the first n_vocab of each), as core's sampler picks with par
	 * at (seq[r], pos[r]) (host memory) and no history: NaN counts as
	 * -inf, and a row of only -inf gets -1.  Waits until the tokens are
	 * in token.  TF_ERR_UNSUPPORTED, with nothing queued or recorded, for
	 * parameters whose pick it cannot reproduce exactly (penalties, which
	 * need the history, always): the caller samples on the host then.
	 * Check it with tf_backend_can_sample. */
	int (*sample)(void *ctx, const tf_sampler_params *par, const float *logits,
		      int64_t rows, int64_t n_vocab, int64_t ld, const uint64_t *seq,
		      const uint64_t *pos, int32_t *token);

	/* Since ABI 1.10, optional (device backends): one step's work run as
	 * graphs.  After graph_begin, what is queued on the stream (the ops
	 * and copies above, the device plugins' launches) is recorded, not
	 * run, so nothing may wait for it before graph_end: download and sync
	 * fail, quiesce returns at once (nothing recorded has run), memory
	 * freed is released once the step has run, and host sources of
	 * uploads and embeds are copied aside for the graph to read.
	 * graph_end runs the recording as one graph, or drops it with
	 * run = TF_GRAPH_DROP (a step that failed part way).  A step that
	 * must wait for the device part way (a download, an all-reduce
	 * through the host) is recorded in parts: each part but the last
	 * ends with run = TF_GRAPH_PART, the last with TF_GRAPH_RUN, so the
	 * backend knows each part's place in its step.  An executable graph
	 * kept for that place (or, from backends older than parts, the last
	 * one) takes the part's parameters when both have the same nodes
	 * (*reused = 1), else one is built (*reused = 0).  A backend that
	 * predates parts treats TF_GRAPH_PART as TF_GRAPH_RUN (rebuilding
	 * more often).  Read with tf_backend_has_graph. */
	int (*graph_begin)(void *ctx);
	int (*graph_end)(void *ctx, int run, int *reused);

	/* Since ABI 1.11, optional (device backends): host memory the device
	 * reads in place, for a device that shares the CPU's memory (GB10's
	 * unified memory) where a copy would hold each weight twice.  map
	 * sets *dev to the device's address of [host, host + bytes): memory
	 * the caller keeps, unchanged, until its unmap(host, bytes), such as
	 * the mapped checkpoint's bytes or a host buffer it converted weights
	 * into.  The device only reads it.  Ranges may share pages and
	 * overlap; each map is undone by one unmap of the same range, before
	 * fini.  TF_ERR_UNSUPPORTED, recording no error, when this backend
	 * does not map (a discrete device, or the INI turned it off): the
	 * caller copies to the device instead.  A map of 0 bytes holds
	 * nothing and asks only that (TF_OK or TF_ERR_UNSUPPORTED).  Not while
	 * a step is recorded.  Read with tf_backend_has_map. */
	int (*map)(void *ctx, const void *host, size_t bytes, const void **dev);
	void (*unmap)(void *ctx, const void *host, size_t bytes);
} tf_backend;

/* graph_end's run: drop the recording, run it as the step's last (or
 * only) part, or run it as a part that a host wait and more of the same
 * step follow. */
enum { TF_GRAPH_DROP = 0, TF_GRAPH_RUN = 1, TF_GRAPH_PART = 2 };

/* The backend's device stream, or NULL when it has none (a host-memory
 * backend, or one built before ABI 1.7). */
static inline void *tf_backend_stream(const tf_backend *be, void *ctx)
{
	return be->hdr.struct_size >= offsetof(tf_backend, stream) + sizeof(be->stream) &&
	       be->stream ? be->stream(ctx) : NULL;
}

/* Whether the backend has the sample slot (ABI 1.9). */
static inline bool tf_backend_can_sample(const tf_backend *be)
{
	return be->hdr.struct_size >= offsetof(tf_backend, sample) + sizeof(be->sample) &&
	       be->sample;
}

/* Whether the backend records steps as graphs (ABI 1.10). */
static inline int tf_backend_has_graph(const tf_backend *be)
{
	return be->hdr.struct_size >= offsetof(tf_backend, graph_end) + sizeof(be->graph_end) &&
	       be->graph_begin && be->graph_end;
}

/* Whether the backend has the map and unmap slots (ABI 1.11); map may
 * still decline (TF_ERR_UNSUPPORTED). */
static inline int tf_backend_has_map(const tf_backend *be)
{
	return be->hdr.struct_size >= offsetof(tf_backend, unmap) + sizeof(be->unmap) &&
	       be->map && be->unmap;
}

/* Entry symbol. */
const tf_backend *tf_plugin_backend_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_BACKEND_H */
