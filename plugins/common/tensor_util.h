/*
 * tensor_util.h - small helpers the layer plugins share, header-only.
 *
 * Plugins link against nothing from the core, so what two plugins both need
 * (reading a small weight vector whatever its stored dtype, checking a
 * tensor's shape against the config, naming a tensor under a prefix, the
 * scalar activations) lives here as static inline functions.
 *
 * Every function that can fail records the detail through host->error,
 * naming the tensor and the expected shape, and returns the tf_status.
 */
#ifndef TF_PLUGIN_TENSOR_UTIL_H
#define TF_PLUGIN_TENSOR_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/backend.h"
#include "tf/plugin.h"
#include "tf/quant.h"

/* Longest tensor name we build ("model.layers.<n>.attention.q_a_layernorm.weight"). */
#define TF_TU_NAME_MAX 256

static inline float tf_tu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float tf_tu_silu(float x) { return x / (1.0f + expf(-x)); }

/* torch softplus (beta 1, threshold 20): linear above the threshold, where
 * log1p(exp(x)) == x in float anyway and exp would only risk overflow. */
static inline float tf_tu_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* "<prefix>.<leaf>" into buf; TF_ERR_RANGE when it does not fit. */
static inline int tf_tu_name(const tf_host *h, char *buf, const char *prefix,
			     const char *leaf)
{
	int n = snprintf(buf, TF_TU_NAME_MAX, "%s.%s", prefix, leaf);
	if (n < 0 || n >= TF_TU_NAME_MAX)
		return h->error(h, TF_ERR_RANGE, "%s.%s: tensor name too long", prefix, leaf);
	return TF_OK;
}

