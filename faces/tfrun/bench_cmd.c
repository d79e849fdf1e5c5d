/* bench_cmd.c - `tfrun bench` (bench_cmd.h): options, rounds, the A/B. */
#define _GNU_SOURCE
#include "bench_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/report.h"
#include "fail.h"
#include "tf/diag.h"
#include "tf/progress.h"

#define MAX_SETS 64
#define MAX_LIST 16
#define RESAMPLES 4000

static const char usage[] =
"usage: tfrun bench MODEL.ini [-p N] [-n N] [-d N,...] [-s N,...] [-r N]\n"
"                   [--threads N] [--set K=V ...]\n"
"                   [--vs B.ini | --vs-set K=V ...] [--tolerance X]\n"
"                   [--processes] [--json | --csv]\n"
"\n"
"Prefill (pp) and decode (tg) speed of MODEL.ini, as a table: each test's\n"
"median tokens per second over the rounds, its median absolute deviation,\n"
"ms per token and, for one-sequence decode on a host backend, the share of\n"
"the roofline (the memory plan's weight bytes per token over the read\n"
"bandwidth measured in the same run).  With --vs or --vs-set, a second configuration B is timed\n"
"interleaved with A (ABBA) in this process (in alternating processes where\n"
"B does not fit in memory beside A, or with --processes), and each figure and each stage\n"
"gets B/A with a 95% interval (a percentile bootstrap of the paired rounds'\n"
"ratios); B's logits on the same prompt are compared with A's.\n"
"\n"
"  -p N            prompt tokens of the prefill test (default 512; 0: none)\n"
"  -n N            tokens decoded per sequence (default 128; 0: none)\n"
"  -d N,...        context already filled before each test (default 0)\n"
"  -s N,...        sequences decoded per step (default 1)\n"
"  -r N            rounds (default 5)\n"
"      --threads N     [runtime] threads\n"
"      --set K=V       an INI override for A and B (repeatable)\n"
"      --vs B.ini      B: another INI (with the same --set)\n"
"      --vs-set K=V    B: A with this override too (repeatable)\n"
"      --tolerance X   the largest relative logit error B may have (1e-3)\n"
"      --processes     time A and B in alternating processes, each loaded anew\n"
"      --json, --csv   the tables as JSON or CSV\n"
"\n"
"Exit status: 0, or 1 when B is slower than A beyond its interval on any\n"
"test or less exact than the tolerance; 2 when the benchmark cannot run.\n";

typedef struct bench_opts {
	const char *ini, *vs;
	const char *sets[MAX_SETS], *vs_sets[MAX_SETS];
	int n_sets, n_vs_sets;
	int64_t prompt, gen;
	int64_t depth[MAX_LIST], seqs[MAX_LIST];
	int n_depth, n_seqs, rounds;
	int threads;
	double tolerance;
	bench_format fmt;
	char extra[3][64];              /* runtime.* overrides the tests need */
	bool processes;                 /* A and B in alternating processes */
	int child;                      /* in a child: the configuration it runs, else -1 */
	const char *dump;               /* in a child: write its numbers there */
	int argc;                       /* the command line, for the children */
	char **argv;
} bench_opts;

/* "1,2,4" into out; false when it is not such a list. */
static bool parse_list(const char *s, int64_t *out, int *n, int64_t min)
{
	char *end;

	*n = 0;
	do {
		long long v = strtoll(s, &end, 10);
		if (end == s || v < min || v > (1 << 20) || *n == MAX_LIST)
			return false;
		out[(*n)++] = v;
		s = end + (*end == ',');
	} while (*end == ',');
	return !*end;
}

static bool parse_count(const char *s, int64_t *out, int64_t min)
{
	int n;
	return parse_list(s, out, &n, min) && n == 1;
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A bad option: said, with the usage; exit status 2. */
static int bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tfrun bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", usage);
	return 2;
}

