/* fuzz_grammar.c - libFuzzer target: bytes as a grammar and a text to feed
 * it.  Before the first NUL the grammar: GBNF, or (first byte '{') a JSON
 * Schema made into GBNF; after it the text, fed byte by byte.  Must never
 * crash, hang or leak; a refusal is fine. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tf/grammar.h"
#include "tf/value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *nul = memchr(p, 0, size);
	size_t n = nul ? (size_t)(nul - p) : size;
	const char *text = nul ? nul + 1 : "";
	size_t text_len = nul ? size - n - 1 : 0;
	char *src = malloc(n + 1), *gbnf = NULL;
	tf_grammar *g = NULL;
	tf_grammar_state *st = NULL, *copy = NULL;
	tf_val *schema = NULL;

	if (!src)
		return 0;
	memcpy(src, p, n);
	src[n] = 0;
	if (n && src[0] == '{' && tf_val_parse_json(src, n, &schema) == 0 &&
	    tf_grammar_schema_gbnf(schema, &gbnf) == 0) {
		free(src);
		src = gbnf;
		n = strlen(src);
	}
	if (tf_grammar_compile(src, n, NULL, 0, NULL, 0, &g) == 0 &&
	    tf_grammar_state_new(g, &st) == 0) {
		for (size_t i = 0; i < text_len; i++)
			if (tf_grammar_accept_bytes(st, text + i, 1) != 0)
				break;
		(void)tf_grammar_complete(st);
		if (tf_grammar_state_clone(st, &copy) == 0)
			(void)tf_grammar_accept_bytes(copy, "{\"", 2);
	}
	tf_grammar_state_free(copy);
	tf_grammar_state_free(st);
	tf_grammar_free(g);
	tf_val_unref(schema);
	free(src);
	return 0;
}
