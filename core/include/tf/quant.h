/*
 * tf/quant.h - the quant kind: linear layers over stored weights.
 *
 * A quant plugin recognises the tensors stored under a module prefix
 * ("model.layers.3.mlp.experts.7.up_proj") and computes y = x · Wᵀ (+ b)
 * from them: EXL3 trellises, or plain fp16/bf16/fp32 `.weight` tensors.
 * Layer plugins never talk to a quant plugin directly; they call
 * host->lin_open(), which asks every loaded quant plugin's match() and opens
 * the prefix with the best one, then use the tf_lin_* calls below.
 *
 * x and y of forward live in backend memory (tf/backend.h alloc); the
 * slice products' vectors and dequant's matrix live in host memory.
 */
#ifndef TF_QUANT_H
#define TF_QUANT_H

#include <stddef.h>

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_lin_info {
	int64_t in, out;                /* logical features (unpadded) */
	int bits;                       /* bits per weight: 1..8, or 16/32 plain */
	size_t bytes;                   /* bytes read per full forward */
	const char *format;             /* "exl3-mul1", "bf16", ... */
} tf_lin_info;

/* Where a quantizer writes its tensors (host memory); add() copies them
 * and returns a tf_status. */
/*
 * One rank's part of a linear layer (ABI 1.7), for tensor parallelism.
 * Of the whole layer, in x out features as stored:
 *   TF_LIN_PART_OUT: the output features [lo, hi) (column parallel): y
 *                    holds just those, x all in features;
 *   TF_LIN_PART_IN:  the input features [lo, hi) (row parallel): x holds
 *                    just those, and y all out features as a partial sum
 *                    that the ranks' all-reduce completes (the bias, if
 *                    any, goes to the part with lo == 0 alone).
 * The opened linear's tf_lin_info gives the part's own in and out.
 */
typedef enum tf_lin_axis {
	TF_LIN_PART_OUT = 1,
	TF_LIN_PART_IN,
} tf_lin_axis;

typedef struct tf_lin_part {
	tf_lin_axis axis;
	int64_t lo, hi;
} tf_lin_part;

typedef struct tf_tensor_sink {
	void *ctx;
	int (*add)(void *ctx, const char *name, tf_dtype dtype, int ndim,
		   const int64_t *shape, const void *data);
} tf_tensor_sink;

typedef struct tf_quantize_opts {
	int bits;                       /* bits per weight; 0: the format's default */
	uint64_t seed;                  /* randomised formats: same seed, same bits */
	int threads;                    /* worker threads it may start (>= 1) */
	const char *variant;            /* format-specific; NULL: the default */
} tf_quantize_opts;

/*
 * A quantizer (tf_plugin_quant.quantize, optional, ABI 1.4): write
 * w[out, in] and bias[out] (or NULL), float32 host memory, in the plugin's
 * format under `prefix` through `sink`, so that its open() accepts the
 * prefix; *rel_mse is ||W - Wq||² / ||W||².  A bit width or variant the
 * format does not offer fails with TF_ERR_UNSUPPORTED, naming it.
 */
typedef int (*tf_quantize_fn)(const tf_host *h, const char *prefix, const float *w,
			      int64_t out, int64_t in, const float *bias,
			      const tf_quantize_opts *o, const tf_tensor_sink *sink,
			      double *rel_mse);

/* How a drawn tensor's elements are made (tf_quant_draw_fn). */
typedef enum tf_draw_fill {
	TF_DRAW_BITS = 1,               /* uniformly random bits in every element */
	TF_DRAW_SIGNS,                  /* ±a at random for the first b elements, then 0 */
	TF_DRAW_CONST,                  /* a in every element (an integer dtype) */
} tf_draw_fill;

/* Where a drawer lays out its tensors; add() returns a tf_status.  The
 * caller makes the values from its own random source, so a seed gives the
 * same bytes without the drawer holding any. */
typedef struct tf_draw_sink {
	void *ctx;
	int (*add)(void *ctx, const char *name, tf_dtype dtype, int ndim, const int64_t *shape,
		   tf_draw_fill fill, double a, double b);
} tf_draw_sink;

/*
 * A drawer (tf_plugin_quant.draw, optional, ABI 1.6): the tensors quantize
 * would store under `prefix` for an out x in weight at o->bits and
 * o->variant, with random codes in place of searched ones, scaled so that
 * the decoded weight's RMS is `rms`.  Generated checkpoints (tfsynth) get
 * the format's size and decode work without the search; the weights mean
 * nothing.  o->seed and o->threads are not read.
 */
typedef int (*tf_quant_draw_fn)(const tf_host *h, const char *prefix, int64_t out, int64_t in,
				double rms, const tf_quantize_opts *o, const tf_draw_sink *sink);