static int parse(int argc, char **argv, bench_opts *o)
{
	enum { O_THREADS = 256, O_SET, O_VS, O_VS_SET, O_TOL, O_JSON, O_CSV, O_PROCS, O_CHILD,
	       O_DUMP };
	static const struct option longs[] = {
		{ "threads", required_argument, NULL, O_THREADS },
		{ "set", required_argument, NULL, O_SET },
		{ "vs", required_argument, NULL, O_VS },
		{ "vs-set", required_argument, NULL, O_VS_SET },
		{ "tolerance", required_argument, NULL, O_TOL },
		{ "json", no_argument, NULL, O_JSON },
		{ "csv", no_argument, NULL, O_CSV },
		{ "processes", no_argument, NULL, O_PROCS },
		/* What a parent passes its children (procs.c). */
		{ "child", required_argument, NULL, O_CHILD },
		{ "child-dump", required_argument, NULL, O_DUMP },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int64_t v;
	int c;

	*o = (bench_opts){ .prompt = 512, .gen = 128, .depth = { 0 }, .n_depth = 1,
			   .seqs = { 1 }, .n_seqs = 1, .rounds = 5, .tolerance = 1e-3,
			   .child = -1, .argc = argc, .argv = argv };
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:n:d:s:r:h", longs, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!parse_count(optarg, &o->prompt, 0))
				return bad("-p %s: not a token count", optarg);
			break;
		case 'n':
			if (!parse_count(optarg, &o->gen, 0))
				return bad("-n %s: not a token count", optarg);
			break;
		case 'd':
			if (!parse_list(optarg, o->depth, &o->n_depth, 0))
				return bad("-d %s: not a list of depths", optarg);
			break;
		case 's':
			if (!parse_list(optarg, o->seqs, &o->n_seqs, 1))
				return bad("-s %s: not a list of sequence counts (1 or more)", optarg);
			break;
		case 'r':
			if (!parse_count(optarg, &v, 1) || v > 1000)
				return bad("-r %s: rounds must be 1..1000", optarg);
			o->rounds = (int)v;
			break;
		case O_THREADS:
			if (!parse_count(optarg, &v, 1) || v > 1024)
				return bad("--threads %s: not a thread count", optarg);
			o->threads = (int)v;
			break;
		case O_SET:
		case O_VS_SET:
			if (!strchr(optarg, '=') || (c == O_SET ? o->n_sets : o->n_vs_sets) == MAX_SETS)
				return bad("--set/--vs-set %s: want SECTION.KEY=VALUE", optarg);
			if (c == O_SET)
				o->sets[o->n_sets++] = optarg;
			else
				o->vs_sets[o->n_vs_sets++] = optarg;
			break;
		case O_VS: o->vs = optarg; break;
		case O_TOL: {
			char *end;
			o->tolerance = strtod(optarg, &end);
			if (*end || !(o->tolerance >= 0))
				return bad("--tolerance %s: not a number >= 0", optarg);
			break;
		}
		case O_JSON: o->fmt = BENCH_JSON; break;
		case O_CSV: o->fmt = BENCH_CSV; break;
		case O_PROCS: o->processes = true; break;
		case O_CHILD:
			if (strcmp(optarg, "A") && strcmp(optarg, "B"))
				return bad("--child %s: A or B", optarg);
			o->child = optarg[0] - 'A';
			break;
		case O_DUMP: o->dump = optarg; break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind != argc - 1)
		return bad(optind < argc ? "one MODEL.ini, please" : "MODEL.ini is missing");
	o->ini = argv[optind];
	if (o->vs && o->n_vs_sets)
		return bad("--vs and --vs-set: one B, please");
	if (!o->prompt && !o->gen)
		return bad("-p 0 and -n 0: nothing to time");
	if (o->child == 1 && !o->vs && !o->n_vs_sets)
		return bad("--child B: there is no B");
	return -1;
}

