/*
 * bench_batch - aggregate decode throughput of S sequences stepped together.
 *
 *   bench_batch [options] MODEL.ini
 *
 *   -s LIST      sequence counts, comma-separated            [1,2,4,8]
 *   -k LIST      verify widths: steps of k + 1 rows of one sequence [none]
 *   -d LIST      draft depths: the MTP layer drafting d tokens  [none]
 *   -p N         prompt tokens per sequence                  [32]
 *   -n K         decode steps timed per repeat               [64]
 *   -r R         repeats; the median is reported             [5]
 *   --set S.K=V  an INI override (repeatable), over runtime.sequences = max S
 *   --json       one JSON object instead of the table
 *
 * Each repeat makes S fresh sequences, prefills each with its own prompt
 * (fixed random ids), then times K steps in which every sequence decodes
 * one token, greedily (the argmax of its logits row), all S in one batch.
 * A step reads every weight once for all its rows, so the aggregate rate
 * should grow with S until the rows' own compute, or the experts the rows
 * route to, dominate; a second table splits a step by pipeline stage.  The "one_seq" row is S = 1 through the plain
 * single-sequence batch (tf_batch.one_seq), today's decode path, measured
 * in the same run; the ratios are against the batched S = 1.
 *
 * A "verify" row times what a speculative verify of depth k costs: steps
 * of k + 1 rows of one sequence, every row's logits asked for, its tokens
 * the greedy picks of the step before (a draft chain's shape; the rows
 * route as text does, not as one token repeated).  Its rate is in rows a
 * second, so "vs 1" is its speed-up over one row and a verify costs
 * (k + 1) / vs_1 plain steps.  A "draft" row times tf_seq_draft of d tokens
 * after one sequence's prompt (the MTP layer's rows and head, needing it
 * open: --set mtp.enabled=true), d rows a call: it costs d / vs_1 plain
 * steps.
 *
 * Uses tf/engine.h only.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tf/engine.h"
#include "tf/error.h"

#define MAX_COUNTS 16
#define MAX_SETS 32
#define MAX_STAGES 16

struct opts {
	const char *ini;
	int counts[MAX_COUNTS], n_counts;
	int widths[MAX_COUNTS], n_widths;
	int depths[MAX_COUNTS], n_depths;
	int prompt, steps, repeats;
	const char *sets[MAX_SETS + 1];
	int n_sets;
	bool json;
};

/* What one row of the table times: S sequences of one row each, the
 * one_seq path, the verify rows of one sequence, or its MTP drafts. */
enum path { PATH_BATCH, PATH_ONE_SEQ, PATH_VERIFY, PATH_DRAFT };

static const char *const path_names[] = { "batch", "one_seq", "verify", "draft" };

struct config {
	enum path path;
	int seqs, rows;                 /* sequences; rows of each a step */
};

/* One row of the table. */
struct row {
	struct config c;
	double tok_s, lo, hi;           /* median, min, max of the repeats (rows a second) */
	double experts;                 /* mean union of experts per MoE pass */
	double stage_us[MAX_STAGES];    /* mean microseconds a step spent per stage */
};

static void usage(void)
{
	fprintf(stderr, "usage: bench_batch [-s 1,2,4,8] [-k 1,2,3] [-d 1,2,3] [-p N] [-n K] [-r R] "
			"[--set SECTION.KEY=VALUE]... [--json] MODEL.ini\n");
	exit(2);
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_batch: %s: %s (%s)\n", what, tf_engine_errmsg(), tf_strerror(rc));
	exit(1);
}

static int positive(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 1 << 20)
		usage();
	return (int)v;
}

/* A comma-separated list of positive numbers into out (MAX_COUNTS at
 * most); how many. */
