/*
 * exl3_lin.c - the "exl3" linear: y = x · W (+ b) with W stored as an
 * EXL3 trellis (spec exl3.md §2-3):
 *
 *     <prefix>.trellis  I16 [k/16, n/16, 16·K]   K = bits per weight, 1..8
 *     <prefix>.suh      F16 [k]                  input sign × scale
 *     <prefix>.svh      F16 [n]                  output sign × scale
 *     <prefix>.bias     F16 [n]                  optional
 *     <prefix>.mcg | <prefix>.mul1               optional codebook marker
 *
 * forward: xh = Had128(x ⊙ suh), yh = xh · Ŵ (matmul.c), y = Had128(yh) ⊙
 * svh + b.  "exl3-int" and "exl3-q8" are the same linear with MUL1
 * products through 15-bit and 8-bit integer activations
 * (matmul_int.h).  Logical in/out may be below the padded k/n: inputs are
 * zero-extended, outputs trimmed.
 */
#include <stdlib.h>
#include <string.h>

#include "exl3_load.h"
#include "hadamard.h"
#include "lin.h"
#include "matmul_int.h"
#include "vec.h"

#define EXL3_GRAIN 8            /* tile columns per work item: 128 outputs */
_Static_assert(EXL3_GRAIN * TF_EXL3_TILE == 128, "a work item is one Hadamard block");
/* Work estimates in flops, for the size of a chunk worth a worker: a
 * weight's decode costs about what 8 flops of FMAs do, and an input row's
 * Hadamard transform and quantization ~16 an element. */
#define EXL3_DECODE_FLOPS 8
#define EXL3_ROW_FLOPS 16

typedef struct tf_exl3_lin {
	const tf_host *h;
	tf_exl3_parts p;
	tf_exl3_mat mat;                /* the trellis in the kernels' layout */
	int64_t in, out;
	/* "exl3-int", "exl3-q8": MUL1 products through the integer-
	 * activation kernels at this precision (TF_EXL3_QMAX_*); 0 for
	 * "exl3", which keeps float. */
	int qmax;
} tf_exl3_lin;

static void exl3_close(void *lin)
{
	tf_exl3_lin *l = lin;
	if (!l)
		return;
	tf_exl3_mat_free(&l->mat);
	tf_exl3_parts_free(&l->p);
	free(l);
}

/* Tile columns [begin, end) of the layout: whole column groups. */
static void exl3_pack_cols(void *arg, int64_t begin, int64_t end, int worker)
{
	tf_exl3_lin *l = arg;

	(void)worker;
	tf_exl3_mat_pack(&l->mat, l->p.trellis, begin, end);
}

/* The whole layer (part NULL) or one rank's part of it. */
static int exl3_open_as(const tf_host *h, const char *prefix, int64_t in, int64_t out,
			const tf_lin_part *part, int qmax, void **lin, tf_lin_info *info)
{
	tf_exl3_lin *l = calloc(1, sizeof(*l));
	uint16_t *owned = NULL;
	int rc;

	if (!l)
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);
	rc = tf_exl3_parts_load(h, prefix, in, out, &l->p);
	if (!rc && part)
		rc = tf_exl3_parts_cut(h, prefix, part, &l->p, &owned);
	if (rc) {
		tf_exl3_parts_free(&l->p);
		free(l);
		return rc;
	}
	if (part && part->axis == TF_LIN_PART_IN)
		in = part->hi - part->lo;
	else if (part)
		out = part->hi - part->lo;
	/* The layout costs one pass over the trellis now, done by the
	 * workers, column groups apart: the pass and the first touch of each
	 * new page are most of the time a model takes to load.  The file's
	 * pages are not read again, so the host may drop them: the model is
	 * then in memory once. */
	if (tf_exl3_mat_alloc(&l->mat, l->p.k, l->p.n, l->p.K, l->p.cb)) {
		free(owned);
		exl3_close(l);
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory for the trellis layout", prefix);
	}
	tf_lin_parallel(h, l->mat.n / TF_EXL3_TILE, EXL3_GRAIN, TF_EXL3_TILE * l->mat.k,
			exl3_pack_cols, l);
	free(owned);
	l->p.trellis = NULL;            /* packed: neither the copy nor the file is read again */
	tf_lin_release(h, prefix, "trellis");
	l->h = h;
	l->in = in;
	l->out = out;
	l->qmax = qmax;
	*info = tf_exl3_parts_info(&l->p, in, out);
	*lin = l;
	return TF_OK;
}