typedef struct tf_plugin_quant {
	tf_plugin_header hdr;

	/* Score (0 = not mine) for the tensors under `prefix`. */
	int (*match)(const tf_host *h, const char *prefix);
	/* Open the layer as in x out features; validates every tensor and
	 * fails naming the tensor.  Inputs narrower than the stored (padded)
	 * width are zero-extended and padded outputs trimmed. */
	int (*open)(const tf_host *h, const char *prefix, int64_t in, int64_t out,
		    void **lin, tf_lin_info *info);
	void (*close)(void *lin);
	/* y[rows, out] = x[rows, in] · Wᵀ (+ bias), backend memory. */
	int (*forward)(void *lin, const float *x, int64_t rows, float *y);
	/* Optional: the dense weight as float32 [out, in], host memory. */
	int (*dequant)(void *lin, float *w);

	/*
	 * Optional, ABI 1.1 (an ABI 1.0 descriptor ends above; use
	 * tf_lin_has_slices): products with one slice [c0, c1) of the output
	 * features, c0 and c1 multiples of `slice`, for layers that use W a
	 * slice at a time, as MLA's absorbed attention does per head.  One row,
	 * no bias, callable from several workers at once:
	 *   forward_slice:  y[c1 - c0] = (x[in] · Wᵀ)[c0 .. c1)
	 *   backward_slice: z[in] = u[c1 - c0] · W[c0 .. c1, :]
	 */
	int64_t slice;
	int (*forward_slice)(void *lin, const float *x, int64_t c0, int64_t c1, float *y);
	int (*backward_slice)(void *lin, const float *u, int64_t c0, int64_t c1, float *z);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;

	/* Optional, ABI 1.4: the format's quantizer (above); tools reach it
	 * through tf_quant_quantizer. */
	tf_quantize_fn quantize;

	/* Optional, ABI 1.6: the format's drawer (above); tools reach it
	 * through tf_quant_drawer. */
	tf_quant_draw_fn draw;

	/* Optional, ABI 1.7: open only `part` of the in x out layer under
	 * prefix (tf_lin_part above), reading no more of the stored weights
	 * than that part needs.  A cut the format cannot make (inside an
	 * EXL3 tile or Hadamard block) fails with TF_ERR_UNSUPPORTED naming
	 * the tensor and the granularity.  Reached through host->lin_open_part. */
	int (*open_part)(const tf_host *h, const char *prefix, int64_t in, int64_t out,
			 const tf_lin_part *part, void **lin, tf_lin_info *info);
} tf_plugin_quant;

/* An opened linear layer, as layer plugins hold it. */
typedef struct tf_lin {
	const tf_plugin_quant *ops;
	void *impl;
	tf_lin_info info;
} tf_lin;

static inline int tf_lin_forward(const tf_lin *l, const float *x, int64_t rows,
				 float *y)
{
	return l->ops->forward(l->impl, x, rows, y);
}

/* The dense weight as float32 [out, in] (host memory), or
 * TF_ERR_UNSUPPORTED when l's format cannot give it. */
static inline int tf_lin_dequant(const tf_lin *l, float *w)
{
	return l->ops->dequant ? l->ops->dequant(l->impl, w) : TF_ERR_UNSUPPORTED;
}

/* The quantizer of q, or NULL when it has none. */
static inline tf_quantize_fn tf_quant_quantizer(const tf_plugin_quant *q)
{
	return q->hdr.struct_size >= offsetof(tf_plugin_quant, quantize) + sizeof(void *) ?
	       q->quantize : NULL;
}

/* The drawer of q, or NULL when it has none. */
static inline tf_quant_draw_fn tf_quant_drawer(const tf_plugin_quant *q)
{
	return q->hdr.struct_size >= offsetof(tf_plugin_quant, draw) + sizeof(void *) ?
	       q->draw : NULL;
}

/* Whether l has the slice products, on slices of `width` features. */
static inline int tf_lin_has_slices(const tf_lin *l, int64_t width)
{
	const tf_plugin_quant *q = l->ops;
	return q->hdr.struct_size >= offsetof(tf_plugin_quant, backward_slice) + sizeof(void *) &&
	       q->slice > 0 && width % q->slice == 0 && q->forward_slice && q->backward_slice;
}

/* The slice products of tf_plugin_quant; only after tf_lin_has_slices. */
static inline int tf_lin_forward_slice(const tf_lin *l, const float *x, int64_t c0,
				       int64_t c1, float *y)
{
	return l->ops->forward_slice(l->impl, x, c0, c1, y);
}

static inline int tf_lin_backward_slice(const tf_lin *l, const float *u, int64_t c0,
					int64_t c1, float *z)
{
	return l->ops->backward_slice(l->impl, u, c0, c1, z);
}

const tf_plugin_quant *tf_plugin_quant_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_QUANT_H */