/* The tests, depth by depth: pp, then tg at each sequence count. */
static int make_tests(const bench_opts *o, bench_report *rep)
{
	for (int d = 0; d < o->n_depth; d++) {
		if (o->prompt) {
			if (rep->n_tests == BENCH_MAX_TESTS)
				return -1;
			rep->test[rep->n_tests++] = (bench_test){ .kind = BENCH_PREFILL,
				.tokens = o->prompt, .depth = o->depth[d], .seqs = 1 };
		}
		for (int s = 0; o->gen && s < o->n_seqs; s++) {
			if (rep->n_tests == BENCH_MAX_TESTS)
				return -1;
			rep->test[rep->n_tests++] = (bench_test){ .kind = BENCH_DECODE,
				.tokens = o->gen, .depth = o->depth[d], .seqs = (int)o->seqs[s] };
		}
	}
	return 0;
}

/* Opens one configuration: the INI, the shared --set, B's own, and what
 * the tests need (sequences, context, threads), unless set already. */
static int open_config(const bench_opts *o, const char *ini, const char *const *own, int n_own,
		       tf_engine **e)
{
	const char *all[2 * MAX_SETS + 3];
	int n = 0;

	for (int i = 0; i < 3; i++)
		if (o->extra[i][0])
			all[n++] = o->extra[i];
	for (int i = 0; i < o->n_sets; i++)
		all[n++] = o->sets[i];
	for (int i = 0; i < n_own; i++)
		all[n++] = own[i];
	return tf_engine_open(ini, all, n, e);
}

/* "HEAD", or "HEAD with K=V ..." for the overrides of both lists. */
static void label_sets(char *buf, size_t size, const char *head, const char *const *a, int na,
		       const char *const *b, int nb)
{
	int at = snprintf(buf, size, "%s%s", head, na + nb ? " with" : "");
	for (int i = 0; i < na + nb && at > 0 && (size_t)at < size; i++)
		at += snprintf(buf + at, size - (size_t)at, " %s", i < na ? a[i] : b[i - na]);
}

/* The largest of a list. */
static int64_t most(const int64_t *x, int n)
{
	int64_t m = x[0];
	for (int i = 1; i < n; i++)
		m = x[i] > m ? x[i] : m;
	return m;
}

/* Medians, spreads, rooflines, and B/A for every test and stage; accept:
 * each configuration and test's drafts made and kept over its rounds. */
static void summarize(bench_report *rep, double *tps, double *stage, double roof[2],
		      int64_t (*accept)[BENCH_MAX_TESTS][2])
{
	int R = rep->rounds, S = rep->n_stages, T = rep->n_tests;
	double *x = malloc((size_t)R * sizeof(*x)), *y = malloc((size_t)R * sizeof(*y));

	if (!x || !y)
		goto out;
	for (int c = 0; c < rep->n_configs; c++)
		for (int t = 0; t < T; t++) {
			const double *v = tps + ((size_t)c * T + t) * R;
			bench_row *row = &rep->row[c][t];
			memcpy(x, v, (size_t)R * sizeof(*x));
			row->tps = bench_median(x, R);
			row->mad = bench_mad(x, R);
			const bench_test *te = &rep->test[t];
			row->roofline = te->kind == BENCH_DECODE && te->seqs == 1 && roof[c] > 0 ?
					row->tps / roof[c] : NAN;
			row->accept = accept[c][t][0] ? (double)accept[c][t][1] /
							(double)accept[c][t][0] : NAN;
		}
	for (int t = 0; t < T; t++) {
		const bool two = rep->n_configs > 1;
		if (two) {
			const double *a = tps + (size_t)t * R, *b = tps + ((size_t)T + t) * R;
			rep->ab[t] = bench_paired_ratio(a, b, R, RESAMPLES, 42);
			rep->regression |= rep->ab[t].hi < 1;
		}
		for (int k = 0; k < S; k++) {
			bench_stage *st = &rep->stage[t][k];
			for (int i = 0; i < R; i++) {
				x[i] = stage[(((size_t)0 * T + t) * R + i) * S + k];
				y[i] = two ? stage[(((size_t)1 * T + t) * R + i) * S + k] : 0;
			}
			st->name = tf_engine_stage_name(k);
			if (two)
				st->r = bench_paired_ratio(x, y, R, RESAMPLES, 43);
			st->a = bench_median(x, R);
			st->b = two ? bench_median(y, R) : 0;
		}
	}
out:
	free(x);
	free(y);
}

