/* report.c - `tfrun bench`'s tables: Markdown, JSON or CSV. */
#include <math.h>
#include <stdio.h>

#include "report.h"

static void test_name(const bench_test *t, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s%lld", t->kind == BENCH_PREFILL ? "pp" : "tg",
			 (long long)t->tokens);
	if (t->depth && n > 0 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, " @d%lld", (long long)t->depth);
	if (t->kind == BENCH_DECODE && t->seqs > 1 && n > 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, " x%d", t->seqs);
}

/* B against A: faster, slower, or the interval holds 1. */
static const char *verdict(bench_ratio r)
{
	return isnan(r.lo) ? "-" : r.lo > 1 ? "faster" : r.hi < 1 ? "slower" : "same";
}

/* "[lo, hi]", or "-" with too few rounds for one. */
static void interval(FILE *f, bench_ratio r)
{
	if (isnan(r.lo))
		fputs("-", f);
	else
		fprintf(f, "[%.3f, %.3f]", r.lo, r.hi);
}

static void markdown(const bench_report *rep, FILE *f)
{
	char name[64];

	fprintf(f, "A: %s\n", rep->label[0]);
	if (rep->n_configs > 1)
		fprintf(f, "B: %s\n", rep->label[1]);
	fprintf(f, "read bandwidth %.1f GB/s (%d threads); %d rounds%s\n\n", rep->bandwidth / 1e9,
		rep->threads, rep->rounds, rep->n_configs > 1 ? ", A and B interleaved ABBA" : "");
	fprintf(f, "| config | test | t/s | ± | ms/tok | roofline | drafts kept |\n"
		   "|---|---|---:|---:|---:|---:|---:|\n");
	for (int c = 0; c < rep->n_configs; c++)
		for (int t = 0; t < rep->n_tests; t++) {
			const bench_row *r = &rep->row[c][t];
			test_name(&rep->test[t], name, sizeof(name));
			fprintf(f, "| %s | %s | %.1f | %.1f | %.3f | ", c ? "B" : "A", name, r->tps,
				r->mad, 1e3 / r->tps);
			if (isnan(r->roofline))
				fprintf(f, "- | ");
			else
				fprintf(f, "%.0f%% | ", 100 * r->roofline);
			if (isnan(r->accept))
				fprintf(f, "- |\n");
			else
				fprintf(f, "%.0f%% |\n", 100 * r->accept);
		}
	if (rep->n_configs < 2)
		return;
	fprintf(f, "\nB/A, tokens per second: the median of the rounds' ratios, a 95%% interval by "
		   "a bootstrap of the paired rounds\n\n| test | B/A | 95%% interval | verdict |\n"
		   "|---|---:|---|---|\n");
	for (int t = 0; t < rep->n_tests; t++) {
		bench_ratio r = rep->ab[t];
		test_name(&rep->test[t], name, sizeof(name));
		fprintf(f, "| %s | %.3f | ", name, r.mid);
		interval(f, r);
		fprintf(f, " | %s |\n", verdict(r));
	}
	for (int t = 0; t < rep->n_tests; t++) {
		test_name(&rep->test[t], name, sizeof(name));
		fprintf(f, "\n%s by stage, ms per token (B/A of time: above 1 is slower)\n\n"
			   "| stage | A | B | B/A | 95%% interval |\n|---|---:|---:|---:|---|\n", name);
		for (int k = 0; k < rep->n_stages; k++) {
			const bench_stage *st = &rep->stage[t][k];
			if (st->a <= 0 && st->b <= 0)
				continue;
			fprintf(f, "| %s | %.4f | %.4f | %.3f | ", st->name, 1e3 * st->a,
				1e3 * st->b, st->r.mid);
			interval(f, st->r);
			fputs(" |\n", f);
		}
	}
	const bench_exact *x = &rep->exact;
	fprintf(f, "\nExactness, B against A on the same %lld-token prompt: max relative error "
		   "%.3g (tolerance %.3g), mean KL %.3g nats, top-1 agreement %.4f, greedy tokens "
		   "alike %lld of %lld\n", (long long)x->positions, x->max_rel, rep->tolerance,
		x->mean_kl, x->top1, (long long)x->greedy, (long long)x->greedy_of);
	if (!rep->regression) {
		fprintf(f, "\nno regression\n");
		return;
	}
	fprintf(f, "\nREGRESSION:");
	for (int t = 0; t < rep->n_tests; t++)
		if (rep->ab[t].hi < 1) {
			test_name(&rep->test[t], name, sizeof(name));
			fprintf(f, " B is slower on %s;", name);
		}
	if (!(x->max_rel <= rep->tolerance))
		fprintf(f, " B's logits are off by %.3g, past the tolerance %.3g;", x->max_rel,
			rep->tolerance);
	fprintf(f, "\n");
}

/* A number, or null where there is none (NaN: a stage that never ran). */
static void json_num(FILE *f, double x)
{
	if (isfinite(x))
		fprintf(f, "%.6g", x);
	else
		fputs("null", f);
}

