/*
 * unicode.h - the UTF-8, byte-level and NFC pieces the tokenizer stands on.
 *
 * Text is UTF-8 with explicit lengths everywhere: prompts may hold U+0000.
 */
#ifndef TF_UNICODE_H
#define TF_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte string; zero-initialise, then tf_bytes_free(). */
typedef struct tf_bytes {
	char *p;
	size_t len, cap;
} tf_bytes;

/* Room for `extra` more bytes; TF_ERR_NOMEM (no diag) leaves b unchanged. */
int tf_bytes_reserve(tf_bytes *b, size_t extra);
/* Appends n bytes and no NUL terminator: b->len counts them. */
int tf_bytes_append(tf_bytes *b, const void *p, size_t n);
void tf_bytes_free(tf_bytes *b);

#define TF_UTF8_REPLACEMENT "\xEF\xBF\xBD"   /* U+FFFD */

/*
 * Reads one character at s[0..len).  Returns its length (1..4) and sets *cp;
 * 0 when s is a valid but unfinished prefix (more bytes may complete it);
 * -n when the first n bytes are an invalid "maximal subpart" that a lossy
 * decoder replaces with one U+FFFD (the rule Rust's from_utf8_lossy follows).
 */
int tf_utf8_next(const uint8_t *s, size_t len, uint32_t *cp);
/* Writes cp as UTF-8 into out; returns its length. */
int tf_utf8_put(uint32_t cp, char out[4]);
/* True when s[0..len) is valid UTF-8; else *bad is the offset of the fault. */
bool tf_utf8_valid(const char *s, size_t len, size_t *bad);
/* Appends s with every invalid subpart replaced by U+FFFD. */
int tf_utf8_lossy(const char *s, size_t len, tf_bytes *out);

/* Unicode White_Space. */
bool tf_unicode_is_space(uint32_t cp);

/*
 * GPT-2's byte-level alphabet: every byte maps to one printable code point
 * (printable ASCII and Latin-1 to themselves, the rest to U+0100 upwards), so
 * any byte string becomes a vocabulary key without spaces or controls.
 */
extern const uint16_t tf_bytelevel_cp[256];
/* The byte behind a byte-level code point, or -1 when cp is not one. */
int tf_bytelevel_byte(uint32_t cp);
/* Appends the byte-level spelling of s[0..len) (each byte -> 1 or 2 bytes). */
int tf_bytelevel_encode(const char *s, size_t len, tf_bytes *out);

/* Appends NFC(s) for valid UTF-8 s; text that is already NFC is copied. */
int tf_nfc(const char *s, size_t len, tf_bytes *out);

#endif /* TF_UNICODE_H */
