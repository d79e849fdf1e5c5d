/* report.h - what `tfrun bench` measured, and its tables. */
#ifndef TF_CLI_BENCH_REPORT_H
#define TF_CLI_BENCH_REPORT_H

#include <stdio.h>

#include "bench.h"

#define BENCH_MAX_TESTS 64
#define BENCH_MAX_STAGES 16

typedef enum bench_format { BENCH_MARKDOWN, BENCH_JSON, BENCH_CSV } bench_format;

/* One configuration's figures for one test. */
typedef struct bench_row {
	double tps, mad;                /* median tokens per second, its MAD */
	double roofline;                /* share of decode's roofline; NaN where none */
	double accept;                  /* drafts kept over drafts made; NaN: no drafting */
} bench_row;

/* One stage's seconds per token, A's and B's medians, B/A of time. */
typedef struct bench_stage {
	const char *name;
	double a, b;
	bench_ratio r;
} bench_stage;

typedef struct bench_report {
	const char *label[2];           /* what A and B are */
	int n_configs, n_tests, n_stages, rounds, threads;
	bench_test test[BENCH_MAX_TESTS];
	bench_row row[2][BENCH_MAX_TESTS];
	bench_ratio ab[BENCH_MAX_TESTS];        /* B/A of tokens per second */
	bench_stage stage[BENCH_MAX_TESTS][BENCH_MAX_STAGES];
	double bandwidth;               /* bytes per second */
	bench_exact exact;
	double tolerance;
	bool regression;
} bench_report;

void bench_report_print(const bench_report *rep, bench_format fmt, FILE *f);

#endif /* TF_CLI_BENCH_REPORT_H */