/* Configuration c (0: A, 1: B) opened, and its name for an error. */
static int open_side(const bench_opts *o, int c, tf_engine **e)
{
	return c ? open_config(o, o->vs ? o->vs : o->ini, o->vs_sets, o->n_vs_sets, e)
		 : open_config(o, o->ini, NULL, 0, e);
}

static const char *side_name(const bench_opts *o, int c)
{
	return c ? (o->vs ? o->vs : "--vs-set") : o->ini;
}

/* What the roofline needs of a configuration: its threads, and the weight
 * bytes a decoded token reads where they sit in the memory
 * bench_read_bandwidth measures (a host backend); 0 elsewhere (a device's
 * memory: bench/model/run.sh measures its bandwidth), so no roofline. */
typedef struct bench_side {
	int threads;
	double bytes;
} bench_side;

static bench_side side_of(tf_engine *e)
{
	const char *be = tf_conf_get(tf_engine_conf(e), "plugins", "backend");
	int64_t th = 1;

	tf_conf_get_int(tf_engine_conf(e), "runtime", "threads", 1, &th);
	return (bench_side){
		.threads = (int)th,
		.bytes = !be || !strcmp(be, "cpu") ? (double)tf_engine_active_bytes(e) : 0,
	};
}

/* The read bandwidth on A's threads, and each configuration's roofline. */
static void rooflines(bench_report *rep, const bench_side *info, double roof[2])
{
	rep->threads = info[0].threads;
	rep->bandwidth = bench_read_bandwidth(rep->threads);
	for (int c = 0; c < rep->n_configs; c++)
		roof[c] = info[c].bytes > 0 ? rep->bandwidth / info[c].bytes : 0;
}

/* A fixed pseudo-random run of token ids below the vocabulary. */
static int32_t *make_tokens(int vocab, int64_t n)
{
	int32_t *tok = malloc((size_t)n * sizeof(*tok));
	uint64_t lcg = 12345;

	for (int64_t i = 0; tok && i < n; i++) {
		lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
		tok[i] = (int32_t)((lcg >> 33) % (uint64_t)vocab);
	}
	return tok;
}

/* What the rounds fill: per configuration, test and round, tokens per
 * second and stage seconds per token; per configuration and test, the
 * drafts made and kept. */
typedef struct bench_runs {
	double *tps, *stage;
	int64_t accept[2][BENCH_MAX_TESTS][2];
} bench_runs;

static void runs_add(bench_runs *w, const bench_report *rep, int c, int t, int r,
		     const bench_sample *smp)
{
	w->tps[((size_t)c * rep->n_tests + t) * rep->rounds + r] = smp->tps;
	w->accept[c][t][0] += smp->drafted;
	w->accept[c][t][1] += smp->accepted;
}

static double *runs_stage(bench_runs *w, const bench_report *rep, int c, int t, int r)
{
	return w->stage + (((size_t)c * rep->n_tests + t) * rep->rounds + r) * rep->n_stages;
}

/* In one process: a warm-up run of each test, then the rounds, A and B in
 * ABBA order. */
static int rounds_here(tf_engine *const *e, bench_report *rep, const int32_t *tok,
		       int64_t n_tok, bench_runs *w)
{
	tf_progress bar;
	double *scratch = malloc((size_t)rep->n_stages * sizeof(double));
	uint64_t done = 0;

	if (!scratch) {
		fprintf(stderr, "tfrun bench: out of memory\n");
		return 2;
	}
	tf_progress_init(&bar, "bench", (uint64_t)rep->n_configs * rep->n_tests * rep->rounds,
			 TF_PROGRESS_TOKENS);
	for (int t = 0; t < rep->n_tests; t++)
		for (int r = -1; r < rep->rounds; r++)
			for (int k = 0; k < rep->n_configs; k++) {
				int c = r >= 0 && r % 2 ? rep->n_configs - 1 - k : k;
				bench_sample smp = { .stage = r < 0 ? scratch
								    : runs_stage(w, rep, c, t, r) };
				if (bench_run(e[c], &rep->test[t], tok, n_tok, &smp)) {
					tf_progress_finish(&bar);
					free(scratch);
					return tf_cli_fail(c ? "B" : "A"), 2;
				}
				if (r >= 0) {
					runs_add(w, rep, c, t, r, &smp);
					tf_progress_update(&bar, ++done);
				}
			}
	tf_progress_finish(&bar);
	free(scratch);
	return 0;
}

