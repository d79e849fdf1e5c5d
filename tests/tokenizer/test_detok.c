/* test_detok.c - streaming decode never emits half a character, and the
 * stream adds up to tf_tok_decode of the same ids. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tf/detok.h"
#include "tf/diag.h"
#include "tf/utf8.h"
#include "tok_fixture.h"

static tf_tokenizer *tok;

static void load(void)
{
	tok = tok_fixture_load("qwen3");
	cr_assert(tok, "%s", tf_diag_msg());
}

static void unload(void)
{
	tf_tok_free(tok);
}

TestSuite(detok, .init = load, .fini = unload, .timeout = 30);

/* Streams ids one by one; every chunk must be whole UTF-8 characters. */
static void stream(const int32_t *ids, size_t n, unsigned flags, tf_bytes *all)
{
	tf_detok d;
	const char *t;
	size_t i, len;

	tf_detok_init(&d, tok, flags);
	for (i = 0; i < n; i++) {
		cr_assert_eq(tf_detok_push(&d, ids[i], &t, &len), 0, "%s", tf_diag_msg());
		cr_expect(tf_utf8_valid(t, len, NULL), "chunk %zu is not whole UTF-8", i);
		tf_bytes_append(all, t, len);
	}
	cr_assert_eq(tf_detok_flush(&d, &t, &len), 0);
	tf_bytes_append(all, t, len);
	tf_detok_free(&d);
}

Test(detok, split_characters_wait_for_their_end)
{
	/* CJK and emoji: byte-level BPE splits many of these mid-character */
	const char *text = "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c "
			   "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb\xf0\x9f\x8f\xbd "
			   "\xf0\x9f\xa6\x80\xf0\x9f\xa7\xac \xea\xb0\x81\xe0\xa4\xb9\xe0\xa4\xbf";
	tf_tokens ids = { 0 };
	tf_bytes all = { 0 };
	size_t i, partial = 0, len;

	cr_assert_eq(tf_tok_encode(tok, text, strlen(text), 0, &ids), 0);
	/* the case must really cut characters, or the test proves nothing */
	for (i = 0; i < ids.n; i++)
		partial += !tf_utf8_valid(tf_tok_piece(tok, ids.ids[i], &len), len, NULL);
	cr_assert_gt(partial, 0);
	stream(ids.ids, ids.n, 0, &all);
	cr_expect_eq(all.len, strlen(text));
	cr_expect_arr_eq(all.p, text, strlen(text));
	tf_tokens_free(&ids);
	tf_bytes_free(&all);
}

Test(detok, random_ids_stream_like_decode)
{
	int32_t ids[64];
	int round;
	size_t i;

	srand(5);
	for (round = 0; round < 200; round++) {
		tf_bytes all = { 0 }, want = { 0 };

		for (i = 0; i < 64; i++)
			ids[i] = rand() % 151643;       /* the byte-level vocabulary */
		stream(ids, 64, 0, &all);
		cr_assert_eq(tf_tok_decode(tok, ids, 64, 0, &want), 0);
		cr_assert_eq(all.len, want.len, "round %d", round);
		cr_assert_arr_eq(all.p, want.p, want.len, "round %d", round);
		tf_bytes_free(&all);
		tf_bytes_free(&want);
	}
}

Test(detok, special_tokens_and_bad_ids)
{
	int32_t ids[] = { 151644, 9707, 151645 };      /* <|im_start|>Hello<|im_end|> */
	tf_bytes all = { 0 };
	tf_detok d;
	const char *t;
	size_t len;

	stream(ids, 3, TF_TOK_SKIP_SPECIAL, &all);
	cr_expect_eq(all.len, 5);
	cr_expect_arr_eq(all.p, "Hello", 5);
	all.len = 0;
	stream(ids, 3, 0, &all);
	cr_expect_eq(all.len, strlen("<|im_start|>Hello<|im_end|>"));
	tf_bytes_free(&all);

	tf_detok_init(&d, tok, 0);
	cr_expect_eq(tf_detok_push(&d, -3, &t, &len), TF_ERR_RANGE);
	cr_expect_eq(tf_detok_push(&d, 1 << 30, &t, &len), TF_ERR_RANGE);
	/* the lone byte 0xE4 (spelled "\u00e4" in the byte-level alphabet)
	 * starts a character that never ends: held, then U+FFFD at the end */
	cr_assert_eq(tf_detok_push(&d, tf_tok_find(tok, "\xc3\xa4"), &t, &len), 0);
	cr_expect_eq(len, 0);
	cr_assert_eq(tf_detok_flush(&d, &t, &len), 0);
	cr_expect_eq(len, 3);
	cr_expect_arr_eq(t, TF_UTF8_REPLACEMENT, 3);
	tf_detok_free(&d);
}
