/* test_bench_stats.c - tfrun bench's arithmetic on made-up timings: medians,
 * spreads, and the paired bootstrap interval of B/A. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "bench/bench.h"

Test(bench_stats, median_and_mad)
{
	double odd[] = { 5, 1, 4, 2, 3 }, even[] = { 4, 1, 3, 2 }, one[] = { 7 };
	double spread[] = { 1, 2, 3, 4, 100 };

	cr_expect_eq(bench_median(odd, 5), 3);
	cr_expect_eq(bench_median(even, 4), 2.5);
	cr_expect_eq(bench_median(one, 1), 7);
	cr_expect(isnan(bench_median(one, 0)));
	cr_expect_eq(bench_mad(spread, 5), 1, "an outlier moves the MAD by one rank only");
}

/* n paired rounds: a around 100, b = a * ratio, each with its own noise of
 * relative size `noise` (uniform), drawn from seed. */
static void rounds(double *a, double *b, int n, double ratio, double noise, unsigned seed)
{
	srand(seed);
	for (int i = 0; i < n; i++) {
		double drift = 100 * (1 + 0.3 * rand() / RAND_MAX);    /* the machine's */
		a[i] = drift * (1 + noise * (2.0 * rand() / RAND_MAX - 1));
		b[i] = drift * ratio * (1 + noise * (2.0 * rand() / RAND_MAX - 1));
	}
}

Test(bench_stats, interval_finds_a_real_change_and_no_false_one)
{
	double a[15], b[15];
	int hits = 0, misses = 0;

	for (unsigned s = 0; s < 40; s++) {
		rounds(a, b, 15, 1.10, 0.02, s);
		bench_ratio r = bench_paired_ratio(a, b, 15, 2000, s);
		cr_assert(r.lo <= r.mid && r.mid <= r.hi, "seed %u", s);
		cr_expect(fabs(r.mid - 1.10) < 0.03, "seed %u: %g", s, r.mid);
		hits += r.lo > 1;
		rounds(a, b, 15, 1.00, 0.02, 1000 + s);
		r = bench_paired_ratio(a, b, 15, 2000, s);
		misses += r.lo > 1 || r.hi < 1;
	}
	cr_expect_eq(hits, 40, "a 10%% change told from 2%% noise every time");
	cr_expect_leq(misses, 6, "no change called one %d times of 40", misses);
}

Test(bench_stats, pairing_removes_the_machine_drift)
{
	double a[9], b[9];

	/* The drift (30%) dwarfs the change (5%); the noise within a pair is
	 * small: the paired interval sees the change. */
	rounds(a, b, 9, 0.95, 0.005, 7);
	bench_ratio r = bench_paired_ratio(a, b, 9, 2000, 1);
	cr_expect(r.hi < 1 && r.lo > 0.9, "[%g, %g]", r.lo, r.hi);
}

Test(bench_stats, too_few_rounds_give_no_interval)
{
	double a[2] = { 10, 11 }, b[2] = { 5, 6 };
	bench_ratio r = bench_paired_ratio(a, b, 2, 1000, 1);

	cr_expect(fabs(r.mid - (0.5 + 6.0 / 11) / 2) < 1e-12, "%g", r.mid);
	cr_expect(isnan(r.lo) && isnan(r.hi), "[%g, %g]", r.lo, r.hi);
}

Test(bench_stats, same_data_same_interval)
{
	double a[7] = { 10, 11, 9, 10, 12, 10, 11 }, b[7] = { 11, 10, 10, 12, 11, 10, 12 };
	bench_ratio x = bench_paired_ratio(a, b, 7, 1000, 5), y = bench_paired_ratio(a, b, 7, 1000, 5);

	cr_expect(x.lo == y.lo && x.hi == y.hi && x.mid == y.mid);
}
