/*
 * test_mla_cuda_layer.c - a whole gated MLA layer with its attention on
 * the CUDA kernels (plugins/mla-cuda) against the float64 layer of
 * mla_ref.c: the projections, norms and the kv_b_proj expansion of the
 * naive form in float on the host (they are the linears' and the
 * backend's work, not these kernels'), RoPE, the cache, both attention
 * forms and the gate on the device.  One sequence over six forwards,
 * prefills (naive form) and decode steps (absorbed form, split over
 * parts), 311 tokens in all so the cache crosses a page.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/mla/rope.h"
#include "mla_case.h"
#include "mla_cuda.h"

/* As test_mla.c's bounds for the CPU plugin: float error against the
 * float64 layer, whose cache is rounded to bf16 the same way when the
 * device's is (measured at most 1.5e-6). */
#define LAYER_TOL 1e-5

/* y [n, out] = x [n, in] W^T, W [out, in]. */
static void matmul(const float *x, const float *w, int64_t n, int in, int out, float *y)
{
	for (int64_t i = 0; i < n; i++)
		for (int o = 0; o < out; o++) {
			float s = 0.0f;
			for (int k = 0; k < in; k++)
				s += x[i * in + k] * w[(int64_t)o * in + k];
			y[i * out + o] = s;
		}
}

/* RMSNorm of n rows of len elements at stride ld, in place. */
static void rmsnorm(float *x, int64_t n, int len, int64_t ld, const float *w, float eps)
{
	for (int64_t i = 0; i < n; i++) {
		float *r = x + i * ld, ss = 0.0f;
		for (int k = 0; k < len; k++)
			ss += r[k] * r[k];
		const float inv = 1.0f / sqrtf(ss / len + eps);
		for (int k = 0; k < len; k++)
			r[k] = r[k] * inv * w[k];
	}
}

static void *dev(size_t bytes)
{
	void *p = NULL;
	cr_assert_eq(cudaMalloc(&p, bytes), cudaSuccess);
	cr_assert_eq(cudaMemset(p, 0xFF, bytes), cudaSuccess);
	return p;
}

static void put(void *d, const void *h, size_t bytes)
{
	cr_assert_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
}

