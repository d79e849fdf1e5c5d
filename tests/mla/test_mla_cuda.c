/*
 * test_mla_cuda.c - the CUDA MLA kernels (plugins/mla-cuda) against the
 * CPU plugin's attention (plugins/mla/attend.c), the cpu-ref backend's
 * rope and rmsnorm ops and a plain loop for the gate: fresh random inputs, caches of
 * 1, 17 and 300 rows (past a page; and 4095, 16 pages) before 1 or 9 new
 * rows, bf16 and float caches, head shapes of ling-nano, ling-tiny, an
 * odd one and Ling-3 flash, outputs poisoned with NaN first.  Built on
 * the SIMT harness (test_mla_cuda_sim) and, for a GPU, on the CUDA
 * runtime (test_mla_cuda_gpu).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/mla/attend.h"
#include "cpu_fixture.h"
#include "mla_cuda.h"
#include "support/testhost.h"

/* Max |err| / max |ref|.  The kernels sum in other orders than attend.c
 * (partial dot products, split parts) and nvcc contracts products into
 * FMAs, which costs a few float roundings: measured on the harness at
 * most 1.7e-6 (the naive form, qlat, RoPE and the gate exactly 0); a wrong
 * row, head, mask or scale costs 1e-2 or more. */
#define MLA_CUDA_TOL 1e-5
/* One split against none: the same sums, grouped by part (measured at
 * most 1.9e-6, over 4095 rows in 16 parts). */
#define MLA_CUDA_SPLIT_TOL 5e-6
/* RoPE and the gate: the CPU's float expressions, element by element
 * (the GPU's cosf, sinf and expf are within 2 ulp). */
#define MLA_CUDA_EW_TOL 1e-6

_Static_assert(MLA_CUDA_PAGE_ROWS == MLA_PAGE_ROWS, "the device reads the CPU's pages");

struct shape {
	const char *name;
	int heads, dn, dr, dv, r;
};

static const struct shape shapes[] = {
	{ "ling-nano", 4, 32, 16, 32, 64 },
	{ "ling-tiny", 2, 64, 32, 64, 128 },
	{ "odd", 11, 24, 6, 20, 40 },
	{ "flash", 64, 128, 64, 128, 512 },
};
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

static const int64_t cache_lens[] = { 1, 17, 300 };
static const int64_t new_rows[] = { 1, 9 };

typedef void case_fn(const struct shape *sh, int bf16, int64_t len, int64_t n, uint64_t seed);

/* A case of flash's shape: its 64 heads run only a few, for time. */
struct flash_case {
	int64_t len, n;
	int bf16;
};

/* Every shape but flash with every cache type, cache length and count of
 * new rows; flash with its own cases. */
static void each_case(case_fn *fn, const struct flash_case *fc, int n_fc, uint64_t seed)
{
	for (size_t k = 0; k < N_SHAPES; k++) {
		if (!strcmp(shapes[k].name, "flash")) {
			for (int f = 0; f < n_fc; f++)
				fn(&shapes[k], fc[f].bf16, fc[f].len, fc[f].n, seed++);
			continue;
		}
		for (int bf16 = 0; bf16 < 2; bf16++)
			for (size_t a = 0; a < sizeof(cache_lens) / sizeof(cache_lens[0]); a++)
				for (size_t b = 0; b < sizeof(new_rows) / sizeof(new_rows[0]); b++)
					fn(&shapes[k], bf16, cache_lens[a], new_rows[b], seed++);
	}
}

static mla_dims dims_of(const struct shape *s)
{
	return (mla_dims){ .heads = s->heads, .dn = s->dn, .dr = s->dr, .dv = s->dv, .r = s->r,
			   .scale = 1.0f / sqrtf((float)(s->dn + s->dr)) * 1.3f };
}

static tf_mla_cuda_dims cuda_dims(const mla_dims *d)
{
	return (tf_mla_cuda_dims){ .heads = d->heads, .dn = d->dn, .dr = d->dr, .dv = d->dv,
				   .r = d->r, .scale = d->scale };
}

static float *alloc_f(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	cr_assert(p);
	return p;
}

static float *rand_f(size_t n, float scale, uint64_t *seed)
{
	float *p = alloc_f(n);
	tf_test_fill_uniform(p, n, scale, seed);
	return p;
}

