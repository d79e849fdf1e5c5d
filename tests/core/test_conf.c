/* test_conf.c - the INI model description: parsing, validation, overrides. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/conf.h"
#include "support/tmpfile.h"
#include "tf/diag.h"

static const char good[] =
	"; a comment\n"
	"[model]\n"
	"path = ../models/tiny\n"
	"\n"
	"[runtime]\n"
	"context = 4096\n"
	"threads = 8   ; inline comment\n"
	"memory_limit = 24G\n"
	"[plugins]\n"
	"path = a:/abs/b\n"
	"exclude = backend-cuda, kda\n"
	"layer.7.attention = mla\n"
	"[sampling]\n"
	"temperature = 0.7\n"
	"seed = -1\n"
	"[chat]\n"
	"think = off\n"
	"system = You are a helpful assistant.\n";

static tf_conf *parse_ok(const char *text)
{
	tf_conf *c = NULL;
	int rc = tf_conf_parse(text, strlen(text), "cfg/model.ini", &c);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());
	return c;
}

/* Parsing fails with `status` and a message containing `msg`. */
static void parse_fails(const char *text, int status, const char *msg)
{
	tf_conf *c = NULL;
	tf_diag_clear();
	int rc = tf_conf_parse(text, strlen(text), "cfg/model.ini", &c);
	cr_assert_eq(rc, status, "got %d (%s) for:\n%s", rc, tf_diag_msg(), text);
	cr_assert_null(c);
	cr_assert(strstr(tf_diag_msg(), msg), "'%s' lacks '%s'", tf_diag_msg(), msg);
}

Test(conf, good_file_typed_reads)
{
	tf_conf *c = parse_ok(good);
	int64_t i;
	double f;
	bool b;
	uint64_t u;
	cr_assert_eq(tf_conf_get_int(c, "runtime", "context", 0, &i), TF_OK);
	cr_assert_eq(i, 4096);
	cr_assert_eq(tf_conf_get_int(c, "runtime", "threads", 0, &i), TF_OK);
	cr_assert_eq(i, 8);
	cr_assert_eq(tf_conf_get_size(c, "runtime", "memory_limit", 0, &u), TF_OK);
	cr_assert_eq(u, 24ull << 30);
	cr_assert_eq(tf_conf_get_float(c, "sampling", "temperature", 1, &f), TF_OK);
	cr_assert_float_eq(f, 0.7, 1e-12);
	cr_assert_eq(tf_conf_get_int(c, "sampling", "seed", 0, &i), TF_OK);
	cr_assert_eq(i, -1);
	cr_assert_eq(tf_conf_get_bool(c, "chat", "think", true, &b), TF_OK);
	cr_assert_not(b);
	cr_assert_str_eq(tf_conf_get(c, "chat", "system"), "You are a helpful assistant.");
	cr_assert_str_eq(tf_conf_get(c, "plugins", "layer.7.attention"), "mla");
	/* unset keys give the default */
	cr_assert_eq(tf_conf_get_int(c, "sampling", "top_k", 40, &i), TF_OK);
	cr_assert_eq(i, 40);
	cr_assert_null(tf_conf_get(c, "tp", "peers"));
	/* reading a key as another type is a bug, not a default */
	cr_assert_eq(tf_conf_get_float(c, "runtime", "context", 0, &f), TF_ERR_INTERNAL);
	cr_assert_eq(tf_conf_count(c), 11);
	tf_conf_free(c);
}

Test(conf, paths_resolve_against_the_ini_folder)
{
	tf_conf *c = parse_ok(good);
	char buf[256];
	const char *p;
	cr_assert_eq(tf_conf_get_path(c, "model", "path", buf, sizeof(buf), &p), TF_OK);
	cr_assert_str_eq(p, "cfg/../models/tiny");
	cr_assert_eq(tf_conf_resolve(c, "/abs/b", buf, sizeof(buf)), TF_OK);
	cr_assert_str_eq(buf, "/abs/b");
	cr_assert_eq(tf_conf_resolve(c, "x", buf, 4), TF_ERR_RANGE);
	tf_conf_free(c);
}