/* open and open_part of the three descriptors, at their precision. */
#define EXL3_OPENS(name, qmax)                                                          \
	static int name##_open(const tf_host *h, const char *prefix, int64_t in,        \
			       int64_t out, void **lin, tf_lin_info *info)              \
	{                                                                               \
		return exl3_open_as(h, prefix, in, out, NULL, qmax, lin, info);         \
	}                                                                               \
	static int name##_open_part(const tf_host *h, const char *prefix, int64_t in,   \
				    int64_t out, const tf_lin_part *part, void **lin,   \
				    tf_lin_info *info)                                  \
	{                                                                               \
		return exl3_open_as(h, prefix, in, out, part, qmax, lin, info);         \
	}
EXL3_OPENS(exl3, 0)
EXL3_OPENS(exl3_int, TF_EXL3_QMAX_I15)
EXL3_OPENS(exl3_q8, TF_EXL3_QMAX_I8)

/* "exl3-int" (tf_exl3_match) is the CPU default; "exl3" and "exl3-q8"
 * open trellises where the INI pins them. */
static int exl3_float_match(const tf_host *h, const char *prefix)
{
	return tf_exl3_match(h, prefix) ? TF_LIN_SCORE_EXL3_FLOAT : 0;
}

static int exl3_q8_match(const tf_host *h, const char *prefix)
{
	return tf_exl3_match(h, prefix) ? TF_LIN_SCORE_EXL3_Q8 : 0;
}

struct exl3_job {
	const tf_exl3_lin *l;
	const float *x;
	float *xh, *yh, *y;
	int64_t rows;
	tf_exl3_qx *qx;                 /* set: the integer-activation path */
};

/* xh = Had128(x ⊙ suh), zero-extended from in to k. */
static void exl3_input(const tf_exl3_lin *l, const float *x, float *xh)
{
	tf_vec_mul_add(xh, x, l->p.suh, NULL, l->in);
	memset(xh + l->in, 0, (size_t)(l->mat.k - l->in) * sizeof(float));
	tf_had128(xh, l->mat.k);
}

static void exl3_input_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct exl3_job *j = arg;
	const tf_exl3_lin *l = j->l;
	for (int64_t r = begin; r < end; r++) {
		float *xh = j->xh + r * l->mat.k;
		exl3_input(l, j->x + r * l->in, xh);
		if (j->qx)
			tf_exl3_qx_set(j->qx, r, xh);
	}
}

/* y[r][c0 .. c1) = (Had128(yh[r]) ⊙ svh + bias), trimmed to out; c0 and
 * c1 on 128-column blocks. */
static void exl3_output_cols(const struct exl3_job *j, int64_t c0, int64_t c1)
{
	const tf_exl3_lin *l = j->l;
	const int64_t o1 = c1 < l->out ? c1 : l->out;

	for (int64_t r = 0; r < j->rows; r++) {
		float *yh = j->yh + r * l->mat.n, *y = j->y + r * l->out;
		tf_had128(yh + c0, c1 - c0);
		tf_vec_mul_add(y + c0, yh + c0, l->p.svh + c0, l->p.bias ? l->p.bias + c0 : NULL,
			       o1 - c0);
	}
}

/* Tile columns [begin, end) and their outputs: chunks are whole grains
 * (EXL3_GRAIN tiles = 128 columns, one Hadamard block), so each worker
 * finishes its own columns without waiting for the others. */
static void exl3_tile_cols(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct exl3_job *j = arg;
	if (j->qx)
		tf_exl3_mat_mul_int(&j->l->mat, j->qx, j->yh, begin, end, TF_EXL3_IPATH_AUTO);
	else
		tf_exl3_mat_mul(&j->l->mat, j->xh, j->rows, j->yh, begin, end);
	exl3_output_cols(j, begin * TF_EXL3_TILE, end * TF_EXL3_TILE);
}

