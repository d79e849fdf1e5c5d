/* test_value.c - JSON in and out as Python's json module reads and writes
 * it: exact spellings (the expected strings are what CPython 3.11 prints),
 * key order, duplicate keys, and malformed text named by line and column. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/value.h"
#include "tf/diag.h"
#include "tf/error.h"

static void expect_dump(const char *json, const char *want)
{
	tf_val *v = NULL;
	tf_bytes out = { 0 };

	cr_assert_eq(tf_val_parse_json(json, strlen(json), &v), 0, "%s: %s", json, tf_diag_msg());
	cr_assert_eq(tf_val_dump_json(v, &out), 0);
	cr_expect(out.len == strlen(want) && memcmp(out.p, want, out.len) == 0,
		  "%s: got %.*s, want %s", json, (int)out.len, out.p, want);
	tf_bytes_free(&out);
	tf_val_unref(v);
}

Test(value, dumps_as_python)
{
	expect_dump("{\"a\":[1,2.5,null,true,\"x\\u00e9\\n\\u0001\\u007f\\\"\\\\\\/\"],\"b\":{}}",
		    "{\"a\": [1, 2.5, null, true, \"x\xC3\xA9\\n\\u0001\x7F\\\"\\\\/\"], \"b\": {}}");
	expect_dump(" [ ] ", "[]");
	expect_dump("\"\\ud83d\\ude00 \\b\\f\\r\\t\"", "\"\xF0\x9F\x98\x80 \\b\\f\\r\\t\"");
	expect_dump("[-0, 0, -9223372036854775808, 9223372036854775807]",
		    "[0, 0, -9223372036854775808, 9223372036854775807]");
	expect_dump("[NaN, Infinity, -Infinity]", "[NaN, Infinity, -Infinity]");
	/* A duplicate key keeps its first place and its last value. */
	expect_dump("{\"a\":1,\"b\":2,\"a\":3}", "{\"a\": 3, \"b\": 2}");
}

Test(value, floats_as_repr)
{
	static const struct { const char *in, *want; } cases[] = {
		{ "1.0", "1.0" }, { "0.1", "0.1" }, { "1e-5", "1e-05" }, { "0.0001", "0.0001" },
		{ "1e16", "1e+16" }, { "1e15", "1000000000000000.0" },
		{ "123456789012345680.0", "1.2345678901234568e+17" }, { "-0.0", "-0.0" },
		{ "5e-324", "5e-324" }, { "1.7976931348623157e+308", "1.7976931348623157e+308" },
		{ "0.30000000000000004", "0.30000000000000004" }, { "-2.5e-7", "-2.5e-07" },
		{ "12345.678", "12345.678" }, { "1E22", "1e+22" }, { "100.0", "100.0" },
		{ "0.00012", "0.00012" }, { "2.0e0", "2.0" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_dump(cases[i].in, cases[i].want);
}

Test(value, float_spelling_reads_back_exactly)
{
	srand(12345);
	for (int i = 0; i < 20000; i++) {
		uint64_t bits = 0;
		for (int k = 0; k < 4; k++)
			bits = bits << 16 | (uint64_t)(rand() & 0xFFFF);
		double d;
		memcpy(&d, &bits, sizeof(d));
		if (!isfinite(d))
			continue;
		tf_bytes out = { 0 };
		cr_assert_eq(tf_val_dump_float(d, &out), 0);
		cr_assert_eq(tf_bytes_append(&out, "", 1), 0);
		double back = strtod(out.p, NULL);
		cr_assert(memcmp(&back, &d, sizeof(d)) == 0, "%s reads back as %.17g", out.p, back);
		tf_bytes_free(&out);
	}
}

Test(value, dict_keeps_order_and_finds_keys)
{
	tf_val *d = tf_val_dict();
	char key[16];

	for (int i = 0; i < 1000; i++) {
		int n = snprintf(key, sizeof(key), "k%d", (i * 7919) % 1000);
		cr_assert_eq(tf_val_dict_set(d, key, (size_t)n, tf_val_int(i)), 0);
	}
	cr_assert_eq(tf_val_len(d), 1000);
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "k%d", (i * 7919) % 1000);
		cr_expect_eq(tf_val_as_int(tf_val_dict_get(d, key)), i);
		size_t kl;
		cr_expect_str_eq(tf_val_as_str(tf_val_key_at(d, (size_t)i), &kl), key);
	}
	cr_expect_null(tf_val_dict_get(d, "k1000"));
	/* Replacing keeps the place. */
	cr_assert_eq(tf_val_dict_set(d, "k0", 2, tf_val_cstr("zero")), 0);
	cr_expect_eq(tf_val_len(d), 1000);
	cr_expect_str_eq(tf_val_as_str(tf_val_at(d, 0), NULL), "zero");
	tf_val_unref(d);
}

