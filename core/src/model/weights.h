/*
 * weights.h - every tensor of a checkpoint folder, by name.
 *
 * A folder holds either model.safetensors, or model.safetensors.index.json
 * whose "weight_map" maps each tensor name to a shard file in the same
 * folder.  The index is authoritative: every listed tensor must be in the
 * shard it names (else TF_ERR_FORMAT naming both), shard names must not
 * leave the folder, and tensors a shard holds but the index does not list
 * are ignored, as the reference loaders do.  `dir` may also name a single
 * .safetensors file.
 *
 * Every shard is validated by tf_st_open() and stays mapped until
 * tf_weights_close(); the tensors' pointers live as long.
 */
#ifndef TF_WEIGHTS_H
#define TF_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "tf/tensor.h"

typedef struct tf_weights tf_weights;

/* Failures name the folder, the shard or the tensor in the diag. */
int tf_weights_open(const char *dir, tf_weights **out);
void tf_weights_close(tf_weights *w);

/* Copy the named tensor's view to *out.  TF_ERR_NOT_FOUND when absent,
 * without recording a diag: callers probe for optional tensors. */
int tf_weights_get(const tf_weights *w, const char *name, tf_tensor *out);

/* Drop this process's copies of the named tensor's pages (tf_st_release):
 * for a tensor a plugin has copied and will not read again.  Its view stays
 * valid.  Nothing happens for an unknown name. */
void tf_weights_release(const tf_weights *w, const char *name);

/* All tensors, in name order. */
size_t tf_weights_count(const tf_weights *w);

/* Whether a file of w was written header-only (st_writer.h: its tensors'
 * bytes are holes): its sizes can be planned, its layers not opened. */
bool tf_weights_header_only(const tf_weights *w);
const tf_tensor *tf_weights_at(const tf_weights *w, size_t i);

#endif /* TF_WEIGHTS_H */
