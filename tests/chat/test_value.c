/* test_value.c - JSON in and out as Python's json module reads and writes
 * it: exact spellings (the expected strings are what CPython 3.11 prints),
 * key order, duplicate keys, and malformed text named by line and column. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/value.h"
#include "diag.h"
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
