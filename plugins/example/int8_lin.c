/*
 * int8_lin.c - an example quant plugin: int8 weights with a scale per row.
 *
 * It recognises the tensors under a linear's prefix
 *
 *     <prefix>.qweight  I8  [out, in]
 *     <prefix>.scale    F32 [out]
 *     <prefix>.bias     F32 [out]      (optional)
 *
 * and computes y = x · (qweight · scale)ᵀ + bias.  It is the plugin that
 * docs/plugins.md walks through: everything it uses comes from the public
 * headers and the tf_host table, it links nothing from the core, and the
 * tests load it through the registry like any other plugin.
 *
 * The kernel is the plain loop (one dot product per output feature), split
 * over output features with the backend's parallel_for.  Its quantizer
 * (the quantize slot) writes the same tensors from float weights: each
 * row scaled so its largest |w| is 127.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/backend.h"
#include "tf/quant.h"

#define INT8_NAME_MAX 256
#define INT8_GRAIN 8            /* fewest output features per work item */

struct int8_lin {
	const tf_host *h;
	const int8_t *q;        /* [out, in] */
	const float *scale;     /* [out] */
	const float *bias;      /* [out] or NULL */
	int64_t in, out;
};

/* The weights are read in place, so activations must be host memory: only
 * a backend with host threads (parallel_for) will do. */
static int int8_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, backend) || !h->backend) {
		*reason = "needs a backend";
		return 0;
	}
	if (!h->backend->parallel_for) {
		*reason = "needs a host-memory backend (with parallel_for)";
		return 0;
	}
	return 10;
}

static int tensor_at(const tf_host *h, const char *prefix, const char *leaf,
		     tf_tensor *t)
{
	char name[INT8_NAME_MAX];
	int n = snprintf(name, sizeof(name), "%s.%s", prefix, leaf);
	if (n < 0 || n >= (int)sizeof(name))
		return TF_ERR_RANGE;
	return h->weight_get(h, name, t);
}

static int int8_match(const tf_host *h, const char *prefix)
{
	tf_tensor q, s;
	if (tensor_at(h, prefix, "qweight", &q) || tensor_at(h, prefix, "scale", &s))
		return 0;
	return q.dtype == TF_DTYPE_I8 ? 10 : 0;
}

static void shape_str(char *buf, size_t size, int ndim, const int64_t *shape)
{
	size_t off = (size_t)snprintf(buf, size, "[");
	for (int d = 0; d < ndim && off < size; d++)
		off += (size_t)snprintf(buf + off, size - off, "%s%lld", d ? ", " : "",
					(long long)shape[d]);
	if (off < size)
		snprintf(buf + off, size - off, "]");
}

/* A tensor of `dtype` and exactly the shape [d0] (d1 == 0) or [d0, d1]. */
static int check(const tf_host *h, const tf_tensor *t, tf_dtype dtype,
		 int64_t d0, int64_t d1)
{
	const int64_t want[2] = { d0, d1 };
	int ndim = d1 ? 2 : 1;
	if (t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 &&
	    (ndim == 1 || t->shape[1] == d1))
		return TF_OK;
	char ws[64], gs[160];
	shape_str(ws, sizeof(ws), ndim, want);
	shape_str(gs, sizeof(gs), t->ndim, t->shape);
	return h->error(h, TF_ERR_FORMAT, "%s (%s): expected %s %s, found %s %s",
			t->name, t->file, tf_dtype_name(dtype), ws,
			tf_dtype_name(t->dtype), gs);
}

static int int8_open(const tf_host *h, const char *prefix, int64_t in,
		     int64_t out, void **lin, tf_lin_info *info)
{
	tf_tensor q, s, b;
	int rc;

	if (in <= 0 || out <= 0)
		return h->error(h, TF_ERR_INVALID, "%s: bad size %lld x %lld", prefix,
				(long long)in, (long long)out);
	if (tensor_at(h, prefix, "qweight", &q) || tensor_at(h, prefix, "scale", &s))
		return h->error(h, TF_ERR_NOT_FOUND, "%s: no qweight and scale tensors",
				prefix);
	if ((rc = check(h, &q, TF_DTYPE_I8, out, in)) ||
	    (rc = check(h, &s, TF_DTYPE_F32, out, 0)))
		return rc;
	bool has_bias = tensor_at(h, prefix, "bias", &b) == TF_OK;
	if (has_bias && (rc = check(h, &b, TF_DTYPE_F32, out, 0)))
		return rc;

	struct int8_lin *l = calloc(1, sizeof(*l));
	if (!l)
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);
	*l = (struct int8_lin){ .h = h, .q = q.data, .scale = s.data,
				.bias = has_bias ? b.data : NULL,
				.in = in, .out = out };
	*info = (tf_lin_info){ .in = in, .out = out, .bits = 8,
			       .bytes = q.nbytes + s.nbytes, .format = "int8-row" };
	*lin = l;
	return TF_OK;
}

