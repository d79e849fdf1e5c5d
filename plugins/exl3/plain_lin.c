/*
 * plain_lin.c - the "plain" linear: y = x · Wᵀ (+ b) over an unquantized
 * `<prefix>.weight` [out, in] stored as F16, BF16 or F32, with an optional
 * `<prefix>.bias` [out].
 *
 * It serves every linear an EXL3 checkpoint leaves unquantized (router,
 * kv_b_proj, an fp16 lm_head) and whole bf16 checkpoints.  Work is split
 * over output features; a few outputs' weight rows are widened on the fly
 * and applied to up to PLAIN_ROWS input rows at once (plain_dot.h), so
 * decode (one row) streams the weights exactly once, and a prompt's rows
 * pass a block of outputs at a time (plain_range).
 *
 * A part (tensor parallelism, tf_lin_part) is a view of the stored rows:
 * an output range starts further in, an input range strides past the
 * other ranks' columns, so a rank's pages are the only ones it reads.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lin.h"
#include "plain_dot.h"

#define PLAIN_GRAIN 16          /* fewest output features per work item */
#define PLAIN_BLOCK_BYTES (256u << 10)  /* weight rows a block of outputs keeps in L2 */

typedef struct tf_plain_lin {
	const tf_host *h;
	const void *w;          /* [out, in] rows, ld elements apart */
	tf_dtype dt;
	int64_t in, out, ld;
	float *bias;            /* [out] or NULL */
	plain_dot_fn dot;       /* plain_dot_of(dt), chosen once at open */
} tf_plain_lin;

PLAIN_DOT_FOR(static, plain_dot_f32, TF_DTYPE_F32)
PLAIN_DOT_FOR(static, plain_dot_f16, TF_DTYPE_F16)
PLAIN_DOT_FOR(static, plain_dot_bf16, TF_DTYPE_BF16)

static plain_dot_fn plain_dot_of(tf_dtype dt)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return dt == TF_DTYPE_F16 ? tf_plain_dot_avx512_f16
		       : dt == TF_DTYPE_BF16 ? tf_plain_dot_avx512_bf16 : tf_plain_dot_avx512_f32;
#endif
	return dt == TF_DTYPE_F16 ? plain_dot_f16 : dt == TF_DTYPE_BF16 ? plain_dot_bf16
		: plain_dot_f32;
}

struct plain_job {
	const tf_plain_lin *l;
	const float *x;
	int64_t rows;
	float *y;
};

/*
 * Outputs [begin, end) in blocks whose weight rows stay in L2
 * (PLAIN_BLOCK_BYTES) while every row passes them, PLAIN_ROWS rows at a
 * time: a prompt's rows are read once per block, not once per output
 * (one output at a time, a 512-row prompt re-read its 4 MiB of rows for
 * each of a router's 64 outputs).  Each row's sums are plain_dot's
 * whatever the block, so the bits are those of a row alone.
 */
static void plain_range(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct plain_job *j = arg;
	const tf_plain_lin *l = j->l;
	const size_t es = tf_dtype_size(l->dt), row_bytes = (size_t)l->in * es;
	const int64_t block = row_bytes < PLAIN_BLOCK_BYTES ?
			      (int64_t)(PLAIN_BLOCK_BYTES / row_bytes) : 1;

	for (int64_t o0 = begin; o0 < end; o0 += block) {
		const int64_t o1 = end - o0 < block ? end : o0 + block;
		const void *w = (const char *)l->w + (size_t)o0 * (size_t)l->ld * es;
		for (int64_t r = 0; r < j->rows; r += PLAIN_ROWS) {
			const int nr = j->rows - r < PLAIN_ROWS ? (int)(j->rows - r) : PLAIN_ROWS;
			l->dot(j->x + r * l->in, l->in, nr, w, l->ld, o1 - o0,
			       l->bias ? l->bias + o0 : NULL, j->y + r * l->out + o0, l->out);
		}
	}
}

static int plain_forward(void *lin, const float *x, int64_t rows, float *y)
{
	const tf_plain_lin *l = lin;
	struct plain_job job = { .l = l, .x = x, .rows = rows, .y = y };

	if (rows < 0)
		return l->h->error(l->h, TF_ERR_INVALID, "plain linear: %lld rows",
				   (long long)rows);
	tf_lin_parallel(l->h, l->out, PLAIN_GRAIN, 2 * l->in * rows, plain_range, &job);
	return TF_OK;
}

/* z += a · w[0 .. in), w widened on the fly. */
static inline __attribute__((always_inline)) void
plain_axpy(float *z, float a, const void *w, int64_t in, tf_dtype dt)
{
	const tf_vf va = tf_vf_set1(a);
	int64_t i = 0;

	for (; i + TF_VL <= in; i += TF_VL)
		tf_vf_store(z + i, tf_vf_fma(va, tf_vf_load_as(w, i, dt), tf_vf_load(z + i)));
	for (; i < in; i++)
		z[i] += a * tf_f32_load_as(w, i, dt);
}

/* z = Σ_o u[o]·W[o] over n rows of W from w (ld elements apart), one
 * loop per stored type. */
typedef void (*plain_rows_fn)(float *z, const float *u, const void *w, int64_t n, int64_t in,
			      int64_t ld);