Test(value, strings_hold_nul)
{
	tf_val *v = NULL;
	size_t n = 0;

	cr_assert_eq(tf_val_parse_json("\"a\\u0000b\"", 10, &v), 0);
	cr_expect_eq(memcmp(tf_val_as_str(v, &n), "a\0b", 4), 0);
	cr_expect_eq(n, 3);
	tf_val_unref(v);
}

static void expect_error(const char *json, int status, const char *msg)
{
	tf_val *v = (tf_val *)1;

	tf_diag_clear();
	cr_expect_eq(tf_val_parse_json(json, strlen(json), &v), status, "%s", json);
	cr_expect_null(v, "%s", json);
	cr_expect(strstr(tf_diag_msg(), msg), "%s: diag '%s' lacks '%s'", json, tf_diag_msg(), msg);
}

Test(value, malformed_text_is_named)
{
	expect_error("", TF_ERR_FORMAT, "line 1 column 1: unexpected end");
	expect_error("{\"a\": 1,\n  \"b\" 2}", TF_ERR_FORMAT, "line 2 column 7: expected ':'");
	expect_error("[1, 2", TF_ERR_FORMAT, "expected ',' or ']'");
	expect_error("[1] x", TF_ERR_FORMAT, "line 1 column 5: extra data");
	expect_error("\"a\nb\"", TF_ERR_FORMAT, "control character");
	expect_error("\"\\ud800\"", TF_ERR_FORMAT, "lone surrogate");
	expect_error("\"\\ude00\"", TF_ERR_FORMAT, "lone surrogate");
	expect_error("\"\\x\"", TF_ERR_FORMAT, "bad escape");
	expect_error("\"\xC3\"", TF_ERR_FORMAT, "invalid UTF-8");
	expect_error("\"abc", TF_ERR_FORMAT, "unterminated string");
	expect_error("01", TF_ERR_FORMAT, "extra data");
	expect_error("1.", TF_ERR_FORMAT, "bad number");
	expect_error("-", TF_ERR_FORMAT, "bad number");
	expect_error("tru", TF_ERR_FORMAT, "unexpected character");
	expect_error("{1: 2}", TF_ERR_FORMAT, "expected a string key");
	expect_error("9223372036854775808", TF_ERR_RANGE, "integer beyond 64 bits");

	char deep[1100];
	memset(deep, '[', 600);
	deep[600] = 0;
	expect_error(deep, TF_ERR_FORMAT, "nested too deep");
	memset(deep, '[', 512);
	memset(deep + 512, ']', 512);
	deep[1024] = 0;
	tf_val *v = NULL;
	cr_expect_eq(tf_val_parse_json(deep, 1024, &v), 0, "512 deep is allowed");
	tf_val_unref(v);
}

/* str() or repr() of the JSON json as Python prints it (CPython 3.11). */
static void expect_py(const char *json, bool repr, const char *want)
{
	tf_val *v = NULL;
	tf_bytes out = { 0 };

	cr_assert_eq(tf_val_parse_json(json, strlen(json), &v), 0, "%s: %s", json, tf_diag_msg());
	cr_assert_eq(tf_val_dump_py(v, repr, SIZE_MAX, &out), 0);
	cr_expect(out.len == strlen(want) && memcmp(out.p, want, out.len) == 0,
		  "%s: got %.*s, want %s", json, (int)out.len, out.p, want);
	tf_bytes_free(&out);
	tf_val_unref(v);
}

