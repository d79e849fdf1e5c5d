/*
 * safetensors.h - one safetensors file, mapped read-only, header validated.
 *
 * Layout (see spec/testdata.md §5): an 8-byte little-endian header length N,
 * N bytes of JSON (may be space-padded), then the data section.  The JSON
 * maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end)}
 * with offsets relative to the data section; "__metadata__" holds
 * string-to-string pairs.
 *
 * tf_st_open() checks everything a reader later relies on, so a tensor
 * obtained from an open file is safe to read in full:
 *   - the length prefix is present and the header lies inside the file;
 *   - the header is at most TF_ST_MAX_HEADER bytes of UTF-8 JSON object;
 *   - every dtype is known (F8 and other types we cannot compute with are
 *     TF_ERR_UNSUPPORTED), every shape has at most TF_MAX_DIMS
 *     non-negative dims whose byte size does not overflow;
 *   - end - begin == numel * dtype size, begin <= end <= data section size;
 *   - no two tensors share a name or overlap.
 * Gaps between tensors are allowed.  Any failure returns a tf_status and
 * records a tf_diag message naming the file and, where there is one, the
 * tensor.
 *
 * Tensors are listed in name order.  Their `name` and `file` strings and
 * `data` live until tf_st_close().
 */
#ifndef TF_SAFETENSORS_H
#define TF_SAFETENSORS_H

#include <stddef.h>

#include "tf/checkpoint.h"
#include "tf/tensor.h"

/* Header size limit; the reference implementation uses the same 100 MB. */
#define TF_ST_MAX_HEADER 100000000ull

typedef struct tf_st_file tf_st_file;

/* Map and validate `path`; release with tf_st_close. */
int tf_st_open(const char *path, tf_st_file **out);
/* Parse a file image already in memory (tests, fuzzing).  buf is not
 * copied and must outlive the handle; `name` is used in messages. */
int tf_st_open_buffer(const void *buf, size_t len, const char *name,
		      tf_st_file **out);
void tf_st_close(tf_st_file *f);

size_t tf_st_count(const tf_st_file *f);
const tf_tensor *tf_st_at(const tf_st_file *f, size_t i);
/* NULL when absent. */
const tf_tensor *tf_st_find(const tf_st_file *f, const char *name);

/* A "__metadata__" value, NULL when absent. */
const char *tf_st_meta(const tf_st_file *f, const char *key);
/* The path (or buffer name) given at open. */
const char *tf_st_path(const tf_st_file *f);

/* Drop this process's copies of the whole pages inside `bytes` bytes at
 * `data`, when f maps them from its file: the bytes stay readable, and a
 * page read again comes back from the page cache (or the file).  For
 * tensors whose reader keeps its own copy.  Returns 1 when the range lies
 * in f's mapping, 0 otherwise (a buffer image, another file's range:
 * nothing is done). */
int tf_st_release(const tf_st_file *f, const void *data, size_t bytes);

#endif /* TF_SAFETENSORS_H */