static void int8_close(void *lin)
{
	free(lin);
}

struct int8_job {
	const struct int8_lin *l;
	const float *x;
	int64_t rows;
	float *y;
};

/* Output features [begin, end) for every input row. */
static void int8_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct int8_job *j = arg;
	const struct int8_lin *l = j->l;
	for (int64_t o = begin; o < end; o++) {
		const int8_t *w = l->q + o * l->in;
		for (int64_t r = 0; r < j->rows; r++) {
			const float *x = j->x + r * l->in;
			float acc = 0.0f;
			for (int64_t i = 0; i < l->in; i++)
				acc += x[i] * (float)w[i];
			j->y[r * l->out + o] = acc * l->scale[o] +
					       (l->bias ? l->bias[o] : 0.0f);
		}
	}
}

static int int8_forward(void *lin, const float *x, int64_t rows, float *y)
{
	const struct int8_lin *l = lin;
	if (rows < 0)
		return l->h->error(l->h, TF_ERR_INVALID, "int8 forward: %lld rows",
				   (long long)rows);
	struct int8_job job = { .l = l, .x = x, .rows = rows, .y = y };
	l->h->backend->parallel_for(l->h->backend_ctx, l->out, INT8_GRAIN,
				    int8_rows, &job);
	return TF_OK;
}

static int int8_dequant(void *lin, float *w)
{
	const struct int8_lin *l = lin;
	for (int64_t o = 0; o < l->out; o++)
		for (int64_t i = 0; i < l->in; i++)
			w[o * l->in + i] = (float)l->q[o * l->in + i] * l->scale[o];
	return TF_OK;
}

/* Emit `name` = prefix + "." + leaf through the sink. */
static int emit(const tf_tensor_sink *sink, const char *prefix, const char *leaf,
		tf_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
	char name[INT8_NAME_MAX];
	snprintf(name, sizeof(name), "%s.%s", prefix, leaf);
	return sink->add(sink->ctx, name, dtype, ndim, shape, data);
}

/* Each row scaled so its largest |w| is 127, rounded to nearest. */
static int int8_quantize(const tf_host *h, const char *prefix, const float *w,
			 int64_t out, int64_t in, const float *bias,
			 const tf_quantize_opts *o, const tf_tensor_sink *sink, double *rel_mse)
{
	if (o->bits != 0 && o->bits != 8)
		return h->error(h, TF_ERR_UNSUPPORTED, "%s: example-int8 stores 8 bits per "
				"weight, not %d", prefix, o->bits);
	if (o->variant)
		return h->error(h, TF_ERR_UNSUPPORTED, "%s: example-int8 has no variant '%s'",
				prefix, o->variant);
	int8_t *q = malloc((size_t)(out * in));
	float *scale = malloc((size_t)out * sizeof(float));
	double err = 0, norm = 0;
	int rc = q && scale ? TF_OK : h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);

	for (int64_t r = 0; !rc && r < out; r++) {
		const float *row = w + r * in;
		float m = 0;
		for (int64_t i = 0; i < in; i++)
			m = fabsf(row[i]) > m ? fabsf(row[i]) : m;
		scale[r] = m > 0 ? m / 127.0f : 1.0f;
		for (int64_t i = 0; i < in; i++) {
			q[r * in + i] = (int8_t)lrintf(row[i] / scale[r]);
			double d = (double)row[i] - (double)q[r * in + i] * scale[r];
			err += d * d;
			norm += (double)row[i] * row[i];
		}
	}
	if (!rc)
		rc = emit(sink, prefix, "qweight", TF_DTYPE_I8, 2, (int64_t[]){ out, in }, q);
	if (!rc)
		rc = emit(sink, prefix, "scale", TF_DTYPE_F32, 1, &out, scale);
	if (!rc && bias)
		rc = emit(sink, prefix, "bias", TF_DTYPE_F32, 1, &out, bias);
	*rel_mse = norm > 0 ? err / norm : 0;
	free(q);
	free(scale);
	return rc;
}

static const tf_plugin_quant int8_quant = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, "example-int8",
				"1.0", "example: int8 weights, one float scale per row",
				int8_probe),
	.match = int8_match,
	.open = int8_open,
	.close = int8_close,
	.forward = int8_forward,
	.dequant = int8_dequant,
	.quantize = int8_quantize,
};

TF_EXPORT const tf_plugin_quant *tf_plugin_quant_v1(unsigned index)
{
	return index == 0 ? &int8_quant : NULL;
}