/*
 * A child's part: configuration o->child alone.  With a dump file, its
 * numbers on the comparison's prompt go there; else a line "info THREADS
 * BYTES" (bench_side), then for each test, warmed up and run once, "test T
 * TPS DRAFTED KEPT STAGE...".
 */
static int child_main(const bench_opts *o, const bench_report *rep, int64_t n_tok,
		      int64_t cmp_n, int64_t cmp_gen)
{
	tf_engine *e = NULL;
	int32_t *tok = NULL;
	double *st = malloc((size_t)rep->n_stages * sizeof(double));
	int status = 2;

	if (open_side(o, o->child, &e)) {
		tf_cli_fail(side_name(o, o->child));
		goto out;
	}
	if (!st || !(tok = make_tokens(tf_engine_vocab(e), n_tok))) {
		fprintf(stderr, "tfrun bench: out of memory\n");
		goto out;
	}
	if (o->dump) {
		bench_numbers x;
		if (!bench_numbers_take(e, tok, cmp_n, cmp_gen, &x)) {
			status = bench_numbers_save(&x, o->dump) ? 2 : 0;
			bench_numbers_free(&x);
		}
		if (status)
			tf_cli_fail(o->child ? "B" : "A");
		goto out;
	}
	const bench_side info = side_of(e);
	printf("info %d %.17g\n", info.threads, info.bytes);
	for (int t = 0; t < rep->n_tests; t++) {
		bench_sample warm = { .stage = st }, smp = { .stage = st };
		if (bench_run(e, &rep->test[t], tok, n_tok, &warm) ||
		    bench_run(e, &rep->test[t], tok, n_tok, &smp)) {
			tf_cli_fail(o->child ? "B" : "A");
			goto out;
		}
		printf("test %d %.17g %" PRId64 " %" PRId64, t, smp.tps, smp.drafted, smp.accepted);
		for (int k = 0; k < rep->n_stages; k++)
			printf(" %.17g", st[k]);
		printf("\n");
	}
	status = fflush(stdout) ? 2 : 0;
out:
	tf_engine_close(e);
	free(tok);
	free(st);
	return status;
}

/* This command line again, with --child C (and --child-dump FILE). */
static int child(const bench_opts *o, int c, const char *dump, char **out)
{
	char **argv = calloc((size_t)o->argc + 6, sizeof(*argv));
	int n = 0, rc;

	if (!argv)
		return tf_diag_set(TF_ERR_NOMEM, "bench: out of memory");
	argv[n++] = "tfrun";
	for (int i = 0; i < o->argc; i++)
		argv[n++] = o->argv[i];
	argv[n++] = "--child";
	argv[n++] = c ? "B" : "A";
	if (dump) {
		argv[n++] = "--child-dump";
		argv[n++] = (char *)dump;
	}
	rc = bench_child_run(argv, out);
	free(argv);
	return rc;
}

/* A child's lines into the runs, and its info line into *info. */
static int child_parse(const char *text, bench_report *rep, int c, int r, bench_runs *w,
		       bench_side *info)
{
	int tests = 0;

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char *end;
		if (!strncmp(l, "info ", 5)) {
			info->threads = (int)strtol(l + 5, &end, 10);
			info->bytes = strtod(end, &end);
			continue;
		}
		if (strncmp(l, "test ", 5))
			continue;
		long t = strtol(l + 5, &end, 10);
		if (t < 0 || t >= rep->n_tests)
			return -1;
		bench_sample smp = { .stage = runs_stage(w, rep, c, (int)t, r) };
		smp.tps = strtod(end, &end);
		smp.drafted = strtoll(end, &end, 10);
		smp.accepted = strtoll(end, &end, 10);
		for (int k = 0; k < rep->n_stages; k++)
			smp.stage[k] = strtod(end, &end);
		runs_add(w, rep, c, (int)t, r, &smp);
		tests++;
	}
	return tests == rep->n_tests ? 0 : -1;
}