#define PLAIN_ROWS_FOR(name, dt)                                                 \
	static void name(float *z, const float *u, const void *w, int64_t n, int64_t in, \
			 int64_t ld)                                             \
	{                                                                        \
		memset(z, 0, (size_t)in * sizeof(float));                       \
		for (int64_t o = 0; o < n; o++)                                  \
			plain_axpy(z, u[o], (const char *)w + (size_t)(o * ld) *  \
				   tf_dtype_size(dt), in, dt);                   \
	}
PLAIN_ROWS_FOR(plain_rows_f32, TF_DTYPE_F32)
PLAIN_ROWS_FOR(plain_rows_f16, TF_DTYPE_F16)
PLAIN_ROWS_FOR(plain_rows_bf16, TF_DTYPE_BF16)

static plain_rows_fn plain_rows_of(tf_dtype dt)
{
	return dt == TF_DTYPE_F16 ? plain_rows_f16 : dt == TF_DTYPE_BF16 ? plain_rows_bf16
		: plain_rows_f32;
}

static int plain_slice_check(const tf_plain_lin *l, int64_t c0, int64_t c1, const char *op)
{
	if (c0 < 0 || c1 <= c0 || c1 > l->out)
		return l->h->error(l->h, TF_ERR_INVALID, "plain %s: outputs [%lld, %lld) of %lld",
				   op, (long long)c0, (long long)c1, (long long)l->out);
	return TF_OK;
}

/* The slice products read the stored weights (2 bytes each for F16/BF16),
 * never a widened copy: row o of W for outputs, or the slice's rows
 * summed for the transposed product. */
static int plain_forward_slice(void *lin, const float *x, int64_t c0, int64_t c1, float *y)
{
	const tf_plain_lin *l = lin;
	const size_t row = (size_t)l->ld * tf_dtype_size(l->dt);
	int rc = plain_slice_check(l, c0, c1, "forward_slice");
	if (!rc)
		l->dot(x, l->in, 1, (const char *)l->w + (size_t)c0 * row, l->ld, c1 - c0, NULL, y, 0);
	return rc;
}

static int plain_backward_slice(void *lin, const float *u, int64_t c0, int64_t c1, float *z)
{
	const tf_plain_lin *l = lin;
	const size_t row = (size_t)l->ld * tf_dtype_size(l->dt);
	int rc = plain_slice_check(l, c0, c1, "backward_slice");
	if (!rc)
		plain_rows_of(l->dt)(z, u, (const char *)l->w + (size_t)c0 * row, c1 - c0, l->in,
				     l->ld);
	return rc;
}

static int plain_dequant(void *lin, float *w)
{
	const tf_plain_lin *l = lin;
	for (int64_t o = 0; o < l->out; o++)
		for (int64_t i = 0; i < l->in; i++)
			w[o * l->in + i] = tf_f32_load_as(l->w, o * l->ld + i, l->dt);
	return TF_OK;
}

static void plain_close(void *lin)
{
	tf_plain_lin *l = lin;
	if (!l)
		return;
	free(l->bias);
	free(l);
}

/* A part reads its rows of the checkpoint's view in place: ld is the
 * stored row length, so an input part strides past the other columns. */
static int plain_open_part(const tf_host *h, const char *prefix, int64_t in, int64_t out,
			   const tf_lin_part *part, void **lin, tf_lin_info *info)
{
	tf_tensor w;
	float *bias;
	int rc = tf_lin_plain_load(h, prefix, in, out, part, &w, &bias, info);
	if (rc)
		return rc;
	bool cols = part->axis == TF_LIN_PART_IN;
	int64_t o0 = cols ? 0 : part->lo, i0 = cols ? part->lo : 0;
	tf_plain_lin *l = calloc(1, sizeof(*l));
	if (!l) {
		free(bias);
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);
	}
	*l = (tf_plain_lin){ .h = h,
			     .w = (const char *)w.data + (size_t)(o0 * in + i0) * tf_dtype_size(w.dtype),
			     .dt = w.dtype, .in = info->in, .out = info->out, .ld = in, .bias = bias,
			     .dot = plain_dot_of(w.dtype) };
	*lin = l;
	return TF_OK;
}

/* The whole layer is the part of all its output features. */
static int plain_open(const tf_host *h, const char *prefix, int64_t in,
		      int64_t out, void **lin, tf_lin_info *info)
{
	const tf_lin_part all = { .axis = TF_LIN_PART_OUT, .lo = 0, .hi = out };
	return plain_open_part(h, prefix, in, out, &all, lin, info);
}

static int plain_probe(const tf_host *h, const char **reason)
{
	if (h && h->backend && !h->backend->parallel_for) {
		*reason = "computes on the host; the backend keeps activations on a device";
		return 0;
	}
	return 1;
}

const tf_plugin_quant tf_plain_lin_ops = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, "plain", "0.1.0",
				"unquantized F16/BF16/F32 linear (y = x·Wᵀ + b), CPU",
				plain_probe),
	.match = tf_lin_plain_match,
	.open = plain_open,
	.close = plain_close,
	.forward = plain_forward,
	.dequant = plain_dequant,
	.slice = 1,
	.forward_slice = plain_forward_slice,
	.backward_slice = plain_backward_slice,
	.open_part = plain_open_part,
};
