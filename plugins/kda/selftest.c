/*
 * selftest.c - the vector paths of the delta rule against its plain step,
 * as a plain program so it also runs for aarch64 under qemu
 * (scripts/cross-test.sh).  The float64 checks live in tests/kda/.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/selftest.h"
#include "../common/vec.h"
#include "delta.h"

static uint64_t rng = 88172645463325252ull;

static float frand(void)
{
	return tf_selftest_uniform(&rng);
}

/* Passes when err < tol; a failure prints what and err. */
static void check(const char *what, double err, double tol)
{
	tf_selftest_check(err < tol, "%s: rel err %.3g", what, err);
}

/* The primitives against their plain loops, at lengths that leave tails. */
static void check_vec(void)
{
	const int64_t lens[] = { 1, 7, 8, 33, 64, 100, 131 };
	float x[131 * 5], y[131], z[131], a[5];
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		int64_t n = lens[li];
		for (int i = 0; i < 131 * 5; i++)
			x[i] = frand();
		for (int i = 0; i < 5; i++)
			a[i] = frand();
		for (int64_t i = 0; i < n; i++)
			y[i] = z[i] = frand();
		double dot = 0;
		for (int64_t i = 0; i < n; i++) {
			dot += (double)x[i] * y[i];
			z[i] += a[0] * x[i];
		}
		check("tf_vec_dot", fabs(tf_vec_dot(x, y, n) - dot) / (1 + fabs(dot)), 1e-5);
		tf_vec_axpy(y, a[0], x, n);
		check("tf_vec_axpy", tf_selftest_rel_err(y, z, n), 1e-6);
		for (int64_t i = 0; i < n; i++)
			for (int t = 1; t < 5; t++)
				z[i] += a[t] * x[t * 131 + i];
		tf_vec_axpy_rows(y, a + 1, x + 131, 131, 4, n);
		check("tf_vec_axpy_rows", tf_selftest_rel_err(y, z, n), 1e-6);
		tf_vec_scale(y, 0.5f, n);
		for (int64_t i = 0; i < n; i++)
			z[i] *= 0.5f;
		check("tf_vec_scale", tf_selftest_rel_err(y, z, n), 1e-6);
		tf_vec_mul_acc(y, x + 131, x + 262, n);
		for (int64_t i = 0; i < n; i++)
			z[i] += x[131 + i] * x[262 + i];
		check("tf_vec_mul_acc", tf_selftest_rel_err(y, z, n), 1e-6);
	}
}

/* Recurrent and chunked forms against the plain step. */
static void check_delta(int K, int V, int64_t n, float glo)
{
	const int64_t ld = K > V ? K : V;
	size_t sz = (size_t)n * ld;
	float *q = malloc(sz * 4), *k = malloc(sz * 4), *g = malloc(sz * 4), *v = malloc(sz * 4);
	float *o[3], *S[3], *beta = malloc((size_t)n * 4);
	float *work = malloc(kda_delta_chunk_work(K, V) * 4);
	for (int64_t t = 0; t < n; t++) {
		float qs = 0, ks = 0;
		for (int64_t i = 0; i < ld; i++) {
			q[t * ld + i] = frand();
			k[t * ld + i] = frand();
			v[t * ld + i] = frand();
			g[t * ld + i] = glo * (0.5f + 0.5f * frand());
			if (i < K) {
				qs += q[t * ld + i] * q[t * ld + i];
				ks += k[t * ld + i] * k[t * ld + i];
			}
		}
		for (int i = 0; i < K; i++) {
			q[t * ld + i] /= sqrtf(qs * (float)K);
			k[t * ld + i] /= sqrtf(ks);
		}
		beta[t] = 0.5f + 0.5f * frand();
	}
	for (int f = 0; f < 3; f++) {
		o[f] = malloc(sz * 4);
		S[f] = malloc((size_t)K * V * 4);
		for (size_t i = 0; i < sz; i++)
			o[f][i] = NAN;
		for (int i = 0; i < K * V; i++)
			S[f][i] = 0.25f * (float)((i * 7919) % 101) / 101.0f;
		kda_head_io io = { q, k, g, v, beta, o[f], ld, 1 };
		if (f == 0)
			kda_delta_ref(S[f], K, V, n, &io);
		else if (f == 1)
			kda_delta_recurrent(S[f], K, V, n, &io, work);
		else
			kda_delta_chunked(S[f], K, V, n, &io, work);
	}
	char what[96];
	for (int f = 1; f < 3; f++) {
		double eo = tf_selftest_rel_err(o[f], o[0], (int64_t)sz);
		double es = tf_selftest_rel_err(S[f], S[0], (int64_t)K * V);
		snprintf(what, sizeof(what), "%s K=%d V=%d n=%lld g>=%g output/state",
			 f == 1 ? "recurrent" : "chunked", K, V, (long long)n, glo);
		check(what, fmax(eo, es), 5e-6);
	}
	for (int f = 0; f < 3; f++) {
		free(o[f]);
		free(S[f]);
	}
	free(q);
	free(k);
	free(g);
	free(v);
	free(beta);
	free(work);
}

/* exp, sigmoid and silu against float64 element by element over the
 * gates' range, and each element's bits the same wherever it sits. */
static void check_vec_map(void)
{
	enum { N = 131 };
	static const char *const names[] = { "tf_vec_exp", "tf_vec_sigmoid", "tf_vec_silu" };
	float x[N], y[N];
	for (int i = 0; i < N; i++)
		x[i] = 30.0f * frand();
	for (int f = TF_VEC_EXP; f <= TF_VEC_SILU; f++) {
		for (int i = 0; i < N; i++)
			y[i] = NAN;
		tf_vec_map(y, x, N, (enum tf_vec_fn)f);
		double worst = 0;
		bool same = true;
		for (int i = 0; i < N; i++) {
			const double e = exp(f == TF_VEC_EXP ? x[i] : -(double)x[i]);
			const double want = f == TF_VEC_EXP ? e : (f == TF_VEC_SILU ? x[i] : 1.0) / (1 + e);
			const double err = fabs(y[i] - want) / fabs(want);
			worst = err <= worst ? worst : isnan(err) ? INFINITY : err;
			float alone = NAN;
			tf_vec_map(&alone, x + i, 1, (enum tf_vec_fn)f);
			same = same && memcmp(&alone, y + i, sizeof(float)) == 0;
		}
		check(names[f], worst, 4e-7);
		tf_selftest_check(same, "%s: an element alone has other bits", names[f]);
	}
}

int main(void)
{
	check_vec();
	check_vec_map();
	check_delta(32, 32, 100, -5.0f);
	check_delta(24, 40, 70, -0.01f);
	check_delta(128, 128, 65, -5.0f);
	check_delta(32, 32, 50, -40.0f);
	return tf_selftest_done();
}