static int positive_list(char *s, int *out)
{
	int n = 0;
	for (char *t = strtok(s, ","); t; t = strtok(NULL, ","))
		if (n < MAX_COUNTS)
			out[n++] = positive(t);
	return n;
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .prompt = 32, .steps = 64, .repeats = 5 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--set") && more && o->n_sets < MAX_SETS) {
			o->sets[++o->n_sets] = argv[++i];   /* [0]: runtime.sequences */
		} else if (!strcmp(a, "-s") && more) {
			o->n_counts = positive_list(argv[++i], o->counts);
		} else if (!strcmp(a, "-k") && more) {
			o->n_widths = positive_list(argv[++i], o->widths);
		} else if (!strcmp(a, "-d") && more) {
			o->n_depths = positive_list(argv[++i], o->depths);
		} else if (!strcmp(a, "-p") && more) {
			o->prompt = positive(argv[++i]);
		} else if (!strcmp(a, "-n") && more) {
			o->steps = positive(argv[++i]);
		} else if (!strcmp(a, "-r") && more) {
			o->repeats = positive(argv[++i]);
		} else if (a[0] == '-' || o->ini) {
			usage();
		} else {
			o->ini = a;
		}
	}
	if (!o->ini)
		usage();
	if (!o->n_counts) {
		static const int def[] = { 1, 2, 4, 8 };
		memcpy(o->counts, def, sizeof(def));
		o->n_counts = 4;
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static int n_stages(void)
{
	int n = tf_engine_stage_count();
	return n < MAX_STAGES ? n : MAX_STAGES;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/*
 * One repeat of c: its sequences prefilled, then `steps` greedy steps of
 * c.rows rows each; rows decoded per second, and in *experts the mean
 * number of distinct experts a step's MoE pass read, in stage_us[] the
 * microseconds a step spent in each pipeline stage.
 */
static double run_once(tf_engine *e, const struct opts *o, struct config c, int rep,
		       double *experts, double *stage_us)
{
	const int V = tf_engine_vocab(e), S = c.seqs, R = c.rows, N = S * R;
	tf_seq_id *s = malloc((size_t)S * sizeof(*s));
	int32_t *tok = malloc((size_t)(N > o->prompt ? N : o->prompt) * sizeof(*tok));
	float *logits = malloc((size_t)N * (size_t)V * sizeof(*logits));
	uint8_t *out = malloc((size_t)N);
	int rc;

	if (!s || !tok || !logits || !out) {
		fprintf(stderr, "bench_batch: out of memory\n");
		exit(1);
	}
	memset(out, 1, (size_t)N);
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(rep + 1);
	for (int k = 0; k < S; k++) {
		if ((rc = tf_seq_new(e, &s[k])) != TF_OK)
			die("tf_seq_new", rc);
		for (int i = 0; i < o->prompt; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			tok[i] = (int32_t)((seed >> 33) % (uint64_t)V);
		}
		tf_batch p = { .n = o->prompt, .token = tok, .one_seq = s[k] };
		if ((rc = tf_engine_forward(e, &p, logits + (size_t)k * R * V, NULL)) != TF_OK)
			die("prefill", rc);
		for (int i = 1; c.path == PATH_VERIFY && i < R; i++)   /* its first step: the prompt's pick */
			memcpy(logits + ((size_t)k * R + i) * V, logits + (size_t)k * R * V,
			       (size_t)V * sizeof(*logits));
	}

	tf_batch d = { .n = N, .token = tok, .seq = c.path == PATH_BATCH ? s : NULL,
		       .one_seq = s[0], .out = c.path == PATH_VERIFY ? out : NULL };
	tf_engine_stats_reset(e);
	double t0 = now_s();
	for (int step = 0; step < o->steps && c.path == PATH_DRAFT; step++)
		if ((rc = tf_seq_draft(e, s[0], argmax(logits, V), R, tok, NULL)) != TF_OK)
			die("draft", rc);
	for (int step = 0; step < o->steps && c.path != PATH_DRAFT; step++) {
		for (int k = 0; k < N; k++)
			tok[k] = argmax(logits + (size_t)k * V, V);
		if ((rc = tf_engine_forward(e, &d, logits, NULL)) != TF_OK)
			die(c.path == PATH_VERIFY ? "verify step" : "decode step", rc);
	}
	double t = now_s() - t0;
	tf_moe_stats m = tf_engine_moe_stats(e);
	*experts = m.passes ? (double)m.experts / (double)m.passes : 0.0;
	for (int k = 0; k < n_stages(); k++)
		stage_us[k] = 1e6 * tf_engine_stage_seconds(e, k) / o->steps;

	for (int k = 0; k < S; k++)
		tf_seq_free(e, s[k]);
	free(s);
	free(tok);
	free(logits);
	free(out);
	return (double)N * o->steps / t;
}

/* The median, min and max of n timings (sorted in place). */
static struct row summarise(double *v, int n, struct config c, double experts,
			     const double *stage_us)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	struct row w = { .c = c, .tok_s = v[n / 2], .lo = v[0],
			 .hi = v[n - 1], .experts = experts };
	memcpy(w.stage_us, stage_us, sizeof(w.stage_us));
	if (n % 2 == 0)
		w.tok_s = 0.5 * (v[n / 2 - 1] + v[n / 2]);
	return w;
}

/* The CPU's model name from /proc/cpuinfo, or "?". */
static void cpu_name(char *out, size_t n)
{
	char line[256];
	FILE *f = fopen("/proc/cpuinfo", "r");
	snprintf(out, n, "?");
	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');
		if (!strncmp(line, "model name", 10) && c) {
			snprintf(out, n, "%s", c + 2);
			out[strcspn(out, "\n")] = 0;
			break;
		}
	}
	if (f)
		fclose(f);
}

