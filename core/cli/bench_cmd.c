/* bench_cmd.c - `tfrun bench` (bench_cmd.h): options, rounds, the A/B. */
#define _GNU_SOURCE
#include "bench_cmd.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
"                   [--json | --csv]\n"
"\n"
"Prefill (pp) and decode (tg) speed of MODEL.ini, as a table: each test's\n"
"median tokens per second over the rounds, its median absolute deviation,\n"
"ms per token and, for one-sequence decode, the share of the roofline (the\n"
"memory plan's weight bytes per token over the read bandwidth measured in\n"
"the same run).  With --vs or --vs-set, a second configuration B is timed\n"
"interleaved with A (ABBA) in this process, and each figure and each stage\n"
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
	enum { O_THREADS = 256, O_SET, O_VS, O_VS_SET, O_TOL, O_JSON, O_CSV };
	static const struct option longs[] = {
		{ "threads", required_argument, NULL, O_THREADS },
		{ "set", required_argument, NULL, O_SET },
		{ "vs", required_argument, NULL, O_VS },
		{ "vs-set", required_argument, NULL, O_VS_SET },
		{ "tolerance", required_argument, NULL, O_TOL },
		{ "json", no_argument, NULL, O_JSON },
		{ "csv", no_argument, NULL, O_CSV },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int64_t v;
	int c;

	*o = (bench_opts){ .prompt = 512, .gen = 128, .depth = { 0 }, .n_depth = 1,
			   .seqs = { 1 }, .n_seqs = 1, .rounds = 5, .tolerance = 1e-3 };
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
	for (int t = 0; rep->n_configs > 1 && t < T; t++) {
		const double *a = tps + (size_t)t * R, *b = tps + ((size_t)T + t) * R;
		rep->ab[t] = bench_paired_ratio(a, b, R, RESAMPLES, 42);
		rep->regression |= rep->ab[t].hi < 1;
		for (int k = 0; k < S; k++) {
			bench_stage *st = &rep->stage[t][k];
			for (int i = 0; i < R; i++) {
				x[i] = stage[(((size_t)0 * T + t) * R + i) * S + k];
				y[i] = stage[(((size_t)1 * T + t) * R + i) * S + k];
			}
			st->name = tf_engine_stage_name(k);
			st->r = bench_paired_ratio(x, y, R, RESAMPLES, 43);
			st->a = bench_median(x, R);
			st->b = bench_median(y, R);
		}
	}
out:
	free(x);
	free(y);
}

int tf_cli_bench(int argc, char **argv)
{
	bench_opts o;
	bench_report *rep = calloc(1, sizeof(*rep));
	tf_engine *e[2] = { NULL, NULL };
	double *tps = NULL, *stage = NULL, roof[2] = { 0, 0 };
	int64_t accept[2][BENCH_MAX_TESTS][2] = { 0 };      /* drafted, kept */
	int32_t *tok = NULL;
	char label_b[1024] = "";
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
	rep->label[0] = o.ini;
	if (open_config(&o, o.ini, NULL, 0, &e[0])) {
		tf_cli_fail(o.ini);
		goto out;
	}
	if (rep->n_configs > 1) {
		int at = snprintf(label_b, sizeof(label_b), "%s", o.vs ? o.vs : "A with");
		for (int i = 0; i < o.n_vs_sets && at > 0 && (size_t)at < sizeof(label_b); i++)
			at += snprintf(label_b + at, sizeof(label_b) - (size_t)at, " %s", o.vs_sets[i]);
		rep->label[1] = label_b;
		if (open_config(&o, o.vs ? o.vs : o.ini, o.vs_sets, o.n_vs_sets, &e[1])) {
			tf_cli_fail(o.vs ? o.vs : "--vs-set");
			goto out;
		}
	}
	/* Token ids: a fixed pseudo-random run below the vocabulary. */
	int64_t n_tok = longest + seqs + 1;
	int vocab = tf_engine_vocab(e[0]);
	tok = malloc((size_t)n_tok * sizeof(*tok));
	size_t cells = (size_t)rep->n_configs * (size_t)rep->n_tests * (size_t)o.rounds;
	tps = calloc(cells, sizeof(*tps));
	stage = calloc(cells * (size_t)rep->n_stages, sizeof(*stage));
	if (!tok || !tps || !stage) {
		fprintf(stderr, "tfrun bench: out of memory\n");
		goto out;
	}
	uint64_t lcg = 12345;
	for (int64_t i = 0; i < n_tok; i++) {
		lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
		tok[i] = (int32_t)((lcg >> 33) % (uint64_t)vocab);
	}
	int64_t th = 1;
	tf_conf_get_int(tf_engine_conf(e[0]), "runtime", "threads", 1, &th);
	rep->threads = (int)th;
	rep->bandwidth = bench_read_bandwidth(rep->threads);
	for (int c = 0; c < rep->n_configs; c++)
		roof[c] = rep->bandwidth / (double)tf_engine_active_bytes(e[c]);

	/* A warm-up run of each test, then the rounds, A and B in ABBA order. */
	tf_progress bar;
	tf_progress_init(&bar, "bench", cells, TF_PROGRESS_TOKENS);
	double *scratch = malloc((size_t)rep->n_stages * sizeof(double));
	uint64_t done = 0;
	for (int t = 0; scratch && t < rep->n_tests; t++)
		for (int r = -1; r < o.rounds; r++)
			for (int k = 0; k < rep->n_configs; k++) {
				int c = r >= 0 && r % 2 ? rep->n_configs - 1 - k : k;
				size_t at = ((size_t)c * rep->n_tests + t) * o.rounds + (r < 0 ? 0 : r);
				bench_sample smp = { .stage = r < 0 ? scratch : stage + at * rep->n_stages };
				if (bench_run(e[c], &rep->test[t], tok, n_tok, &smp)) {
					tf_progress_finish(&bar);
					free(scratch);
					tf_cli_fail(c ? "B" : "A");
					goto out;
				}
				if (r >= 0) {
					tps[at] = smp.tps;
					accept[c][t][0] += smp.drafted;
					accept[c][t][1] += smp.accepted;
					tf_progress_update(&bar, ++done);
				}
			}
	tf_progress_finish(&bar);
	if (!scratch) {
		fprintf(stderr, "tfrun bench: out of memory\n");
		goto out;
	}
	free(scratch);
	summarize(rep, tps, stage, roof, accept);
	if (rep->n_configs > 1) {
		if (bench_compare(e[0], e[1], tok, cmp_n, cmp_gen, &rep->exact)) {
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
	free(tps);
	free(stage);
	free(rep);
	return status;
}
