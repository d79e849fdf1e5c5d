/*
 * test_backend_ops.c - every CPU op, through the ABI, on both descriptors,
 * against a double-precision formula on fresh random data.  Lengths are
 * chosen off the vector width (1, 7, 9, 33, ...) to reach the tails, and
 * row counts large enough that the thread pool splits the work.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fixture.h"

#define TOL 2e-6

static cpu_fixture fx;

static void setup(void) { cpu_fixture_open(&fx, 3); }
static void teardown(void) { cpu_fixture_close(&fx); }

TestSuite(backend_ops, .init = setup, .fini = teardown);

static float *random_floats(size_t n, float scale, uint64_t seed)
{
	float *x = malloc(n * sizeof(float));
	cr_assert_not_null(x);
	tf_test_fill_uniform(x, n, scale, &seed);
	return x;
}

static const int64_t lengths[] = { 1, 7, 8, 9, 33, 100, 4096, 4099 };
#define N_LENGTHS (sizeof(lengths) / sizeof(lengths[0]))

Test(backend_ops, rmsnorm)
{
	static const int64_t rows[] = { 1, 3, 37 };
	for (size_t li = 0; li < N_LENGTHS; li++)
		for (size_t ri = 0; ri < 3; ri++) {
			int64_t dim = lengths[li], n = rows[ri] * dim;
			float *x = random_floats((size_t)n, 3.0f, 11 + li);
			float *w = random_floats((size_t)dim, 1.5f, 12 + ri);
			float *want = malloc((size_t)n * sizeof(float));
			for (int64_t r = 0; r < rows[ri]; r++) {
				double ss = 0;
				for (int64_t i = 0; i < dim; i++)
					ss += (double)x[r * dim + i] * x[r * dim + i];
				double s = 1.0 / sqrt(ss / dim + 1e-6);
				for (int64_t i = 0; i < dim; i++)
					want[r * dim + i] = (float)(x[r * dim + i] * s * w[i]);
			}
			for (int b = 0; b < CPU_N; b++) {
				float *y = cpu_fixture_poisoned(&fx, (size_t)n);
				fx.be[b]->rmsnorm(fx.ctx[b], y, x, w, rows[ri], dim, 1e-6f);
				cr_assert_lt(tf_test_rel_err(y, want, (size_t)n, 1e-6), 1e-5,
					     "%s rows %lld dim %lld", fx.be[b]->hdr.name,
					     (long long)rows[ri], (long long)dim);
				/* In place gives the same answer. */
				memcpy(y, x, (size_t)n * sizeof(float));
				fx.be[b]->rmsnorm(fx.ctx[b], y, y, w, rows[ri], dim, 1e-6f);
				cr_assert_lt(tf_test_rel_err(y, want, (size_t)n, 1e-6), 1e-5);
				cpu_fixture_release(&fx, y);
			}
			free(x);
			free(w);
			free(want);
		}
}

Test(backend_ops, add)
{
	const int64_t big = 3 * 16384 + 5;         /* more than one grain */
	for (size_t li = 0; li <= N_LENGTHS; li++) {
		int64_t n = li < N_LENGTHS ? lengths[li] : big;
		float *a = random_floats((size_t)n, 5.0f, 21 + li);
		float *b = random_floats((size_t)n, 5.0f, 22 + li);
		float *want = malloc((size_t)n * sizeof(float));
		for (int64_t i = 0; i < n; i++)
			want[i] = (float)((double)a[i] + b[i]);
		for (int k = 0; k < CPU_N; k++) {
			float *y = cpu_fixture_poisoned(&fx, (size_t)n);
			fx.be[k]->add(fx.ctx[k], y, a, b, n);
			cr_assert_lt(tf_test_rel_err(y, want, (size_t)n, 1e-6), TOL,
				     "%s n %lld", fx.be[k]->hdr.name, (long long)n);
			memcpy(y, a, (size_t)n * sizeof(float));
			fx.be[k]->add(fx.ctx[k], y, y, b, n);       /* y aliases a */
			cr_assert_lt(tf_test_rel_err(y, want, (size_t)n, 1e-6), TOL);
			cpu_fixture_release(&fx, y);
		}
		free(a);
		free(b);
		free(want);
	}
}

static double silu(double g) { return g / (1.0 + exp(-g)); }