/* "[a, b, c]" for error messages. */
static inline const char *tf_tu_shape_str(char *buf, size_t len, int ndim,
					  const int64_t *shape)
{
	size_t off = 0;
	off += (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < ndim && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "",
					(long long)shape[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
	return buf;
}

/* Shapes equal once size-1 dims are dropped from both: checkpoints store the
 * same vector as [H] (Ling) or [1, 1, H, 1] (Kimi), a conv weight as [P, 1, W]. */
static inline int tf_tu_shape_matches(const tf_tensor *t, int ndim, const int64_t *shape)
{
	int i = 0, j = 0;
	for (;;) {
		while (i < t->ndim && t->shape[i] == 1)
			i++;
		while (j < ndim && shape[j] == 1)
			j++;
		if (i == t->ndim || j == ndim)
			return i == t->ndim && j == ndim;
		if (t->shape[i++] != shape[j++])
			return 0;
	}
}

/*
 * Read the tensor `name` into a new float32 array (free()), converting from
 * F32, F16 or BF16.  The tensor must have `shape` up to size-1 dims; a
 * missing tensor, another dtype or another shape fails naming the tensor.
 */
static inline int tf_tu_load_f32(const tf_host *h, const char *name, int ndim,
				 const int64_t *shape, float **out)
{
	char want[96], got[96];
	tf_tensor t;
	*out = NULL;
	if (h->weight_get(h, name, &t) != TF_OK)
		return h->error(h, TF_ERR_NOT_FOUND, "%s: tensor missing from the checkpoint",
				name);
	if (!tf_tu_shape_matches(&t, ndim, shape))
		return h->error(h, TF_ERR_FORMAT, "%s: shape %s, config.json expects %s", name,
				tf_tu_shape_str(got, sizeof(got), t.ndim, t.shape),
				tf_tu_shape_str(want, sizeof(want), ndim, shape));
	if (t.dtype != TF_DTYPE_F32 && t.dtype != TF_DTYPE_F16 && t.dtype != TF_DTYPE_BF16)
		return h->error(h, TF_ERR_FORMAT, "%s: dtype %s, expected F32, F16 or BF16",
				name, tf_dtype_name(t.dtype));

	int64_t n = tf_tensor_numel(&t);
	float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
	if (!v)
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory for %lld floats", name,
				(long long)n);
	/* Byte-wise reads: the mapped data need not be aligned for the type. */
	const unsigned char *p = t.data;
	for (int64_t i = 0; i < n; i++) {
		if (t.dtype == TF_DTYPE_F32) {
			memcpy(&v[i], p + 4 * i, 4);
		} else {
			uint16_t u;
			memcpy(&u, p + 2 * i, 2);
			v[i] = t.dtype == TF_DTYPE_BF16 ? tf_bf16_to_f32(u) : tf_f16_to_f32(u);
		}
	}
	*out = v;
	return TF_OK;
}

/* tf_tu_load_f32 of "<prefix>.<leaf>". */
static inline int tf_tu_load_leaf_f32(const tf_host *h, const char *prefix,
				      const char *leaf, int ndim,
				      const int64_t *shape, float **out)
{
	char name[TF_TU_NAME_MAX];
	int rc = tf_tu_name(h, name, prefix, leaf);
	return rc ? rc : tf_tu_load_f32(h, name, ndim, shape, out);
}

/* Open the linear "<prefix>.<leaf>" as in -> out features.  The quant plugin
 * names the tensor when it fails; `keys` says which config.json keys give
 * in and out ("in hidden_size, out num_experts"), added to a malformed
 * tensor's message where the host can (ABI 1.3).  A failed open leaves
 * *lin zeroed so that tf_tu_lin_close may run on it. */
static inline int tf_tu_lin_open(const tf_host *h, const char *prefix,
				 const char *leaf, int64_t in, int64_t out,
				 const char *keys, tf_lin *lin)
{
	char name[TF_TU_NAME_MAX];
	int rc = tf_tu_name(h, name, prefix, leaf);
	if (!rc)
		rc = h->lin_open(h, name, in, out, lin);
	if (rc == TF_ERR_FORMAT && TF_HAS_SLOT(h, tf_host, error_note) && h->error_note)
		rc = h->error_note(h, rc, "config.json: %s", keys);
	if (rc)
		memset(lin, 0, sizeof(*lin));
	return rc;
}

/*
 * Tensor parallelism: this rank's share [*lo, *hi) of `total` units
 * (heads, intermediate features), in rank order.  Every rank gets the same
 * count; a total the ranks cannot share evenly fails naming `what` (the
 * tensor or layer) and `key` (the config.json key behind the total).  One
 * rank holds it all.
 */
static inline int tf_tu_shard(const tf_host *h, int64_t total, const char *what,
			      const char *key, int64_t *lo, int64_t *hi)
{
	int size = h->tp_size > 1 ? h->tp_size : 1, rank = size > 1 ? h->tp_rank : 0;
	if (total % size)
		return h->error(h, TF_ERR_UNSUPPORTED,
				"%s: %s = %lld does not split evenly over [tp] size %d",
				what, key, (long long)total, size);
	*lo = total / size * rank;
	*hi = total / size * (rank + 1);
	return TF_OK;
}

/* tf_tu_lin_open of this rank's part: the whole with one rank (or the
 * part [0, whole)), else host->lin_open_part. */
static inline int tf_tu_lin_open_part(const tf_host *h, const char *prefix,
				      const char *leaf, int64_t in, int64_t out,
				      const char *keys, const tf_lin_part *part, tf_lin *lin)
{
	int64_t whole = part->axis == TF_LIN_PART_OUT ? out : in;
	if (part->lo == 0 && part->hi == whole)
		return tf_tu_lin_open(h, prefix, leaf, in, out, keys, lin);
	char name[TF_TU_NAME_MAX];
	int rc = tf_tu_name(h, name, prefix, leaf);
	if (!rc && !(TF_HAS_SLOT(h, tf_host, lin_open_part) && h->lin_open_part))
		rc = h->error(h, TF_ERR_UNSUPPORTED, "%s: the host cannot open part of a linear",
			      name);
	if (!rc)
		rc = h->lin_open_part(h, name, in, out, part, lin);
	if (rc == TF_ERR_FORMAT && TF_HAS_SLOT(h, tf_host, error_note) && h->error_note)
		rc = h->error_note(h, rc, "config.json: %s", keys);
	if (rc)
		memset(lin, 0, sizeof(*lin));
	return rc;
}

/* Keep rows [lo, hi) of a float array of `width` floats per row, in place. */
static inline void tf_tu_keep_rows(float *v, int64_t width, int64_t lo, int64_t hi)
{
	memmove(v, v + lo * width, (size_t)((hi - lo) * width) * sizeof(float));
}

/* Close a linear that may never have been opened (cleanup paths). */
static inline void tf_tu_lin_close(const tf_host *h, tf_lin *lin)
{
	if (lin->ops)
		h->lin_close(h, lin);
	lin->ops = NULL;
}

/* Items per parallel_for chunk so that a chunk is worth waking a worker
 * for (~64K flops; less costs more in hand-off than it saves). */
static inline int64_t tf_tu_grain(int64_t flops_per_item)
{
	return flops_per_item >= 65536 ? 1 : 65536 / (flops_per_item > 0 ? flops_per_item : 1);
}

/* An attention layer holding `len` tokens of a `max_ctx` context takes n
 * more; else TF_ERR_RANGE naming the layer and the INI key that sets it. */
static inline int tf_tu_check_room(const tf_host *h, int layer, const char *kind,
				   int64_t n, int64_t len, int64_t max_ctx)
{
	if (n <= max_ctx - len)
		return TF_OK;
	return h->error(h, TF_ERR_RANGE,
			"layer %d (%s): %lld tokens after %lld exceed the context of %lld ([runtime] context)",
			layer, kind, (long long)n, (long long)len, (long long)max_ctx);
}

/* Layer plugins compute on the host: they need a backend whose activations
 * live in host memory, which is what parallel_for marks. */
static inline int tf_tu_probe_host_backend(const tf_host *h, const char **reason)
{
	if (!h->backend || !h->backend->parallel_for || !h->backend->n_threads) {
		*reason = "needs a host-memory backend (backend-cpu)";
		return 0;
	}
	return 1;
}

#endif /* TF_PLUGIN_TENSOR_UTIL_H */
