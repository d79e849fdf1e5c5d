/* lin.c - helpers shared by the exl3 and plain linears (see lin.h). */
#include "lin.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"
#include "../common/tensor_util.h"

int tf_lin_threads(const tf_host *h)
{
	const tf_backend *be = h->backend;
	if (!be || !be->parallel_for || !be->n_threads)
		return 1;
	int n = be->n_threads(h->backend_ctx);
	return n > 0 ? n : 1;
}

void tf_lin_parallel(const tf_host *h, int64_t n, int64_t grain, int64_t flops,
		     tf_range_fn fn, void *arg)
{
	const tf_backend *be = h->backend;
	if (n <= 0)
		return;
	grain *= tf_tu_grain(grain * flops);
	if (!be || !be->parallel_for || n <= grain) {
		fn(arg, 0, n, 0);
		return;
	}
	be->parallel_for(h->backend_ctx, n, grain, fn, arg);
}

int tf_lin_tensor(const tf_host *h, const char *prefix, const char *suffix,
		  tf_tensor *t)
{
	char name[512];
	int len = snprintf(name, sizeof(name), "%s.%s", prefix, suffix);
	if (len < 0 || (size_t)len >= sizeof(name))
		return h->error(h, TF_ERR_INVALID, "%s: prefix too long", prefix);
	return h->weight_get(h, name, t);
}

void tf_lin_release(const tf_host *h, const char *prefix, const char *suffix)
{
	char name[512];
	int len = snprintf(name, sizeof(name), "%s.%s", prefix, suffix);

	if (TF_HAS_SLOT(h, tf_host, weight_release) && h->weight_release &&
	    len > 0 && (size_t)len < sizeof(name))
		h->weight_release(h, name);
}

int tf_lin_has(const tf_host *h, const char *prefix, const char *suffix)
{
	tf_tensor t;
	return tf_lin_tensor(h, prefix, suffix, &t) == TF_OK;
}

int tf_lin_check_bytes(const tf_host *h, const tf_tensor *t)
{
	size_t es = tf_dtype_size(t->dtype);
	if (t->ndim < 0 || t->ndim > TF_MAX_DIMS)
		return h->error(h, TF_ERR_FORMAT, "%s: bad rank %d", t->name, t->ndim);
	for (int i = 0; i < t->ndim; i++)
		if (t->shape[i] < 0)
			return h->error(h, TF_ERR_FORMAT, "%s: negative dimension %d",
					t->name, i);
	if (!es || t->nbytes != (size_t)tf_tensor_numel(t) * es)
		return h->error(h, TF_ERR_FORMAT,
				"%s: %zu bytes do not hold %lld elements of %s",
				t->name, t->nbytes, (long long)tf_tensor_numel(t),
				tf_dtype_name(t->dtype));
	if (!t->data && t->nbytes)
		return h->error(h, TF_ERR_FORMAT, "%s: no data", t->name);
	return TF_OK;
}

int tf_lin_vector(const tf_host *h, const tf_tensor *t, int64_t n, float **out)
{
	int rc = tf_lin_check_bytes(h, t);
	if (rc)
		return rc;
	if (t->dtype != TF_DTYPE_F32 && t->dtype != TF_DTYPE_F16 &&
	    t->dtype != TF_DTYPE_BF16)
		return h->error(h, TF_ERR_FORMAT, "%s: dtype %s, expected F16, BF16 or F32",
				t->name, tf_dtype_name(t->dtype));
	if (t->ndim != 1 || t->shape[0] < n)
		return h->error(h, TF_ERR_FORMAT,
				"%s: shape does not hold a vector of %lld elements",
				t->name, (long long)n);
	float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
	if (!v)
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory", t->name);
	for (int64_t i = 0; i < n; i++)
		v[i] = tf_f32_load_as(t->data, i, t->dtype);
	*out = v;
	return TF_OK;
}

int tf_lin_plain_load(const tf_host *h, const char *prefix, int64_t in, int64_t out,
		      const tf_lin_part *part, tf_tensor *w, float **bias, tf_lin_info *info)
{
	tf_tensor b = { 0 };
	int rc;

	*bias = NULL;
	if (in <= 0 || out <= 0)
		return h->error(h, TF_ERR_INVALID, "%s: bad linear size %lld x %lld",
				prefix, (long long)in, (long long)out);
	rc = tf_lin_tensor(h, prefix, "weight", w);
	if (rc == TF_ERR_NOT_FOUND)
		return h->error(h, rc, "%s.weight: tensor not found", prefix);
	if (rc || (rc = tf_lin_check_bytes(h, w)))
		return rc;
	if (w->dtype != TF_DTYPE_F16 && w->dtype != TF_DTYPE_BF16 && w->dtype != TF_DTYPE_F32)
		return h->error(h, TF_ERR_FORMAT, "%s: dtype %s, expected F16, BF16 or F32",
				w->name, tf_dtype_name(w->dtype));
	if (w->ndim != 2 || w->shape[0] != out || w->shape[1] != in)
		return h->error(h, TF_ERR_FORMAT,
				"%s: shape [%lld, %lld], expected [out %lld, in %lld]",
				w->name, (long long)(w->ndim > 0 ? w->shape[0] : 0),
				(long long)(w->ndim > 1 ? w->shape[1] : 0),
				(long long)out, (long long)in);

	bool cols = part && part->axis == TF_LIN_PART_IN;
	int64_t o0 = part && !cols ? part->lo : 0, o1 = part && !cols ? part->hi : out;
	int64_t n_in = cols ? part->hi - part->lo : in;

	/* A row-parallel part's bias is added once, by the part holding column 0. */
	rc = !cols || part->lo == 0 ? tf_lin_tensor(h, prefix, "bias", &b) : TF_ERR_NOT_FOUND;
	if (rc == TF_OK) {
		if (b.ndim != 1 || b.shape[0] != out)
			return h->error(h, TF_ERR_FORMAT, "%s: expected shape [%lld]",
					b.name, (long long)out);
		if ((rc = tf_lin_vector(h, &b, out, bias)))
			return rc;
		memmove(*bias, *bias + o0, (size_t)(o1 - o0) * sizeof(float));
	} else if (rc != TF_ERR_NOT_FOUND) {
		return rc;
	}

	size_t es = tf_dtype_size(w->dtype);
	*info = (tf_lin_info){
		.in = n_in, .out = o1 - o0,
		.bits = (int)es * 8,
		.bytes = (size_t)(n_in * (o1 - o0)) * es +
			 (*bias ? (size_t)(o1 - o0) * tf_dtype_size(b.dtype) : 0),
		.format = w->dtype == TF_DTYPE_F16 ? "f16"
			: w->dtype == TF_DTYPE_BF16 ? "bf16" : "f32",
	};
	return TF_OK;
}

int tf_lin_plain_match(const tf_host *h, const char *prefix)
{
	return tf_lin_has(h, prefix, "weight") ? TF_LIN_SCORE_PLAIN : 0;
}
