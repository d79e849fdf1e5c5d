/* test_jinja.c - the Jinja interpreter through its C interface: every
 * golden prompt rendered by tests/chat/ling3.jinja (the Ling-3 template
 * written from the rules), the statuses and messages of failures, and the
 * limits that keep hostile templates from hanging (bench/chat times long
 * conversations).  Jinja semantics are checked against jinja2 itself by
 * jinja_diff.py. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "chat/value.h"
#include "tf/diag.h"
#include "tf/error.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	cr_assert(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	buf[n] = 0;
	*len = (size_t)n;
	return buf;
}

static tf_jinja *ling3(void)
{
	size_t len;
	char *src = slurp(TF_SOURCE_DIR "/tests/chat/ling3.jinja", &len);
	tf_jinja *t;
	cr_assert_eq(tf_jinja_parse(src, len, "ling3.jinja", &t), 0, "%s", tf_diag_msg());
	free(src);
	return t;
}

/* The template's variables from a request: its fields, with the
 * chat_template_kwargs entries among them, as apply_chat_template passes. */
static tf_val *request_vars(const tf_val *req)
{
	tf_val *vars = tf_val_dict();
	for (size_t i = 0; i < tf_val_len(req); i++) {
		size_t klen;
		const char *k = tf_val_as_str(tf_val_key_at(req, i), &klen);
		const tf_val *v = tf_val_at(req, i);
		if (strcmp(k, "chat_template_kwargs") != 0) {
			cr_assert_eq(tf_val_dict_set(vars, k, klen, tf_val_ref((tf_val *)v)), 0);
			continue;
		}
		for (size_t j = 0; j < tf_val_len(v); j++) {
			const char *kk = tf_val_as_str(tf_val_key_at(v, j), &klen);
			cr_assert_eq(tf_val_dict_set(vars, kk, klen, tf_val_ref(tf_val_at(v, j))),
				     0);
		}
	}
	return vars;
}

Test(jinja, goldens_through_the_template)
{
	size_t len, n = 0;
	char *text = slurp(TF_TESTDATA "/chat/ling3-goldens.jsonl", &len);
	tf_jinja *t = ling3();

	for (char *line = text, *end; line < text + len; line = end + 1) {
		end = memchr(line, '\n', (size_t)(text + len - line));
		if (!end)
			end = text + len;
		if (end == line)
			continue;
		tf_val *g, *vars;
		tf_bytes out = { 0 };
		cr_assert_eq(tf_val_parse_json(line, (size_t)(end - line), &g), 0, "%s",
			     tf_diag_msg());
		const char *name = tf_val_as_str(tf_val_dict_get(g, "case"), NULL);
		size_t wlen;
		const char *want = tf_val_as_str(tf_val_dict_get(g, "prompt"), &wlen);
		vars = request_vars(tf_val_dict_get(g, "request"));
		cr_assert_eq(tf_jinja_render(t, vars, &out), 0, "%s: %s", name, tf_diag_msg());
		cr_expect(out.len == wlen && memcmp(out.p, want, wlen) == 0,
			  "%s: got\n%.*s\nwant\n%s", name, (int)out.len, out.p, want);
		tf_bytes_free(&out);
		tf_val_unref(vars);
		tf_val_unref(g);
		n++;
	}
	cr_expect_eq(n, 120, "%zu goldens", n);
	tf_jinja_free(t);
	free(text);
}

static int render(const char *src, const char *json, tf_bytes *out)
{
	tf_jinja *t;
	tf_val *vars;
	cr_assert_eq(tf_val_parse_json(json, strlen(json), &vars), 0);
	int rc = tf_jinja_parse(src, strlen(src), "t.jinja", &t);
	if (rc == 0)
		rc = tf_jinja_render(t, vars, out);
	tf_jinja_free(t);
	tf_val_unref(vars);
	return rc;
}

static void expect_fail(const char *src, int status, const char *where, const char *what)
{
	tf_bytes out = { 0 };
	cr_assert_eq(tf_bytes_append(&out, "kept", 4), 0);
	int rc = render(src, "{\"n\": 1}", &out);
	cr_expect_eq(rc, status, "%s: status %d, want %d (%s)", src, rc, status, tf_diag_msg());
	cr_expect(strncmp(tf_diag_msg(), where, strlen(where)) == 0 && strstr(tf_diag_msg(), what),
		  "%s: message %s, want %s ... %s", src, tf_diag_msg(), where, what);
	cr_expect(out.len == 4 && memcmp(out.p, "kept", 4) == 0, "%s: output changed on failure",
		  src);
	tf_bytes_free(&out);
}

