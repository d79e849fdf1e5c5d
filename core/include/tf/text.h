/*
 * tf/text.h - byte strings and text files, as the core and its faces pass
 * text around (UTF-8 checks: tf/utf8.h).
 *
 * Text is UTF-8 with explicit lengths everywhere: prompts may hold U+0000.
 * Failures name the path in the diag (tf/diag.h).
 */
#ifndef TF_TEXT_H
#define TF_TEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

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

/* A regular file into a new NUL-terminated buffer (free()); *len excludes
 * the NUL: a small file the model names (config.json, an index) or one a
 * user points at.  Files over `max` bytes are refused as TF_ERR_RANGE, so a
 * hostile path (a device, a huge file) cannot exhaust memory. */
int tf_text_read(const char *path, size_t max, char **out, size_t *len);

/* Append everything `path` holds to *out, read as a stream so that a pipe
 * or /dev/stdin will do (a prompt, a tokenizer, a corpus); no size limit.
 * TF_ERR_IO when it cannot be opened or read, TF_ERR_NOMEM; *out keeps what
 * was read either way. */
int tf_text_read_stream(const char *path, tf_bytes *out);

#ifdef __cplusplus
}
#endif
#endif /* TF_TEXT_H */
