/*
 * tokenizer.h - the tokenizer inside the core (tf/tokenizer.h is its API):
 * the bound on the ids a file may hold.
 */
#ifndef TF_TOKENIZER_INT_H
#define TF_TOKENIZER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "tf/tokenizer.h"

/* Ids a file may use are below this: far above any real vocabulary, and
 * small enough that a hostile file cannot make us allocate gigabytes. */
#define TF_TOK_MAX_ID (1 << 24)

/* True when v is a whole number usable as a token id. */
static inline bool tf_tok_id_ok(double v)
{
	return v >= 0 && v < TF_TOK_MAX_ID && v == (double)(int32_t)v;
}

#endif /* TF_TOKENIZER_INT_H */
