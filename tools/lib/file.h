/*
 * file.h - whole small files for the checkpoint tools (tfquant, tfsynth):
 * config.json, tokenizer.json and the files copied beside the tensors.
 * Failures go to fail.h, naming the path.
 */
#ifndef TFQ_FILE_H
#define TFQ_FILE_H

#include <stddef.h>

/* A regular file of at most `max` bytes into a new NUL-terminated buffer
 * (free()); *len excludes the NUL.  TF_ERR_NOT_FOUND when it is absent. */
int tfq_file_read(const char *path, size_t max, char **out, size_t *len);

/* Create or replace path with len bytes of data. */
int tfq_file_write(const char *path, const void *data, size_t len);

/* Copy a regular file of at most `max` bytes. */
int tfq_file_copy(const char *from, const char *to, size_t max);

#endif /* TFQ_FILE_H */
