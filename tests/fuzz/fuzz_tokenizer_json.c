/*
 * fuzz_tokenizer_json.c - the tokenizer.json loader on hostile bytes.
 *
 * The bytes are a tokenizer.json.  Loading may fail, with a message; whatever
 * loads must encode a sample to ids inside its vocabulary and decode them to
 * valid UTF-8.
 */
#include <stdint.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"
#include "unicode/unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sample[] = "Hello, world! 123 caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
			     "<|endoftext|> \xf0\x9f\x98\x80\n\tx";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tf_tokenizer *tok;
	tf_tokens ids = { 0 };
	tf_bytes text = { 0 };

	if (tf_tok_load_json((const char *)data, size, "fuzz/tokenizer.json", &tok))
		return 0;
	if (!tf_tok_encode(tok, sample, sizeof(sample) - 1, TF_TOK_ADD_SPECIAL, &ids)) {
		for (size_t i = 0; i < ids.n; i++)
			if (ids.ids[i] < 0 || ids.ids[i] >= tf_tok_vocab_size(tok))
				abort();
		if (tf_tok_decode(tok, ids.ids, ids.n, 0, &text) ||
		    !tf_utf8_valid(text.p, text.len, NULL))
			abort();
	}
	tf_tokens_free(&ids);
	tf_bytes_free(&text);
	tf_tok_free(tok);
	return 0;
}