/* s as a JSON string. */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void print_json(const struct opts *o, const char *cmd, const char *cpu,
		       const struct utsname *u, const struct row *rows, int n, double base)
{
	printf("{\n  \"command\": ");
	json_str(cmd);
	printf(",\n  \"ini\": ");
	json_str(o->ini);
	printf(",\n  \"machine\": {\"cpu\": ");
	json_str(cpu);
	printf(", \"arch\": ");
	json_str(u->machine);
	printf(", \"nproc\": %ld},\n", sysconf(_SC_NPROCESSORS_ONLN));
	printf("  \"prompt\": %d, \"steps\": %d, \"repeats\": %d,\n  \"results\": [\n",
	       o->prompt, o->steps, o->repeats);
	for (int i = 0; i < n; i++) {
		const struct config *c = &rows[i].c;
		printf("    {\"seqs\": %d, \"rows\": %d, \"path\": \"%s\", \"tok_s\": %.2f, "
		       "\"tok_s_min\": %.2f, \"tok_s_max\": %.2f, \"per_seq_tok_s\": %.2f, "
		       "\"vs_1\": %.3f, \"experts_per_moe_pass\": %.2f, \"stage_us\": {",
		       c->seqs, c->seqs * c->rows, path_names[c->path], rows[i].tok_s, rows[i].lo,
		       rows[i].hi, rows[i].tok_s / c->seqs, rows[i].tok_s / base,
		       rows[i].experts);
		for (int k = 0; k < n_stages(); k++)
			printf("%s\"%s\": %.1f", k ? ", " : "", tf_engine_stage_name(k),
			       rows[i].stage_us[k]);
		printf("}}%s\n", i + 1 < n ? "," : "");
	}
	printf("  ]\n}\n");
}

