/* attend.c - see attend.h. */
#include "attend.h"

#include <math.h>
#include <string.h>

#include "../common/vec.h"

/* Fold a block of scores with maximum mx into a running softmax: when the
 * maximum grows, rescale the sum and accumulator to it.  Returns the
 * running maximum m; the block's terms are then exp(s - m). */
static float run_rescale(mla_run *r, float mx, float *acc, int64_t len)
{
	if (mx > r->m) {
		float c = r->m == -INFINITY ? 0.0f : expf(r->m - mx);
		r->l *= c;
		tf_vec_scale(acc, c, len);
		r->m = mx;
	}
	return r->m;
}

void mla_naive_block(const mla_dims *d, int h, const float *q, int64_t n,
		     int64_t len, const float *kv, const float *cache, int64_t t0,
		     int64_t tb, mla_run *run, float *acc, float *scores)
{
	const int dq = d->dn + d->dr, dkv = d->dn + d->dv;
	const int64_t lat = d->r + d->dr;

	for (int64_t i = 0; i < n; i++) {
		/* query i sits at row len + i and sees rows up to it */
		int64_t end = len + i + 1 - t0;
		if (end <= 0)
			continue;
		if (end > tb)
			end = tb;
		const float *qn = q + (i * d->heads + h) * dq, *qp = qn + d->dn;
		float mx = -INFINITY;
		for (int64_t t = 0; t < end; t++) {
			const float *kn = kv + t * d->heads * dkv + (int64_t)h * dkv;
			const float *kp = cache + (t0 + t) * lat + d->r;
			scores[t] = (tf_vec_dot(qn, kn, d->dn) + tf_vec_dot(qp, kp, d->dr)) * d->scale;
			mx = fmaxf(mx, scores[t]);
		}
		mla_run *r = run + i * d->heads + h;
		float *a = acc + (i * d->heads + h) * d->dv;
		float m = run_rescale(r, mx, a, d->dv);
		for (int64_t t = 0; t < end; t++) {
			scores[t] = expf(scores[t] - m);
			r->l += scores[t];
		}
		tf_vec_axpy_rows(a, scores, kv + (int64_t)h * dkv + d->dn, d->heads * dkv, end,
				 d->dv);
	}
}

void mla_absorb_query(const mla_dims *d, const float *wkvb, const float *q,
		      int h0, int h1, float *qlat)
{
	const int dq = d->dn + d->dr, lat = d->r + d->dr;
	for (int h = h0; h < h1; h++) {
		const float *qn = q + h * dq, *qp = qn + d->dn;
		const float *wuk = wkvb + (int64_t)h * (d->dn + d->dv) * d->r;
		float *ql = qlat + (int64_t)h * lat;
		memset(ql, 0, (size_t)d->r * sizeof(float));
		tf_vec_axpy_rows(ql, qn, wuk, d->r, d->dn, d->r);
		tf_vec_scale(ql, d->scale, d->r);
		for (int e = 0; e < d->dr; e++)
			ql[d->r + e] = qp[e] * d->scale;
	}
}

void mla_absorbed_rows(const mla_dims *d, const float *qlat, const float *cache,
		       int64_t t0, int64_t t1, mla_run *run, float *acc, float *p)
{
	const int64_t lat = d->r + d->dr;
	for (int h = 0; h < d->heads; h++) {
		run[h].m = -INFINITY;
		run[h].l = 0.0f;
	}
	memset(acc, 0, (size_t)d->heads * d->r * sizeof(float));
	/* A tile of rows at a time: the tile stays in cache while every head
	 * scores it and then accumulates it. */
	for (int64_t tt = t0; tt < t1; tt += MLA_TILE) {
		int64_t nt = t1 - tt < MLA_TILE ? t1 - tt : MLA_TILE;
		const float *tile = cache + tt * lat;
		for (int h = 0; h < d->heads; h++) {
			float *ph = p + (int64_t)h * MLA_TILE, mx = -INFINITY;
			for (int64_t t = 0; t < nt; t++) {
				ph[t] = tf_vec_dot(qlat + h * lat, tile + t * lat, lat);
				mx = fmaxf(mx, ph[t]);
			}
			float *a = acc + (int64_t)h * d->r;
			float m = run_rescale(&run[h], mx, a, d->r);
			for (int64_t t = 0; t < nt; t++) {
				ph[t] = expf(ph[t] - m);
				run[h].l += ph[t];
			}
			tf_vec_axpy_rows(a, ph, tile, lat, nt, d->r);
		}
	}
}

void mla_absorbed_out(const mla_dims *d, const float *wkvb, const mla_run *run,
		      const float *acc, int np, int h0, int h1, float *o, float *lat)
{
	for (int h = h0; h < h1; h++) {
		float m = -INFINITY, l = 0.0f;
		for (int p = 0; p < np; p++)
			m = fmaxf(m, run[p * d->heads + h].m);
		memset(lat, 0, (size_t)d->r * sizeof(float));
		for (int p = 0; p < np; p++) {
			const mla_run *r = &run[p * d->heads + h];
			if (r->m == -INFINITY)
				continue;       /* a part with no rows */
			float c = expf(r->m - m);
			l += r->l * c;
			tf_vec_axpy(lat, c, acc + ((int64_t)p * d->heads + h) * d->r, d->r);
		}
		const float *wuv = wkvb + ((int64_t)h * (d->dn + d->dv) + d->dn) * d->r;
		for (int e = 0; e < d->dv; e++)
			o[h * d->dv + e] = tf_vec_dot(wuv + (int64_t)e * d->r, lat, d->r) / l;
	}
}
