/* test_registry.c - loading, ABI checks, probing and selection of plugins. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/conf.h"
#include "plugin/registry.h"
#include "support/tmpfile.h"
#include "tf/diag.h"

#define SEL TF_TEST_PLUGINS "/sel"
#define BAD TF_TEST_PLUGINS "/bad"

/* Toys and broken plugins probe without touching the host. */
static const tf_host bare_host = { .struct_size = sizeof(tf_host) };

static tf_registry *reg_new(void)
{
	tf_registry *r;
	cr_assert_eq(tf_registry_init(&r), TF_OK);
	return r;
}

static const tf_candidate *find(const tf_registry *r, const char *name)
{
	for (size_t i = 0; i < tf_registry_count(r); i++)
		if (!strcmp(tf_registry_at(r, i)->name, name))
			return tf_registry_at(r, i);
	return NULL;
}

static tf_conf *conf_of(const char *text)
{
	tf_conf *c;
	int rc = tf_conf_parse(text, strlen(text), "sel.ini", &c);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());
	return c;
}

Test(registry, loads_the_example_plugin)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_load(r, TF_PLUGIN_DIR "/example.so"), TF_OK,
		     "%s", tf_diag_msg());
	const tf_candidate *c = find(r, "example-int8");
	cr_assert_not_null(c);
	cr_assert_eq(c->kind, TF_KIND_QUANT);
	cr_assert_eq(c->status, TF_OK);
	cr_assert_not(c->probed);
	cr_assert_str_eq(c->file, TF_PLUGIN_DIR "/example.so");
	tf_registry_free(r);
}

Test(registry, missing_file)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_load(r, BAD "/no-such.so"), TF_ERR_NOT_FOUND);
	cr_assert(strstr(tf_diag_msg(), "no-such.so"), "%s", tf_diag_msg());
	cr_assert_eq(tf_registry_add(r, BAD "/no-such-dir", "TF_PLUGIN_PATH"),
		     TF_ERR_NOT_FOUND);
	cr_assert(strstr(tf_diag_msg(), "TF_PLUGIN_PATH"), "%s", tf_diag_msg());
	cr_assert_eq(tf_registry_count(r), 0);
	tf_registry_free(r);
}

Test(registry, shared_object_that_is_not_a_plugin)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_load(r, BAD "/bad-not_plugin.so"), TF_ERR_NOT_FOUND);
	cr_assert(strstr(tf_diag_msg(), "bad-not_plugin.so: not a TensorFold plugin"),
		  "%s", tf_diag_msg());
	tf_registry_free(r);
}

Test(registry, file_that_is_not_a_shared_object)
{
	char path[] = "/tmp/tf-garbage-XXXXXX.so";
	tf_test_tmpfile(path, 3, "hello\n", 6);
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_load(r, path), TF_ERR_FORMAT);
	cr_assert(strstr(tf_diag_msg(), "not a loadable shared object"), "%s",
		  tf_diag_msg());
	tf_registry_free(r);
	unlink(path);
}

Test(registry, other_abi_major_in_the_entry_symbol)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_load(r, BAD "/bad-abi_symbol.so"), TF_ERR_ABI);
	cr_assert(strstr(tf_diag_msg(), "built for plugin ABI 2 (exports "
			 "tf_plugin_ffn_v2)"), "%s", tf_diag_msg());
	tf_registry_free(r);
}

/* Broken descriptors load (the .so is a plugin) but stay rejected. */
static void expect_rejected(const char *file, int status, const char *why)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_load(r, file), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_registry_count(r), 1);
	const tf_candidate *c = tf_registry_at(r, 0);
	cr_assert_eq(c->status, status, "%s: %s", file, c->why);
	cr_assert(strstr(c->why, why), "%s: '%s' lacks '%s'", file, c->why, why);
	/* rejected candidates are never probed nor chosen */
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	cr_assert_not(c->probed);
	const tf_candidate *sel = NULL;
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, NULL, NULL, &sel),
		     TF_ERR_NOT_FOUND);
	cr_assert_null(sel);
	tf_registry_free(r);
}

Test(registry, other_abi_major_in_the_header)
{
	expect_rejected(BAD "/bad-abi_major.so", TF_ERR_ABI, "built for plugin ABI 2.0");
}

Test(registry, struct_too_small)
{
	expect_rejected(BAD "/bad-small.so", TF_ERR_ABI,
			"too small for required slot 'layer_init'");
}

Test(registry, missing_required_slot)
{
	expect_rejected(BAD "/bad-no_slot.so", TF_ERR_ABI,
			"missing required slot 'forward'");
}

/* An attention descriptor fills the pre-1.5 slots or all the 1.5 state
 * slots; toy-mean has the former and one of the latter. */
Test(registry, partial_abi_1_5_state_slots)
{
	expect_rejected(TF_TEST_PLUGINS "/half15/toy-half15.so", TF_ERR_ABI,
			"missing required slot 'state_free'");
}

Test(registry, wrong_kind_from_an_entry)
{
	expect_rejected(BAD "/bad-wrong_kind.so", TF_ERR_ABI,
			"tf_plugin_ffn_v1 returned a descriptor of kind 2");
}

