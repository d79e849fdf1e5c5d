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
 * svh + b.  Logical in/out may be below the padded k/n: inputs are
 * zero-extended, outputs trimmed.
 */
#include <stdlib.h>
#include <string.h>

#include "hadamard.h"
#include "lin.h"
#include "matmul.h"

#define EXL3_GRAIN 4            /* fewest tile columns per work item */

typedef struct tf_exl3_lin {
	const tf_host *h;
	tf_exl3_mat mat;
	int64_t in, out;
	float *suh, *svh, *bias;        /* [k], [n], [n] or NULL */
} tf_exl3_lin;

static int exl3_match(const tf_host *h, const char *prefix)
{
	return tf_lin_has(h, prefix, "trellis") ? TF_LIN_SCORE_EXL3 : 0;
}

static void exl3_close(void *lin)
{
	tf_exl3_lin *l = lin;
	if (!l)
		return;
	free(l->suh);
	free(l->svh);
	free(l->bias);
	free(l);
}

/* The trellis' shape rules; sets *K and the padded k, n. */
static int exl3_check_trellis(const tf_host *h, const tf_tensor *t, int *K,
			      int64_t *k, int64_t *n)
{
	int rc = tf_lin_check_bytes(h, t);
	if (rc)
		return rc;
	if (t->dtype != TF_DTYPE_I16 && t->dtype != TF_DTYPE_U16)
		return h->error(h, TF_ERR_FORMAT, "%s: dtype %s, expected I16", t->name,
				tf_dtype_name(t->dtype));
	if (t->ndim != 3)
		return h->error(h, TF_ERR_FORMAT, "%s: rank %d, expected 3 [k/16, n/16, 16*K]",
				t->name, t->ndim);
	if (t->shape[2] % 16 || t->shape[2] < 16 || t->shape[2] > 16 * TF_EXL3_K_MAX)
		return h->error(h, TF_ERR_FORMAT,
				"%s: last dimension %lld is not 16*K for K in 1..8",
				t->name, (long long)t->shape[2]);
	*K = (int)(t->shape[2] / 16);
	*k = t->shape[0] * 16;
	*n = t->shape[1] * 16;
	if (*k <= 0 || *n <= 0 || *k % 128 || *n % 128)
		return h->error(h, TF_ERR_FORMAT,
				"%s: %lld x %lld features are not multiples of 128",
				t->name, (long long)*k, (long long)*n);
	return TF_OK;
}

/* A required float vector of exactly `len` elements; `legacy` names the
 * pre-release packed-sign tensor it replaced, for a clearer refusal. */
static int exl3_vector(const tf_host *h, const char *prefix, const char *suffix,
		       const char *legacy, int64_t len, float **out)
{
	tf_tensor t;
	int rc = tf_lin_tensor(h, prefix, suffix, &t);
	if (rc == TF_ERR_NOT_FOUND)
		return h->error(h, rc, "%s.%s: tensor not found%s", prefix, suffix,
				legacy && tf_lin_has(h, prefix, legacy)
				? " (legacy packed su/sv signs are not supported)" : "");
	if (rc)
		return rc;
	if (t.ndim != 1 || t.shape[0] != len)
		return h->error(h, TF_ERR_FORMAT, "%s: shape disagrees with the trellis: expected [%lld]",
				t.name, (long long)len);
	return tf_lin_vector(h, &t, len, out);
}

