/*
 * selftest.c - the build's vector kernels against the reference, and the
 * thread pool, as a plain C program (no Criterion), so it also runs for a
 * cross target under qemu: scripts/cross-test.sh runs the NEON kernels
 * this way.  The Criterion tests in tests/backend go further, through the
 * plugin ABI.
 *
 * Prints one line per failure and "N passed, N failed" last; exits 1 on
 * any failure.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/selftest.h"
#include "kernels.h"
#include "pool.h"
#include "tf/dtype.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_u32(void)
{
	return tf_selftest_u32(&rng);
}

/* Uniform in [-scale, scale). */
static void fill(float *x, int64_t n, float scale)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = scale * tf_selftest_uniform(&rng);
}

static void poison(float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = NAN;
}

/* Lengths around the vector widths (4 and 8) and the unrolled 16. */
static const int64_t lengths[] = { 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 100, 1027 };
#define N_LENGTHS (sizeof(lengths) / sizeof(lengths[0]))
#define MAX_LEN 1027

static const tf_cpu_kernels *const vec = TF_CPU_FAST, *const ref = &tf_cpu_ref;

static void test_rows(int64_t n)
{
	/* Zeroed past n only so -O3 sees them initialised; the kernels read n. */
	float x[MAX_LEN] = { 0 }, w[MAX_LEN] = { 0 }, b[MAX_LEN] = { 0 };
	float got[MAX_LEN], want[MAX_LEN];
	fill(x, n, 4.0f);
	fill(w, n, 1.5f);
	fill(b, n, 12.0f);

	poison(got, n);
	vec->rmsnorm(got, x, w, n, 1e-6f);
	ref->rmsnorm(want, x, w, n, 1e-6f);
	tf_selftest_check(tf_selftest_rel_err(got, want, n) < 2e-6, "rmsnorm n=%lld", (long long)n);

	poison(got, n);
	vec->add(got, x, w, n);
	ref->add(want, x, w, n);
	tf_selftest_check(memcmp(got, want, (size_t)n * sizeof(float)) == 0, "add n=%lld",
			  (long long)n);

	for (float limit = 0.0f; limit < 8.0f; limit += 3.5f) {
		fill(x, n, 12.0f);
		poison(got, n);
		vec->swiglu(got, x, b, n, limit);
		ref->swiglu(want, x, b, n, limit);
		tf_selftest_check(tf_selftest_rel_err(got, want, n) < 2e-6,
				  "swiglu n=%lld limit=%g", (long long)n, limit);
	}

	fill(x, n, 60.0f);
	memcpy(got, x, (size_t)n * sizeof(float));
	memcpy(want, x, (size_t)n * sizeof(float));
	vec->softmax(got, n);
	ref->softmax(want, n);
	int close = 1;
	for (int64_t i = 0; i < n; i++)
		close &= fabsf(got[i] - want[i]) <= 2e-6f * want[i] + 1e-30f;
	tf_selftest_check(close, "softmax n=%lld", (long long)n);

	/* Ties (the first wins), NaN (never wins). */
	fill(x, n, 1.0f);
	x[(n * 2) / 3] = 3.0f;
	x[n / 3] = 3.0f;
	x[n - 1] = NAN;
	tf_selftest_check(vec->argmax(x, n) == ref->argmax(x, n), "argmax n=%lld: %lld vs %lld",
			  (long long)n, (long long)vec->argmax(x, n), (long long)ref->argmax(x, n));
}

static void test_rope(int64_t pairs)
{
	float x[2 * MAX_LEN], got[2 * MAX_LEN], want[2 * MAX_LEN];
	float c[MAX_LEN] = { 0 }, s[MAX_LEN] = { 0 };   /* see test_rows */
	for (int64_t j = 0; j < pairs; j++) {
		float a = (float)(next_u32() % 4096) * powf(10000.0f, -(float)j / (float)pairs);
		c[j] = 1.1f * cosf(a);
		s[j] = 1.1f * sinf(a);
	}
	fill(x, 2 * pairs, 2.0f);

	memcpy(got, x, (size_t)(2 * pairs) * sizeof(float));
	memcpy(want, x, (size_t)(2 * pairs) * sizeof(float));
	vec->rope_gptj(got, c, s, pairs);
	ref->rope_gptj(want, c, s, pairs);
	tf_selftest_check(tf_selftest_rel_err(got, want, 2 * pairs) < 1e-6, "rope_gptj pairs=%lld",
			  (long long)pairs);

	memcpy(got, x, (size_t)(2 * pairs) * sizeof(float));
	memcpy(want, x, (size_t)(2 * pairs) * sizeof(float));
	vec->rope_neox(got, got + pairs, c, s, pairs);
	ref->rope_neox(want, want + pairs, c, s, pairs);
	tf_selftest_check(tf_selftest_rel_err(got, want, 2 * pairs) < 1e-6, "rope_neox pairs=%lld",
			  (long long)pairs);
}