static int exl3_forward(void *lin, const float *x, int64_t rows, float *y)
{
	const tf_exl3_lin *l = lin;
	const tf_host *h = l->h;
	struct exl3_job job = { .l = l, .x = x, .y = y, .rows = rows };
	tf_exl3_qx qx;

	if (rows <= 0)
		return rows ? h->error(h, TF_ERR_INVALID, "exl3 linear: %lld rows",
				       (long long)rows) : TF_OK;
	/* Per call, not per layer: a layer may run on several threads. */
	job.xh = malloc((size_t)rows * (size_t)(l->mat.k + l->mat.n) * sizeof(float));
	if (!job.xh)
		return h->error(h, TF_ERR_NOMEM, "exl3 linear: out of memory for %lld rows",
				(long long)rows);
	job.yh = job.xh + rows * l->mat.k;
	/* "exl3-int", "exl3-q8": MUL1 layers multiply integer activations,
	 * the byte-sum codebook becoming integer dot products (matmul_int.h),
	 * for any row count: a row's bits must not depend on its company. */
	if (l->qmax && l->mat.cb == TF_EXL3_CB_MUL1) {
		if (tf_exl3_qx_init(&qx, l->mat.k, rows, l->qmax)) {
			free(job.xh);
			return h->error(h, TF_ERR_NOMEM, "exl3 linear: out of memory for %lld rows",
					(long long)rows);
		}
		job.qx = &qx;
	}

	/* Eight rows a chunk at least: up to eight, the transforms run here. */
	tf_lin_parallel(h, rows, 8, EXL3_ROW_FLOPS * l->mat.k, exl3_input_rows, &job);
	tf_lin_parallel(h, l->mat.n / TF_EXL3_TILE, EXL3_GRAIN,
			TF_EXL3_TILE * l->mat.k * (EXL3_DECODE_FLOPS + 2 * rows), exl3_tile_cols, &job);
	if (job.qx)
		tf_exl3_qx_free(job.qx);
	free(job.xh);
	return TF_OK;
}

/* W[o][i] = suh[i] · (Hbd · Ŵ · Hbd)[i][o] · svh[o], bias not included. */
static int exl3_dequant(void *lin, float *w)
{
	const tf_exl3_lin *l = lin;
	const tf_exl3_mat *m = &l->mat;
	float tile[TF_EXL3_TILE_N];
	float *a = malloc((size_t)m->k * (size_t)m->n * sizeof(float));
	float *col = malloc((size_t)m->k * sizeof(float));

	if (!a || !col) {
		free(a);
		free(col);
		return l->h->error(l->h, TF_ERR_NOMEM, "exl3 dequant: out of memory");
	}
	for (int64_t i = 0; i < m->k / TF_EXL3_TILE; i++)
		for (int64_t j = 0; j < m->n / TF_EXL3_TILE; j++) {
			tf_exl3_mat_tile_ref(m, i, j, tile);
			for (int r = 0; r < TF_EXL3_TILE; r++)
				memcpy(a + (i * TF_EXL3_TILE + r) * m->n + j * TF_EXL3_TILE,
				       tile + r * TF_EXL3_TILE, TF_EXL3_TILE * sizeof(float));
		}
	for (int64_t i = 0; i < m->k; i++)
		tf_had128(a + i * m->n, m->n);                  /* Ŵ · Hbd */
	for (int64_t o = 0; o < l->out; o++) {
		for (int64_t i = 0; i < m->k; i++)
			col[i] = a[i * m->n + o];
		tf_had128(col, m->k);                           /* Hbd · (...) */
		for (int64_t i = 0; i < l->in; i++)
			w[o * l->in + i] = l->p.suh[i] * col[i] * l->p.svh[o];
	}
	free(a);
	free(col);
	return TF_OK;
}

/* Scratch of k + n floats for a slice product, after checking the slice:
 * whole Hadamard blocks, since each output of a block needs all of it.
 * NULL with *rc set (and the error reported) when either fails. */
static float *exl3_slice_scratch(const tf_exl3_lin *l, int64_t c0, int64_t c1, const char *op,
				 int *rc)
{
	float *buf = NULL;

	if (c0 < 0 || c1 <= c0 || c1 > l->out || c0 % TF_HAD_BLOCK || c1 % TF_HAD_BLOCK)
		*rc = l->h->error(l->h, TF_ERR_INVALID,
				  "exl3 %s: outputs [%lld, %lld) of %lld are not whole %d-feature blocks",
				  op, (long long)c0, (long long)c1, (long long)l->out, TF_HAD_BLOCK);
	else if (!(buf = malloc((size_t)(l->mat.k + l->mat.n) * sizeof(float))))
		*rc = l->h->error(l->h, TF_ERR_NOMEM, "exl3 %s: out of memory", op);
	return buf;
}

/* y = svh ⊙ Had128(xh · Ŵ) on the slice's columns alone.  The slice
 * products take the float kernels whatever the descriptor: they serve
 * small per-head products, where exactness costs nothing measurable. */
