/*
 * st_writer.h - write safetensors files: one file, or shards plus an index.
 *
 * The writer only records what to write: tensor data stays owned by the
 * caller and must stay valid until the save call returns.  Saving writes
 * the header, then streams each tensor's bytes straight from the caller's
 * buffer, so a model is never held twice in memory.
 *
 * Tensors are laid out in the order the reference writer uses (larger
 * element size first, then by name), which keeps every tensor aligned to its
 * element size; the header is space-padded to a multiple of 8 bytes.  A save
 * writes "<path>.tmp" and renames it, so a failed save leaves no half file.
 *
 *     tf_st_writer *w;
 *     tf_st_writer_init(&w);
 *     tf_st_writer_add(w, "lm_head.weight", TF_DTYPE_BF16, 2, shape, data);
 *     tf_st_writer_save(w, "model.safetensors");
 *     tf_st_writer_free(w);
 */
#ifndef TF_ST_WRITER_H
#define TF_ST_WRITER_H

#include <stdint.h>

#include "tf/dtype.h"

typedef struct tf_st_writer tf_st_writer;

/* An empty writer; tf_st_writer_free releases it, saved or not. */
int tf_st_writer_init(tf_st_writer **out);
void tf_st_writer_free(tf_st_writer *w);

/* Record a tensor; name and shape are copied, data is not.  NULL data
 * leaves the tensor's bytes a hole: the file gets its full size but no
 * blocks there, and the metadata TF_ST_HEADER_ONLY (tf/checkpoint.h) = "true" (a
 * header-only checkpoint, for planning).  Duplicate names are refused at
 * save. */
int tf_st_writer_add(tf_st_writer *w, const char *name, tf_dtype dt, int ndim,
		     const int64_t *shape, const void *data);
/* A "__metadata__" string pair (copied); a repeated key replaces the value. */
int tf_st_writer_meta(tf_st_writer *w, const char *key, const char *value);

/* Everything into one file. */
int tf_st_writer_save(tf_st_writer *w, const char *path);
/* Into `dir` as model-00001-of-0000N.safetensors ... plus
 * model.safetensors.index.json, starting a new shard before a tensor
 * would take the current one past shard_bytes of data (a larger tensor gets
 * a shard of its own).  Every shard carries the metadata. */
int tf_st_writer_save_shards(tf_st_writer *w, const char *dir, uint64_t shard_bytes);

#endif /* TF_ST_WRITER_H */