static void print_table(const struct opts *o, const char *cmd, const char *cpu,
			const struct utsname *u, const struct row *rows, int n, double base)
{
	printf("%s\n%s, %s, %ld CPUs; prompt %d, %d decode steps, median of %d\n\n", cmd, cpu,
	       u->machine, sysconf(_SC_NPROCESSORS_ONLN), o->prompt, o->steps, o->repeats);
	printf("| seqs | rows | path    |   tok/s | min..max        | tok/s/seq | vs 1 | experts/pass |\n");
	printf("| ---: | ---: | :------ | ------: | :-------------- | --------: | ---: | -----------: |\n");
	for (int i = 0; i < n; i++) {
		const struct config *c = &rows[i].c;
		char range[32];
		snprintf(range, sizeof(range), "%.1f..%.1f", rows[i].lo, rows[i].hi);
		printf("| %4d | %4d | %-7s | %7.1f | %-15s | %9.1f | %4.2f | %12.1f |\n", c->seqs,
		       c->seqs * c->rows, path_names[c->path], rows[i].tok_s, range,
		       rows[i].tok_s / c->seqs, rows[i].tok_s / base, rows[i].experts);
	}
	printf("\nMicroseconds a step spends per stage (mean of the repeats)\n\n| seqs | rows | path    |");
	for (int k = 0; k < n_stages(); k++)
		printf(" %8s |", tf_engine_stage_name(k));
	printf("\n| ---: | ---: | :------ |");
	for (int k = 0; k < n_stages(); k++)
		printf(" -------: |");
	for (int i = 0; i < n; i++) {
		printf("\n| %4d | %4d | %-7s |", rows[i].c.seqs, rows[i].c.seqs * rows[i].c.rows,
		       path_names[rows[i].c.path]);
		for (int k = 0; k < n_stages(); k++)
			printf(" %8.1f |", rows[i].stage_us[k]);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	struct opts o;
	char cmd[4096] = "", seqs[64], cpu[256];
	struct utsname u;
	tf_engine *e;
	int rc, max_s = 1;

	for (int i = 0; i < argc; i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s%s", i ? " " : "",
			 argv[i]);
	parse(argc, argv, &o);
	for (int i = 0; i < o.n_counts; i++)
		max_s = o.counts[i] > max_s ? o.counts[i] : max_s;
	snprintf(seqs, sizeof(seqs), "runtime.sequences=%d", max_s);
	o.sets[0] = seqs;               /* the user's --set come after and win */
	if ((rc = tf_engine_open(o.ini, o.sets, o.n_sets + 1, &e)) != TF_OK)
		die(o.ini, rc);
	/* Row 0 is the one_seq path, then the batches, the verifies and the
	 * drafts.
	 * Each repeat runs every row once, so a change in the machine's load
	 * falls on all rows alike. */
	struct config cf[3 * MAX_COUNTS + 1] = { { PATH_ONE_SEQ, 1, 1 } };
	int n = 1, most_rows = 1;
	for (int i = 0; i < o.n_counts; i++)
		cf[n++] = (struct config){ PATH_BATCH, o.counts[i], 1 };
	for (int i = 0; i < o.n_widths; i++) {
		cf[n++] = (struct config){ PATH_VERIFY, 1, o.widths[i] + 1 };
		most_rows = o.widths[i] + 1 > most_rows ? o.widths[i] + 1 : most_rows;
	}
	for (int i = 0; i < o.n_depths; i++)
		cf[n++] = (struct config){ PATH_DRAFT, 1, o.depths[i] };
	if (o.n_depths && !tf_engine_has_mtp(e)) {
		fprintf(stderr, "bench_batch: -d needs the MTP layer open (--set mtp.enabled=true "
				"on a checkpoint that has one)\n");
		return 1;
	}
	if (o.prompt + (int64_t)o.steps * most_rows + 1 > tf_engine_context(e)) {
		fprintf(stderr, "bench_batch: %d prompt tokens and %d steps of %d rows exceed the "
				"context of %lld tokens\n", o.prompt, o.steps, most_rows,
			(long long)tf_engine_context(e));
		return 1;
	}
	double *v = malloc((size_t)n * (size_t)o.repeats * sizeof(*v));
	double experts[3 * MAX_COUNTS + 1] = { 0 }, stage_us[3 * MAX_COUNTS + 1][MAX_STAGES] = { { 0 } };
	if (!v) {
		fprintf(stderr, "bench_batch: out of memory\n");
		return 1;
	}
	for (int r = 0; r <= o.repeats; r++)    /* r = 0 warms up: caches, pages, threads */
		for (int i = 0; i < n; i++) {
			double x, st[MAX_STAGES] = { 0 };
			double t = run_once(e, &o, cf[i], r, &x, st);
			if (r) {
				v[i * o.repeats + r - 1] = t;
				experts[i] += x / o.repeats;
				for (int k = 0; k < MAX_STAGES; k++)
					stage_us[i][k] += st[k] / o.repeats;
			}
		}
	struct row rows[3 * MAX_COUNTS + 1];
	double base = 0;
	for (int i = 0; i < n; i++) {
		rows[i] = summarise(v + i * o.repeats, o.repeats, cf[i], experts[i], stage_us[i]);
		if (cf[i].path == PATH_BATCH && cf[i].seqs == 1)
			base = rows[i].tok_s;
	}
	if (!base)
		base = rows[0].tok_s;
	free(v);
	tf_engine_close(e);

	uname(&u);
	cpu_name(cpu, sizeof(cpu));
	if (o.json)
		print_json(&o, cmd, cpu, &u, rows, n, base);
	else
		print_table(&o, cmd, cpu, &u, rows, n, base);
	return 0;
}