Test(conf, unknown_key_names_its_line)
{
	parse_fails("[runtime]\ncontext = 5\ncontxt = 6\n", TF_ERR_INVALID,
		    "cfg/model.ini:3: [runtime] contxt: unknown key");
	parse_fails("[plugins]\nlayer.x.ffn = moe\n", TF_ERR_INVALID,
		    "cfg/model.ini:2: [plugins] layer.x.ffn: unknown key");
	parse_fails("[plugins]\nlayer.1234567.ffn = moe\n", TF_ERR_INVALID,
		    "layer.1234567.ffn: unknown key");
	parse_fails("[runtime]\n[modle]\npath = x\n", TF_ERR_INVALID,
		    "cfg/model.ini:2: unknown section [modle]");
	parse_fails("context = 5\n", TF_ERR_FORMAT,
		    "cfg/model.ini:1: 'context' comes before any [section]");
}

Test(conf, bad_values_name_line_and_key)
{
	parse_fails("[runtime]\ncontext = lots\n", TF_ERR_INVALID,
		    "cfg/model.ini:2: [runtime] context: 'lots' is not an integer");
	parse_fails("[runtime]\ncontext = 0\n", TF_ERR_INVALID,
		    "[runtime] context: 0 is outside 1..");
	parse_fails("\n\n[runtime]\nmemory_limit = 3X\n", TF_ERR_INVALID,
		    "cfg/model.ini:4: [runtime] memory_limit: '3X' is not a size");
	parse_fails("[runtime]\nmemory_limit = 99999999999T\n", TF_ERR_INVALID,
		    "is too large");
	parse_fails("[runtime]\nthreads = 5000\n", TF_ERR_INVALID,
		    "[runtime] threads: 5000 is outside 0..4096");
	parse_fails("[runtime]\nthreads = -1\n", TF_ERR_INVALID,
		    "[runtime] threads: -1 is outside 0..4096");
	parse_fails("[sampling]\ntop_p = 1.5\n", TF_ERR_INVALID,
		    "[sampling] top_p: 1.5 is outside 0..1");
	parse_fails("[sampling]\ntemperature = nan\n", TF_ERR_INVALID,
		    "'nan' is not a number");
	parse_fails("[chat]\ntemplate = chatml\n", TF_ERR_INVALID,
		    "[chat] template: 'chatml' is not one of auto|jinja|ling3|raw");
	parse_fails("[mtp]\nenabled = maybe\n", TF_ERR_INVALID,
		    "[mtp] enabled: 'maybe' is not true or false");
	parse_fails("[plugins]\nexclude = a,,b\n", TF_ERR_INVALID,
		    "[plugins] exclude: 'a,,b' has an empty item");
	parse_fails("[plugins]\nbackend = cpu fast\n", TF_ERR_INVALID,
		    "[plugins] backend: 'cpu fast' is not a name");
	parse_fails("[runtime]\ncontext = 5\ncontext = 6\n", TF_ERR_INVALID,
		    "cfg/model.ini:3: [runtime] context: set twice (first on line 2)");
}

Test(conf, broken_lines)
{
	parse_fails("[runtime]\ncontext 4096\n", TF_ERR_FORMAT,
		    "cfg/model.ini:2: expected 'key = value' or '[section]'");
	parse_fails("[runtime\ncontext = 1\n", TF_ERR_FORMAT,
		    "cfg/model.ini:1: expected");
	/* libinih would glue an indented line onto the previous value */
	parse_fails("[runtime]\ncontext = 1\n  threads = 2\n", TF_ERR_FORMAT,
		    "cfg/model.ini:3: indented line");

	static const char nul[] = "[runtime]\ncontext = 1\0\n";
	tf_conf *c = NULL;
	cr_assert_eq(tf_conf_parse(nul, sizeof(nul) - 1, "n.ini", &c), TF_ERR_FORMAT);
	cr_assert(strstr(tf_diag_msg(), "n.ini:2: line holds a NUL byte"), "%s",
		  tf_diag_msg());
}

/* libinih splits lines past its buffer; we refuse them whole instead. */
Test(conf, overlong_line)
{
	char text[600];
	int n = snprintf(text, sizeof(text), "[chat]\nsystem = ");
	memset(text + n, 'x', 400);
	strcpy(text + n + 400, "\n");
	parse_fails(text, TF_ERR_FORMAT,
		    "cfg/model.ini:2: line is 409 bytes long; the INI reader takes at most 197");

	/* the longest accepted line, with and without its newline */
	memset(text, 0, sizeof(text));
	n = snprintf(text, sizeof(text), "[chat]\nsystem = ");
	memset(text + n, 'y', 197 - 9);
	tf_conf *c = parse_ok(text);
	cr_assert_eq(strlen(tf_conf_get(c, "chat", "system")), 197 - 9);
	tf_conf_free(c);
	strcat(text, "\n");
	c = parse_ok(text);
	tf_conf_free(c);
}

