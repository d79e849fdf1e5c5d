/* quantize.c - identity-Hessian EXL3 quantization of one linear (quantize.h). */
#include "quantize.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hadamard.h"
#include "trellis.h"
#include "tf/dtype.h"
#include "tf/error.h"
#include "viterbi.h"

#define PAD128(x) (((x) + 127) / 128 * 128)

/* ±1 from a splitmix64 stream: the sign vectors of §7.2. */
static float rand_sign(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) & 1 ? -1.0f : 1.0f;
}

static float to_f16(float f, uint16_t *h)
{
	*h = tf_f32_to_f16(f);
	return tf_f16_to_f32(*h);
}

/* Apply Had128 down every column of the k x n matrix w. */
static int had_columns(float *w, int64_t k, int64_t n)
{
	float *col = malloc((size_t)k * sizeof(float));
	if (!col)
		return TF_ERR_NOMEM;
	for (int64_t j = 0; j < n; j++) {
		for (int64_t i = 0; i < k; i++)
			col[i] = w[i * n + j];
		tf_had128(col, k);
		for (int64_t i = 0; i < k; i++)
			w[i * n + j] = col[i];
	}
	free(col);
	return TF_OK;
}

/* W (k x n, zero-padded) -> regularised W, filling q->suh and q->svh. */
static int regularise(float *w, tf_exl3_qtensor *q, uint64_t seed)
{
	const int64_t k = q->k, n = q->n;
	const float cb_rms = q->cb == TF_EXL3_CB_MUL1 ? 1.000312f : TF_EXL3_CODEBOOK_SCALE;
	double *rms = calloc((size_t)(k > n ? k : n), sizeof(double));
	double mean = 0;
	int64_t nonzero = 0;

	if (!rms)
		return TF_ERR_NOMEM;
	/* Output channels: s_out = col_rms / mean(col_rms), zero columns 0. */
	for (int64_t i = 0; i < k; i++)
		for (int64_t j = 0; j < n; j++)
			rms[j] += (double)w[i * n + j] * w[i * n + j];
	for (int64_t j = 0; j < n; j++) {
		rms[j] = sqrt(rms[j] / (double)k);
		if (rms[j] > 0) {
			mean += rms[j];
			nonzero++;
		}
	}
	mean = nonzero ? mean / (double)nonzero : 1.0;
	for (int64_t j = 0; j < n; j++) {
		float sign = rand_sign(&seed);
		float sv = rms[j] > 0 ? to_f16(sign * (float)(rms[j] / mean), &q->svh[j]) : 0.0f;
		if (sv == 0.0f)
			q->svh[j] = 0;
		for (int64_t i = 0; i < k; i++)
			w[i * n + j] = sv != 0.0f ? w[i * n + j] / sv : 0.0f;
	}
	for (int64_t i = 0; i < k; i++)
		tf_had128(w + i * n, n);

	/* Input channels: rows to the codebook's RMS (sign included). */
	for (int64_t i = 0; i < k; i++) {
		double s = 0;
		for (int64_t j = 0; j < n; j++)
			s += (double)w[i * n + j] * w[i * n + j];
		float r = (float)sqrt(s / (double)n);
		float su = to_f16(rand_sign(&seed) * (r > 0 ? r : 0.1f) / cb_rms, &q->suh[i]);
		if (su == 0.0f)         /* below fp16 range: keep the row at zero */
			su = to_f16(1e-4f, &q->suh[i]);
		for (int64_t j = 0; j < n; j++)
			w[i * n + j] /= su;
	}
	free(rms);
	return had_columns(w, k, n);
}

struct tile_job {
	const float *w;
	tf_exl3_qtensor *q;
	int64_t next;           /* next tile index, under lock */
	pthread_mutex_t lock;
	int rc;
};

static void *tile_worker(void *arg)
{
	struct tile_job *j = arg;
	tf_exl3_qtensor *q = j->q;
	const int64_t tn = q->n / 16, total = (q->k / 16) * tn;
	tf_exl3_viterbi v;
	float x[TF_EXL3_TILE_N];
	uint16_t st[TF_EXL3_TILE_N];
	int rc = tf_exl3_viterbi_init(&v, q->K, q->cb);

	for (;;) {
		int64_t t;
		pthread_mutex_lock(&j->lock);
		if (rc && !j->rc)
			j->rc = rc;
		t = j->rc ? total : j->next++;
		pthread_mutex_unlock(&j->lock);
		if (t >= total)
			break;
		int64_t ti = t / tn, tj = t % tn;
		for (int p = 0; p < TF_EXL3_TILE_N; p++) {
			int e = tf_exl3_perm(p);
			x[p] = j->w[(ti * 16 + e / 16) * q->n + tj * 16 + e % 16];
		}
		tf_exl3_viterbi_run(&v, x, st);
		tf_exl3_tile_pack(st, q->K, q->trellis + t * 16 * q->K);
	}
	tf_exl3_viterbi_free(&v);
	return NULL;
}