Test(jinja, failures_name_the_place)
{
	expect_fail("ok\n  {% if %}", TF_ERR_FORMAT, "t.jinja:2:9:", "expected an expression");
	expect_fail("{% for x in y %}", TF_ERR_FORMAT, "t.jinja:1:17:", "expected 'endfor'");
	expect_fail("{{ a.b }}", TF_ERR_INVALID, "t.jinja:1:5:", "'a' is undefined");
	expect_fail("é{{ raise_exception('no tools here') }}", TF_ERR_INVALID,
		    "t.jinja:1:20:", "no tools here");
	expect_fail("{{ n ~ 1 }}{{ n + 'x' }}", TF_ERR_INVALID,
		    "t.jinja:1:17:", "unsupported operand");
}

Test(jinja, render_appends)
{
	tf_bytes out = { 0 };
	cr_assert_eq(tf_bytes_append(&out, "<", 1), 0);
	cr_assert_eq(render("{% for i in range(n) %}{{ i }}{% endfor %}", "{\"n\": 3}", &out), 0);
	cr_expect(out.len == 4 && memcmp(out.p, "<012", 4) == 0);
	tf_bytes_free(&out);
}

Test(jinja, hostile_templates_stop)
{
	/* nesting too deep to parse, without exhausting the stack */
	size_t depth = 100000;
	char *deep = malloc(2 * depth + 8);
	cr_assert(deep);
	strcpy(deep, "{{ ");
	memset(deep + 3, '(', depth);
	memset(deep + 3 + depth, ')', depth);
	strcpy(deep + 3 + 2 * depth, " }}");
	expect_fail(deep, TF_ERR_FORMAT, "t.jinja:1:", "nested too deep");
	/* so are long chains, which nest as deep as they are long */
	strcpy(deep, "{{ n");
	for (size_t i = 0; i < 20000; i++)
		strcpy(deep + 4 + 4 * i, i % 2 ? " + n" : "|abs");
	strcat(deep, " }}");
	expect_fail(deep, TF_ERR_FORMAT, "t.jinja:1:", "nested too deep");
	free(deep);
	/* and deep expressions inside deep recursion, at run time */
	char expr[1024] = "(m(k - 1) if k > 0 else 'x')|length", tmp[1024], src[2048];
	for (int i = 0; i < 50; i++) {
		snprintf(tmp, sizeof(tmp), "(%s + 1)", expr);
		strcpy(expr, tmp);
	}
	snprintf(src, sizeof(src), "{%% macro m(k) %%}{{ %s }}{%% endmacro %%}{{ m(40) }}", expr);
	expect_fail(src, TF_ERR_INVALID, "t.jinja:1:", "nested deeper than");
	/* recursion, output and work are bounded */
	expect_fail("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", TF_ERR_INVALID,
		    "t.jinja:1:", "nested deeper");
	expect_fail("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", TF_ERR_INVALID,
		    "t.jinja:1:", "output beyond");
	expect_fail(
		"{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
		TF_ERR_INVALID, "t.jinja:1:", "steps");
	expect_fail("{% set s = 'x' * 1000000 %}{% for a in range(100) %}{% set s = s ~ s %}{% "
		    "endfor %}",
		    TF_ERR_INVALID, "t.jinja:1:", "beyond");
	/* so are the strings str() and tojson make of a container, which print
	 * far more bytes than the list holds, and the items filters pass over */
	static const char *const big[] = {
		"{{ l }}", "{{ l|string|length }}", "{{ l|tojson|length }}", "{{ l|join|length }}",
		"{{ [l]|join|length }}", "{{ {'k': l} ~ '' }}",
	};
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		char tmpl[256];
		snprintf(tmpl, sizeof(tmpl),
			 "{%% set s = 'x' * 1000 * 60000 %%}{%% set l = [[1] * 1000] * 3000 %%}%s",
			 big[i]);
		expect_fail(tmpl, TF_ERR_INVALID, "t.jinja:1:", "output beyond");
	}
	expect_fail("{{ ('x' * 1000 * 6000)|list|length }}", TF_ERR_INVALID, "t.jinja:1:", "steps");
	expect_fail("{{ ([1] * 6000000)|length }}", TF_ERR_INVALID, "t.jinja:1:", "steps");
	expect_fail("{{ (['a', 'b'] * 1000000 * 3)|select|list|length }}", TF_ERR_INVALID,
		    "t.jinja:1:", "steps");
}

