/* checkpoint_writer.c - a checkpoint folder's safetensors (checkpoint_writer.h):
 * st_writer.h, with the one-file-or-shards choice made from the data's size. */
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint_writer.h"
#include "st_writer.h"
#include "tf/checkpoint.h"
#include "tf/diag.h"

struct tf_checkpoint_writer {
	tf_st_writer *st;
	uint64_t bytes;                 /* tensor data recorded so far */
};

int tf_checkpoint_writer_init(tf_checkpoint_writer **out)
{
	tf_checkpoint_writer *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w)
		return tf_diag_set(TF_ERR_NOMEM, "checkpoint writer: out of memory");
	rc = tf_st_writer_init(&w->st);
	if (rc) {
		free(w);
		return rc;
	}
	*out = w;
	return TF_OK;
}

void tf_checkpoint_writer_free(tf_checkpoint_writer *w)
{
	if (!w)
		return;
	tf_st_writer_free(w->st);
	free(w);
}

int tf_checkpoint_writer_add(tf_checkpoint_writer *w, const char *name, tf_dtype dt, int ndim,
			     const int64_t *shape, const void *data)
{
	uint64_t n = tf_dtype_size(dt);
	for (int i = 0; i < ndim; i++)
		n *= (uint64_t)shape[i];
	int rc = tf_st_writer_add(w->st, name, dt, ndim, shape, data);
	if (!rc)
		w->bytes += n;
	return rc;
}

int tf_checkpoint_writer_meta(tf_checkpoint_writer *w, const char *key, const char *value)
{
	return tf_st_writer_meta(w->st, key, value);
}

int tf_checkpoint_writer_save(tf_checkpoint_writer *w, const char *dir, uint64_t shard_bytes)
{
	char path[4096];

	if (w->bytes > shard_bytes)
		return tf_st_writer_save_shards(w->st, dir, shard_bytes);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	return tf_st_writer_save(w->st, path);
}

int tf_checkpoint_writer_save_file(tf_checkpoint_writer *w, const char *path)
{
	return tf_st_writer_save(w->st, path);
}
