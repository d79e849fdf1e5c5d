/*
 * textfile.h - read a text file whole: a small one the model names
 * (config.json, an index), or whatever a user points at (a prompt, a
 * tokenizer, a corpus).  Failures name the path in the diag.
 */
#ifndef TF_TEXTFILE_H
#define TF_TEXTFILE_H

#include <stddef.h>

#include "unicode.h"

/* A regular file into a new NUL-terminated buffer (free()); *len excludes
 * the NUL.  Files over `max` bytes are refused as TF_ERR_RANGE, so a
 * hostile path (a device, a huge file) cannot exhaust memory. */
int tf_text_read(const char *path, size_t max, char **out, size_t *len);

/* Append everything `path` holds to *out, read as a stream so that a pipe
 * or /dev/stdin will do; no size limit.  TF_ERR_IO when it cannot be
 * opened or read, TF_ERR_NOMEM; *out keeps what was read either way. */
int tf_text_read_stream(const char *path, tf_bytes *out);

#endif /* TF_TEXTFILE_H */
