/*
 * fuzz_tokenizer.c - the tokenizer.json loader and the encoder on hostile
 * bytes.  The first byte picks the target:
 *
 *   0  the rest is a tokenizer.json: loading may fail, but whatever loads
 *      must encode a sample to ids inside its vocabulary and decode them;
 *   1  the rest is text for a fixed byte-level tokenizer: invalid UTF-8 is
 *      refused with TF_ERR_INVALID, valid text round-trips exactly;
 *   2  the rest is token ids (two bytes each) for the same tokenizer: the
 *      streaming detokenizer emits only whole characters and, in sum, what
 *      tf_tok_decode gives.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/detok.h"
#include "tokenizer.h"
#include "unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sample[] = "Hello, world! 123 caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
			     "<|endoftext|> \xf0\x9f\x98\x80\n\tx";

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

static void fuzz_loader(const char *json, size_t len)
{
	tf_tokenizer *tok;
	tf_tokens ids = { 0 };
	tf_bytes text = { 0 };
	size_t i;

	if (tf_tok_load_json(json, len, "fuzz/tokenizer.json", &tok))
		return;
	if (!tf_tok_encode(tok, sample, sizeof(sample) - 1, TF_TOK_ADD_SPECIAL, &ids)) {
		for (i = 0; i < ids.n; i++)
			if (ids.ids[i] < 0 || ids.ids[i] >= tf_tok_vocab_size(tok))
				abort();
		if (tf_tok_decode(tok, ids.ids, ids.n, 0, &text) ||
		    !tf_utf8_valid(text.p, text.len, NULL))
			abort();
	}
	tf_tokens_free(&ids);
	tf_bytes_free(&text);
	tf_tok_free(tok);
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
	if (data[0] == 0)
		fuzz_loader((const char *)data + 1, size - 1);
	else if (data[0] == 1)
		fuzz_encoder((const char *)data + 1, size - 1);
	else if (data[0] == 2)
		fuzz_detok(data + 1, size - 1);
	return 0;
}
