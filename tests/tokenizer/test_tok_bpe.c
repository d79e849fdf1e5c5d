/* test_tok_bpe.c - the BPE model and the encode pipeline on small hand-made
 * tokenizers: merge formats, ignore_merges, added tokens, templates, the
 * merge loop against its reference, and bad tokenizer files. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer/bpe.h"
#include "tf/diag.h"
#include "tok_fixture.h"

/* Vocabulary spelled in the byte-level alphabet: "Ġ" is the space. */
#define MINI_VOCAB \
	"{\"a\":0,\"b\":1,\"c\":2,\"d\":3,\"ab\":4,\"bc\":5,\"cd\":6,\"abcd\":7," \
	"\"Ġ\":8,\"Ġa\":9,\"x\":10,\"<\":11,\">\":12,\"Ċ\":13}"
#define MINI_PRE "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"

/* A tokenizer.json around the given merges, model options and extra keys. */
static char *mini_json(const char *merges, const char *model_opts, const char *extra)
{
	static char buf[8192];

	snprintf(buf, sizeof(buf),
		 "{%s\"pre_tokenizer\":" MINI_PRE ",\"decoder\":{\"type\":\"ByteLevel\"},"
		 "\"model\":{\"type\":\"BPE\"%s,\"vocab\":" MINI_VOCAB ",\"merges\":%s}}",
		 extra, model_opts, merges);
	return buf;
}

static tf_tokenizer *mini(const char *merges, const char *model_opts, const char *extra)
{
	const char *json = mini_json(merges, model_opts, extra);
	tf_tokenizer *tok = NULL;
	int rc = tf_tok_load_json(json, strlen(json), "mini.json", &tok);

	cr_assert_eq(rc, 0, "load: %s", tf_diag_msg());
	return tok;
}

static void expect_ids(const tf_tokenizer *tok, const char *text, unsigned flags,
		       const int32_t *want, size_t n)
{
	tf_tokens ids = { 0 };
	size_t i;

	cr_assert_eq(tf_tok_encode(tok, text, strlen(text), flags, &ids), 0, "%s", tf_diag_msg());
	cr_expect_eq(ids.n, n, "\"%s\": %zu ids, want %zu", text, ids.n, n);
	for (i = 0; i < n && i < ids.n; i++)
		cr_expect_eq(ids.ids[i], want[i], "\"%s\"[%zu] = %d, want %d", text, i,
			     ids.ids[i], want[i]);
	tf_tokens_free(&ids);
}

#define EXPECT(tok, text, flags, ...) \
	expect_ids(tok, text, flags, (const int32_t[]){ __VA_ARGS__ }, \
		   sizeof((const int32_t[]){ __VA_ARGS__ }) / sizeof(int32_t))

static int load_err(const char *json)
{
	tf_tokenizer *tok = NULL;
	int rc = tf_tok_load_json(json, strlen(json), "bad.json", &tok);

	cr_assert_null(tok);
	cr_assert(strstr(tf_diag_msg(), "bad.json"), "diag names the file: %s", tf_diag_msg());
	return rc;
}

static const char merges[] = "[\"b c\",\"a b\",\"c d\",\"Ġ a\"]";

Test(tok_bpe, merge_formats_agree)
{
	tf_tokenizer *s = mini(merges, "", "");
	tf_tokenizer *p = mini("[[\"b\",\"c\"],[\"a\",\"b\"],[\"c\",\"d\"],[\"Ġ\",\"a\"]]", "", "");

	/* "b c" ranks first, so "abcd" is a|bc|d, never ab|cd */
	EXPECT(s, "abcd", 0, 0, 5, 3);
	EXPECT(p, "abcd", 0, 0, 5, 3);
	EXPECT(s, "ab cd a", 0, 4, 8, 6, 9);
	EXPECT(p, "ab cd a", 0, 4, 8, 6, 9);
	tf_tok_free(s);
	tf_tok_free(p);
}

Test(tok_bpe, ignore_merges_keeps_whole_vocab_words)
{
	tf_tokenizer *on = mini(merges, ",\"ignore_merges\":true", "");
	tf_tokenizer *off = mini(merges, ",\"ignore_merges\":false", "");

	EXPECT(on, "abcd", 0, 7);
	EXPECT(off, "abcd", 0, 0, 5, 3);
	EXPECT(on, "abc", 0, 0, 5);     /* not a vocab word: merged as usual */
	tf_tok_free(on);
	tf_tok_free(off);
}

/* Random pieces through the heap merge and the plain rescan. */
static void heap_vs_ref(const tf_bpe *b, const char *alphabet, int rounds, unsigned seed)
{
	size_t na = strlen(alphabet);
	char piece[64];
	int r;

	srand(seed);
	for (r = 0; r < rounds; r++) {
		tf_tokens x = { 0 }, y = { 0 };
		tf_bpe_scratch sc = { 0 };
		size_t len = 1 + (size_t)rand() % sizeof(piece), i;

		for (i = 0; i < len; i++)
			piece[i] = alphabet[(size_t)rand() % na];
		cr_assert_eq(tf_bpe_encode(b, piece, len, &sc, &x), 0);
		cr_assert_eq(tf_bpe_encode_ref(b, piece, len, &y), 0);
		cr_assert_eq(x.n, y.n, "piece \"%.*s\"", (int)len, piece);
		cr_assert_arr_eq(x.ids, y.ids, x.n * sizeof(int32_t), "piece \"%.*s\"", (int)len, piece);
		tf_tokens_free(&x);
		tf_tokens_free(&y);
		tf_bpe_scratch_free(&sc);
	}
}