/* In alternating processes: each round a child for A and one for B, in
 * ABBA order; info[c] what configuration c's children said of it. */
static int rounds_apart(const bench_opts *o, bench_report *rep, bench_runs *w,
			bench_side info[2])
{
	tf_progress bar;
	uint64_t done = 0;

	tf_progress_init(&bar, "bench", (uint64_t)rep->n_configs * rep->rounds,
			 TF_PROGRESS_TOKENS);
	for (int r = 0; r < rep->rounds; r++)
		for (int k = 0; k < rep->n_configs; k++) {
			int c = r % 2 ? rep->n_configs - 1 - k : k;
			char *text = NULL;
			int rc = child(o, c, NULL, &text);
			if (!rc && child_parse(text, rep, c, r, w, &info[c]))
				rc = tf_diag_set(TF_ERR_FORMAT, "bench: %s's process gave no "
							       "figures", c ? "B" : "A");
			free(text);
			if (rc) {
				tf_progress_finish(&bar);
				return tf_cli_fail(c ? "B" : "A"), 2;
			}
			tf_progress_update(&bar, ++done);
		}
	tf_progress_finish(&bar);
	return 0;
}

/* B's numbers against A's, each from a child through a file of a fresh
 * folder (under $TMPDIR, else /tmp), removed after. */
static int compare_apart(const bench_opts *o, bench_exact *exact)
{
	const char *tmp = getenv("TMPDIR");
	char dir[512], path[2][600];
	bench_numbers x[2] = { { 0 } };
	int rc = TF_OK;

	snprintf(dir, sizeof(dir), "%s/tfrun-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return tf_diag_set(TF_ERR_IO, "bench: cannot make a folder %s: %s", dir,
				   strerror(errno));
	for (int c = 0; c < 2; c++)
		snprintf(path[c], sizeof(path[c]), "%s/%c.bin", dir, 'A' + c);
	for (int c = 0; !rc && c < 2; c++) {
		char *text = NULL;
		rc = child(o, c, path[c], &text);
		free(text);
		if (!rc)
			rc = bench_numbers_load(&x[c], path[c]);
	}
	if (!rc)
		rc = bench_diff(&x[0], &x[1], exact);
	for (int c = 0; c < 2; c++) {
		unlink(path[c]);
		bench_numbers_free(&x[c]);
	}
	rmdir(dir);
	return rc;
}

/* Whether opening B failed for want of memory (beside A, or at all). */
static bool no_room(int rc)
{
	return rc == TF_ERR_RANGE || rc == TF_ERR_NOMEM;
}