static void json_ratio(FILE *f, const char *key, bench_ratio r)
{
	fprintf(f, "\"%s\": ", key);
	json_num(f, r.mid);
	fputs(", \"lo\": ", f);
	json_num(f, r.lo);
	fputs(", \"hi\": ", f);
	json_num(f, r.hi);
}

/* A JSON string of s (labels are INI paths and keys: escape quotes and
 * backslashes, drop controls). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++)
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	fputc('"', f);
}

static void json(const bench_report *rep, FILE *f)
{
	char name[64];

	fprintf(f, "{\"a\": ");
	json_str(f, rep->label[0]);
	if (rep->n_configs > 1) {
		fprintf(f, ", \"b\": ");
		json_str(f, rep->label[1]);
	}
	fprintf(f, ", \"bandwidth\": %.6g, \"threads\": %d, \"rounds\": %d, \"rows\": [",
		rep->bandwidth, rep->threads, rep->rounds);
	for (int c = 0; c < rep->n_configs; c++)
		for (int t = 0; t < rep->n_tests; t++) {
			const bench_row *r = &rep->row[c][t];
			test_name(&rep->test[t], name, sizeof(name));
			fprintf(f, "%s{\"config\": \"%s\", \"test\": \"%s\", \"tps\": %.6g, "
				"\"mad\": %.6g, \"ms_per_token\": %.6g, \"roofline\": ",
				c || t ? ", " : "", c ? "B" : "A", name, r->tps, r->mad, 1e3 / r->tps);
			json_num(f, r->roofline);
			fputs(", \"drafts_kept\": ", f);
			json_num(f, r->accept);
			fputs(", \"stages_ms\": {", f);
			for (int k = 0; k < rep->n_stages; k++) {
				const bench_stage *st = &rep->stage[t][k];
				fprintf(f, "%s\"%s\": %.6g", k ? ", " : "", st->name,
					1e3 * (c ? st->b : st->a));
			}
			fputs("}}", f);
		}
	fprintf(f, "]");
	if (rep->n_configs > 1) {
		fprintf(f, ", \"ab\": [");
		for (int t = 0; t < rep->n_tests; t++) {
			test_name(&rep->test[t], name, sizeof(name));
			fprintf(f, "%s{\"test\": \"%s\", ", t ? ", " : "", name);
			json_ratio(f, "ratio", rep->ab[t]);
			fprintf(f, ", \"verdict\": \"%s\", \"stages\": [", verdict(rep->ab[t]));
			for (int k = 0, n = 0; k < rep->n_stages; k++) {
				const bench_stage *st = &rep->stage[t][k];
				if (st->a <= 0 && st->b <= 0)
					continue;       /* a stage this model has not */
				fprintf(f, "%s{\"stage\": \"%s\", \"a_ms\": %.6g, \"b_ms\": %.6g, ",
					n++ ? ", " : "", st->name, 1e3 * st->a, 1e3 * st->b);
				json_ratio(f, "ratio", st->r);
				fprintf(f, "}");
			}
			fprintf(f, "]}");
		}
		const bench_exact *x = &rep->exact;
		fprintf(f, "], \"exact\": {\"positions\": %lld, \"max_rel\": %.6g, \"mean_kl\": %.6g,"
			" \"top1\": %.6g, \"greedy\": %lld, \"greedy_of\": %lld, \"tolerance\": %.6g}, "
			"\"regression\": %s", (long long)x->positions, x->max_rel, x->mean_kl, x->top1,
			(long long)x->greedy, (long long)x->greedy_of, rep->tolerance,
			rep->regression ? "true" : "false");
	}
	fprintf(f, "}\n");
}

static void csv(const bench_report *rep, FILE *f)
{
	char name[64];

	fprintf(f, "config,test,tps,mad,ms_per_token,roofline,ratio,lo,hi\n");
	for (int c = 0; c < rep->n_configs; c++)
		for (int t = 0; t < rep->n_tests; t++) {
			const bench_row *r = &rep->row[c][t];
			test_name(&rep->test[t], name, sizeof(name));
			fprintf(f, "%s,%s,%.6g,%.6g,%.6g,", c ? "B" : "A", name, r->tps, r->mad,
				1e3 / r->tps);
			if (!isnan(r->roofline))
				fprintf(f, "%.6g", r->roofline);
			fprintf(f, ",,,\n");
		}
	for (int t = 0; rep->n_configs > 1 && t < rep->n_tests; t++) {
		test_name(&rep->test[t], name, sizeof(name));
		fprintf(f, "B/A,%s,,,,,%.6g,%.6g,%.6g\n", name, rep->ab[t].mid, rep->ab[t].lo,
			rep->ab[t].hi);
	}
}

void bench_report_print(const bench_report *rep, bench_format fmt, FILE *f)
{
	switch (fmt) {
	case BENCH_JSON: json(rep, f); break;
	case BENCH_CSV: csv(rep, f); break;
	default: markdown(rep, f); break;
	}
}