/* n bytes of device memory, every byte 0xFF (NaN as float). */
static void *dev_poisoned(size_t n)
{
	void *p = NULL;
	cr_assert_eq(cudaMalloc(&p, n ? n : 1), cudaSuccess);
	cr_assert_eq(cudaMemset(p, 0xFF, n ? n : 1), cudaSuccess);
	return p;
}

static void *upload(const void *x, size_t n)
{
	void *p = dev_poisoned(n);
	cr_assert_eq(cudaMemcpy(p, x, n, cudaMemcpyHostToDevice), cudaSuccess);
	return p;
}

static float *download(const void *dp, size_t nf)
{
	float *p = alloc_f(nf);
	cr_assert_eq(cudaMemcpy(p, dp, nf * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
	return p;
}

static void ok(int rc, const char *what)
{
	cr_assert_eq(rc, cudaSuccess, "%s: %s", what, cudaGetErrorString(rc));
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess, "%s", what);
}

/* A sequence of rows latent rows in both caches, host (attend.c's) and
 * device, written in two appends (len, then the rest) that cross a page
 * where rows > 256. */
struct seq {
	mla_dims d;
	int bf16;
	int64_t rows, n_pages;
	size_t page_bytes;
	void **hpage;                   /* host pages */
	void **dpage;                   /* device pages, their table on the host */
	void **dtable;                  /* the table on the device */
	mla_cache hc;
	tf_mla_cuda_cache dc;
};

static void seq_init(struct seq *s, const mla_dims *d, int bf16, int64_t len, int64_t n,
		     uint64_t *seed)
{
	const int64_t lat = d->r + d->dr;
	memset(s, 0, sizeof(*s));
	s->d = *d;
	s->bf16 = bf16;
	s->rows = len + n;
	s->n_pages = (s->rows + MLA_PAGE_ROWS - 1) / MLA_PAGE_ROWS;
	s->page_bytes = (size_t)MLA_PAGE_ROWS * lat * (bf16 ? 2 : 4);
	s->hpage = calloc((size_t)s->n_pages, sizeof(void *));
	s->dpage = calloc((size_t)s->n_pages, sizeof(void *));
	cr_assert(s->hpage && s->dpage);
	for (int64_t p = 0; p < s->n_pages; p++) {
		s->hpage[p] = malloc(s->page_bytes);
		cr_assert(s->hpage[p]);
		memset(s->hpage[p], 0xFF, s->page_bytes);
		s->dpage[p] = dev_poisoned(s->page_bytes);
	}
	s->dtable = upload(s->dpage, (size_t)s->n_pages * sizeof(void *));
	s->hc = (mla_cache){ .page = s->hpage, .bf16 = bf16 };
	s->dc = (tf_mla_cuda_cache){ .page = s->dtable, .bf16 = bf16 };

	/* latents as a norm leaves them (~1), keys as rope does */
	float *src = rand_f((size_t)s->rows * lat, 1.5f, seed);
	float *dsrc = upload(src, (size_t)s->rows * lat * sizeof(float));
	tf_mla_cuda_dims cd = cuda_dims(d);
	mla_cache_write(d, &s->hc, 0, s->rows, src);
	ok(tf_mla_cuda_cache_write(0, &cd, &s->dc, 0, len, dsrc), "cache_write");
	ok(tf_mla_cuda_cache_write(0, &cd, &s->dc, len, n, dsrc + len * lat), "cache_write");
	cudaFree(dsrc);
	free(src);
}

static void seq_free(struct seq *s)
{
	for (int64_t p = 0; p < s->n_pages; p++) {
		free(s->hpage[p]);
		cudaFree(s->dpage[p]);
	}
	free(s->hpage);
	free(s->dpage);
	cudaFree(s->dtable);
}

/* kv_b_proj [heads, dn + dv, r], small enough that scores stay O(1). */
static float *rand_wkvb(const mla_dims *d, uint64_t *seed)
{
	return rand_f((size_t)d->heads * (d->dn + d->dv) * d->r, 1.0f / sqrtf((float)d->r), seed);
}

/* The cache appends are the CPU's bit for bit: the bf16 rounding is the
 * contract (a row is rounded once, where it is written). */
Test(mla_cuda, cache_write_bit_exact)
{
	uint64_t seed = 11;
	for (size_t k = 0; k < N_SHAPES; k++)
		for (int bf16 = 0; bf16 < 2; bf16++) {
			mla_dims d = dims_of(&shapes[k]);
			struct seq s;
			seq_init(&s, &d, bf16, 300, 9, &seed);
			unsigned char *h = malloc(s.page_bytes);
			cr_assert(h);
			const size_t row_bytes = s.page_bytes / MLA_PAGE_ROWS;
			for (int64_t p = 0; p < s.n_pages; p++) {
				int64_t used = s.rows - p * MLA_PAGE_ROWS;
				if (used > MLA_PAGE_ROWS)
					used = MLA_PAGE_ROWS;
				cr_assert_eq(cudaMemcpy(h, s.dpage[p], s.page_bytes,
							cudaMemcpyDeviceToHost), cudaSuccess);
				cr_assert(!memcmp(h, s.hpage[p], (size_t)used * row_bytes),
					  "%s %s page %lld differs", shapes[k].name,
					  bf16 ? "bf16" : "f32", (long long)p);
			}
			free(h);
			seq_free(&s);
		}
}

/* q's rope slices (several heads, behind each head's dn) and k_pe (one
 * head behind the latent), YaRN-like frequencies and attention factor,
 * positions up to 262143: the other elements must come back unchanged. */
Test(mla_cuda, rope)
{
	uint64_t seed = 5;
	cpu_fixture f;
	cpu_fixture_open(&f, 1);
	const tf_backend *ref = f.be[CPU_REF];
	for (size_t k = 0; k < N_SHAPES; k++)
		for (int il = 0; il < 2; il++) {
			const struct shape *sh = &shapes[k];
			const int dq = sh->dn + sh->dr, lat = sh->r + sh->dr;
			const int64_t n = 9;
			int32_t pos[9];
			float *inv = alloc_f((size_t)sh->dr / 2);
			for (int j = 0; j < sh->dr / 2; j++)
				inv[j] = powf(6e6f, -2.0f * j / sh->dr) * (j < sh->dr / 4 ? 1.0f : 0.25f);
			float pf[9];
			tf_test_fill_uniform(pf, n, 1.0f, &seed);
			for (int i = 0; i < n; i++)
				pos[i] = i == 0 ? 262143 : (int32_t)((pf[i] + 1.0f) * 131071.0f);
			int32_t *dpos = upload(pos, sizeof(pos));
			float *dinv = upload(inv, (size_t)sh->dr / 2 * sizeof(float));
			struct {
				int heads;
				int64_t row_stride, head_stride, off;
			} cases[2] = { { sh->heads, (int64_t)sh->heads * dq, dq, sh->dn },
				       { 1, lat, 0, sh->r } };
			for (int c = 0; c < 2; c++) {
				size_t total = (size_t)n * cases[c].row_stride;
				float *x = rand_f(total, 2.0f, &seed);
				float *dx = upload(x, total * sizeof(float));
				ok(tf_cuda_rope(0, dx + cases[c].off, n, cases[c].heads,
						    cases[c].row_stride, cases[c].head_stride, sh->dr,
						    dpos, dinv, 1.17f, il), "rope");
				ref->rope(f.ctx[CPU_REF], x + cases[c].off, n, cases[c].heads,
					  cases[c].row_stride, cases[c].head_stride, sh->dr, pos, inv,
					  1.17f, il);
				float *got = download(dx, total);
				double e = tf_test_rel_err(got, x, total, 1e-3);
				cr_log_info("rope %s %d case %d: %.3g", sh->name, il, c, e);
				cr_assert(e <= MLA_CUDA_EW_TOL, "rope %s %s case %d: rel err %g",
					  sh->name, il ? "interleaved" : "split", c, e);
				free(got);
				free(x);
				cudaFree(dx);
			}
			free(inv);
			cudaFree(dpos);
			cudaFree(dinv);
		}
	cpu_fixture_close(&f);
}

/* kv_a_layernorm's form: the first r elements of rows lat apart against
 * cpu-ref's rmsnorm row by row (k_pe behind each must come back as it
 * was), and q_a_layernorm's contiguous rows (20: fewer than a block's
 * threads). */
Test(mla_cuda, rmsnorm)
{
	uint64_t seed = 6;
	cpu_fixture f;
	cpu_fixture_open(&f, 1);
	const tf_backend *ref = f.be[CPU_REF];
	for (size_t k = 0; k <= N_SHAPES; k++) {
		const int dim = k < N_SHAPES ? shapes[k].r : 20;
		const int64_t stride = k < N_SHAPES ? dim + shapes[k].dr : dim, n = 7;
		const size_t total = (size_t)(n * stride);
		float *x = rand_f(total, 2.0f, &seed), *w = rand_f((size_t)dim, 1.0f, &seed);
		float *dx = upload(x, total * sizeof(float)), *dw = upload(w, dim * sizeof(float));
		ok(tf_mla_cuda_rmsnorm(0, dx, n, dim, stride, dw, 1e-6f), "rmsnorm");
		for (int64_t i = 0; i < n; i++)
			ref->rmsnorm(f.ctx[CPU_REF], x + i * stride, x + i * stride, w, 1, dim, 1e-6f);
		float *got = download(dx, total);
		double e = tf_test_rel_err(got, x, total, 1e-3);
		cr_log_info("rmsnorm dim %d stride %lld: %.3g", dim, (long long)stride, e);
		cr_assert(e <= MLA_CUDA_EW_TOL, "rmsnorm dim %d stride %lld: rel err %g", dim,
			  (long long)stride, e);
		free(got);
		free(x);
		free(w);
		cudaFree(dx);
		cudaFree(dw);
	}
	cpu_fixture_close(&f);
}

Test(mla_cuda, gate)
{
	uint64_t seed = 7;
	for (size_t k = 0; k < N_SHAPES; k++)
		for (int hw = 0; hw < 2; hw++) {
			const struct shape *sh = &shapes[k];
			mla_dims d = dims_of(sh);
			tf_mla_cuda_dims cd = cuda_dims(&d);
			const int64_t n = 9, per = hw ? d.dv : 1;
			const size_t no = (size_t)n * d.heads * d.dv, ng = no / per;
			float *o = rand_f(no, 3.0f, &seed), *g = rand_f(ng, 6.0f, &seed);
			float *dout = upload(o, no * sizeof(float)), *dg = upload(g, ng * sizeof(float));
			ok(tf_mla_cuda_gate(0, &cd, dout, dg, n, hw), "gate");
			for (size_t i = 0; i < no; i++)
				o[i] *= 1.0f / (1.0f + expf(-g[i / per]));
			float *got = download(dout, no);
			double e = tf_test_rel_err(got, o, no, 1e-3);
			cr_log_info("gate %s %d: %.3g", sh->name, hw, e);
			cr_assert(e <= MLA_CUDA_EW_TOL, "gate %s %s: rel err %g", sh->name,
				  hw ? "head-wise" : "element-wise", e);
			free(got);
			free(o);
			free(g);
			cudaFree(dout);
			cudaFree(dg);
		}
}

/* --- absorbed form --- */

/* attend.c's absorbed form for queries len .. len + n - 1, all rows in
 * one part: qlat [n, heads, lat] and o [n, heads * dv]. */
static void absorbed_ref(const struct seq *s, const float *w, const float *q, int64_t len,
			 int64_t n, float *qlat, float *o)
{
	const mla_dims *d = &s->d;
	const int64_t lat = d->r + d->dr;
	const mla_kvb kvb = { .w = w };
	mla_run *run = malloc((size_t)d->heads * sizeof(*run));
	float *acc = alloc_f((size_t)d->heads * d->r), *work = alloc_f(mla_absorbed_work(d));
	float *buf = alloc_f((size_t)d->r);
	cr_assert(run);
	for (int64_t i = 0; i < n; i++) {
		float *ql = qlat + i * d->heads * lat;
		cr_assert_eq(mla_absorb_query(d, &kvb, q + i * d->heads * (d->dn + d->dr), 0,
					      d->heads, ql), 0);
		mla_absorbed_rows(d, ql, 1, len + i + 1, &s->hc, 0, len + i + 1, run, acc, 0, work);
		cr_assert_eq(mla_absorbed_out(d, &kvb, run, acc, 1, 0, d->heads,
					      o + i * d->heads * d->dv, buf), 0);
	}
	free(run);
	free(acc);
	free(work);
	free(buf);
}

/* The device's absorbed form with parts of part_rows rows; o on the host. */
static float *absorbed_dev(const struct seq *s, const float *dw, const float *dq,
			   int64_t len, int64_t n, int64_t part_rows, float **qlat_out)
{
	const mla_dims *d = &s->d;
	tf_mla_cuda_dims cd = cuda_dims(d);
	const int64_t lat = d->r + d->dr;
	const int parts = tf_mla_cuda_parts(len + n, part_rows);
	float *dqlat = dev_poisoned((size_t)n * d->heads * lat * sizeof(float));
	tf_mla_cuda_run *drun = dev_poisoned((size_t)parts * n * d->heads * sizeof(*drun));
	float *dacc = dev_poisoned((size_t)parts * n * d->heads * d->r * sizeof(float));
	float *dout = dev_poisoned((size_t)n * d->heads * d->dv * sizeof(float));

	ok(tf_mla_cuda_absorb_query(0, &cd, dw, dq, n, dqlat), "absorb_query");
	ok(tf_mla_cuda_decode_split(0, &cd, dqlat, n, &s->dc, len, part_rows, parts, drun, dacc),
	   "decode_split");
	ok(tf_mla_cuda_decode_combine(0, &cd, dw, drun, dacc, parts, n, dout), "decode_combine");
	float *o = download(dout, (size_t)n * d->heads * d->dv);
	if (qlat_out)
		*qlat_out = download(dqlat, (size_t)n * d->heads * lat);
	cudaFree(dqlat);
	cudaFree(drun);
	cudaFree(dacc);
	cudaFree(dout);
	return o;
}

/* The device's unsplit form and its split into parts of split_rows rows
 * against attend.c, and against each other. */
static void absorbed_check(const struct shape *sh, int bf16, int64_t len, int64_t n,
			   int64_t split_rows, uint64_t seed)
{
	mla_dims d = dims_of(sh);
	const int64_t lat = d.r + d.dr, dq = d.dn + d.dr;
	struct seq s;
	seq_init(&s, &d, bf16, len, n, &seed);
	float *w = rand_wkvb(&d, &seed), *q = rand_f((size_t)n * d.heads * dq, 1.0f, &seed);
	float *dw = upload(w, (size_t)d.heads * (d.dn + d.dv) * d.r * sizeof(float));
	float *dqv = upload(q, (size_t)n * d.heads * dq * sizeof(float));
	const size_t no = (size_t)n * d.heads * d.dv, nq = (size_t)n * d.heads * lat;
	float *qlat = alloc_f(nq), *o = alloc_f(no), *gql;
	absorbed_ref(&s, w, q, len, n, qlat, o);

	const int64_t one = (len + n + MLA_CUDA_TILE - 1) / MLA_CUDA_TILE * MLA_CUDA_TILE;
	float *whole = absorbed_dev(&s, dw, dqv, len, n, one, &gql);
	float *split = absorbed_dev(&s, dw, dqv, len, n, split_rows, NULL);
	double eq = tf_test_rel_err(gql, qlat, nq, 1e-3);
	double ew = tf_test_rel_err(whole, o, no, 1e-3);
	double es = tf_test_rel_err(split, o, no, 1e-3);
	double ews = tf_test_rel_err(split, whole, no, 1e-3);
	cr_log_info("absorbed %s %s len %lld n %lld: qlat %.3g unsplit %.3g split %.3g split/unsplit %.3g",
		    sh->name, bf16 ? "bf16" : "f32", (long long)len, (long long)n, eq, ew, es, ews);
	cr_assert(eq <= MLA_CUDA_TOL && ew <= MLA_CUDA_TOL && es <= MLA_CUDA_TOL &&
		  ews <= MLA_CUDA_SPLIT_TOL,
		  "absorbed %s %s len %lld n %lld: rel err qlat %g, unsplit %g, split %g, split vs unsplit %g",
		  sh->name, bf16 ? "bf16" : "f32", (long long)len, (long long)n, eq, ew, es, ews);
	free(qlat);
	free(o);
	free(gql);
	free(whole);
	free(split);
	free(w);
	free(q);
	cudaFree(dw);
	cudaFree(dqv);
	seq_free(&s);
}

static void absorbed_case(const struct shape *sh, int bf16, int64_t len, int64_t n,
			  uint64_t seed)
{
	absorbed_check(sh, bf16, len, n, MLA_CUDA_TILE * 4, seed);
}

/* Flash: a decode step over 300 rows, and a 9-row verify over 17. */
Test(mla_cuda, absorbed_decode)
{
	static const struct flash_case fc[] = { { 300, 1, 0 }, { 17, 9, 1 } };
	each_case(absorbed_case, fc, 2, 100);
}

/* The part size chosen for a long context: every part a whole number of
 * tiles, no more than MLA_CUDA_MAX_PARTS of them, covering every row. */
Test(mla_cuda, part_rows)
{
	mla_dims d = dims_of(&shapes[3]);
	tf_mla_cuda_dims cd = cuda_dims(&d);
	const int64_t rows[] = { 1, 300, 262144, 1 << 20 };
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		int64_t pr = tf_mla_cuda_part_rows(&cd, rows[k], 1, 264);
		int parts = tf_mla_cuda_parts(rows[k], pr);
		cr_assert(pr % MLA_CUDA_TILE == 0 && parts >= 1 && parts <= MLA_CUDA_MAX_PARTS &&
			  (int64_t)parts * pr >= rows[k], "rows %lld: part_rows %lld, parts %d",
			  (long long)rows[k], (long long)pr, parts);
	}
	/* 262144 rows of one sequence: 8 head groups x parts fill 264 blocks */
	int64_t pr = tf_mla_cuda_part_rows(&cd, 262144, 1, 264);
	cr_assert_geq(tf_mla_cuda_parts(262144, pr) * 8, 264);
}