static int exl3_open(const tf_host *h, const char *prefix, int64_t in,
		     int64_t out, void **lin, tf_lin_info *info)
{
	tf_tensor tr;
	tf_exl3_lin *l = NULL;
	int64_t k = 0, n = 0;
	int K = 0, rc;

	rc = tf_lin_tensor(h, prefix, "trellis", &tr);
	if (rc == TF_ERR_NOT_FOUND)
		return h->error(h, rc, "%s.trellis: tensor not found", prefix);
	if (rc)
		return rc;
	rc = exl3_check_trellis(h, &tr, &K, &k, &n);
	if (rc)
		return rc;
	if (in <= 0 || out <= 0 || in > k || out > n)
		return h->error(h, TF_ERR_INVALID,
				"%s: linear %lld x %lld does not fit the trellis' %lld x %lld",
				tr.name, (long long)in, (long long)out, (long long)k,
				(long long)n);

	int mcg = tf_lin_has(h, prefix, "mcg"), mul1 = tf_lin_has(h, prefix, "mul1");
	if (mcg && mul1)
		return h->error(h, TF_ERR_FORMAT, "%s: both .mcg and .mul1 codebook markers",
				prefix);
	if (tf_lin_has(h, prefix, "scale"))
		return h->error(h, TF_ERR_UNSUPPORTED,
				"%s.scale: pre-release global scale is not supported", prefix);

	l = calloc(1, sizeof(*l));
	if (!l)
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);
	l->h = h;
	l->in = in;
	l->out = out;
	tf_exl3_mat_init(&l->mat, tr.data, k, n, K,
			 mul1 ? TF_EXL3_CB_MUL1 : mcg ? TF_EXL3_CB_MCG : TF_EXL3_CB_3INST);

	rc = exl3_vector(h, prefix, "suh", "su", k, &l->suh);
	if (!rc)
		rc = exl3_vector(h, prefix, "svh", "sv", n, &l->svh);
	if (!rc && tf_lin_has(h, prefix, "bias"))
		rc = exl3_vector(h, prefix, "bias", NULL, n, &l->bias);
	if (rc)
		goto fail;

	static const char *const format[TF_EXL3_CB_COUNT] = {
		[TF_EXL3_CB_3INST] = "exl3-3inst", [TF_EXL3_CB_MCG] = "exl3-mcg",
		[TF_EXL3_CB_MUL1] = "exl3-mul1",
	};
	*info = (tf_lin_info){
		.in = in, .out = out, .bits = K,
		.bytes = tr.nbytes + 2 * (size_t)(k + n) + (l->bias ? 2 * (size_t)n : 0),
		.format = format[l->mat.cb],
	};
	*lin = l;
	return TF_OK;
fail:
	exl3_close(l);
	return rc;
}

struct exl3_job {
	const tf_exl3_lin *l;
	const float *x;
	float *xh, *yh, *y;
	int64_t rows;
};

/* xh[r] = Had128(x[r] ⊙ suh), zero-extended from in to k. */
static void exl3_input_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct exl3_job *j = arg;
	const tf_exl3_lin *l = j->l;
	for (int64_t r = begin; r < end; r++) {
		const float *x = j->x + r * l->in;
		float *xh = j->xh + r * l->mat.k;
		for (int64_t i = 0; i < l->in; i++)
			xh[i] = x[i] * l->suh[i];
		memset(xh + l->in, 0, (size_t)(l->mat.k - l->in) * sizeof(float));
		tf_had128(xh, l->mat.k);
	}
}

static void exl3_tile_cols(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct exl3_job *j = arg;
	tf_exl3_mat_mul(&j->l->mat, j->xh, j->rows, j->yh, begin, end);
}

/* y[r] = (Had128(yh[r]) ⊙ svh + bias), trimmed to out. */
static void exl3_output_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct exl3_job *j = arg;
	const tf_exl3_lin *l = j->l;
	for (int64_t r = begin; r < end; r++) {
		float *yh = j->yh + r * l->mat.n, *y = j->y + r * l->out;
		tf_had128(yh, l->mat.n);
		for (int64_t o = 0; o < l->out; o++)
			y[o] = yh[o] * l->svh[o] + (l->bias ? l->bias[o] : 0.0f);
	}
}

static int exl3_forward(void *lin, const float *x, int64_t rows, float *y)
{
	const tf_exl3_lin *l = lin;
	const tf_host *h = l->h;
	struct exl3_job job = { .l = l, .x = x, .y = y, .rows = rows };

	if (rows <= 0)
		return rows ? h->error(h, TF_ERR_INVALID, "exl3 linear: %lld rows",
				       (long long)rows) : TF_OK;
	/* Per call, not per layer: a layer may run on several threads. */
	job.xh = malloc((size_t)rows * (size_t)(l->mat.k + l->mat.n) * sizeof(float));
	if (!job.xh)
		return h->error(h, TF_ERR_NOMEM, "exl3 linear: out of memory for %lld rows",
				(long long)rows);
	job.yh = job.xh + rows * l->mat.k;

	tf_lin_parallel(h, rows, 8, exl3_input_rows, &job);
	tf_lin_parallel(h, l->mat.n / TF_EXL3_TILE, EXL3_GRAIN, exl3_tile_cols, &job);
	tf_lin_parallel(h, rows, 8, exl3_output_rows, &job);
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
			w[o * l->in + i] = l->suh[i] * col[i] * l->svh[o];
	}
	free(a);
	free(col);
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

const tf_plugin_quant tf_exl3_lin_ops = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_quant, TF_KIND_QUANT, "exl3", "0.1.0",
				"EXL3 trellis linear (exllamav3 format, K = 1..8, 3INST/MCG/MUL1), CPU",
				exl3_probe),
	.match = exl3_match,
	.open = exl3_open,
	.close = exl3_close,
	.forward = exl3_forward,
	.dequant = exl3_dequant,
};
