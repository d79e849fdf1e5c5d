/* stats.c - medians and paired-ratio intervals of benchmark rounds. */
#include <math.h>
#include <stdlib.h>

#include "bench.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *x, int n)
{
	if (n <= 0)
		return NAN;
	qsort(x, (size_t)n, sizeof(*x), cmp);
	return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double bench_mad(double *x, int n)
{
	double m = bench_median(x, n);

	for (int i = 0; i < n; i++)
		x[i] = fabs(x[i] - m);
	return bench_median(x, n);
}

/* splitmix64: the resamples' indices. */
static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

bench_ratio bench_paired_ratio(const double *a, const double *b, int n, int resamples,
			       uint64_t seed)
{
	bench_ratio r = { NAN, NAN, NAN };
	double *ratio = malloc((size_t)(n > 0 ? n : 1) * sizeof(*ratio));
	double *pick = malloc((size_t)(n > 0 ? n : 1) * sizeof(*pick));
	double *med = malloc((size_t)(resamples > 0 ? resamples : 1) * sizeof(*med));

	if (n > 0 && ratio && pick && med) {
		for (int i = 0; i < n; i++)
			ratio[i] = b[i] / a[i];
		for (int k = 0; k < resamples; k++) {
			for (int i = 0; i < n; i++)
				pick[i] = ratio[next(&seed) % (uint64_t)n];
			med[k] = bench_median(pick, n);
		}
		r.mid = bench_median(ratio, n);
		qsort(med, (size_t)resamples, sizeof(*med), cmp);
		if (n >= BENCH_MIN_ROUNDS) {
			r.lo = med[(int)floor(0.025 * (resamples - 1))];
			r.hi = med[(int)ceil(0.975 * (resamples - 1))];
		}
	}
	free(ratio);
	free(pick);
	free(med);
	return r;
}