static void get(void *h, const void *d, size_t bytes)
{
	cr_assert_eq(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

static void ok(int rc, const char *what)
{
	cr_assert_eq(rc, cudaSuccess, "%s: %s", what, cudaGetErrorString(rc));
}

/* The layer on the device: its weights, the sequence's cache, scratch. */
struct layer {
	const mla_ref_weights *w;
	tf_mla_cuda_dims d;
	mla_rope rope;
	int lat, dq, gw;
	float *wkvb, *inv_freq;         /* device */
	tf_mla_cuda_cache c;
	void *pages[2], **table;
	int64_t len;
};

/* n rows x at positions len.. through the layer; y [n, hidden]. */
static void layer_forward(struct layer *L, const float *x, int64_t n, int naive, float *y)
{
	const mla_ref_weights *w = L->w;
	const tf_mla_cuda_dims *d = &L->d;
	const int H = w->hidden, nq = d->heads * L->dq, no = d->heads * d->dv;
	const int dkv = d->dn + d->dv;
	float *q = malloc((size_t)n * nq * sizeof(float)), *ckv = malloc((size_t)n * L->lat * 4);
	float *gate = malloc((size_t)n * L->gw * 4), *o = malloc((size_t)n * no * 4);
	int32_t *pos = malloc((size_t)n * sizeof(int32_t));
	cr_assert(q && ckv && gate && o && pos);

	if (w->rq) {
		float *qa = malloc((size_t)n * w->rq * sizeof(float));
		cr_assert(qa);
		matmul(x, w->wqa, n, H, w->rq, qa);
		rmsnorm(qa, n, w->rq, w->rq, w->qa_norm, (float)w->eps);
		matmul(qa, w->wqb, n, w->rq, nq, q);
		free(qa);
	} else {
		matmul(x, w->wq, n, H, nq, q);
	}
	matmul(x, w->wkva, n, H, L->lat, ckv);
	rmsnorm(ckv, n, d->r, L->lat, w->kva_norm, (float)w->eps);
	matmul(x, w->wg, n, H, L->gw, gate);
	for (int64_t i = 0; i < n; i++)
		pos[i] = (int32_t)(L->len + i);

	float *dq_ = dev((size_t)n * nq * 4), *dckv = dev((size_t)n * L->lat * 4);
	float *dgate = dev((size_t)n * L->gw * 4), *dout = dev((size_t)n * no * 4);
	int32_t *dpos = dev((size_t)n * sizeof(int32_t));
	put(dq_, q, (size_t)n * nq * 4);
	put(dckv, ckv, (size_t)n * L->lat * 4);
	put(dgate, gate, (size_t)n * L->gw * 4);
	put(dpos, pos, (size_t)n * sizeof(int32_t));

	ok(tf_cuda_rope(0, dq_ + d->dn, n, d->heads, nq, L->dq, d->dr, dpos, L->inv_freq,
			    L->rope.attn_factor, w->interleave), "rope q");
	ok(tf_cuda_rope(0, dckv + d->r, n, 1, L->lat, 0, d->dr, dpos, L->inv_freq,
			    L->rope.attn_factor, w->interleave), "rope k");
	ok(tf_mla_cuda_cache_write(0, d, &L->c, L->len, n, dckv), "cache_write");

	if (naive) {
		const int64_t end = L->len + n, ld = (int64_t)d->heads * dkv;
		float *cb = malloc((size_t)MLA_CUDA_PAGE_ROWS * d->r * 4);
		float *kv = malloc((size_t)MLA_CUDA_PAGE_ROWS * ld * 4);
		float *dcb = dev((size_t)MLA_CUDA_PAGE_ROWS * d->r * 4);
		float *dkpe = dev((size_t)MLA_CUDA_PAGE_ROWS * d->dr * 4);
		float *dexp = dev((size_t)MLA_CUDA_PAGE_ROWS * ld * 4);
		tf_mla_cuda_run *drun = dev((size_t)n * d->heads * sizeof(*drun));
		cr_assert(cb && kv);
		ok(tf_mla_cuda_naive_begin(0, d, n, drun, dout), "naive_begin");
		for (int64_t t0 = 0; t0 < end; t0 += MLA_CUDA_PAGE_ROWS) {
			const int64_t tb = end - t0 < MLA_CUDA_PAGE_ROWS ? end - t0 :
					   MLA_CUDA_PAGE_ROWS;
			ok(tf_mla_cuda_naive_split(0, d, &L->c, t0, tb, dcb, dkpe), "naive_split");
			get(cb, dcb, (size_t)tb * d->r * 4);
			matmul(cb, w->wkvb, tb, d->r, (int)ld, kv);
			put(dexp, kv, (size_t)tb * ld * 4);
			ok(tf_mla_cuda_naive_block(0, d, dq_, n, L->len, dexp, dkpe, t0, tb, drun,
						   dout), "naive_block");
		}
		ok(tf_mla_cuda_naive_end(0, d, n, drun, dout), "naive_end");
		free(cb);
		free(kv);
		cudaFree(dcb);
		cudaFree(dkpe);
		cudaFree(dexp);
		cudaFree(drun);
	} else {
		/* parts of a tile or two: many parts even for these short rows */
		const int64_t pr = 2 * MLA_CUDA_TILE;
		const int parts = tf_mla_cuda_parts(L->len + n, pr);
		float *dqlat = dev((size_t)n * d->heads * (d->r + d->dr) * 4);
		tf_mla_cuda_run *drun = dev((size_t)parts * n * d->heads * sizeof(*drun));
		float *dacc = dev((size_t)parts * n * d->heads * d->r * 4);
		ok(tf_mla_cuda_absorb_query(0, d, L->wkvb, dq_, n, dqlat), "absorb_query");
		ok(tf_mla_cuda_decode_split(0, d, dqlat, n, &L->c, L->len, pr, parts, drun, dacc),
		   "decode_split");
		ok(tf_mla_cuda_decode_combine(0, d, L->wkvb, drun, dacc, parts, n, dout),
		   "decode_combine");
		cudaFree(dqlat);
		cudaFree(drun);
		cudaFree(dacc);
	}
	ok(tf_mla_cuda_gate(0, d, dout, dgate, n, w->gate_head_wise), "gate");
	get(o, dout, (size_t)n * no * 4);
	matmul(o, w->wdense, n, no, H, y);
	L->len += n;

	cudaFree(dq_);
	cudaFree(dckv);
	cudaFree(dgate);
	cudaFree(dout);
	cudaFree(dpos);
	free(q);
	free(ckv);
	free(gate);
	free(o);
	free(pos);
}

static void check_layer(bool q_lora, bool head_wise, int yarn, int dn, int dv, int r, int bf16,
			uint64_t seed)
{
	static const struct {
		int64_t n;
		int naive;
	} steps[] = { { 200, 1 }, { 1, 0 }, { 70, 1 }, { 9, 0 }, { 1, 0 }, { 30, 1 } };
	struct mla_case c;
	mla_case_init_dims(&c, q_lora, head_wise, yarn, dn, dv, r, seed);
	c.w.bf16_cache = bf16;
	tf_testhost *th = tf_testhost_new(&c.cfg, 1);
	const mla_ref_weights *w = &c.w;
	struct layer L = { .w = w, .lat = w->r + w->dr, .dq = w->dn + w->dr,
			   .gw = head_wise ? w->heads : w->heads * w->dv };
	cr_assert_eq(mla_rope_init(tf_testhost_host(th), w->dr, &L.rope), 0);
	L.d = (tf_mla_cuda_dims){ .heads = w->heads, .dn = w->dn, .dr = w->dr, .dv = w->dv,
				  .r = w->r,
				  .scale = L.rope.scale_mult / sqrtf((float)(w->dn + w->dr)) };
	const size_t nw = (size_t)w->heads * (w->dn + w->dv) * w->r;
	L.wkvb = dev(nw * 4);
	put(L.wkvb, w->wkvb, nw * 4);
	L.inv_freq = dev((size_t)w->dr / 2 * 4);
	put(L.inv_freq, L.rope.inv_freq, (size_t)w->dr / 2 * 4);
	for (int p = 0; p < 2; p++)
		L.pages[p] = dev((size_t)MLA_CUDA_PAGE_ROWS * L.lat * (bf16 ? 2 : 4));
	L.table = dev(sizeof(L.pages));
	put(L.table, L.pages, sizeof(L.pages));
	L.c = (tf_mla_cuda_cache){ .page = L.table, .bf16 = bf16 };

	int64_t total = 0;
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++)
		total += steps[k].n;
	cr_assert_leq(total, 2 * MLA_CUDA_PAGE_ROWS);
	const int H = w->hidden;
	float *x = malloc((size_t)total * H * 4), *y = malloc((size_t)total * H * 4);
	float *yd = malloc((size_t)total * H * 4);
	cr_assert(x && y && yd);
	tf_test_fill_uniform(x, (size_t)total * H, 1.0f, &seed);
	mla_case_reference(&c, x, total, yd);
	for (size_t k = 0, row = 0; k < sizeof(steps) / sizeof(steps[0]); row += steps[k].n, k++)
		layer_forward(&L, x + row * H, steps[k].n, steps[k].naive, y + row * H);

	double e = tf_test_rel_err(y, yd, (size_t)total * H, 1e-3);
	cr_log_info("layer (q_lora %d, head-wise %d, yarn %d, dn %d dv %d r %d, %s cache): rel err %.3g",
		    q_lora, head_wise, yarn, dn, dv, r, bf16 ? "bf16" : "f32", e);
	cr_assert(e <= LAYER_TOL,
		  "layer (q_lora %d, head-wise %d, yarn %d, dn %d dv %d r %d, %s cache): rel err %.3g vs f64",
		  q_lora, head_wise, yarn, dn, dv, r, bf16 ? "bf16" : "f32", e);

	free(x);
	free(y);
	free(yd);
	for (int p = 0; p < 2; p++)
		cudaFree(L.pages[p]);
	cudaFree(L.table);
	cudaFree(L.wkvb);
	cudaFree(L.inv_freq);
	mla_rope_free(&L.rope);
	tf_testhost_free(th);
	mla_case_free(&c);
}

Test(mla_cuda_layer, plain_rope_f32_cache) { check_layer(false, true, YARN_NONE, 16, 12, 24, 0, 41); }
Test(mla_cuda_layer, yarn_q_lora_bf16_cache) { check_layer(true, false, YARN_MSCALE, 16, 12, 24, 1, 42); }
Test(mla_cuda_layer, yarn_factor_nano_dims) { check_layer(false, true, YARN_FACTOR_ONLY, 32, 32, 64, 1, 43); }
