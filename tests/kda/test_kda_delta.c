/*
 * test_kda_delta.c - the three delta-rule kernels of the kda plugin against
 * the float64 recurrence, on random inputs with gates near both bounds.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "../../plugins/kda/delta.h"
#include "kda_ref.h"
#include "support/testhost.h"

enum { KERNEL_REF, KERNEL_RECURRENT, KERNEL_CHUNKED };

struct delta_case {
	int K, V;
	int64_t n, ld;
	float *q, *k, *g, *v, *beta, *o;
};

static float *alloc_f(size_t n)
{
	float *p = malloc(n * sizeof(float));
	cr_assert(p);
	return p;
}

/* q, k unit vectors (q scaled by K^-1/2), gates uniform in [glo, ghi]. */
static void case_init(struct delta_case *c, int K, int V, int64_t n, float glo,
		      float ghi, uint64_t seed)
{
	c->K = K;
	c->V = V;
	c->n = n;
	c->ld = K > V ? K : V;
	size_t sz = (size_t)n * c->ld;
	c->q = alloc_f(sz);
	c->k = alloc_f(sz);
	c->g = alloc_f(sz);
	c->v = alloc_f(sz);
	c->o = alloc_f(sz);
	c->beta = alloc_f((size_t)n);
	tf_test_fill_uniform(c->q, sz, 1.0f, &seed);
	tf_test_fill_uniform(c->k, sz, 1.0f, &seed);
	tf_test_fill_uniform(c->v, sz, 1.0f, &seed);
	tf_test_fill_uniform(c->g, sz, 0.5f, &seed);
	tf_test_fill_uniform(c->beta, (size_t)n, 0.5f, &seed);
	for (int64_t t = 0; t < n; t++) {
		float qs = 0, ks = 0;
		for (int i = 0; i < K; i++) {
			qs += c->q[t * c->ld + i] * c->q[t * c->ld + i];
			ks += c->k[t * c->ld + i] * c->k[t * c->ld + i];
		}
		for (int i = 0; i < K; i++) {
			c->q[t * c->ld + i] /= sqrtf(qs) * sqrtf((float)K);
			c->k[t * c->ld + i] /= sqrtf(ks);
			float u = c->g[t * c->ld + i] + 0.5f;       /* [0, 1] */
			c->g[t * c->ld + i] = glo + (ghi - glo) * u;
		}
		c->beta[t] += 0.5f;
	}
}

static void case_free(struct delta_case *c)
{
	free(c->q);
	free(c->k);
	free(c->g);
	free(c->v);
	free(c->o);
	free(c->beta);
}

/* Dense copies [n, K] / [n, V] for the reference. */
static float *pack(const float *x, int64_t n, int w, int64_t ld)
{
	float *p = alloc_f((size_t)n * w);
	for (int64_t t = 0; t < n; t++)
		for (int i = 0; i < w; i++)
			p[t * w + i] = x[t * ld + i];
	return p;
}

static double rel_err_d(const float *a, int64_t ld, const double *b, int64_t n, int w)
{
	double num = 0, den = 1e-6;
	for (int64_t t = 0; t < n; t++)
		for (int i = 0; i < w; i++) {
			double d = fabs((double)a[t * ld + i] - b[t * w + i]);
			num = isnan(d) || d > num ? (isnan(d) ? INFINITY : d) : num;
			den = fmax(den, fabs(b[t * w + i]));
		}
	return num / den;
}

/* Run one kernel from a random initial state; compare outputs and final
 * state with the float64 recurrence. */
static void check_kernel(int kernel, int K, int V, int64_t n, float glo, float ghi,
			 uint64_t seed)
{
	struct delta_case c;
	case_init(&c, K, V, n, glo, ghi, seed);
	float *S = alloc_f((size_t)K * V);
	double *Sd = malloc((size_t)K * V * sizeof(double));
	double *od = malloc((size_t)n * V * sizeof(double));
	tf_test_fill_uniform(S, (size_t)K * V, 0.3f, &seed);
	for (int i = 0; i < K * V; i++)
		Sd[i] = S[i];
	for (size_t i = 0; i < (size_t)n * c.ld; i++)
		c.o[i] = NAN;

	kda_head_io io = { .q = c.q, .k = c.k, .g = c.g, .v = c.v, .beta = c.beta,
			   .o = c.o, .ld = c.ld, .ldb = 1 };
	float *work = alloc_f(kda_delta_chunk_work(K, V));
	if (kernel == KERNEL_REF)
		kda_delta_ref(S, K, V, n, &io);
	else if (kernel == KERNEL_RECURRENT)
		kda_delta_recurrent(S, K, V, n, &io, work);
	else
		kda_delta_chunked(S, K, V, n, &io, work);

	float *q = pack(c.q, n, K, c.ld), *k = pack(c.k, n, K, c.ld);
	float *g = pack(c.g, n, K, c.ld), *v = pack(c.v, n, V, c.ld);
	kda_ref_delta(Sd, K, V, n, q, k, g, v, c.beta, od);

	double eo = rel_err_d(c.o, c.ld, od, n, V), es = rel_err_d(S, V, Sd, K, V);
	cr_log_info("kernel %d K=%d V=%d n=%lld g [%g, %g]: %.3g %.3g", kernel, K, V,
		    (long long)n, glo, ghi, eo, es);
	/* fp32 against fp64: all three forms stay within ~6e-7 here. */
	cr_expect(eo < 5e-6 && es < 5e-6,
		  "kernel %d K=%d V=%d n=%lld g in [%g, %g]: output err %.3g, state err %.3g",
		  kernel, K, V, (long long)n, glo, ghi, eo, es);
	free(q);
	free(k);
	free(g);
	free(v);
	free(work);
	free(S);
	free(Sd);
	free(od);
	case_free(&c);
}

static const int64_t lengths[] = { 1, 3, 16, 17, 64, 65, 150 };

/* Near the safe gate's lower bound, near no decay, the full safe range, and
 * the unbounded Kimi range that defeats the factorised sub-block path. */
static const float gates[][2] = { { -5.0f, -4.95f }, { -0.01f, 0.0f }, { -5.0f, 0.0f },
				  { -40.0f, 0.0f } };

static void check_all(int kernel)
{
	uint64_t seed = 1234 + (uint64_t)kernel;
	for (size_t gi = 0; gi < sizeof(gates) / sizeof(gates[0]); gi++)
		for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++)
			check_kernel(kernel, 32, 32, lengths[li], gates[gi][0], gates[gi][1],
				     seed += 17);
	/* K != V catches a swapped index; 128 is the real head size. */
	check_kernel(kernel, 24, 40, 70, -5.0f, 0.0f, seed + 1);
	check_kernel(kernel, 128, 128, 80, -5.0f, 0.0f, seed + 2);
}

Test(kda_delta, reference_step_matches_f64) { check_all(KERNEL_REF); }
Test(kda_delta, fused_recurrent_matches_f64) { check_all(KERNEL_RECURRENT); }
Test(kda_delta, chunked_wy_matches_f64) { check_all(KERNEL_CHUNKED); }

/* A full chunk at the lower bound decays by e^-320 across it: a kernel
 * that factorised exp(G_i) exp(-G_j) over the chunk would overflow here. */
Test(kda_delta, chunked_stays_finite_at_lower_bound)
{
	check_kernel(KERNEL_CHUNKED, 32, 32, 128, -5.0f, -5.0f, 99);
}