Test(value, python_spellings)
{
	expect_py("[1, \"a\", null, true, false, 2.5, 1e22, {\"k\": [\"x\"]}]", false,
		  "[1, 'a', None, True, False, 2.5, 1e+22, {'k': ['x']}]");
	expect_py("\"it's \\\"q\\\"\"", false, "it's \"q\"");
	expect_py("[\"it's\", \"say \\\"hi\\\"\", \"both ' \\\"\", \"tab\\t nl\\n bs\\\\\"]", true,
		  "[\"it's\", 'say \"hi\"', 'both \\' \"', 'tab\\t nl\\n bs\\\\']");
	expect_py("[\"\\u0001\\u007f\\u00a0\\u00ad\\u00e9\\u4f60\\u2028\\ud83d\\ude00\\ue000\"]",
		  true,
		  "['\\x01\\x7f\\xa0\\xad\xC3\xA9\xE4\xBD\xA0\\u2028\xF0\x9F\x98\x80\\ue000']");
	expect_py("[NaN, Infinity, -0.0]", true, "[nan, inf, -0.0]");

	tf_val *t = tf_val_seq_new(TF_SEQ_TUPLE), *u = tf_val_undefined("'x' is undefined");
	tf_bytes out = { 0 };
	cr_assert_eq(tf_val_list_push(t, tf_val_int(1)), 0);
	cr_assert_eq(tf_val_dump_py(t, true, SIZE_MAX, &out), 0);
	cr_assert_eq(tf_val_list_push(t, tf_val_ref(u)), 0);
	cr_assert_eq(tf_val_dump_py(t, true, SIZE_MAX, &out), 0);
	cr_assert_eq(tf_val_dump_py(u, false, SIZE_MAX, &out), 0);
	cr_expect(out.len == 18 && memcmp(out.p, "(1,)(1, Undefined)", 18) == 0, "%.*s",
		  (int)out.len, out.p);
	cr_expect_str_eq(tf_val_undefined_why(u), "'x' is undefined");
	tf_bytes_free(&out);
	/* views print as Python does; generators and ranges have addresses */
	tf_val *keys = tf_val_seq_new(TF_SEQ_DICT_KEYS), *gen = tf_val_seq_new(TF_SEQ_GENERATOR);
	cr_assert_eq(tf_val_list_push(keys, tf_val_cstr("k")), 0);
	cr_assert_eq(tf_val_dump_py(keys, false, SIZE_MAX, &out), 0);
	cr_expect(out.len == 16 && memcmp(out.p, "dict_keys(['k'])", 16) == 0, "%.*s", (int)out.len,
		  out.p);
	cr_expect_eq(tf_val_dump_py(gen, false, SIZE_MAX, &out), TF_ERR_UNSUPPORTED);
	cr_expect_eq(tf_val_dump_json(keys, &out), TF_ERR_INVALID);
	cr_expect(tf_val_truthy(gen) && tf_val_truthy(keys), "a generator is true, even empty");
	tf_val_unref(keys);
	tf_val_unref(gen);
	tf_bytes_free(&out);
	tf_val *ns = tf_val_namespace();
	cr_expect_eq(tf_val_dump_py(ns, false, SIZE_MAX, &out), TF_ERR_UNSUPPORTED);
	tf_bytes_free(&out);
	tf_val_unref(ns);
	/* a bounded dump stops between items once past its bound */
	tf_val *l = tf_val_list();
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(tf_val_list_push(l, tf_val_int(1000 + i)), 0);
	cr_expect_eq(tf_val_dump_py(l, false, 20, &out), TF_ERR_RANGE);
	cr_expect(out.len > 20 && out.len <= 26, "stopped after %zu bytes", out.len);
	cr_expect(strstr(tf_diag_msg(), "beyond 20 bytes"), "%s", tf_diag_msg());
	tf_bytes_free(&out);
	tf_json_style st = { -1, ",", ":", false, 20 };
	cr_expect_eq(tf_val_dump_json_style(l, &st, &out), TF_ERR_RANGE);
	cr_expect(out.len > 20 && out.len <= 25, "stopped after %zu bytes", out.len);
	tf_bytes_free(&out);
	cr_expect_eq(tf_val_dump_py(l, false, 6000, &out), 0, "the whole list is 6000 bytes");
	tf_bytes_free(&out);
	tf_val_unref(l);
	tf_val_unref(t);
	tf_val_unref(u);
}

static tf_val *json(const char *text)
{
	tf_val *v = NULL;
	cr_assert_eq(tf_val_parse_json(text, strlen(text), &v), 0, "%s", text);
	return v;
}

