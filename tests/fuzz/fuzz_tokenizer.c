/*
 * fuzz_tokenizer.c - the encoder and the streaming detokenizer on hostile
 * bytes, over a fixed byte-level tokenizer.  The first byte picks the target:
 *
 *   odd   the rest is text: invalid UTF-8 is refused with TF_ERR_INVALID,
 *         valid text round-trips exactly;
 *   even  the rest is token ids (two bytes each): the streaming detokenizer
 *         emits only whole characters and, in sum, what tf_tok_decode gives.
 *
 * The tokenizer.json loader has a target of its own, fuzz_tokenizer_json:
 * its seeds are whole files, and libFuzzer grows every input of a target to
 * the size of its largest seed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/detok.h"
#include "tf/utf8.h"
#include "tokenizer/tokenizer.h"
#include "unicode/unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put(tf_bytes *b, const char *s)
{
	tf_bytes_append(b, s, strlen(s));
}

/* All 256 byte tokens, a few merges and two added tokens. */
static tf_tokenizer *fixed_tokenizer(void)
{
	static const char *const merges[] = {
		"\xc4\xa0 t", "h e", "i n", "\xc4\xa0 a", "e r", "\xc4\xa0t he", "o n", "a n",
	};
	static tf_tokenizer *tok;
	tf_bytes j = { 0 }, spell = { 0 };
	char num[32];
	size_t i, n = 256;

	if (tok)
		return tok;
	put(&j, "{\"added_tokens\":[{\"id\":300,\"content\":\"<|endoftext|>\","
		"\"special\":true},{\"id\":301,\"content\":\"<think>\"}],"
		"\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},"
		"\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{");
	for (i = 0; i < 256; i++) {
		char c = (char)i;

		spell.len = 0;
		tf_bytelevel_encode(&c, 1, &spell);
		put(&j, i ? ",\"" : "\"");
		if (c == '"' || c == '\\')
			put(&j, "\\");        /* JSON escape */
		tf_bytes_append(&j, spell.p, spell.len);
		tf_bytes_append(&j, num, (size_t)snprintf(num, sizeof(num), "\":%zu", i));
	}
	for (i = 0; i < sizeof(merges) / sizeof(*merges); i++) {
		const char *sp = strchr(merges[i], ' ');

		put(&j, ",\"");
		tf_bytes_append(&j, merges[i], (size_t)(sp - merges[i]));
		put(&j, sp + 1);
		tf_bytes_append(&j, num, (size_t)snprintf(num, sizeof(num), "\":%zu", n++));
	}
	put(&j, "},\"merges\":[");
	for (i = 0; i < sizeof(merges) / sizeof(*merges); i++) {
		put(&j, i ? ",\"" : "\"");
		put(&j, merges[i]);
		put(&j, "\"");
	}
	put(&j, "]}}");
	if (tf_tok_load_json(j.p, j.len, "fuzz-fixed.json", &tok))
		abort();
	tf_bytes_free(&j);
	tf_bytes_free(&spell);
	return tok;
}

static void fuzz_encoder(const char *s, size_t len)
{
	tf_tokenizer *tok = fixed_tokenizer();
	tf_tokens ids = { 0 };
	tf_bytes back = { 0 };
	int rc = tf_tok_encode(tok, s, len, 0, &ids);

	if (!tf_utf8_valid(s, len, NULL)) {
		if (rc != TF_ERR_INVALID)
			abort();
	} else if (rc || tf_tok_decode(tok, ids.ids, ids.n, 0, &back) ||
		   back.len != len || (len && memcmp(back.p, s, len))) {
		abort();
	}
	tf_tokens_free(&ids);
	tf_bytes_free(&back);
}

static void fuzz_detok(const uint8_t *p, size_t len)
{
	tf_tokenizer *tok = fixed_tokenizer();
	tf_tokens ids = { 0 };
	tf_bytes all = { 0 }, want = { 0 };
	tf_detok d;
	const char *t;
	size_t i, n;

	/* ids 0..263 and 300..301 exist; others are refused, and skipped */
	for (i = 0; i + 1 < len; i += 2) {
		int32_t id = (p[i] | p[i + 1] << 8) % 302;

		if (tf_tok_piece(tok, id, &n))
			tf_tokens_push(&ids, id);
		else if (tf_tok_decode(tok, &id, 1, 0, &all) != TF_ERR_RANGE)
			abort();
	}
	tf_detok_init(&d, tok, 0);
	for (i = 0; i < ids.n; i++) {
		if (tf_detok_push(&d, ids.ids[i], &t, &n) || !tf_utf8_valid(t, n, NULL))
			abort();
		tf_bytes_append(&all, t, n);
	}
	if (tf_detok_flush(&d, &t, &n) || tf_tok_decode(tok, ids.ids, ids.n, 0, &want))
		abort();
	tf_bytes_append(&all, t, n);
	if (all.len != want.len || (want.len && memcmp(all.p, want.p, want.len)))
		abort();
	tf_detok_free(&d);
	tf_tokens_free(&ids);
	tf_bytes_free(&all);
	tf_bytes_free(&want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] & 1)
		fuzz_encoder((const char *)data + 1, size - 1);
	else
		fuzz_detok(data + 1, size - 1);
	return 0;
}
