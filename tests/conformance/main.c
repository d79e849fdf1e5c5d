/* main.c - the conformance runner; see conformance.h.
 *
 *     test_conformance [KIND...]      (default: every kind)
 *
 * Exits non-zero when a case fails, when a kind's reference is missing,
 * or when no case ran. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"
#include "tf/diag.h"

bool cf_case(cf_tally *t, bool ok, const char *impl, const char *fmt, ...)
{
	if (ok) {
		t->pass++;
		return true;
	}
	va_list ap;
	va_start(ap, fmt);
	printf("  FAIL %s: ", impl);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	t->fail++;
	return false;
}

double cf_rel_err(const float *a, const float *b, size_t n)
{
	double num = 0, den = 1e-30;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		if (isnan(d))
			return INFINITY;
		num = d > num ? d : num;
		den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
	}
	return num / den;
}

void cf_kind(tf_registry *r, tf_plugin_kind kind, const char *ref, cf_check_fn check,
	     cf_tally *all)
{
	const char *kn = tf_registry_kind_name(kind);
	tf_testhost *th = tf_testhost_new(NULL, 2);
	const tf_host *h = tf_testhost_host(th);
	const tf_candidate *refc = NULL;

	tf_registry_probe(r, kind, h);
	if (ref && tf_registry_select(r, kind, NULL, ref, &refc)) {
		printf("%-9s no usable reference: %s\n", kn, tf_diag_msg());
		all->fail++;
		tf_testhost_free(th);
		return;
	}
	for (size_t i = 0; i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		cf_tally t = { 0 };
		if (c->kind != kind || c == refc)
			continue;
		if (c->status) {
			printf("%-9s %-10s skipped: %s\n", kn, c->name, c->why);
			all->skip++;
			continue;
		}
		check(r, c, refc, h, &t);
		printf("%-9s %-10s %d passed, %d failed, %d skipped (against %s)\n", kn, c->name,
		       t.pass, t.fail, t.skip, ref ? ref : "no reference plugin");
		all->pass += t.pass;
		all->fail += t.fail;
		all->skip += t.skip;
	}
	tf_testhost_free(th);
}

/* Each kind with cases: its reference (NULL: none), its case list and
 * what frees the inputs its cases share (NULL: none). */
static const struct {
	tf_plugin_kind kind;
	const char *ref;
	cf_check_fn check;
	void (*done)(void);
} suites[] = {
	{ TF_KIND_BACKEND, "cpu-ref", cf_check_backend, NULL },
	{ TF_KIND_ROUTER, "ling-ref", cf_check_router, NULL },
	{ TF_KIND_QUANT, NULL, cf_check_quant, cf_quant_done },
	{ TF_KIND_ATTENTION, NULL, cf_check_attention, NULL },
	{ TF_KIND_DRAFTER, NULL, cf_check_drafter, NULL },
};

static bool wanted(int argc, char **argv, tf_plugin_kind kind)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], tf_registry_kind_name(kind)))
			return true;
	return argc < 2;
}

int main(int argc, char **argv)
{
	tf_registry *r;
	cf_tally all = { 0 };

	if (tf_registry_init(&r) || tf_registry_scan(r, NULL)) {
		fprintf(stderr, "conformance: %s\n", tf_diag_msg());
		return 1;
	}
	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
		if (!wanted(argc, argv, suites[i].kind))
			continue;
		cf_kind(r, suites[i].kind, suites[i].ref, suites[i].check, &all);
		if (suites[i].done)
			suites[i].done();
	}
	tf_registry_free(r);
	printf("conformance: %d passed, %d failed, %d skipped\n", all.pass, all.fail, all.skip);
	return all.fail || !all.pass;
}