static int quantize_tiles(const float *w, tf_exl3_qtensor *q, int threads)
{
	struct tile_job job = { .w = w, .q = q };
	pthread_t tid[64];
	int started = 0;

	if (threads < 1)
		threads = 1;
	if (threads > 64)
		threads = 64;
	pthread_mutex_init(&job.lock, NULL);
	for (; started < threads - 1; started++)
		if (pthread_create(&tid[started], NULL, tile_worker, &job))
			break;
	tile_worker(&job);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_mutex_destroy(&job.lock);
	return job.rc;
}

int tf_exl3_reconstruct(const tf_exl3_qtensor *q, double *w)
{
	const int64_t k = q->k, n = q->n;
	float *a = malloc((size_t)k * (size_t)n * sizeof(float));
	uint16_t tile[TF_EXL3_TILE_N];

	if (!a)
		return TF_ERR_NOMEM;
	for (int64_t i = 0; i < k / 16; i++)
		for (int64_t j = 0; j < n / 16; j++) {
			tf_exl3_tile_decode_ref(q->trellis + (i * (n / 16) + j) * 16 * q->K, q->K,
						q->cb, tile);
			for (int e = 0; e < TF_EXL3_TILE_N; e++)
				a[(i * 16 + e / 16) * n + j * 16 + e % 16] = tf_f16_to_f32(tile[e]);
		}
	for (int64_t i = 0; i < k; i++)
		tf_had128(a + i * n, n);
	int rc = had_columns(a, k, n);
	for (int64_t i = 0; !rc && i < k; i++)
		for (int64_t j = 0; j < n; j++)
			w[i * n + j] = (double)a[i * n + j] * tf_f16_to_f32(q->suh[i]) *
				       tf_f16_to_f32(q->svh[j]);
	free(a);
	return rc;
}

int tf_exl3_quantize(const float *weight, int64_t out, int64_t in,
		     const tf_exl3_qopts *opts, tf_exl3_qtensor *q)
{
	float *w = NULL;
	double *rec = NULL;
	int rc = TF_ERR_NOMEM;

	memset(q, 0, sizeof(*q));
	if (out <= 0 || in <= 0 || opts->K < 1 || opts->K > TF_EXL3_K_MAX ||
	    (unsigned)opts->cb >= TF_EXL3_CB_COUNT)
		return TF_ERR_INVALID;
	q->k = PAD128(in);
	q->n = PAD128(out);
	q->K = opts->K;
	q->cb = opts->cb;
	w = calloc((size_t)q->k * (size_t)q->n, sizeof(float));
	q->trellis = malloc((size_t)q->k * (size_t)q->n * (size_t)q->K / 8);
	q->suh = malloc((size_t)q->k * 2);
	q->svh = malloc((size_t)q->n * 2);
	if (!w || !q->trellis || !q->suh || !q->svh)
		goto out;
	for (int64_t o = 0; o < out; o++)
		for (int64_t i = 0; i < in; i++)
			w[i * q->n + o] = weight[o * in + i];

	rc = regularise(w, q, opts->seed);
	if (!rc)
		rc = quantize_tiles(w, q, opts->threads);
	if (rc)
		goto out;

	/* Relative error against the source, over the logical weights. */
	rec = malloc((size_t)q->k * (size_t)q->n * sizeof(double));
	rc = rec ? tf_exl3_reconstruct(q, rec) : TF_ERR_NOMEM;
	if (!rc) {
		double num = 0, den = 0;
		for (int64_t o = 0; o < out; o++)
			for (int64_t i = 0; i < in; i++) {
				double d = rec[i * q->n + o] - weight[o * in + i];
				num += d * d;
				den += (double)weight[o * in + i] * weight[o * in + i];
			}
		q->rel_mse = den > 0 ? num / den : 0.0;
	}
out:
	free(w);
	free(rec);
	if (rc)
		tf_exl3_qtensor_free(q);
	return rc;
}

void tf_exl3_qtensor_free(tf_exl3_qtensor *q)
{
	free(q->trellis);
	free(q->suh);
	free(q->svh);
	q->trellis = q->suh = q->svh = NULL;
}