Test(backend_ops, swiglu_plain_and_clamped)
{
	static const float limits[] = { 0.0f, 7.0f, 0.75f };
	const int64_t big = 2 * 16384 + 3;
	for (size_t ci = 0; ci < 3; ci++)
		for (size_t li = 0; li <= N_LENGTHS; li++) {
			int64_t n = li < N_LENGTHS ? lengths[li] : big;
			float limit = limits[ci];
			/* Wide inputs so both clamps bite when limit > 0. */
			float *g = random_floats((size_t)n, 12.0f, 31 + li);
			float *u = random_floats((size_t)n, 12.0f, 32 + li);
			float *want = malloc((size_t)n * sizeof(float));
			int clamped = 0;
			for (int64_t i = 0; i < n; i++) {
				double s = silu(g[i]), v = u[i];
				if (limit > 0) {
					clamped += s > limit || fabs(v) > limit;
					s = fmin(s, limit);
					v = fmin(fmax(v, -limit), limit);
				}
				want[i] = (float)(s * v);
			}
			if (limit > 0 && n > 100)
				cr_assert_gt(clamped, 0, "the clamp was never reached");
			for (int k = 0; k < CPU_N; k++) {
				float *y = cpu_fixture_poisoned(&fx, (size_t)n);
				fx.be[k]->swiglu(fx.ctx[k], y, g, u, n, limit);
				cr_assert_lt(tf_test_rel_err(y, want, (size_t)n, 1e-6), 1e-5,
					     "%s n %lld limit %g", fx.be[k]->hdr.name,
					     (long long)n, limit);
				cpu_fixture_release(&fx, y);
			}
			free(g);
			free(u);
			free(want);
		}
}

/* One RoPE case: rows of n_heads heads, each head_stride apart inside a
 * row of row_stride; only the first rot_dim of each head turn. */
static void check_rope(int64_t rows, int64_t n_heads, int64_t head_dim,
		       int64_t head_stride, int64_t row_stride, int64_t rot_dim,
		       float attn_factor, int interleaved, uint64_t seed)
{
	size_t n = (size_t)(rows * row_stride);
	int64_t pairs = rot_dim / 2;
	float *x = random_floats(n, 2.0f, seed);
	float *want = malloc(n * sizeof(float));
	float *inv_freq = malloc((size_t)pairs * sizeof(float));
	int32_t *pos = malloc((size_t)rows * sizeof(int32_t));

	for (int64_t j = 0; j < pairs; j++)
		inv_freq[j] = (float)pow(10000.0, -2.0 * j / rot_dim);
	for (int64_t r = 0; r < rows; r++)
		pos[r] = (int32_t)((r * 7919 + seed) % 5000);
	memcpy(want, x, n * sizeof(float));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t h = 0; h < n_heads; h++) {
			float *v = want + r * row_stride + h * head_stride;
			for (int64_t j = 0; j < pairs; j++) {
				/* The angle is a float32 product (the contract). */
				double a = (float)pos[r] * inv_freq[j];
				double c = cos(a) * attn_factor, s = sin(a) * attn_factor;
				int64_t i0 = interleaved ? 2 * j : j;
				int64_t i1 = interleaved ? 2 * j + 1 : j + pairs;
				double x0 = v[i0], x1 = v[i1];
				v[i0] = (float)(x0 * c - x1 * s);
				v[i1] = (float)(x0 * s + x1 * c);
			}
		}
	for (int k = 0; k < CPU_N; k++) {
		float *y = cpu_fixture_poisoned(&fx, n);
		memcpy(y, x, n * sizeof(float));
		fx.be[k]->rope(fx.ctx[k], y, rows, n_heads, row_stride, head_stride,
			       rot_dim, pos, inv_freq, attn_factor, interleaved);
		cr_assert_lt(tf_test_rel_err(y, want, n, 1e-6), 1e-5,
			     "%s rows %lld heads %lld rot %lld %s", fx.be[k]->hdr.name,
			     (long long)rows, (long long)n_heads, (long long)rot_dim,
			     interleaved ? "gptj" : "neox");
		/* Outside the rotated slices nothing moved, bit for bit. */
		for (int64_t r = 0; r < rows; r++)
			for (int64_t i = 0; i < row_stride; i++) {
				int64_t h = i / head_stride, o = i % head_stride;
				if (h < n_heads && o < 2 * pairs)
					continue;
				size_t at = (size_t)(r * row_stride + i);
				cr_assert(memcmp(&y[at], &x[at], sizeof(float)) == 0,
					  "element %zu outside the rotation changed", at);
			}
		cpu_fixture_release(&fx, y);
	}
	(void)head_dim;
	free(x);
	free(want);
	free(inv_freq);
	free(pos);
}