Test(tok_bpe, heap_merge_matches_reference, .timeout = 30)
{
	char *json = tok_fixture_read(TOK_DATA "/qwen3/tokenizer.json", NULL);
	cJSON *root = cJSON_Parse(json);
	tf_bpe b;

	cr_assert(root);
	cr_assert_eq(tf_bpe_init(&b, cJSON_GetObjectItem(root, "model"), "qwen3"), 0, "%s",
		     tf_diag_msg());
	/* letters that merge a lot, and bytes of multi-byte characters */
	heap_vs_ref(&b, "eeeaaansttt  hrdl", 3000, 1);
	heap_vs_ref(&b, "\xe4\xb8\xad\xe6\x96\x87\xf0\x9f\x98\x80 ", 1000, 2);
	tf_bpe_free(&b);
	cJSON_Delete(root);
	free(json);
}

#define ADDED(id, content, opts) \
	"{\"id\":" #id ",\"content\":\"" content "\"" opts "}"

Test(tok_bpe, added_tokens_leftmost_longest)
{
	tf_tokenizer *t = mini(merges, "", "\"added_tokens\":["
			       ADDED(20, "<a>", ",\"special\":true") ","
			       ADDED(21, "<a><b>", ",\"special\":false") "],");

	EXPECT(t, "x<a><b>x", 0, 10, 21, 10);
	EXPECT(t, "<a>x<a>", 0, 20, 10, 20);
	/* user text: the special token is plain text, the other still matches */
	EXPECT(t, "<a>", TF_TOK_SPECIAL_AS_TEXT, 11, 0, 12);
	EXPECT(t, "<a><b>", TF_TOK_SPECIAL_AS_TEXT, 21);
	cr_expect(tf_tok_is_special(t, 20));
	cr_expect(!tf_tok_is_special(t, 21));
	cr_expect_eq(tf_tok_find(t, "<a><b>"), 21);
	cr_expect_eq(tf_tok_find(t, "ab"), 4);
	cr_expect_eq(tf_tok_find(t, "zz"), -1);
	cr_expect_eq(tf_tok_vocab_size(t), 22);
	tf_tok_free(t);
}

Test(tok_bpe, added_token_strip_and_single_word)
{
	tf_tokenizer *t = mini(merges, "", "\"added_tokens\":["
			       ADDED(22, "<m>", ",\"lstrip\":true,\"rstrip\":true") ","
			       ADDED(23, "ab", ",\"single_word\":true") "],");

	EXPECT(t, "a  <m>\n b", 0, 0, 22, 1);
	EXPECT(t, "ab a", 0, 23, 9);
	EXPECT(t, "xab", 0, 10, 4);     /* inside a word: ordinary text */
	tf_tok_free(t);
}

Test(tok_bpe, normalized_added_token_matches_after_nfc)
{
	tf_tokenizer *t = mini(merges, "", "\"normalizer\":{\"type\":\"NFC\"},\"added_tokens\":["
			       ADDED(24, "e\\u0301", ",\"normalized\":true") "],");

	EXPECT(t, "x\xc3\xa9", 0, 10, 24);      /* é precomposed */
	EXPECT(t, "xe\xcc\x81", 0, 10, 24);     /* e + U+0301 */
	tf_tok_free(t);
}

Test(tok_bpe, template_adds_bos_and_eos)
{
	tf_tokenizer *t = mini(merges, "",
		"\"added_tokens\":[" ADDED(30, "<s>", ",\"special\":true") ","
		ADDED(31, "</s>", ",\"special\":true") "],"
		"\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
		"{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
		"{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
		"{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}}],"
		"\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[30],\"tokens\":[\"<s>\"]},"
		"\"</s>\":{\"id\":\"</s>\",\"ids\":[31],\"tokens\":[\"</s>\"]}}},");
	tf_bytes text = { 0 };

	EXPECT(t, "ab", TF_TOK_ADD_SPECIAL, 30, 4, 31);
	EXPECT(t, "ab", 0, 4);
	cr_assert_eq(tf_tok_decode(t, (int32_t[]){ 30, 4, 8, 31 }, 4, TF_TOK_SKIP_SPECIAL, &text), 0);
	cr_expect_eq(text.len, 3);
	cr_expect_arr_eq(text.p, "ab ", 3);
	text.len = 0;
	cr_assert_eq(tf_tok_decode(t, (int32_t[]){ 30, 4 }, 2, 0, &text), 0);
	cr_expect_arr_eq(text.p, "<s>ab", 5);
	cr_expect_eq(tf_tok_decode(t, (int32_t[]){ 4, 99 }, 2, 0, &text), TF_ERR_RANGE);
	cr_expect_eq(tf_tok_decode(t, (int32_t[]){ -1 }, 1, 0, &text), TF_ERR_RANGE);
	tf_bytes_free(&text);
	tf_tok_free(t);
}