Test(registry, older_abi_minors_load)
{
	/* Plugins built against ABI 1.2 and 1.3 load and probe under 1.4. */
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_add(r, TF_TEST_PLUGINS "/old", "test"), TF_OK, "%s",
		     tf_diag_msg());
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	for (int minor = 2; minor <= 3; minor++) {
		char name[16];
		snprintf(name, sizeof(name), "toy-1-%d", minor);
		const tf_candidate *c = find(r, name);
		cr_assert_eq(c->desc->abi_minor, minor);
		cr_assert_lt(c->desc->abi_minor, TF_ABI_MINOR);
		cr_assert_eq(c->status, TF_OK, "%s: %s", name, c->why);
		cr_assert(c->probed);
	}
	tf_registry_free(r);
}

Test(registry, probe_failure_keeps_the_reason)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_load(r, BAD "/bad-probe_fail.so"), TF_OK);
	const tf_candidate *c = find(r, "bad");
	cr_assert_eq(c->status, TF_OK);
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	cr_assert(c->probed);
	cr_assert_eq(c->status, TF_ERR_UNSUPPORTED);
	cr_assert_str_eq(c->why, "not supported");
	const tf_candidate *sel;
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, NULL, "bad", &sel),
		     TF_ERR_UNSUPPORTED);
	cr_assert(strstr(tf_diag_msg(), "not supported"), "%s", tf_diag_msg());
	tf_registry_free(r);
}

Test(registry, folder_scan_lists_failures_beside_plugins)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_add(r, BAD, "test"), TF_OK, "%s", tf_diag_msg());
	/* every file shows up, sorted, none usable */
	cr_assert_eq(tf_registry_count(r), 7);
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	for (size_t i = 0; i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		cr_assert_neq(c->status, TF_OK, "%s", c->file);
		cr_assert_neq(c->why[0], 0, "%s", c->file);
	}
	cr_assert(strstr(tf_registry_at(r, 0)->file, "bad-abi_major.so"));
	tf_registry_free(r);
}

static tf_registry *sel_registry(const tf_conf *conf)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_add(r, SEL, "test"), TF_OK, "%s", tf_diag_msg());
	if (conf && tf_conf_get(conf, "plugins", "exclude"))
		tf_registry_exclude(r, tf_conf_get(conf, "plugins", "exclude"));
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	return r;
}

Test(select, highest_score_of_the_layer_type)
{
	tf_registry *r = sel_registry(NULL);
	const tf_candidate *c;
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, "dense", NULL, &c), TF_OK);
	cr_assert_str_eq(c->name, "toy-b");
	cr_assert_eq(c->score, 7);
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, "moe", NULL, &c), TF_OK);
	cr_assert_str_eq(c->name, "toy-c");
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, "mystery", NULL, &c),
		     TF_ERR_NOT_FOUND);
	cr_assert(strstr(tf_diag_msg(), "layer type mystery"), "%s", tf_diag_msg());
	cr_assert_eq(tf_registry_select(r, TF_KIND_ATTENTION, "kda", NULL, &c),
		     TF_ERR_NOT_FOUND);
	tf_registry_free(r);
}

Test(select, pins_overrides_and_excludes)
{
	tf_conf *conf = conf_of("[plugins]\n"
				"ffn.dense = toy-a\n"
				"layer.3.ffn = toy-b\n"
				"layer.4.ffn = toy-c\n"
				"exclude = toy-c\n");
	tf_registry *r = sel_registry(conf);
	const tf_candidate *c;
	/* the layer-type pin beats the higher score */
	cr_assert_eq(tf_registry_choose(r, conf, TF_KIND_FFN, "dense", 0, &c), TF_OK);
	cr_assert_str_eq(c->name, "toy-a");
	/* the layer-index pin beats the layer-type pin */
	cr_assert_eq(tf_registry_choose(r, conf, TF_KIND_FFN, "dense", 3, &c), TF_OK);
	cr_assert_str_eq(c->name, "toy-b");
	/* an excluded plugin cannot be pinned; the error names the line */
	cr_assert_eq(tf_registry_choose(r, conf, TF_KIND_FFN, "moe", 4, &c),
		     TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "sel.ini:4: [plugins] layer.4.ffn: "),
		  "%s", tf_diag_msg());
	cr_assert(strstr(tf_diag_msg(), "excluded"), "%s", tf_diag_msg());
	/* and is not chosen by score either */
	cr_assert_eq(tf_registry_choose(r, conf, TF_KIND_FFN, "moe", 5, &c),
		     TF_ERR_NOT_FOUND);
	tf_registry_free(r);
	tf_conf_free(conf);
}

