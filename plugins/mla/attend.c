/* attend.c - see attend.h. */
#include "attend.h"

#include <math.h>
#include <string.h>

#include "tf/dtype.h"

#include "../common/vec.h"

void mla_cache_write(const mla_dims *d, const mla_cache *c, int64_t t, int64_t n,
		     const float *src)
{
	const int64_t lat = d->r + d->dr;
	for (int64_t i = 0; i < n; i++, t++) {
		const float *s = src + i * lat;
		size_t off = (size_t)(t % MLA_PAGE_ROWS) * lat;
		if (!c->bf16) {
			memcpy((float *)c->page[t / MLA_PAGE_ROWS] + off, s, (size_t)lat * sizeof(float));
			continue;
		}
		uint16_t *o = (uint16_t *)c->page[t / MLA_PAGE_ROWS] + off;
		for (int64_t e = 0; e < lat; e++)
			o[e] = tf_f32_to_bf16(s[e]);
	}
}

/* n bf16 elements as floats (the compiler leaves the scalar loop scalar:
 * a bf16 cache's decode reads every row through here). */
static void bf16_widen(float *restrict o, const uint16_t *restrict s, int64_t n)
{
	int64_t e = 0;
#if defined(TF_SIMD_AVX2)
	for (; e + 8 <= n; e += 8) {
		__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + e)));
		_mm256_storeu_ps(o + e, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
	}
#elif defined(TF_SIMD_NEON)
	for (; e + 4 <= n; e += 4)
		vst1q_f32(o + e, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(s + e), 16)));
#endif
	for (; e < n; e++)
		o[e] = tf_bf16_to_f32(s[e]);
}

const float *mla_cache_rows(const mla_dims *d, const mla_cache *c, int64_t t, int64_t n,
			    float *buf)
{
	const int64_t lat = d->r + d->dr;
	size_t off = (size_t)(t % MLA_PAGE_ROWS) * lat;
	if (!c->bf16)
		return (const float *)c->page[t / MLA_PAGE_ROWS] + off;
	bf16_widen(buf, (const uint16_t *)c->page[t / MLA_PAGE_ROWS] + off, n * lat);
	return buf;
}

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

size_t mla_naive_work(const mla_dims *d)
{
	return (size_t)(d->dn + d->dr + MLA_QTILE) * MLA_KV_BLOCK;
}

/*
 * Per tile of MLA_QTILE queries, two products: scores = Q_h K_h^T against
 * the block's keys (transposed once per block into kt), and, after the
 * softmax update, acc_h += P V_h.  Entries past a query's own row are
 * masked to zero weight.
 */
void mla_naive_split(const mla_dims *d, const mla_cache *c, int64_t t0, int64_t tb,
		     float *cb, float *kpe)
{
	const int64_t lat = d->r + d->dr;
	for (int64_t t = 0; t < tb; t++) {
		size_t off = (size_t)((t0 + t) % MLA_PAGE_ROWS) * lat;
		const void *page = c->page[(t0 + t) / MLA_PAGE_ROWS];
		if (c->bf16) {
			const uint16_t *row = (const uint16_t *)page + off;
			bf16_widen(cb + t * d->r, row, d->r);
			bf16_widen(kpe + t * d->dr, row + d->r, d->dr);
		} else {
			const float *row = (const float *)page + off;
			memcpy(cb + t * d->r, row, (size_t)d->r * sizeof(float));
			memcpy(kpe + t * d->dr, row + d->r, (size_t)d->dr * sizeof(float));
		}
	}
}

void mla_naive_block(const mla_dims *d, int h, const float *q, int64_t n,
		     int64_t len, const float *kv, const float *kpe, int64_t t0,
		     int64_t tb, mla_run *run, float *acc, float *work)
{
	const int dq = d->dn + d->dr, dkv = d->dn + d->dv;
	const int64_t ldkv = (int64_t)d->heads * dkv;
	float *kt = work, *s = work + (size_t)dq * MLA_KV_BLOCK;

	/* kt [dq, tb]: the head's expanded k_nope, then the shared k_pe */
	for (int64_t t = 0; t < tb; t++) {
		const float *kn = kv + t * ldkv + (int64_t)h * dkv;
		const float *kp = kpe + t * d->dr;
		for (int e = 0; e < d->dn; e++)
			kt[e * tb + t] = kn[e];
		for (int e = 0; e < d->dr; e++)
			kt[(d->dn + e) * tb + t] = kp[e];
	}

	/* query i sits at row len + i and sees rows up to it: skip those
	 * before the block */
	int64_t first = t0 - len > 0 ? t0 - len : 0;
	for (int64_t i0 = first; i0 < n; i0 += MLA_QTILE) {
		int64_t qt = n - i0 < MLA_QTILE ? n - i0 : MLA_QTILE;
		memset(s, 0, (size_t)qt * tb * sizeof(float));
		tf_vec_gemm_acc(s, tb, q + (i0 * d->heads + h) * dq, (int64_t)d->heads * dq, kt,
				tb, qt, dq, tb);
		for (int64_t i = i0; i < i0 + qt; i++) {
			float *si = s + (i - i0) * tb, mx = -INFINITY;
			int64_t end = len + i + 1 - t0 < tb ? len + i + 1 - t0 : tb;
			for (int64_t t = 0; t < end; t++) {
				si[t] *= d->scale;
				mx = fmaxf(mx, si[t]);
			}
			mla_run *r = run + i * d->heads + h;
			float m = run_rescale(r, mx, acc + (i * d->heads + h) * d->dv, d->dv);
			for (int64_t t = 0; t < end; t++)
				si[t] -= m;
			tf_vec_exp(si, si, end);
			for (int64_t t = 0; t < end; t++)
				r->l += si[t];
			memset(si + end, 0, (size_t)(tb - end) * sizeof(float));
		}
		tf_vec_gemm_acc(acc + (i0 * d->heads + h) * d->dv, (int64_t)d->heads * d->dv, s, tb,
				kv + (int64_t)h * dkv + d->dn, ldkv, qt, tb, d->dv);
	}
}

