/*
 * tf/detok.h - streaming detokenizer: turns generated ids into text as they
 * come, never printing half a UTF-8 character.
 *
 * One token may end inside a character (byte-level BPE splits multi-byte
 * characters) and the next completes it, so the unfinished tail waits for
 * the next push.  The concatenated output equals tf_tok_decode of all ids:
 * an invalid sequence becomes U+FFFD the moment it is known to be invalid.
 */
#ifndef TF_DETOK_H
#define TF_DETOK_H

#include "tf/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Its fields are the detokenizer's own. */
typedef struct tf_detok {
	const tf_tokenizer *tok;
	unsigned flags;         /* TF_TOK_SKIP_SPECIAL */
	char tail[4];           /* an unfinished character */
	size_t n_tail;
	tf_bytes in;            /* tail + the new token's bytes */
	tf_bytes out;           /* what the last call returned */
} tf_detok;

/* tok must outlive d; flags: TF_TOK_SKIP_SPECIAL or 0. */
void tf_detok_init(tf_detok *d, const tf_tokenizer *tok, unsigned flags);
void tf_detok_free(tf_detok *d);
/* Feeds one id; *text, *len: the characters it completed (maybe none),
 * valid until the next call.  An unknown id is TF_ERR_RANGE. */
int tf_detok_push(tf_detok *d, int32_t id, const char **text, size_t *len);
/* End of the stream: an unfinished character comes out as U+FFFD. */
int tf_detok_flush(tf_detok *d, const char **text, size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* TF_DETOK_H */