static int exl3_forward_slice(void *lin, const float *x, int64_t c0, int64_t c1, float *y)
{
	const tf_exl3_lin *l = lin;
	const tf_exl3_mat *m = &l->mat;
	int rc;
	float *xh = exl3_slice_scratch(l, c0, c1, "forward_slice", &rc), *yh;
	if (!xh)
		return rc;
	yh = xh + m->k;
	exl3_input(l, x, xh);
	tf_exl3_mat_mul(m, xh, 1, yh, c0 / TF_EXL3_TILE, c1 / TF_EXL3_TILE);
	tf_had128(yh + c0, c1 - c0);
	tf_vec_mul_add(y, yh + c0, l->p.svh + c0, NULL, c1 - c0);
	free(xh);
	return TF_OK;
}

/* z = suh ⊙ Had128(Ŵ · Had128(svh ⊙ u)): u spans whole blocks, so its
 * transform stays inside them and only the slice's tile columns count. */
static int exl3_backward_slice(void *lin, const float *u, int64_t c0, int64_t c1, float *z)
{
	const tf_exl3_lin *l = lin;
	const tf_exl3_mat *m = &l->mat;
	int rc;
	float *wh = exl3_slice_scratch(l, c0, c1, "backward_slice", &rc), *t;
	if (!wh)
		return rc;
	t = wh + m->n;
	tf_vec_mul_add(wh + c0, u, l->p.svh + c0, NULL, c1 - c0);
	tf_had128(wh + c0, c1 - c0);
	tf_exl3_mat_mul_t(m, wh, c0 / TF_EXL3_TILE, c1 / TF_EXL3_TILE, t);
	tf_had128(t, m->k);
	tf_vec_mul_add(z, t, l->p.suh, NULL, l->in);
	free(wh);
	return TF_OK;
}

static int exl3_probe(const tf_host *h, const char **reason)
{
	if (h && h->backend && !h->backend->parallel_for) {
		*reason = "computes on the host; the backend keeps activations on a device";
		return 0;
	}
	return 1;
}

/* The three descriptors open the same layers and differ only in how
 * MUL1 products multiply: every slot after open() is shared. */
#define EXL3_LAYER_OPS                                                          \
	.close = exl3_close, .forward = exl3_forward, .dequant = exl3_dequant,  \
	.slice = TF_HAD_BLOCK, .forward_slice = exl3_forward_slice,             \
	.backward_slice = exl3_backward_slice, .quantize = tf_exl3_quantize_slot,\
	.draw = tf_exl3_draw_slot

const tf_plugin_quant tf_exl3_lin_ops = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, "exl3", "0.1.0",
				"EXL3 trellis linear (exllamav3 format, K = 1..8, 3INST/MCG/MUL1), CPU",
				exl3_probe),
	.match = exl3_float_match,
	.open = exl3_open,
	.open_part = exl3_open_part,
	EXL3_LAYER_OPS,
};

/* The same layers with MUL1 products through 15-bit integer
 * activations: ~5e-5 relative error per linear (matmul_int.h) instead of
 * fp32 rounding, for more weights per second than the float path: a
 * little on AVX-512 VNNI, where both have kernels, more elsewhere
 * (bench/exl3/README.md), and the integer GEMM for prompts.  The CPU's
 * default for trellises (docs/ini.md says why); `[plugins] quant = exl3`
 * pins the float path. */
const tf_plugin_quant tf_exl3_int_lin_ops = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, "exl3-int", "0.1.0",
				"EXL3 trellis linear, MUL1 products with integer activations "
				"(AVX-512 VNNI / AVX2 / NEON dotprod), CPU",
				exl3_probe),
	.match = tf_exl3_match,
	.open = exl3_int_open,
	.open_part = exl3_int_open_part,
	EXL3_LAYER_OPS,
};

/* The same with 8-bit activations (llama.cpp's Q8): about 6e-3 relative
 * error per linear, for the AVX-512 VNNI kernel's single vpdpbusd per 16
 * weights; elsewhere it runs the "exl3-int" kernels at this precision.
 * Chosen by `[plugins] quant = exl3-q8`. */
const tf_plugin_quant tf_exl3_q8_lin_ops = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, "exl3-q8", "0.1.0",
				"EXL3 trellis linear, MUL1 products with 8-bit activations "
				"(AVX-512 VNNI / AVX2 / NEON dotprod), CPU",
				exl3_probe),
	.match = exl3_q8_match,
	.open = exl3_q8_open,
	.open_part = exl3_q8_open_part,
	EXL3_LAYER_OPS,
};