int mla_absorb_query(const mla_dims *d, const mla_kvb *kvb, const float *q,
		     int h0, int h1, float *qlat)
{
	const int dq = d->dn + d->dr, lat = d->r + d->dr, dkv = d->dn + d->dv;
	for (int h = h0; h < h1; h++) {
		const float *qn = q + h * dq, *qp = qn + d->dn;
		float *ql = qlat + (int64_t)h * lat;
		if (kvb->w) {
			memset(ql, 0, (size_t)d->r * sizeof(float));
			tf_vec_axpy_rows(ql, qn, kvb->w + (int64_t)h * dkv * d->r, d->r, d->dn,
					 d->r);
		} else {
			int rc = tf_lin_backward_slice(kvb->lin, qn, (int64_t)h * dkv,
						       (int64_t)h * dkv + d->dn, ql);
			if (rc)
				return rc;
		}
		tf_vec_scale(ql, d->scale, d->r);
		for (int e = 0; e < d->dr; e++)
			ql[d->r + e] = qp[e] * d->scale;
	}
	return TF_OK;
}

int64_t mla_part_rows(int64_t rows)
{
	int64_t part = MLA_PART_MIN;
	while ((rows + part - 1) / part > MLA_PARTS)
		part *= 2;
	return part;
}

size_t mla_absorbed_work(const mla_dims *d)
{
	return (size_t)MLA_TILE * (d->heads + d->r + d->dr);
}

/* Every head of one query over nt rows of a tile: scores, then the
 * running softmax and accumulator; p: heads * MLA_TILE floats. */
static void absorbed_tile(const mla_dims *d, const float *qlat, const float *tile, int64_t nt,
			  mla_run *run, float *acc, float *p)
{
	const int64_t lat = d->r + d->dr;
	for (int h = 0; h < d->heads; h++) {
		float *ph = p + (int64_t)h * MLA_TILE, mx = -INFINITY;
		for (int64_t t = 0; t < nt; t++) {
			ph[t] = tf_vec_dot(qlat + h * lat, tile + t * lat, lat);
			mx = fmaxf(mx, ph[t]);
		}
		float *a = acc + (int64_t)h * d->r;
		float m = run_rescale(&run[h], mx, a, d->r);
		for (int64_t t = 0; t < nt; t++)
			ph[t] -= m;
		tf_vec_exp(ph, ph, nt);
		for (int64_t t = 0; t < nt; t++)
			run[h].l += ph[t];
		tf_vec_axpy_rows(a, ph, tile, lat, nt, d->r);
	}
}

void mla_absorbed_rows(const mla_dims *d, const float *qlat, int nq, int64_t seen,
		       const mla_cache *c, int64_t t0, int64_t t1, mla_run *run, float *acc,
		       int64_t stride, float *work)
{
	const int64_t lat = d->r + d->dr;
	const int64_t end = t1 < seen + nq - 1 ? t1 : seen + nq - 1;
	float *p = work, *buf = work + (size_t)d->heads * MLA_TILE;

	for (int i = 0; i < nq; i++) {
		if (seen + i <= t0)
			continue;
		for (int h = 0; h < d->heads; h++)
			run[i * stride + h] = (mla_run){ .m = -INFINITY, .l = 0.0f };
		memset(acc + i * stride * d->r, 0, (size_t)d->heads * d->r * sizeof(float));
	}
	/* A tile of rows at a time, within one page: the tile stays in cache
	 * while every query's heads score it and then accumulate it.  A
	 * query's tiles are those it has alone: they start where the part
	 * does and end at a page's end or its own last row. */
	for (int64_t tt = t0, nt; tt < end; tt += nt) {
		nt = MLA_PAGE_ROWS - tt % MLA_PAGE_ROWS;
		if (nt > MLA_TILE)
			nt = MLA_TILE;
		if (nt > end - tt)
			nt = end - tt;
		const float *tile = mla_cache_rows(d, c, tt, nt, buf);
		for (int i = 0; i < nq; i++) {
			const int64_t ni = seen + i - tt < nt ? seen + i - tt : nt;
			if (ni > 0)
				absorbed_tile(d, qlat + i * d->heads * lat, tile, ni, run + i * stride,
					      acc + i * stride * d->r, p);
		}
	}
}

int mla_absorbed_out(const mla_dims *d, const mla_kvb *kvb, const mla_run *run,
		     const float *acc, int np, int h0, int h1, float *o, float *lat)
{
	const int dkv = d->dn + d->dv;
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
		float *oh = o + h * d->dv;
		if (kvb->w) {
			const float *wuv = kvb->w + ((int64_t)h * dkv + d->dn) * d->r;
			for (int e = 0; e < d->dv; e++)
				oh[e] = tf_vec_dot(wuv + (int64_t)e * d->r, lat, d->r) / l;
			continue;
		}
		int rc = tf_lin_forward_slice(kvb->lin, lat, (int64_t)h * dkv + d->dn,
					      (int64_t)(h + 1) * dkv, oh);
		if (rc)
			return rc;
		for (int e = 0; e < d->dv; e++)
			oh[e] /= l;
	}
	return TF_OK;
}