Test(value, equality_and_truth_as_python)
{
	static const struct { const char *a, *b; bool eq; } cases[] = {
		{ "1", "1.0", true }, { "true", "1", true }, { "false", "0.0", true },
		{ "2", "true", false }, { "\"a\"", "\"a\"", true }, { "\"a\"", "\"a \"", false },
		{ "null", "null", true }, { "null", "0", false },
		{ "[1, [2]]", "[1.0, [2]]", true }, { "[1]", "[1, 2]", false },
		{ "{\"a\": 1, \"b\": 2}", "{\"b\": 2, \"a\": 1}", true },
		{ "{\"a\": 1}", "{\"a\": 2}", false }, { "{\"a\": 1}", "{\"b\": 1}", false },
		{ "NaN", "NaN", false }, { "[]", "{}", false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tf_val *a = json(cases[i].a), *b = json(cases[i].b);
		cr_expect_eq(tf_val_equal(a, b), cases[i].eq, "%s == %s", cases[i].a, cases[i].b);
		cr_expect_eq(tf_val_equal(b, a), cases[i].eq, "%s == %s", cases[i].b, cases[i].a);
		tf_val_unref(a);
		tf_val_unref(b);
	}
	tf_val *l = tf_val_list(), *t = tf_val_seq_new(TF_SEQ_TUPLE);
	cr_expect(tf_val_equal(l, l) && !tf_val_equal(l, t), "() != []");
	tf_val_unref(l);
	tf_val_unref(t);

	static const struct { const char *v; bool truth; } truths[] = {
		{ "0", false }, { "0.0", false }, { "-0.0", false }, { "\"\"", false },
		{ "[]", false }, { "{}", false }, { "null", false }, { "false", false },
		{ "1", true }, { "0.1", true }, { "\" \"", true }, { "[0]", true },
		{ "{\"a\": null}", true }, { "NaN", true },
	};
	for (size_t i = 0; i < sizeof(truths) / sizeof(truths[0]); i++) {
		tf_val *v = json(truths[i].v);
		cr_expect_eq(tf_val_truthy(v), truths[i].truth, "bool(%s)", truths[i].v);
		tf_val_unref(v);
	}
	tf_val *u = tf_val_undefined("x"), *ns = tf_val_namespace();
	cr_expect(!tf_val_truthy(u) && tf_val_truthy(ns), "Undefined is false, a namespace true");
	tf_val_unref(u);
	tf_val_unref(ns);
}

Test(value, json_styles_as_json_dumps)
{
	/* json.dumps(v, indent=2), (separators=(',', ':')), (sort_keys=True) */
	tf_val *v = json("{\"b\": [1, {}], \"a\": {\"y\": [], \"x\": \"\\u00e9\"}}");
	static const struct { tf_json_style st; const char *want;
	} cases[] = {
		{ { 2, ",", ": ", false, SIZE_MAX },
		  "{\n  \"b\": [\n    1,\n    {}\n  ],\n  \"a\": {\n    \"y\": [],\n    \"x\": "
		  "\"\xC3\xA9\"\n  }\n}" },
		{ { -1, ",", ":", false, SIZE_MAX }, "{\"b\":[1,{}],\"a\":{\"y\":[],\"x\":\"\xC3\xA9\"}}" },
		{ { -1, ", ", ": ", true, SIZE_MAX },
		  "{\"a\": {\"x\": \"\xC3\xA9\", \"y\": []}, \"b\": [1, {}]}" },
		{ { 0, ",", ": ", true, SIZE_MAX },
		  "{\n\"a\": {\n\"x\": \"\xC3\xA9\",\n\"y\": []\n},\n\"b\": [\n1,\n{}\n]\n}" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tf_bytes out = { 0 };
		cr_assert_eq(tf_val_dump_json_style(v, &cases[i].st, &out), 0);
		cr_expect(out.len == strlen(cases[i].want) &&
				  memcmp(out.p, cases[i].want, out.len) == 0,
			  "style %zu: got %.*s", i, (int)out.len, out.p);
		tf_bytes_free(&out);
	}
	tf_val_unref(v);

	tf_val *u = tf_val_list();
	tf_bytes out = { 0 };
	cr_assert_eq(tf_val_list_push(u, tf_val_undefined("x")), 0);
	cr_expect_eq(tf_val_dump_json(u, &out), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "not JSON serializable"), "%s", tf_diag_msg());
	tf_bytes_free(&out);
	tf_val_unref(u);
}
