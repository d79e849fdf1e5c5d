/* test_pretok.c - pre-tokenizer splits: every Split behaviour, invert,
 * Digits and ByteLevel's prefix space, checked piece by piece. */
#include <criterion/criterion.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer/pretok.h"
#include "tf/diag.h"

typedef struct pieces {
	char buf[512];
	size_t len;
} pieces;

/* Joins pieces with '|' so a whole split compares as one string. */
static int collect(void *ctx, const char *p, size_t n)
{
	pieces *ps = ctx;

	cr_assert_lt(ps->len + n + 1, sizeof(ps->buf));
	if (ps->len)
		ps->buf[ps->len++] = '|';
	memcpy(ps->buf + ps->len, p, n);
	ps->len += n;
	ps->buf[ps->len] = 0;
	return 0;
}

static void expect_split(const char *spec, const char *text, const char *want)
{
	cJSON *j = cJSON_Parse(spec);
	tf_pretok *p = NULL;
	pieces ps = { .len = 0 };

	cr_assert(j, "bad spec %s", spec);
	cr_assert_eq(tf_pretok_init(j, "test", &p), 0, "%s", tf_diag_msg());
	cr_assert_eq(tf_pretok_split(p, text, strlen(text), collect, &ps), 0);
	cr_expect_str_eq(ps.buf, want, "%s on \"%s\"", spec, text);
	tf_pretok_free(p);
	cJSON_Delete(j);
}

#define SPLIT(behavior, invert) \
	"{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"" behavior \
	"\",\"invert\":" invert "}"

Test(pretok, split_behaviours)
{
	expect_split(SPLIT("Isolated", "false"), "a-b--c", "a|-|b|-|-|c");
	expect_split(SPLIT("Removed", "false"), "a-b--c", "a|b|c");
	expect_split(SPLIT("MergedWithPrevious", "false"), "a-b--c", "a-|b-|-|c");
	expect_split(SPLIT("MergedWithNext", "false"), "a-b--c", "a|-b|-|-c");
	expect_split(SPLIT("Contiguous", "false"), "a-b--c", "a|-|b|--|c");
	expect_split(SPLIT("Removed", "true"), "a-b--c", "-|-|-");
	expect_split(SPLIT("Isolated", "false"), "--", "-|-");
	expect_split(SPLIT("MergedWithNext", "false"), "-a-", "-a|-");
}

Test(pretok, regex_digits_and_prefix_space)
{
	expect_split("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}\"},"
		     "\"behavior\":\"Isolated\"}", "ab12345x", "ab|123|45|x");
	expect_split("{\"type\":\"Digits\",\"individual_digits\":true}", "ab123", "ab|1|2|3");
	expect_split("{\"type\":\"Digits\",\"individual_digits\":false}", "ab123c", "ab|123|c");
	expect_split("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":false}",
		     "hello world", " hello world");
	expect_split("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}",
		     "hello  world's", " hello| | world|'s");
	/* ByteLevel adds its space to every piece an earlier stage made */
	expect_split("{\"type\":\"Sequence\",\"pretokenizers\":[" SPLIT("Isolated", "false") ","
		     "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":false}]}",
		     "a-b", " a| -| b");
}

Test(pretok, whitespace_is_unicode_white_space)
{
	/* as in Oniguruma: NEL is a space, U+180E (Mongolian vowel separator)
	 * is not, whatever PCRE2's own \s says */
	expect_split("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},"
		     "\"behavior\":\"Removed\"}", "a\xe1\xa0\x8e b\xc2\x85" "c", "a\xe1\xa0\x8e|b|c");
	expect_split("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\S+\"},"
		     "\"behavior\":\"Isolated\"}", "ab \xe1\xa0\x8e", "ab| |\xe1\xa0\x8e");
	/* an escaped backslash before s is a backslash and an s */
	expect_split("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\\\\\s\"},"
		     "\"behavior\":\"Removed\"}", "a\\sb c", "a|b c");
}

Test(pretok, bad_specs)
{
	const char *bad[] = {
		"{\"type\":\"Whitespace\"}",
		"{\"type\":\"Split\",\"pattern\":{},\"behavior\":\"Isolated\"}",
		"{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Sideways\"}",
		"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]}",
		"{\"type\":\"Sequence\"}",
		"{\"pattern\":1}",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cJSON *j = cJSON_Parse(bad[i]);
		tf_pretok *p = (tf_pretok *)1;

		cr_expect_neq(tf_pretok_init(j, "file.json: pre_tokenizer", &p), 0, "%s", bad[i]);
		cr_expect_null(p);
		cr_expect(strstr(tf_diag_msg(), "file.json"), "%s", tf_diag_msg());
		cJSON_Delete(j);
	}
}