/* A decode step and a 2-row verify over 4095 cached rows (16 pages),
 * split as tf_mla_cuda_part_rows chooses for a device of 32 blocks. */
Test(mla_cuda, long_context_split)
{
	mla_dims d = dims_of(&shapes[0]);
	tf_mla_cuda_dims cd = cuda_dims(&d);
	for (int64_t n = 1; n <= 2; n++) {
		const int64_t pr = tf_mla_cuda_part_rows(&cd, 4095 + n, n, 32);
		cr_assert_geq(tf_mla_cuda_parts(4095 + n, pr), 8);
		absorbed_check(&shapes[0], 1, 4095, n, pr, 900 + n);
	}
}

/* --- naive form --- */

/* kv [tb, heads * (dn + dv)] = cb [tb, r] kv_b_proj^T, on the host (the
 * layer's GEMM, not one of these kernels). */
static void expand_kv(const mla_dims *d, const float *w, const float *cb, int64_t tb, float *kv)
{
	const int64_t ld = (int64_t)d->heads * (d->dn + d->dv);
	for (int64_t t = 0; t < tb; t++)
		for (int64_t j = 0; j < ld; j++) {
			float v = 0.0f;
			for (int c = 0; c < d->r; c++)
				v += cb[t * d->r + c] * w[j * d->r + c];
			kv[t * ld + j] = v;
		}
}

