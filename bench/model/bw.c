/*
 * bw.c - memory read bandwidth, the ceiling of a decode step that streams
 * every active weight once.
 *
 *     bw [MiB] [runs]       (default 1024 MiB, 5 runs)
 *
 * Sums an array far larger than the caches with 1 and 2 threads, each
 * thread reading its own contiguous half, and prints the median GB/s
 * (1e9 bytes/s) of the runs per thread count:
 *
 *     threads 1  read GB/s 13.52  (runs 13.4 .. 13.6)
 *
 * The sum is printed too, so the compiler cannot drop the reads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BW_MAX_THREADS 2
#define BW_MAX_RUNS 31

struct bw_part {
	const uint64_t *a;
	size_t n;
	uint64_t sum;
};

static double bw_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Eight independent sums: no add waits for the one before, so the loads,
 * not the adds, set the pace (and the compiler may vectorise). */
static void *bw_read(void *arg)
{
	struct bw_part *p = arg;
	uint64_t s[8] = { 0 };
	size_t i = 0;
	for (; i + 8 <= p->n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += p->a[i + j];
	for (; i < p->n; i++)
		s[0] += p->a[i];
	p->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
	return NULL;
}

/* One pass over a[0 .. n) with `threads` threads: seconds taken. */
static double bw_pass(const uint64_t *a, size_t n, int threads, uint64_t *sum)
{
	struct bw_part part[BW_MAX_THREADS];
	pthread_t tid[BW_MAX_THREADS];
	size_t per = n / (size_t)threads;
	double t0 = bw_now();
	for (int t = 0; t < threads; t++) {
		part[t] = (struct bw_part){ .a = a + (size_t)t * per,
					    .n = t == threads - 1 ? n - (size_t)t * per : per };
		if (t && pthread_create(&tid[t], NULL, bw_read, &part[t]) != 0) {
			fprintf(stderr, "bw: pthread_create failed\n");
			exit(1);
		}
	}
	bw_read(&part[0]);
	for (int t = 1; t < threads; t++)
		pthread_join(tid[t], NULL);
	double dt = bw_now() - t0;
	for (int t = 0; t < threads; t++)
		*sum += part[t].sum;
	return dt;
}

static int bw_cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 1024;
	long runs = argc > 2 ? strtol(argv[2], NULL, 10) : 5;
	if (mib < 64 || mib > 65536 || runs < 1 || runs > BW_MAX_RUNS) {
		fprintf(stderr, "usage: bw [MiB 64..65536] [runs 1..%d]\n", BW_MAX_RUNS);
		return 2;
	}
	size_t n = (size_t)mib << 17;                   /* 8-byte words */
	uint64_t *a = malloc(n * sizeof(*a)), sum = 0;
	if (!a) {
		fprintf(stderr, "bw: cannot allocate %ld MiB\n", mib);
		return 1;
	}
	for (size_t i = 0; i < n; i++)                  /* fault every page in */
		a[i] = i * 0x9E3779B97F4A7C15ull;

	for (int threads = 1; threads <= BW_MAX_THREADS; threads++) {
		double gbs[BW_MAX_RUNS];
		bw_pass(a, n, threads, &sum);           /* warm-up */
		for (long r = 0; r < runs; r++)
			gbs[r] = (double)(n * sizeof(*a)) / bw_pass(a, n, threads, &sum) / 1e9;
		qsort(gbs, (size_t)runs, sizeof(gbs[0]), bw_cmp);
		printf("threads %d  read GB/s %.2f  (runs %.1f .. %.1f)\n", threads,
		       gbs[runs / 2], gbs[0], gbs[runs - 1]);
	}
	fprintf(stderr, "bw: checksum %llx\n", (unsigned long long)sum);
	free(a);
	return 0;
}
