/*
 * selftest.h - the few pieces a plugin's selftest program needs, header-only.
 *
 * A selftest is a plain C program (no Criterion) so that it also runs for a
 * cross target under qemu (scripts/cross-test.sh).  It checks its fast
 * paths against their plain references with tf_selftest_check, prints one
 * line per failure, and ends with tf_selftest_done: "N passed, N failed",
 * exit status 1 on any failure.  Include it from the one file that holds
 * main(): the counters are that file's.
 */
#ifndef TF_PLUGIN_SELFTEST_H
#define TF_PLUGIN_SELFTEST_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int tf_selftest_pass, tf_selftest_fail;

static inline void tf_selftest_check(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline void tf_selftest_check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		tf_selftest_pass++;
		return;
	}
	tf_selftest_fail++;
	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
}

/* Prints the tally; the program's exit status. */
static inline int tf_selftest_done(void)
{
	printf("%d passed, %d failed\n", tf_selftest_pass, tf_selftest_fail);
	return tf_selftest_fail != 0;
}

/* xorshift64: the same inputs on every run and every target. */
static inline uint32_t tf_selftest_u32(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state >> 32);
}

/* Uniform in [-1, 1), 24 bits of it. */
static inline float tf_selftest_uniform(uint64_t *state)
{
	return (float)(tf_selftest_u32(state) >> 8) / 8388608.0f - 1.0f;
}

/* max |a - b| / max(max |b|, 1e-6); NaN anywhere counts as infinite. */
static inline double tf_selftest_rel_err(const float *a, const float *b, int64_t n)
{
	double num = 0, den = 1e-6;

	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (isnan(d))
			return INFINITY;
		num = fmax(num, d);
		den = fmax(den, fabs((double)b[i]));
	}
	return num / den;
}

#endif /* TF_PLUGIN_SELFTEST_H */