/* mla.c's naive form and the device's, page by page: the pages' split
 * rows must be the CPU's bit for bit, the outputs within the bound. */
static void naive_case(const struct shape *sh, int bf16, int64_t len, int64_t n, uint64_t seed)
{
	mla_dims d = dims_of(sh);
	tf_mla_cuda_dims cd = cuda_dims(&d);
	const int64_t dq = d.dn + d.dr, ld = (int64_t)d.heads * (d.dn + d.dv), end = len + n;
	struct seq s;
	seq_init(&s, &d, bf16, len, n, &seed);
	float *w = rand_wkvb(&d, &seed), *q = rand_f((size_t)n * d.heads * dq, 1.0f, &seed);
	const size_t no = (size_t)n * d.heads * d.dv;
	float *o = alloc_f(no), *cb = alloc_f((size_t)MLA_PAGE_ROWS * d.r);
	float *kpe = alloc_f((size_t)MLA_PAGE_ROWS * d.dr), *kv = alloc_f((size_t)MLA_PAGE_ROWS * ld);
	float *work = alloc_f(mla_naive_work(&d));
	mla_run *run = malloc((size_t)n * d.heads * sizeof(*run));
	cr_assert(run);

	float *dqv = upload(q, (size_t)n * d.heads * dq * sizeof(float));
	float *dcb = dev_poisoned((size_t)MLA_PAGE_ROWS * d.r * sizeof(float));
	float *dkpe = dev_poisoned((size_t)MLA_PAGE_ROWS * d.dr * sizeof(float));
	float *dkv = dev_poisoned((size_t)MLA_PAGE_ROWS * ld * sizeof(float));
	tf_mla_cuda_run *drun = dev_poisoned((size_t)n * d.heads * sizeof(*drun));
	float *dacc = dev_poisoned(no * sizeof(float));

	for (int64_t i = 0; i < n * d.heads; i++)
		run[i] = (mla_run){ .m = -INFINITY, .l = 0.0f };
	memset(o, 0, no * sizeof(float));
	ok(tf_mla_cuda_naive_begin(0, &cd, n, drun, dacc), "naive_begin");
	for (int64_t t0 = 0; t0 < end; t0 += MLA_KV_BLOCK) {
		const int64_t tb = end - t0 < MLA_KV_BLOCK ? end - t0 : MLA_KV_BLOCK;
		mla_naive_split(&d, &s.hc, t0, tb, cb, kpe);
		ok(tf_mla_cuda_naive_split(0, &cd, &s.dc, t0, tb, dcb, dkpe), "naive_split");
		float *gcb = download(dcb, (size_t)tb * d.r), *gkpe = download(dkpe, (size_t)tb * d.dr);
		cr_assert(!memcmp(gcb, cb, (size_t)tb * d.r * sizeof(float)) &&
			  !memcmp(gkpe, kpe, (size_t)tb * d.dr * sizeof(float)),
			  "naive_split %s rows %lld + %lld differ", sh->name, (long long)t0,
			  (long long)tb);
		free(gcb);
		free(gkpe);
		expand_kv(&d, w, cb, tb, kv);
		for (int h = 0; h < d.heads; h++)
			mla_naive_block(&d, h, q, n, len, kv, kpe, t0, tb, run, o, work);
		cr_assert_eq(cudaMemcpy(dkv, kv, (size_t)tb * ld * sizeof(float),
					cudaMemcpyHostToDevice), cudaSuccess);
		ok(tf_mla_cuda_naive_block(0, &cd, dqv, n, len, dkv, dkpe, t0, tb, drun, dacc),
		   "naive_block");
	}
	for (int64_t i = 0; i < n * d.heads; i++)
		for (int e = 0; e < d.dv; e++)
			o[i * d.dv + e] *= 1.0f / run[i].l;
	ok(tf_mla_cuda_naive_end(0, &cd, n, drun, dacc), "naive_end");

	float *got = download(dacc, no);
	double e = tf_test_rel_err(got, o, no, 1e-3);
	cr_log_info("naive %s %s len %lld n %lld: %.3g", sh->name, bf16 ? "bf16" : "f32",
		    (long long)len, (long long)n, e);
	cr_assert(e <= MLA_CUDA_TOL, "naive %s %s len %lld n %lld: rel err %g", sh->name,
		  bf16 ? "bf16" : "f32", (long long)len, (long long)n, e);
	free(got);
	free(o);
	free(cb);
	free(kpe);
	free(kv);
	free(work);
	free(run);
	free(w);
	free(q);
	cudaFree(dqv);
	cudaFree(dcb);
	cudaFree(dkpe);
	cudaFree(dkv);
	cudaFree(drun);
	cudaFree(dacc);
	seq_free(&s);
}

