/*
 * pretok.h - the pre-tokenizer: splits normalized text into the pieces that
 * BPE merges within, following a tokenizer.json "pre_tokenizer" object.
 *
 * Supported: Sequence, Split (a Regex run by PCRE2 with UTF+UCP, or a String;
 * every split behaviour and invert), ByteLevel (add_prefix_space, use_regex)
 * and Digits.  ByteLevel must come last: what follows it would see the
 * byte-level alphabet, which we never materialise.
 */
#ifndef TF_PRETOK_H
#define TF_PRETOK_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* The regex of ByteLevel(use_regex=true), GPT-2's. */
#define TF_PRETOK_GPT2_REGEX \
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

typedef struct tf_pretok tf_pretok;

/* Builds from spec; errors name `where` (file and key) in the diag. */
int tf_pretok_init(const cJSON *spec, const char *where, tf_pretok **out);
void tf_pretok_free(tf_pretok *p);
/* True when the chain holds a ByteLevel stage (it is byte-level BPE). */
bool tf_pretok_bytelevel(const tf_pretok *p);

/* Called for every non-empty piece, in text order; non-zero stops the run. */
typedef int (*tf_pretok_emit)(void *ctx, const char *piece, size_t len);

/*
 * Splits valid UTF-8 text[0..len).  Thread-safe: all scratch is per call.
 * A regex that exceeds PCRE2's match limits fails with TF_ERR_RANGE rather
 * than running for ever.
 */
int tf_pretok_split(const tf_pretok *p, const char *text, size_t len,
		    tf_pretok_emit emit, void *ctx);

#endif /* TF_PRETOK_H */