Test(tok_bpe, bad_files_fail_clearly)
{
	tf_tokenizer *tok = NULL;
	char json[8192];

	cr_expect_eq(load_err("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}"), TF_ERR_UNSUPPORTED);
	cr_expect(strstr(tf_diag_msg(), "WordPiece"));
	cr_expect_eq(load_err(mini_json("[\"a b c\"]", "", "")), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "merges[0]"), "%s", tf_diag_msg());
	cr_expect_eq(load_err(mini_json("[\"b c\",[\"a\"]]", "", "")), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "merges[1]"), "%s", tf_diag_msg());
	cr_expect_eq(load_err(mini_json("[\"a z\"]", "", "")), TF_ERR_FORMAT);
	cr_expect_eq(load_err(mini_json("[\"c a\"]", "", "")), TF_ERR_FORMAT); /* "ca" unknown */
	cr_expect_eq(load_err(mini_json("[\"a b\"]", ",\"byte_fallback\":true", "")), TF_ERR_UNSUPPORTED);
	/* a template naming an id the vocabulary lacks */
	cr_expect_eq(load_err(mini_json("[]", "", "\"post_processor\":{\"type\":\"TemplateProcessing\","
			"\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}}],\"special_tokens\":"
			"{\"<s>\":{\"id\":\"<s>\",\"ids\":[99]}}},")), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "id 99"), "%s", tf_diag_msg());
	cr_expect_eq(load_err(mini_json("[]", "", "\"normalizer\":{\"type\":\"Lowercase\"},")),
		     TF_ERR_UNSUPPORTED);
	cr_expect_eq(load_err("{\"model\": {\"type\": \"BPE\", \"vocab\": {"), TF_ERR_FORMAT);
	cr_expect_eq(load_err("[1, 2]"), TF_ERR_FORMAT);
	snprintf(json, sizeof(json), "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":"
		 "\"[\\\\p{L}&&[^a]]\"},\"behavior\":\"Isolated\"},\"decoder\":{\"type\":\"ByteLevel\"},"
		 "\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}");
	cr_expect_eq(load_err(json), TF_ERR_UNSUPPORTED);
	cr_expect(strstr(tf_diag_msg(), "intersection"), "%s", tf_diag_msg());
	snprintf(json, sizeof(json), "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":"
		 "\"(a\"},\"behavior\":\"Isolated\"},\"decoder\":{\"type\":\"ByteLevel\"},"
		 "\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}");
	cr_expect_eq(load_err(json), TF_ERR_FORMAT);
	/* a BPE without ByteLevel is not byte-level BPE */
	cr_expect_eq(load_err("{\"decoder\":{\"type\":\"ByteLevel\"},"
			      "\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}"),
		     TF_ERR_UNSUPPORTED);
	cr_expect_eq(tf_tok_load("/nonexistent/tokenizer.json", &tok), TF_ERR_IO);
	cr_expect(strstr(tf_diag_msg(), "/nonexistent/tokenizer.json"));
	cr_expect_null(tok);
}

Test(tok_bpe, invalid_utf8_prompt_is_refused)
{
	tf_tokenizer *t = mini(merges, "", "");
	tf_tokens ids = { 0 };

	cr_expect_eq(tf_tok_encode(t, "ab\xc3(", 4, 0, &ids), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "byte 2"), "%s", tf_diag_msg());
	cr_expect_eq(tf_tok_encode(t, "\xed\xa0\x80", 3, 0, &ids), TF_ERR_INVALID); /* surrogate */
	cr_expect_eq(tf_tok_encode(t, "\xc0\xaf", 2, 0, &ids), TF_ERR_INVALID);     /* overlong */
	cr_expect_eq(ids.n, 0);
	tf_tokens_free(&ids);
	tf_tok_free(t);
}

Test(tok_bpe, runaway_regex_stops_with_an_error, .timeout = 10)
{
	const char *json = "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
		"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a|aa)+$\"},\"behavior\":\"Isolated\"},"
		"{\"type\":\"ByteLevel\",\"use_regex\":false}]},\"decoder\":{\"type\":\"ByteLevel\"},"
		"\"model\":{\"type\":\"BPE\",\"vocab\":" MINI_VOCAB ",\"merges\":[]}}";
	tf_tokenizer *t = NULL;
	tf_tokens ids = { 0 };
	char text[4096];

	cr_assert_eq(tf_tok_load_json(json, strlen(json), "slow.json", &t), 0, "%s", tf_diag_msg());
	memset(text, 'a', sizeof(text));
	text[sizeof(text) - 1] = 'b';
	cr_expect_eq(tf_tok_encode(t, text, sizeof(text), 0, &ids), TF_ERR_RANGE);
	tf_tokens_free(&ids);
	tf_tok_free(t);
}