int tf_cli_bench(int argc, char **argv)
{
	bench_opts o;
	bench_report *rep = calloc(1, sizeof(*rep));
	tf_engine *e[2] = { NULL, NULL };
	bench_runs w = { 0 };
	double roof[2] = { 0, 0 };
	bench_side info[2] = { { 0 } };
	int32_t *tok = NULL;
	char label_a[1024], label_b[1024];
	int rc = parse(argc, argv, &o), status = 2;

	if (rc >= 0 || !rep) {
		free(rep);
		return rc >= 0 ? rc : 2;
	}
	if (make_tests(&o, rep)) {
		fprintf(stderr, "tfrun bench: more than %d tests\n", BENCH_MAX_TESTS);
		goto out;
	}
	int64_t seqs = most(o.seqs, o.n_seqs), depth = most(o.depth, o.n_depth);
	int64_t longest = depth + (o.prompt > o.gen + 1 ? o.prompt : o.gen + 1);
	/* B's numbers against A's: every position of a prompt, then greedy. */
	int64_t cmp_n = o.prompt ? (o.prompt < 512 ? o.prompt : 512) : 64;
	int64_t cmp_gen = o.gen < 64 ? o.gen : 64;
	if (longest < cmp_n + cmp_gen)
		longest = cmp_n + cmp_gen;
	snprintf(o.extra[0], sizeof(o.extra[0]), "runtime.sequences=%" PRId64, seqs < 2 ? 2 : seqs);
	snprintf(o.extra[1], sizeof(o.extra[1]), "runtime.context=%" PRId64, longest + 1);
	if (o.threads)
		snprintf(o.extra[2], sizeof(o.extra[2]), "runtime.threads=%d", o.threads);
	rep->n_configs = o.vs || o.n_vs_sets ? 2 : 1;
	rep->rounds = o.rounds;
	rep->tolerance = o.tolerance;
	rep->n_stages = tf_engine_stage_count() < BENCH_MAX_STAGES ? tf_engine_stage_count() :
			BENCH_MAX_STAGES;
	int64_t n_tok = longest + seqs + 1;
	if (o.child >= 0) {
		status = child_main(&o, rep, n_tok, cmp_n, cmp_gen);
		goto out;
	}
	/* A: the INI and the shared --set; B: A with its own, or its INI with
	 * both. */
	label_sets(label_a, sizeof(label_a), o.ini, o.sets, o.n_sets, NULL, 0);
	rep->label[0] = label_a;
	if (rep->n_configs > 1) {
		if (o.vs)
			label_sets(label_b, sizeof(label_b), o.vs, o.sets, o.n_sets, o.vs_sets,
				   o.n_vs_sets);
		else
			label_sets(label_b, sizeof(label_b), "A", NULL, 0, o.vs_sets, o.n_vs_sets);
		rep->label[1] = label_b;
	}
	bool apart = o.processes && rep->n_configs > 1;
	if (!apart) {
		if (open_side(&o, 0, &e[0])) {
			tf_cli_fail(side_name(&o, 0));
			goto out;
		}
		if (rep->n_configs > 1 && (rc = open_side(&o, 1, &e[1]))) {
			/* Short of memory: alone, does B open?  Then it is A's
			 * company it lacks room for. */
			if (no_room(rc)) {
				tf_engine_close(e[0]);
				e[0] = NULL;
				rc = open_side(&o, 1, &e[1]);
			}
			if (rc) {
				tf_cli_fail(side_name(&o, 1));
				goto out;
			}
			tf_engine_close(e[1]);
			e[1] = NULL;
			fprintf(stderr, "tfrun bench: B does not fit in memory beside A; timing "
					"them in alternating processes\n");
			apart = true;
		}
	}
	size_t cells = (size_t)rep->n_configs * (size_t)rep->n_tests * (size_t)o.rounds;
	w.tps = calloc(cells, sizeof(*w.tps));
	w.stage = calloc(cells * (size_t)rep->n_stages, sizeof(*w.stage));
	if (!w.tps || !w.stage) {
		fprintf(stderr, "tfrun bench: out of memory\n");
		goto out;
	}
	if (apart) {
		if (rounds_apart(&o, rep, &w, info))
			goto out;
		rooflines(rep, info, roof);
	} else {
		if (!(tok = make_tokens(tf_engine_vocab(e[0]), n_tok))) {
			fprintf(stderr, "tfrun bench: out of memory\n");
			goto out;
		}
		for (int c = 0; c < rep->n_configs; c++)
			info[c] = side_of(e[c]);
		rooflines(rep, info, roof);
		if (rounds_here(e, rep, tok, n_tok, &w))
			goto out;
	}
	summarize(rep, w.tps, w.stage, roof, w.accept);
	if (rep->n_configs > 1) {
		if (apart ? compare_apart(&o, &rep->exact)
			  : bench_compare(e[0], e[1], tok, cmp_n, cmp_gen, &rep->exact)) {
			tf_cli_fail("the comparison of B with A");
			goto out;
		}
		rep->regression |= !(rep->exact.max_rel <= o.tolerance);
	}
	bench_report_print(rep, o.fmt, stdout);
	status = rep->regression ? 1 : 0;
out:
	tf_engine_close(e[0]);
	tf_engine_close(e[1]);
	free(tok);
	free(w.tps);
	free(w.stage);
	free(rep);
	return status;
}