static int same_half(uint16_t a, uint16_t b, int f16)
{
	int nan_a = f16 ? (a & 0x7c00) == 0x7c00 && (a & 0x3ff) : (a & 0x7f80) == 0x7f80 && (a & 0x7f);
	int nan_b = f16 ? (b & 0x7c00) == 0x7c00 && (b & 0x3ff) : (b & 0x7f80) == 0x7f80 && (b & 0x7f);
	return nan_a || nan_b ? nan_a == nan_b : a == b;
}

/* Conversions are bit-exact (NaN payloads aside): random bit patterns of
 * every exponent, with the hard cases mixed in so that they also land in
 * vector bodies: NaNs whose payload sits in the bits narrowing drops,
 * halfway ties, F16 subnormals and the edge of F16 overflow. */
static void test_convert(int64_t n)
{
	static const uint32_t hard[] = {
		0x7f800001u, 0xff800001u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
		0x3f808000u, 0x3f818000u, 0x33800000u, 0x33000000u, 0x33400000u,
		0x387fc000u, 0x477ff000u, 0x477fefffu, 0x80000000u, 0x00000001u,
	};
	float x[MAX_LEN], got[MAX_LEN], want[MAX_LEN];
	uint16_t h[MAX_LEN], hv[MAX_LEN], hr[MAX_LEN];
	for (int64_t i = 0; i < n; i++)
		x[i] = tf_bits_f32(i % 3 ? next_u32() : hard[(i / 3) % (sizeof(hard) / sizeof(hard[0]))]);
	for (int f16 = 0; f16 < 2; f16++) {
		(f16 ? vec->f32_to_f16 : vec->f32_to_bf16)(hv, x, n);
		(f16 ? ref->f32_to_f16 : ref->f32_to_bf16)(hr, x, n);
		int ok = 1;
		for (int64_t i = 0; i < n; i++)
			ok &= same_half(hv[i], hr[i], f16);
		tf_selftest_check(ok, "f32_to_%s n=%lld", f16 ? "f16" : "bf16", (long long)n);

		for (int64_t i = 0; i < n; i++)
			h[i] = (uint16_t)next_u32();
		(f16 ? vec->f16_to_f32 : vec->bf16_to_f32)(got, h, n);
		(f16 ? ref->f16_to_f32 : ref->bf16_to_f32)(want, h, n);
		ok = 1;
		for (int64_t i = 0; i < n; i++)
			ok &= isnan(want[i]) ? isnan(got[i]) != 0 :
			      tf_f32_bits(got[i]) == tf_f32_bits(want[i]);
		tf_selftest_check(ok, "%s_to_f32 n=%lld", f16 ? "f16" : "bf16", (long long)n);
	}
}

#define POOL_MAX_N 5000

struct cover {
	atomic_int hits[POOL_MAX_N];
	atomic_int bad;
	int n_threads;
};

static void cover_fn(void *arg, int64_t begin, int64_t end, int worker)
{
	struct cover *c = arg;
	if (worker < 0 || worker >= c->n_threads || begin >= end)
		atomic_fetch_add(&c->bad, 1);
	for (int64_t i = begin; i < end; i++)
		atomic_fetch_add(&c->hits[i], 1);
}

static void test_pool(int n_threads)
{
	static const int64_t ns[] = { 1, 2, 7, 100, 1000, POOL_MAX_N };
	static const int64_t grains[] = { 1, 5, 64, 100000 };
	static struct cover c;
	tf_pool *p;
	int rc = tf_pool_init(&p, n_threads);
	tf_selftest_check(rc == TF_OK, "pool init %d threads", n_threads);
	if (rc)
		return;
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			for (size_t g = 0; g < sizeof(grains) / sizeof(grains[0]); g++) {
				memset(&c, 0, sizeof(c));
				c.n_threads = n_threads;
				tf_pool_run(p, ns[i], grains[g], cover_fn, &c);
				int ok = atomic_load(&c.bad) == 0;
				for (int64_t k = 0; k < ns[i]; k++)
					ok &= atomic_load(&c.hits[k]) == 1;
				tf_selftest_check(ok, "pool %d threads n=%lld grain=%lld",
						  n_threads, (long long)ns[i], (long long)grains[g]);
			}
	tf_pool_free(p);
}

int main(void)
{
	printf("backend-cpu selftest: %s kernels against the reference%s\n", vec->isa,
	       vec == ref ? " (scalar build: they are the same table)" : "");
	for (size_t i = 0; i < N_LENGTHS; i++) {
		test_rows(lengths[i]);
		test_rope(lengths[i]);
		test_convert(lengths[i]);
	}
	test_pool(1);
	test_pool(4);
	return tf_selftest_done();
}
