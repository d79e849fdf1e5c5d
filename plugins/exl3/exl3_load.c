/* exl3_load.c - find and validate the tensors of one EXL3 linear (exl3_load.h). */
#include "exl3_load.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hadamard.h"
#include "lin.h"

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

int tf_exl3_match(const tf_host *h, const char *prefix)
{
	return tf_lin_has(h, prefix, "trellis") ? TF_LIN_SCORE_EXL3 : 0;
}

int tf_exl3_parts_load(const tf_host *h, const char *prefix, int64_t in, int64_t out,
		       tf_exl3_parts *p)
{
	tf_tensor tr;
	int64_t k = 0, n = 0;
	int K = 0, rc;

	memset(p, 0, sizeof(*p));
	rc = tf_lin_tensor(h, prefix, "trellis", &tr);
	if (rc == TF_ERR_NOT_FOUND)
		return h->error(h, rc, "%s.trellis: tensor not found", prefix);
	if (rc)
		return rc;
	rc = exl3_check_trellis(h, &tr, &K, &k, &n);
	if (rc)
		return rc;
	if (in <= 0 || out <= 0 || in > k || out > n)
		return h->error(h, TF_ERR_FORMAT,
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
	p->trellis = tr.data;
	p->trellis_bytes = tr.nbytes;
	p->k = k;
	p->n = n;
	p->K = K;
	p->cb = mul1 ? TF_EXL3_CB_MUL1 : mcg ? TF_EXL3_CB_MCG : TF_EXL3_CB_3INST;

	rc = exl3_vector(h, prefix, "suh", "su", k, &p->suh);
	if (!rc)
		rc = exl3_vector(h, prefix, "svh", "sv", n, &p->svh);
	if (!rc && tf_lin_has(h, prefix, "bias"))
		rc = exl3_vector(h, prefix, "bias", NULL, n, &p->bias);
	if (rc)
		tf_exl3_parts_free(p);
	return rc;
}

void tf_exl3_parts_free(tf_exl3_parts *p)
{
	free(p->suh);
	free(p->svh);
	free(p->bias);
	p->suh = p->svh = p->bias = NULL;
}

/* v[lo, hi) moved to the front. */
static void keep_range(float *v, int64_t lo, int64_t hi)
{
	if (v)
		memmove(v, v + lo, (size_t)(hi - lo) * sizeof(float));
}

int tf_exl3_parts_cut(const tf_host *h, const char *prefix, const tf_lin_part *part,
		      tf_exl3_parts *p, uint16_t **owned)
{
	const bool cols = part->axis == TF_LIN_PART_IN;
	const int64_t lo = part->lo, hi = part->hi, whole = cols ? p->k : p->n;
	const size_t tile = 16 * (size_t)p->K;
	*owned = NULL;
	if (lo % TF_HAD_BLOCK || hi % TF_HAD_BLOCK || hi > whole)
		return h->error(h, TF_ERR_UNSUPPORTED,
				"%s.trellis: the part [%lld, %lld) of its %lld %s features cuts an EXL3 Hadamard block of %d (tiles of 16 inside it)",
				prefix, (long long)lo, (long long)hi, (long long)whole,
				cols ? "input" : "output", TF_HAD_BLOCK);
	const int64_t tiles_n = p->n / 16;
	if (cols) {                     /* rows of tiles: contiguous */
		p->trellis += (size_t)(lo / 16 * tiles_n) * tile;
		keep_range(p->suh, lo, hi);
		p->k = hi - lo;
		if (lo) {
			free(p->bias);
			p->bias = NULL;
		}
	} else {                        /* columns of tiles: one run per row */
		const int64_t tiles_k = p->k / 16, w = (hi - lo) / 16;
		uint16_t *c = malloc((size_t)(tiles_k * w) * tile * sizeof(uint16_t));
		if (!c)
			return h->error(h, TF_ERR_NOMEM, "%s.trellis: out of memory for a part", prefix);
		for (int64_t i = 0; i < tiles_k; i++)
			memcpy(c + (size_t)(i * w) * tile,
			       p->trellis + (size_t)(i * tiles_n + lo / 16) * tile,
			       (size_t)w * tile * sizeof(uint16_t));
		p->trellis = c;
		*owned = c;
		keep_range(p->svh, lo, hi);
		keep_range(p->bias, lo, hi);
		p->n = hi - lo;
	}
	p->trellis_bytes = (size_t)(p->k / 16 * p->n / 16) * tile * sizeof(uint16_t);
	return TF_OK;
}

tf_lin_info tf_exl3_parts_info(const tf_exl3_parts *p, int64_t in, int64_t out)
{
	static const char *const format[TF_EXL3_CB_COUNT] = {
		[TF_EXL3_CB_3INST] = "exl3-3inst", [TF_EXL3_CB_MCG] = "exl3-mcg",
		[TF_EXL3_CB_MUL1] = "exl3-mul1",
	};
	const int64_t k = p->k, n = p->n;
	return (tf_lin_info){
		.in = in, .out = out, .bits = p->K,
		.bytes = p->trellis_bytes + 2 * (size_t)(k + n) + (p->bias ? 2 * (size_t)n : 0),
		.format = format[p->cb],
	};
}