Test(backend_ops, rope_interleaved_and_neox)
{
	for (int il = 0; il < 2; il++) {
		/* MLA-like: 64-dim rope slice of 192-dim heads, YaRN factor. */
		check_rope(5, 4, 192, 192, 4 * 192, 64, 1.0f, il, 41);
		check_rope(3, 3, 64, 64, 3 * 64, 64, 1.2f, il, 42);
		/* Odd pair counts, padding between heads and rows. */
		check_rope(2, 2, 18, 20, 2 * 20 + 3, 18, 1.0f, il, 43);
		/* More pairs than one cos/sin block; many rows for the pool. */
		check_rope(200, 2, 260, 260, 520, 260, 0.9f, il, 44);
	}
}

Test(backend_ops, softmax)
{
	static const int64_t rows[] = { 1, 4, 257 };
	for (size_t li = 0; li < N_LENGTHS; li++)
		for (size_t ri = 0; ri < 3; ri++) {
			int64_t n = lengths[li], total = n * rows[ri];
			/* Scale 60: exp would overflow without the max shift. */
			float *x = random_floats((size_t)total, 60.0f, 51 + li);
			float *want = malloc((size_t)total * sizeof(float));
			for (int64_t r = 0; r < rows[ri]; r++) {
				const float *v = x + r * n;
				double m = -INFINITY, sum = 0;
				for (int64_t i = 0; i < n; i++)
					m = fmax(m, v[i]);
				for (int64_t i = 0; i < n; i++)
					sum += exp(v[i] - m);
				for (int64_t i = 0; i < n; i++)
					want[r * n + i] = (float)(exp(v[i] - m) / sum);
			}
			for (int k = 0; k < CPU_N; k++) {
				float *y = cpu_fixture_poisoned(&fx, (size_t)total);
				memcpy(y, x, (size_t)total * sizeof(float));
				fx.be[k]->softmax(fx.ctx[k], y, rows[ri], n);
				/* Per element relative, so tiny probabilities count. */
				for (int64_t i = 0; i < total; i++)
					cr_assert(fabsf(y[i] - want[i]) <= 1e-5f * want[i] + 1e-30f,
						  "%s n %lld [%lld]: %g vs %g", fx.be[k]->hdr.name,
						  (long long)n, (long long)i, y[i], want[i]);
				cpu_fixture_release(&fx, y);
			}
			free(x);
			free(want);
		}
}

Test(backend_ops, softmax_masked_entries_get_zero)
{
	float x[9];
	uint64_t seed = 5;
	tf_test_fill_uniform(x, 9, 1.0f, &seed);
	x[0] = x[4] = x[8] = -INFINITY;
	for (int k = 0; k < CPU_N; k++) {
		float y[9];
		memcpy(y, x, sizeof(y));
		fx.be[k]->softmax(fx.ctx[k], y, 1, 9);
		double sum = 0;
		for (int i = 0; i < 9; i++)
			sum += y[i];
		cr_assert_eq(y[0], 0.0f);
		cr_assert_eq(y[4], 0.0f);
		cr_assert_eq(y[8], 0.0f);
		cr_assert_lt(fabs(sum - 1.0), 1e-6, "%s", fx.be[k]->hdr.name);
	}
}

Test(backend_ops, embed_widens_each_dtype_exactly)
{
	static const tf_dtype types[] = { TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16 };
	const int64_t vocab = 300, n = 70;
	for (size_t di = 0; di < 3; di++)
		for (size_t li = 0; li < N_LENGTHS; li++) {
			int64_t dim = lengths[li];
			float *src = random_floats((size_t)(vocab * dim), 4.0f, 61 + li);
			uint16_t *h = malloc((size_t)(vocab * dim) * 2);
			const void *table = src;
			for (int64_t i = 0; i < vocab * dim; i++) {
				if (types[di] == TF_DTYPE_F16)
					h[i] = tf_f32_to_f16(src[i]);
				else
					h[i] = tf_f32_to_bf16(src[i]);
			}
			if (types[di] != TF_DTYPE_F32)
				table = h;
			int32_t ids[70];
			for (int i = 0; i < n; i++)
				ids[i] = (int32_t)((i * 131 + li) % vocab);
			for (int k = 0; k < CPU_N; k++) {
				float *y = cpu_fixture_poisoned(&fx, (size_t)(n * dim));
				fx.be[k]->embed(fx.ctx[k], y, table, types[di], dim, ids, n);
				for (int64_t i = 0; i < n; i++)
					for (int64_t e = 0; e < dim; e++) {
						size_t at = (size_t)(ids[i] * dim + e);
						float want = types[di] == TF_DTYPE_F32 ? src[at] :
							     types[di] == TF_DTYPE_F16 ?
							     tf_f16_to_f32(h[at]) : tf_bf16_to_f32(h[at]);
						cr_assert_eq(y[i * dim + e], want, "%s %s dim %lld",
							     fx.be[k]->hdr.name,
							     tf_dtype_name(types[di]), (long long)dim);
					}
				cpu_fixture_release(&fx, y);
			}
			free(src);
			free(h);
		}
}