Test(conf, set_overrides_and_validates)
{
	tf_conf *c = parse_ok(good);
	cr_assert_eq(tf_conf_set(c, "runtime.context=128"), TF_OK, "%s", tf_diag_msg());
	cr_assert_str_eq(tf_conf_get(c, "runtime", "context"), "128");
	cr_assert_eq(tf_conf_set(c, "plugins.layer.3.ffn=dense"), TF_OK);
	cr_assert_str_eq(tf_conf_get(c, "plugins", "layer.3.ffn"), "dense");
	cr_assert_eq(tf_conf_set(c, "chat.system="), TF_OK);
	cr_assert_str_eq(tf_conf_get(c, "chat", "system"), "");

	cr_assert_eq(tf_conf_set(c, "runtime.context=big"), TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "--set: [runtime] context: 'big' is not an "
			 "integer"), "%s", tf_diag_msg());
	cr_assert_str_eq(tf_conf_get(c, "runtime", "context"), "128");
	cr_assert_eq(tf_conf_set(c, "runtime.nope=1"), TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "unknown key"), "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_set(c, "context=1"), TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "expected section.key=value"), "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_set(c, "runtime.context"), TF_ERR_INVALID);
	cr_assert_eq(tf_conf_check_set("sampling.top_k=5"), TF_OK);
	cr_assert_eq(tf_conf_check_set("sampling.top_k=-5"), TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "[sampling] top_k: -5 is outside"), "%s",
		  tf_diag_msg());

	/* errors about an overridden key say so instead of naming a line */
	cr_assert_eq(tf_conf_fail(c, TF_ERR_RANGE, "runtime", "context", "too %s", "big"),
		     TF_ERR_RANGE);
	cr_assert_str_eq(tf_diag_msg(), "--set [runtime] context: too big");
	cr_assert_eq(tf_conf_fail(c, TF_ERR_RANGE, "runtime", "threads", "x"),
		     TF_ERR_RANGE);
	cr_assert_str_eq(tf_diag_msg(), "cfg/model.ini:7: [runtime] threads: x");
	tf_conf_free(c);
}

Test(conf, layer_types_are_open_names)
{
	/* A type a plugin adds is a key like the core's own. */
	cr_assert_eq(tf_conf_check_set("plugins.attention.toy=toy-mean"), TF_OK, "%s",
		     tf_diag_msg());
	cr_assert_eq(tf_conf_check_set("plugins.ffn.my_ffn-2=x"), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_check_set("model.layer.3.attention=toy"), TF_OK, "%s",
		     tf_diag_msg());
	static const char *const bad[] = {
		"plugins.attention.=x", "plugins.attention.Toy=x", "plugins.attention.a.b=x",
		"plugins.attention.a_very_long_layer_type_name_of_32=x", "model.layer.3.toy=x",
	};
	tf_conf *c = parse_ok(good);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(tf_conf_set(c, bad[i]), TF_ERR_INVALID, "%s", bad[i]);
		cr_assert(strstr(tf_diag_msg(), "unknown key"), "%s: %s", bad[i], tf_diag_msg());
	}
	tf_conf_free(c);
}

