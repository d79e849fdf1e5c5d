/*
 * unicode.h - the UTF-8, byte-level and NFC pieces the tokenizer stands on
 * (tf/text.h holds the byte strings, tf/utf8.h the checks faces use too).
 */
#ifndef TF_UNICODE_H
#define TF_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/utf8.h"

/*
 * Reads one character at s[0..len).  Returns its length (1..4) and sets *cp;
 * 0 when s is a valid but unfinished prefix (more bytes may complete it);
 * -n when the first n bytes are an invalid "maximal subpart" that a lossy
 * decoder replaces with one U+FFFD (the rule Rust's from_utf8_lossy follows).
 */
int tf_utf8_next(const uint8_t *s, size_t len, uint32_t *cp);
/* Writes cp as UTF-8 into out; returns its length. */
int tf_utf8_put(uint32_t cp, char out[4]);
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