/* Reference counts never free a cycle: a template (from a checkpoint, or a
 * request) that would make a namespace or a loop object hold itself is
 * refused, naming the place; the ASan build checks that nothing leaks. */
Test(jinja, cycles_are_refused)
{
	expect_fail("{% set ns = namespace(k=0) %}{{ ns.k }}\n{% set ns.k = ns %}", TF_ERR_INVALID,
		    "t.jinja:2:", "namespace inside itself");
	expect_fail("{% set ns = namespace() %}{% set ns.l = [1, [ns]] %}", TF_ERR_INVALID,
		    "t.jinja:1:", "namespace inside itself");
	expect_fail("{% set a = namespace() %}{% set a.d = {'k': {'j': (a,)}} %}", TF_ERR_INVALID,
		    "t.jinja:1:", "namespace inside itself");
	expect_fail("{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = b %}",
		    TF_ERR_INVALID, "t.jinja:1:", "namespace inside itself");
	/* the loop object reaches ns once ns holds the loop and comes next */
	expect_fail("{% set ns = namespace() %}\n{% for x in [1, 2, ns] %}{% set ns.l = loop %}"
		    "{% endfor %}",
		    TF_ERR_INVALID, "t.jinja:2:", "loop.nextitem would hold the loop itself");
	expect_fail("{% set ns = namespace() %}{% for x in [ns, 1] %}{% set ns.l = loop %}"
		    "{% endfor %}",
		    TF_ERR_INVALID, "t.jinja:1:", "loop.previtem would hold the loop itself");

	/* sharing without a cycle renders, and so does a loop kept after it ends */
	const struct { const char *src, *want; } ok[] = {
		{ "{% set a = namespace(v=1) %}{% set b = namespace() %}{% set b.x = a %}"
		  "{% set b.y = a %}{{ b.x.v + b.y.v }}", "2" },
		{ "{% set ns = namespace() %}{% for x in 'ab' %}{% set ns.l = loop %}{% endfor %}"
		  "{{ ns.l.index }}", "2" },
		/* 2^40 paths through 40 lists: each container is walked once */
		{ "{% set ns = namespace(v=[]) %}{% for i in range(40) %}"
		  "{% set ns.v = [ns.v, ns.v] %}{% endfor %}{{ ns.v|length }}", "2" },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
		tf_bytes out = { 0 };
		cr_expect_eq(render(ok[i].src, "{}", &out), 0, "%s: %s", ok[i].src, tf_diag_msg());
		cr_expect(out.len == strlen(ok[i].want) && !memcmp(out.p, ok[i].want, out.len),
			  "%s: got %.*s, want %s", ok[i].src, (int)out.len, out.p, ok[i].want);
		tf_bytes_free(&out);
	}
}

/* One template and one set of variables rendered by several threads at once,
 * as a server does: every output must be the same. */
struct shared {
	tf_jinja *t;
	tf_val *vars;
	tf_bytes want;
	int bad;
};

static void *render_many(void *arg)
{
	struct shared *sh = arg;
	for (int k = 0; k < 200; k++) {
		tf_bytes out = { 0 };
		if (tf_jinja_render(sh->t, sh->vars, &out) < 0 || out.len != sh->want.len ||
		    memcmp(out.p, sh->want.p, out.len) != 0)
			__atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
		tf_bytes_free(&out);
	}
	return NULL;
}

Test(jinja, threads_share_a_template)
{
	static const char json[] =
		"{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\","
		" \"content\": \"h\u00e9\"}, {\"role\": \"assistant\", \"content\": \"<think>r</think>a\","
		" \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": [1, 2.5]}}}]}],"
		" \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
		" \"add_generation_prompt\": true}";
	struct shared sh = { .t = ling3() };
	pthread_t th[4];

	cr_assert_eq(tf_val_parse_json(json, sizeof(json) - 1, &sh.vars), 0, "%s", tf_diag_msg());
	cr_assert_eq(tf_jinja_render(sh.t, sh.vars, &sh.want), 0, "%s", tf_diag_msg());
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, render_many, &sh), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cr_expect_eq(sh.bad, 0, "%d renders differed", sh.bad);
	tf_bytes_free(&sh.want);
	tf_val_unref(sh.vars);
	tf_jinja_free(sh.t);
}

