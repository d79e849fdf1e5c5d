/* mla_ref.c - see mla_ref.h.  Plain loops in double, nothing shared with
 * the plugin. */
#include "mla_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/dtype.h"

static void matvec(const float *W, int out, int in, const double *x, double *y)
{
	for (int o = 0; o < out; o++) {
		double s = 0.0;
		for (int i = 0; i < in; i++)
			s += (double)W[(int64_t)o * in + i] * x[i];
		y[o] = s;
	}
}

static void rmsnorm(double *x, int n, const float *w, double eps)
{
	double ss = 0.0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	double r = 1.0 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		x[i] *= r * w[i];
}

static double get_mscale(double s, double m)
{
	return s <= 1.0 ? 1.0 : 0.1 * m * log(s) + 1.0;
}

/* Frequency of pair j, YaRN-blended when configured (§3.4). */
static double inv_freq(const mla_ref_weights *w, int j)
{
	double d = w->dr, ext = 1.0 / pow(w->theta, 2.0 * j / d);
	if (w->factor <= 0)
		return ext;
	double cd_fast = d * log(w->orig_ctx / (w->beta_fast * 2 * M_PI)) / (2 * log(w->theta));
	double cd_slow = d * log(w->orig_ctx / (w->beta_slow * 2 * M_PI)) / (2 * log(w->theta));
	double low = fmax(floor(cd_fast), 0), high = fmin(ceil(cd_slow), d - 1);
	if (low == high)
		high += 0.001;
	double ramp = fmin(fmax((j - low) / (high - low), 0.0), 1.0);
	double extrap_factor = 1.0 - ramp;
	return ext / w->factor * (1 - extrap_factor) + ext * extrap_factor;
}

static double attn_factor(const mla_ref_weights *w)
{
	if (w->factor <= 0)
		return 1.0;
	if (w->mscale > 0 && w->mscale_all_dim > 0)
		return get_mscale(w->factor, w->mscale) / get_mscale(w->factor, w->mscale_all_dim);
	return get_mscale(w->factor, 1.0);
}

/* Interleaved (GPT-J) pairs (2j, 2j+1), or NeoX halves (j, j + d/2). */
static void rope(const mla_ref_weights *w, double *x, int32_t pos)
{
	int half = w->dr / 2;
	double af = attn_factor(w);
	for (int j = 0; j < half; j++) {
		double a = pos * inv_freq(w, j), c = cos(a) * af, s = sin(a) * af;
		int i0 = w->interleave ? 2 * j : j, i1 = w->interleave ? 2 * j + 1 : j + half;
		double x0 = x[i0], x1 = x[i1];
		x[i0] = x0 * c - x1 * s;
		x[i1] = x1 * c + x0 * s;
	}
}

void mla_ref_state_init(mla_ref_state *s, const mla_ref_weights *w, int64_t cap)
{
	s->len = 0;
	s->cap = cap;
	s->k = malloc((size_t)cap * w->heads * (w->dn + w->dr) * sizeof(double));
	s->v = malloc((size_t)cap * w->heads * w->dv * sizeof(double));
}

void mla_ref_state_free(mla_ref_state *s)
{
	free(s->k);
	free(s->v);
}

void mla_ref_forward(const mla_ref_weights *w, mla_ref_state *s, const float *x,
		     int64_t n, const int32_t *pos, double *y)
{
	const int nH = w->heads, dq = w->dn + w->dr, dkv = w->dn + w->dv;
	const int gw = w->gate_head_wise ? nH : nH * w->dv;
	double *xd = malloc((size_t)w->hidden * sizeof(double));
	double *q = malloc((size_t)nH * dq * sizeof(double));
	double *qa = malloc((size_t)(w->rq + 1) * sizeof(double));
	double *ckv = malloc((size_t)(w->r + w->dr) * sizeof(double));
	double *kv = malloc((size_t)nH * dkv * sizeof(double));
	double *g = malloc((size_t)gw * sizeof(double));
	double *o = malloc((size_t)nH * w->dv * sizeof(double));
	double *p = malloc((size_t)(s->cap + 1) * sizeof(double));
	double scale = 1.0 / sqrt((double)dq);
	if (w->factor > 0 && w->mscale_all_dim > 0)
		scale *= get_mscale(w->factor, w->mscale_all_dim) * get_mscale(w->factor, w->mscale_all_dim);

	for (int64_t t = 0; t < n; t++) {
		for (int i = 0; i < w->hidden; i++)
			xd[i] = x[t * w->hidden + i];
		if (w->rq) {
			matvec(w->wqa, w->rq, w->hidden, xd, qa);
			rmsnorm(qa, w->rq, w->qa_norm, w->eps);
			matvec(w->wqb, nH * dq, w->rq, qa, q);
		} else {
			matvec(w->wq, nH * dq, w->hidden, xd, q);
		}
		matvec(w->wkva, w->r + w->dr, w->hidden, xd, ckv);
		rmsnorm(ckv, w->r, w->kva_norm, w->eps);
		double *kpe = ckv + w->r;
		rope(w, kpe, pos[t]);
		/* a bf16 cache holds each element rounded once, from float */
		if (w->bf16_cache)
			for (int i = 0; i < w->r + w->dr; i++)
				ckv[i] = tf_bf16_to_f32(tf_f32_to_bf16((float)ckv[i]));
		for (int h = 0; h < nH; h++)
			rope(w, q + h * dq + w->dn, pos[t]);
		matvec(w->wkvb, nH * dkv, w->r, ckv, kv);

		int64_t T = s->len++;
		for (int h = 0; h < nH; h++) {
			double *k = s->k + (T * nH + h) * dq;
			memcpy(k, kv + h * dkv, (size_t)w->dn * sizeof(double));
			memcpy(k + w->dn, kpe, (size_t)w->dr * sizeof(double));
			memcpy(s->v + (T * nH + h) * w->dv, kv + h * dkv + w->dn,
			       (size_t)w->dv * sizeof(double));
		}
		matvec(w->wg, gw, w->hidden, xd, g);
		for (int h = 0; h < nH; h++) {
			double mx = -INFINITY, sum = 0.0;
			for (int64_t u = 0; u <= T; u++) {
				double sc = 0.0;
				for (int e = 0; e < dq; e++)
					sc += q[h * dq + e] * s->k[(u * nH + h) * dq + e];
				p[u] = sc * scale;
				mx = fmax(mx, p[u]);
			}
			for (int64_t u = 0; u <= T; u++)
				sum += p[u] = exp(p[u] - mx);
			for (int e = 0; e < w->dv; e++) {
				double acc = 0.0;
				for (int64_t u = 0; u <= T; u++)
					acc += p[u] * s->v[(u * nH + h) * w->dv + e];
				double gate = w->gate_head_wise ? g[h] : g[h * w->dv + e];
				o[h * w->dv + e] = acc / sum / (1.0 + exp(-gate));
			}
		}
		matvec(w->wdense, w->hidden, nH * w->dv, o, y + t * w->hidden);
	}
	free(xd);
	free(q);
	free(qa);
	free(ckv);
	free(kv);
	free(g);
	free(o);
	free(p);
}
