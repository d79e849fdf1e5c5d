/*
 * textfile.h - read a small text file (config.json, an index) whole.
 *
 * The buffer is NUL-terminated for convenience; *len excludes the NUL.
 * Files over `max` bytes are refused as TF_ERR_RANGE, so a hostile path
 * (a device, a huge file) cannot exhaust memory.
 */
#ifndef TF_TEXTFILE_H
#define TF_TEXTFILE_H

#include <stddef.h>

int tf_text_read(const char *path, size_t max, char **out, size_t *len);

#endif /* TF_TEXTFILE_H */
