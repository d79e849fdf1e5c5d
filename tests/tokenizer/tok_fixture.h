/* tok_fixture.h - loading the shared test tokenizers for the tokenizer tests. */
#ifndef TF_TOK_FIXTURE_H
#define TF_TOK_FIXTURE_H

#include "tokenizer/tokenizer.h"

#define TOK_DATA TF_TESTDATA "/tokenizers"

/* Reads a whole file into a NUL-terminated buffer; NULL on failure. */
char *tok_fixture_read(const char *path, size_t *len);
/* Loads qwen3, deepseek_v3 (their tokenizer.json) or gpt2 (a tokenizer.json
 * built in memory from encoder.json + vocab.bpe, as HF's gpt2 one is). */
tf_tokenizer *tok_fixture_load(const char *name);

#endif
