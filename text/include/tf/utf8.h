/*
 * tf/utf8.h - UTF-8 checks for text a user or a model gives us.
 */
#ifndef TF_UTF8_H
#define TF_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include "tf/text.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_UTF8_REPLACEMENT "\xEF\xBF\xBD"   /* U+FFFD */

/* True when s[0..len) is valid UTF-8; else *bad is the offset of the fault. */
bool tf_utf8_valid(const char *s, size_t len, size_t *bad);
/* Appends s with every invalid subpart replaced by U+FFFD. */
int tf_utf8_lossy(const char *s, size_t len, tf_bytes *out);

#ifdef __cplusplus
}
#endif
#endif /* TF_UTF8_H */