Test(conf, open_description_waits_for_declared_keys)
{
	static const tf_plugin_key keys[] = {
		{ .section = "toy", .name = "depth", .type = TF_KEY_INT, .min = 1, .max = 9,
		  .def = "3" },
		{ .section = "runtime", .name = "spin", .type = TF_KEY_BOOL },
	};
	tf_conf *c;
	int64_t v;
	bool b;
	cr_assert_eq(tf_conf_init(NULL, &c), TF_OK);
	cr_assert_eq(tf_conf_set(c, "toy.depth=12"), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_set(c, "runtime.spin=yes"), TF_OK);
	cr_assert_eq(tf_conf_declare(c, "toy-x", &keys[0]), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_declare(c, "toy-x", &keys[1]), TF_OK);
	cr_assert_eq(tf_conf_declare(c, "toy-y", &keys[0]), TF_OK, "one list, two descriptors");
	cr_assert_eq(tf_conf_check_pending(c), TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "--set: [toy] depth: 12 is outside 1..9"), "%s",
		  tf_diag_msg());
	cr_assert_eq(tf_conf_set(c, "toy.depth=4"), TF_OK);
	cr_assert_eq(tf_conf_check_pending(c), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_get_int(c, "toy", "depth", 0, &v), TF_OK);
	cr_assert_eq(v, 4);
	cr_assert_eq(tf_conf_get_bool(c, "runtime", "spin", false, &b), TF_OK);
	cr_assert(b);
	tf_conf_free(c);

	/* unset: the declared default; an undeclared key stays unknown */
	cr_assert_eq(tf_conf_init(NULL, &c), TF_OK);
	cr_assert_eq(tf_conf_declare(c, "toy-x", &keys[0]), TF_OK);
	cr_assert_eq(tf_conf_get_int(c, "toy", "depth", 0, &v), TF_OK);
	cr_assert_eq(v, 3);
	cr_assert_eq(tf_conf_set(c, "toy.width=1"), TF_OK);
	cr_assert_eq(tf_conf_check_pending(c), TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "[toy] width: unknown key"), "%s", tf_diag_msg());
	tf_conf_free(c);

	/* a strict description still refuses what nobody declared */
	cr_assert_eq(tf_conf_parse("[toy]\ndepth = 2\n", 16, "x.ini", &c), TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "unknown section [toy]"), "%s", tf_diag_msg());
}

Test(conf, load_from_disk_and_missing_file)
{
	char path[] = "/tmp/tf-conf-XXXXXX.ini";
	tf_test_tmpfile(path, 4, good, strlen(good));
	tf_conf *c = NULL;
	cr_assert_eq(tf_conf_load(path, &c), TF_OK, "%s", tf_diag_msg());
	char buf[256];
	const char *p;
	cr_assert_eq(tf_conf_get_path(c, "model", "path", buf, sizeof(buf), &p), TF_OK);
	cr_assert_str_eq(p, "/tmp/../models/tiny");
	tf_conf_free(c);
	unlink(path);

	c = NULL;
	cr_assert_eq(tf_conf_load(path, &c), TF_ERR_NOT_FOUND);
	cr_assert_null(c);
	cr_assert(strstr(tf_diag_msg(), path), "%s", tf_diag_msg());
	cr_assert(strstr(tf_diag_msg(), "No such file"), "%s", tf_diag_msg());
}

/* docs/ini.md is the operator's reference: every key must be in it. */
Test(conf, docs_cover_every_key)
{
	FILE *f = fopen(TF_SOURCE_DIR "/docs/ini.md", "rb");
	cr_assert_not_null(f, "docs/ini.md missing");
	static char doc[1 << 16];
	size_t n = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[n] = 0;
	const char *section, *key;
	for (size_t i = 0; (key = tf_conf_schema_at(i, &section)); i++) {
		char want[96], head[48];
		/* "layer.#.ffn" is written `layer.<N>.ffn`, "ffn.*" `ffn.<type>` */
		const char *hash = strchr(key, '#'), *star = strchr(key, '*');
		if (hash)
			snprintf(want, sizeof(want), "`%.*s<N>%s`", (int)(hash - key), key,
				 hash + 1);
		else if (star)
			snprintf(want, sizeof(want), "`%.*s<type>%s`", (int)(star - key), key,
				 star + 1);
		else
			snprintf(want, sizeof(want), "`%s`", key);
		snprintf(head, sizeof(head), "## [%s]", section);
		const char *sec = strstr(doc, head);
		cr_assert_not_null(sec, "docs/ini.md has no '%s'", head);
		const char *next = strstr(sec + 1, "\n## ");
		const char *at = strstr(sec, want);
		cr_assert(at && (!next || at < next), "docs/ini.md: %s lacks %s", head, want);
	}
}

/* The shipped examples must stay valid as the schema changes. */
Test(conf, shipped_examples_parse)
{
	static const char *const files[] = {
		"ling-tiny.ini", "ling-tiny-exl3.ini", "ling-bench.ini",
		"ling-3.1-flash-tp2.ini",
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/conf/%s", TF_SOURCE_DIR, files[i]);
		tf_conf *c = NULL;
		/* Their [mtp] keys are the mtp drafter's: the plugins declare them. */
		cr_assert_eq(tf_conf_open_checked(path, NULL, 0, &c), TF_OK, "%s", tf_diag_msg());
		cr_assert_not_null(tf_conf_get(c, "model", "path"), "%s", path);
		tf_conf_free(c);
	}
}