/* Flash: short caches only, as the host's float expansion of 64 heads'
 * keys and values is what costs time here. */
Test(mla_cuda, naive_prefill)
{
	static const struct flash_case fc[] = { { 17, 9, 1 }, { 1, 1, 0 } };
	each_case(naive_case, fc, 2, 300);
}

/* Shapes the kernels cannot take are refused, not run. */
Test(mla_cuda, refuses_bad_shapes)
{
	tf_mla_cuda_dims big = { .heads = 2, .dn = 16, .dr = 8, .dv = 16, .r = 1024, .scale = 1 };
	tf_mla_cuda_dims odd = { .heads = 2, .dn = 16, .dr = 7, .dv = 16, .r = 64, .scale = 1 };
	tf_mla_cuda_dims ok_d = { .heads = 2, .dn = 16, .dr = 8, .dv = 16, .r = 64, .scale = 1 };
	cr_assert_eq(tf_mla_cuda_absorb_query(0, &big, NULL, NULL, 1, NULL), cudaErrorInvalidValue);
	cr_assert_eq(tf_mla_cuda_absorb_query(0, &odd, NULL, NULL, 1, NULL), cudaErrorInvalidValue);
	/* parts that do not cover the rows, and a part not a whole number of tiles */
	cr_assert_eq(tf_mla_cuda_decode_split(0, &ok_d, NULL, 1, NULL, 100, 16, 2, NULL, NULL),
		     cudaErrorInvalidValue);
	cr_assert_eq(tf_mla_cuda_decode_split(0, &ok_d, NULL, 1, NULL, 10, 12, 2, NULL, NULL),
		     cudaErrorInvalidValue);
	cr_assert_eq(tf_mla_cuda_naive_block(0, &ok_d, NULL, 1, 0, NULL, NULL, 0, 257, NULL, NULL),
		     cudaErrorInvalidValue);
}
