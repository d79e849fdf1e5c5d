/*
 * checkpoint_writer.h - write a checkpoint folder's safetensors (the tools'
 * library: tfquant, tfsynth): one file, or shards and their index.  Errors
 * as tf/checkpoint.h's.
 */
#ifndef TF_CHECKPOINT_WRITER_H
#define TF_CHECKPOINT_WRITER_H

#include <stdint.h>

#include "tf/dtype.h"

typedef struct tf_checkpoint_writer tf_checkpoint_writer;

/* An empty writer; tf_checkpoint_writer_free releases it, saved or not. */
int tf_checkpoint_writer_init(tf_checkpoint_writer **out);
void tf_checkpoint_writer_free(tf_checkpoint_writer *w);

/* Record a tensor: name and shape are copied, data is not and must stay
 * valid until the save returns.  NULL data leaves the tensor's bytes a
 * hole in a sparse file: a header-only checkpoint, whose shapes and sizes
 * can be planned (tfrun --check) but not run.  Duplicate names are
 * refused at save. */
int tf_checkpoint_writer_add(tf_checkpoint_writer *w, const char *name, tf_dtype dt, int ndim,
			     const int64_t *shape, const void *data);

/* A "__metadata__" string pair (copied); a repeated key replaces it. */
int tf_checkpoint_writer_meta(tf_checkpoint_writer *w, const char *key, const char *value);

/*
 * Write every tensor into the folder dir (which must exist): one
 * model.safetensors when their data fits in shard_bytes, else shards
 * model-0000i-of-0000N.safetensors and model.safetensors.index.json.  A
 * failed save leaves no half-written file.
 */
int tf_checkpoint_writer_save(tf_checkpoint_writer *w, const char *dir, uint64_t shard_bytes);

/* Every tensor into the one file `path`, whatever its size: for a tool
 * that cuts its own shards to bound what it holds in memory. */
int tf_checkpoint_writer_save_file(tf_checkpoint_writer *w, const char *path);

#endif /* TF_CHECKPOINT_WRITER_H */
