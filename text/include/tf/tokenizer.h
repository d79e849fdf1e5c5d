/*
 * tf/tokenizer.h - byte-level BPE tokenizer loaded from a Hugging Face
 * tokenizer.json.
 *
 * Encoding follows the HF pipeline exactly:
 *   1. added tokens (incl. special) are matched leftmost-longest on the raw
 *      text; those marked "normalized" are matched after step 2;
 *   2. the normalizer (none or NFC) runs on the text between them;
 *   3. the pre-tokenizer (Split/ByteLevel/Digits) cuts pieces;
 *   4. BPE merges within each piece, lowest merge rank first.
 * Decoding concatenates each token's bytes (the ByteLevel decoder) and
 * replaces invalid UTF-8 with U+FFFD, as HF does.
 *
 * A loaded tokenizer is read-only: encode and decode may run on many threads.
 * A face finds a model's tokenizer.json in its checkpoint folder ([model]
 * path, tf/conf.h); tf/detok.h turns generated ids into text as they come.
 */
#ifndef TF_TOKENIZER_H
#define TF_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/error.h"
#include "tf/text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_tokenizer tf_tokenizer;

/* A growable id list; zero-initialise, then tf_tokens_free(). */
typedef struct tf_tokens {
	int32_t *ids;
	size_t n, cap;
} tf_tokens;

/* TF_ERR_NOMEM (with a diag) when the list cannot grow; t is unchanged. */
int tf_tokens_push(tf_tokens *t, int32_t id);
void tf_tokens_free(tf_tokens *t);

/* Encode flags. */
enum {
	TF_TOK_ADD_SPECIAL = 1 << 0,   /* the post-processor's BOS/EOS template */
	TF_TOK_SPECIAL_AS_TEXT = 1 << 1, /* special tokens in the text are plain text
					  * (HF split_special_tokens): for user input */
};
/* Decode flags. */
enum {
	TF_TOK_SKIP_SPECIAL = 1 << 0,
};

/* Loads a tokenizer.json; errors (tf_diag) name the file and key. */
int tf_tok_load(const char *path, tf_tokenizer **out);
/* The same from JSON text in memory; `name` labels errors. */
int tf_tok_load_json(const char *json, size_t len, const char *name, tf_tokenizer **out);
void tf_tok_free(tf_tokenizer *tok);

/*
 * Appends the ids of text[0..len) to out.  The text must be valid UTF-8
 * (TF_ERR_INVALID names the byte offset otherwise); it may hold U+0000.
 */
int tf_tok_encode(const tf_tokenizer *tok, const char *text, size_t len,
		  unsigned flags, tf_tokens *out);
/* Appends the text of ids to out (UTF-8, invalid bytes as U+FFFD).  An id
 * outside the vocabulary is TF_ERR_RANGE. */
int tf_tok_decode(const tf_tokenizer *tok, const int32_t *ids, size_t n,
		  unsigned flags, tf_bytes *out);

/* The raw bytes of one token (may be part of a UTF-8 character), or NULL. */
const char *tf_tok_piece(const tf_tokenizer *tok, int32_t id, size_t *len);
/* One past the highest id (vocabulary plus added tokens). */
int tf_tok_vocab_size(const tf_tokenizer *tok);
/* The id of an added token or vocabulary entry spelled `text`, or -1. */
int32_t tf_tok_find(const tf_tokenizer *tok, const char *text);
bool tf_tok_is_special(const tf_tokenizer *tok, int32_t id);

#ifdef __cplusplus
}
#endif
#endif /* TF_TOKENIZER_H */