Test(backend_ops, embed_bad_input_poisons_output)
{
	float table[4 * 3] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	int32_t ok[2] = { 1, 3 }, neg[2] = { 1, -2 };
	for (int k = 0; k < CPU_N; k++) {
		float y[6];
		memset(y, 0, sizeof(y));
		fx.be[k]->embed(fx.ctx[k], y, table, TF_DTYPE_I32, 3, ok, 2);
		for (int i = 0; i < 6; i++)
			cr_assert(isnan(y[i]), "unsupported dtype left y[%d] = %g", i, y[i]);
		memset(y, 0, sizeof(y));
		fx.be[k]->embed(fx.ctx[k], y, table, TF_DTYPE_F32, 3, neg, 2);
		for (int i = 0; i < 6; i++)
			cr_assert(isnan(y[i]), "negative id left y[%d] = %g", i, y[i]);
	}
}

Test(backend_ops, embed_checks_ids_against_vocab_size)
{
	tf_model_config cfg = { .vocab_size = 4 };
	tf_testhost *th = tf_testhost_new(&cfg, 1);
	float table[4 * 3] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	int32_t last[1] = { 3 }, past[2] = { 0, 4 };
	for (unsigned k = 0; k < CPU_N; k++) {
		const tf_backend *be = cpu_fixture_descriptor(k);
		void *ctx;
		float y[6];
		cr_assert_eq(be->init(tf_testhost_host(th), &ctx), TF_OK);
		be->embed(ctx, y, table, TF_DTYPE_F32, 3, last, 1);
		cr_assert(y[0] == 10 && y[1] == 11 && y[2] == 12, "%s", be->hdr.name);
		be->embed(ctx, y, table, TF_DTYPE_F32, 3, past, 2);
		for (int i = 0; i < 6; i++)
			cr_assert(isnan(y[i]), "id 4 of vocab 4 left y[%d] = %g", i, y[i]);
		be->fini(ctx);
	}
	tf_testhost_free(th);
}

Test(backend_ops, argmax_first_of_ties_and_skips_nan)
{
	static const int64_t rows = 9;
	for (size_t li = 0; li < N_LENGTHS; li++) {
		int64_t n = lengths[li];
		float *x = random_floats((size_t)(rows * n), 1.0f, 71 + li);
		int32_t want[9];
		for (int64_t r = 0; r < rows; r++) {
			float *v = x + r * n;
			int64_t top = (r * 5 + 3) % n, twin = (r * 11 + 1) % n;
			v[top] = 2.0f;
			v[twin] = 2.0f;             /* a tie: the first wins */
			if (r % 3 == 0)
				v[(r * 13) % n] = NAN;  /* may replace top: then twin wins */
			want[r] = -1;
			for (int64_t i = 0; i < n; i++)
				if (!isnan(v[i]) && (want[r] < 0 || v[i] > v[want[r]]))
					want[r] = (int32_t)i;
			if (want[r] < 0)
				want[r] = 0;
		}
		for (int k = 0; k < CPU_N; k++) {
			int32_t got[9];
			memset(got, 0xff, sizeof(got));
			fx.be[k]->argmax(fx.ctx[k], got, x, rows, n);
			for (int64_t r = 0; r < rows; r++)
				cr_assert_eq(got[r], want[r], "%s n %lld row %lld",
					     fx.be[k]->hdr.name, (long long)n, (long long)r);
		}
		free(x);
	}
}

Test(backend_ops, alloc_is_aligned_and_usable)
{
	static const size_t sizes[] = { 0, 1, 63, 64, 65, 1 << 20 };
	for (int k = 0; k < CPU_N; k++)
		for (size_t i = 0; i < 6; i++) {
			unsigned char *p = fx.be[k]->alloc(fx.ctx[k], sizes[i]);
			cr_assert_not_null(p);
			cr_assert_eq((uintptr_t)p % 64, 0);
			memset(p, 0xa5, sizes[i]);
			unsigned char *q = fx.be[k]->alloc(fx.ctx[k], sizes[i]);
			cr_assert_eq(fx.be[k]->upload(fx.ctx[k], q, p, sizes[i]), TF_OK);
			cr_assert(memcmp(p, q, sizes[i]) == 0);
			fx.be[k]->free(fx.ctx[k], p);
			fx.be[k]->free(fx.ctx[k], q);
		}
	cr_assert_null(fx.be[CPU_FAST]->alloc(fx.ctx[CPU_FAST], SIZE_MAX - 10));
	cr_assert_eq(fx.be[CPU_FAST]->sync(fx.ctx[CPU_FAST]), TF_OK);
}