Test(select, pin_of_the_wrong_layer_type_or_a_missing_name)
{
	tf_conf *conf = conf_of("[plugins]\nffn.moe = toy-a\nffn.dense = nobody\n");
	tf_registry *r = sel_registry(conf);
	const tf_candidate *c;
	cr_assert_eq(tf_registry_choose(r, conf, TF_KIND_FFN, "moe", 1, &c),
		     TF_ERR_INVALID);
	cr_assert(strstr(tf_diag_msg(), "sel.ini:2: [plugins] ffn.moe: ffn plugin "
			 "'toy-a' serves dense layers, not moe"), "%s", tf_diag_msg());
	cr_assert_eq(tf_registry_choose(r, conf, TF_KIND_FFN, "dense", 1, &c),
		     TF_ERR_NOT_FOUND);
	cr_assert(strstr(tf_diag_msg(), "no ffn plugin named 'nobody'"), "%s",
		  tf_diag_msg());
	tf_registry_free(r);
	tf_conf_free(conf);
}

Test(select, first_on_the_path_shadows_a_twin)
{
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_add(r, SEL, "test"), TF_OK);
	cr_assert_eq(tf_registry_add(r, TF_TEST_PLUGINS "/shadow", "test"), TF_OK);
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	const tf_candidate *twin = tf_registry_at(r, tf_registry_count(r) - 1);
	cr_assert_str_eq(twin->name, "toy-a");
	cr_assert_eq(twin->status, TF_ERR_INVALID);
	cr_assert(strstr(twin->why, "shadowed by " SEL "/toy-a.so"), "%s", twin->why);
	const tf_candidate *c;
	/* the twin's score of 99 does not count */
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, "dense", NULL, &c), TF_OK);
	cr_assert_str_eq(c->name, "toy-b");
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, "dense", "toy-a", &c), TF_OK);
	cr_assert_eq(c->score, 5);
	/* a folder met again (another path, same files) adds nothing */
	size_t n = tf_registry_count(r);
	cr_assert_eq(tf_registry_add(r, SEL "/../sel", "again"), TF_OK);
	cr_assert_eq(tf_registry_load(r, SEL "/toy-b.so"), TF_OK);
	cr_assert_eq(tf_registry_add(r, BAD, "test"), TF_OK);
	size_t with_bad = tf_registry_count(r);
	cr_assert_eq(tf_registry_add(r, BAD, "again"), TF_OK);
	cr_assert_eq(tf_registry_count(r), with_bad);
	cr_assert_eq(with_bad, n + 7);
	tf_registry_free(r);
}

Test(select, scan_follows_the_ini_path_and_the_environment)
{
	tf_conf *conf = conf_of("[plugins]\npath = " TF_TEST_PLUGINS "/shadow\n");
	setenv("TF_PLUGIN_PATH", SEL, 1);
	tf_registry *r = reg_new();
	cr_assert_eq(tf_registry_scan(r, conf), TF_OK, "%s", tf_diag_msg());
	unsetenv("TF_PLUGIN_PATH");
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	/* the INI's folder comes first, so its toy-a (score 99) wins */
	const tf_candidate *c;
	cr_assert_eq(tf_registry_select(r, TF_KIND_FFN, "dense", NULL, &c), TF_OK);
	cr_assert_eq(c->score, 99);
	/* the build folder comes last: the example plugin is there */
	cr_assert_not_null(find(r, "example-int8"));
	tf_registry_free(r);
	tf_conf_free(conf);

	conf = conf_of("[plugins]\npath = no/such/folder\n");
	r = reg_new();
	cr_assert_eq(tf_registry_scan(r, conf), TF_ERR_NOT_FOUND);
	cr_assert(strstr(tf_diag_msg(), "[plugins] path: plugin path "
			 "./no/such/folder"), "%s", tf_diag_msg());
	tf_registry_free(r);
	tf_conf_free(conf);
}

Test(listing, json_has_every_candidate_and_reason)
{
	tf_registry *r = sel_registry(NULL);
	cr_assert_eq(tf_registry_add(r, BAD, "test"), TF_OK);
	tf_registry_probe(r, TF_KIND_FFN, &bare_host);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(tf_registry_print(r, f, true), TF_OK);
	fclose(f);
	cJSON *root = cJSON_Parse(buf);
	cr_assert_not_null(root, "%s", buf);
	cr_assert_eq((size_t)cJSON_GetArraySize(root), tf_registry_count(r));
	int usable = 0, declined = 0;
	cJSON *o;
	cJSON_ArrayForEach(o, root) {
		cr_assert(cJSON_IsString(cJSON_GetObjectItem(o, "kind")));
		cr_assert(cJSON_IsString(cJSON_GetObjectItem(o, "file")));
		cJSON *why = cJSON_GetObjectItem(o, "rejected");
		usable += cJSON_IsTrue(cJSON_GetObjectItem(o, "usable"));
		declined += why && !strcmp(why->valuestring, "not supported");
		cr_assert_neq(cJSON_IsTrue(cJSON_GetObjectItem(o, "usable")), why != NULL);
	}
	cr_assert_eq(usable, 3);
	cr_assert_eq(declined, 1);
	cJSON_Delete(root);
	free(buf);

	f = open_memstream(&buf, &len);
	cr_assert_eq(tf_registry_print(r, f, false), TF_OK);
	fclose(f);
	cr_assert(strstr(buf, "rejected: not supported"), "%s", buf);
	cr_assert(strstr(buf, "toy-b"), "%s", buf);
	free(buf);
	tf_registry_free(r);
}
