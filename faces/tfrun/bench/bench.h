/*
 * bench.h - `tfrun bench`: prefill and decode timings of a configuration,
 * and the A/B of two, judged on speed and exactness at once.
 *
 * bench_cmd.c parses the command and runs the rounds, interleaving A and B
 * (ABBA: A B, then B A, ...) so that a drift of the machine weighs on both
 * alike, in one process or, where A and B do not fit side by side, in
 * alternating child processes (procs.c runs a child and carries numbers
 * through files); measure.c times one test on one engine and compares two
 * engines' numbers; stats.c turns rounds into medians and intervals;
 * report.c writes the tables.
 */
#ifndef TF_CLI_BENCH_H
#define TF_CLI_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "tf/engine.h"

/* ---- stats.c ---- */

/* The median of x[0..n) (sorted in place). */
double bench_median(double *x, int n);
/* The median absolute deviation from the median (x reordered). */
double bench_mad(double *x, int n);

/* A ratio's point and its 95% interval. */
typedef struct bench_ratio {
	double mid, lo, hi;
} bench_ratio;

/* Fewer rounds give a ratio but no interval (lo, hi NaN). */
#define BENCH_MIN_ROUNDS 3

/*
 * B over A from paired rounds a[i], b[i] (both > 0): the median of the
 * rounds' ratios, and a percentile bootstrap of that median over the rounds
 * (resamples drawn from `seed`: the same data gives the same interval).
 */
bench_ratio bench_paired_ratio(const double *a, const double *b, int n, int resamples,
			       uint64_t seed);

/* ---- measure.c ---- */

typedef enum bench_kind { BENCH_PREFILL, BENCH_DECODE } bench_kind;

/* One test: pp<prompt> or tg<gen> at a depth, with seqs sequences. */
typedef struct bench_test {
	bench_kind kind;
	int64_t tokens;                 /* prompt tokens, or tokens decoded per sequence */
	int64_t depth;                  /* context filled before, untimed */
	int seqs;                       /* sequences per step (decode) */
} bench_test;

/* What one round of a test measured. */
typedef struct bench_sample {
	double tps;                     /* tokens per second */
	double *stage;                  /* [tf_engine_stage_count()] seconds per token */
	int64_t drafted, accepted;      /* a drafting decode's drafts, and those kept */
} bench_sample;

/* Runs t once on e; tok: a token source of at least the test's length. */
int bench_run(tf_engine *e, const bench_test *t, const int32_t *tok, int64_t n_tok,
	      bench_sample *out);

/* How far B's numbers are from A's on one prompt. */
typedef struct bench_exact {
	int64_t positions;
	double max_rel;                 /* max |a - b| over the row's max |a|, worst row */
	double mean_kl;                 /* KL(softmax a || softmax b), nats, mean over rows */
	double top1;                    /* share of rows whose argmax agrees */
	int64_t greedy;                 /* greedy tokens alike before the first divergence */
	int64_t greedy_of;              /* of this many decoded */
} bench_exact;

/* One engine's numbers on a prompt: every position's logits [n, vocab]
 * (room for one row more), then `gen` greedy tokens on from the last. */
typedef struct bench_numbers {
	int64_t n, gen;
	int vocab;
	float *logits;
	int32_t *greedy;
} bench_numbers;

int bench_numbers_take(tf_engine *e, const int32_t *prompt, int64_t n, int64_t gen,
		  bench_numbers *out);
void bench_numbers_free(bench_numbers *x);
/* B's numbers against A's (same shapes, else TF_ERR_INVALID). */
int bench_diff(const bench_numbers *a, const bench_numbers *b, bench_exact *out);
/* Both in one process. */
int bench_compare(tf_engine *a, tf_engine *b, const int32_t *prompt, int64_t n,
		  int64_t gen, bench_exact *out);

/* ---- procs.c: an A and a B that do not fit in memory side by side ---- */

/* Runs argv (argv[0] a name; the program is this one, /proc/self/exe) as
 * a child whose stderr is ours; *out its stdout, NUL-terminated, to free.
 * TF_OK, or an error naming how the child ended. */
int bench_child_run(char *const *argv, char **out);
/* A configuration's numbers to a file and back. */
int bench_numbers_save(const bench_numbers *x, const char *path);
int bench_numbers_load(bench_numbers *x, const char *path);

/* The memory's read bandwidth with `threads` readers, bytes per second. */
double bench_read_bandwidth(int threads);

#endif /* TF_CLI_BENCH_H */
