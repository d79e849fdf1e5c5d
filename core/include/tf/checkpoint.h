/*
 * tf/checkpoint.h - the library API for tools that read checkpoint folders
 * (tfquant, tfsynth): the model and its tensors, the quantizer and drawer
 * of a quant plugin.  Writing one is the tools' own library
 * (tools/lib/checkpoint_writer.h).
 *
 * A converter reads one folder and writes another:
 *
 *     tf_checkpoint *src;
 *     if (tf_checkpoint_open("ling-mini", &src) != TF_OK)
 *         die(tf_checkpoint_errmsg());
 *     const tf_model_config *cfg = tf_checkpoint_model(src);
 *
 *     tf_quantizer *q;
 *     tf_quantizer_open("exl3", &q);           // found on the plugin path
 *
 *     tf_checkpoint_writer *w;
 *     tf_checkpoint_writer_init(&w);
 *     for (size_t i = 0; i < tf_checkpoint_count(src); i++) {
 *         const tf_tensor *t = tf_checkpoint_at(src, i);
 *         if (tf_wclass_of(cfg, t->name) == TF_WCLASS_ROUTED)
 *             ...   // tf_quantizer_fn(q) with a tf_tensor_sink (tf/quant.h)
 *                   // whose add() calls tf_checkpoint_writer_add
 *         else
 *             tf_checkpoint_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
 *     }
 *     tf_checkpoint_writer_save(w, "ling-mini-q", 8ull << 30);
 *     tf_checkpoint_writer_free(w);
 *     tf_quantizer_close(q);
 *     tf_checkpoint_close(src);
 *
 * Errors: every call returns a tf_status (tf/error.h); the detail, naming
 * the file, key or tensor, is tf_checkpoint_errmsg() on the same thread.
 */
#ifndef TF_CHECKPOINT_H
#define TF_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "tf/dtype.h"
#include "tf/error.h"
#include "tf/model.h"
#include "tf/quant.h"
#include "tf/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The safetensors "__metadata__" key, "true", of a file whose tensors'
 * bytes are holes: a header-only checkpoint, for planning only. */
#define TF_ST_HEADER_ONLY "header_only"

/* The detail of this thread's last failure ("" when none). */
const char *tf_checkpoint_errmsg(void);

/* --- reading a folder --- */

typedef struct tf_checkpoint tf_checkpoint;

/*
 * dir/config.json and the folder's safetensors: model.safetensors, or the
 * shards model.safetensors.index.json names.  Every tensor stays mapped,
 * read-only, until tf_checkpoint_close.
 */
int tf_checkpoint_open(const char *dir, tf_checkpoint **out);
void tf_checkpoint_close(tf_checkpoint *c);

/* config.json, parsed; lives as long as c. */
const tf_model_config *tf_checkpoint_model(const tf_checkpoint *c);

/* dir/config.json alone, for a folder whose tensors are not written yet;
 * tf_checkpoint_config_free releases it. */
int tf_checkpoint_config(const char *dir, tf_model_config **out);
void tf_checkpoint_config_free(tf_model_config *cfg);

/* Every tensor, in name order; views live as long as c. */
size_t tf_checkpoint_count(const tf_checkpoint *c);
const tf_tensor *tf_checkpoint_at(const tf_checkpoint *c, size_t i);

/* Copy the named tensor's view to *out.  TF_ERR_NOT_FOUND when absent,
 * without a message: callers probe for optional tensors (a bias). */
int tf_checkpoint_get(const tf_checkpoint *c, const char *name, tf_tensor *out);

/* --- what a tensor is for --- */

typedef enum tf_wclass {
	TF_WCLASS_ROUTED,
	TF_WCLASS_SHARED,
	TF_WCLASS_KDA,
	TF_WCLASS_MLA,
	TF_WCLASS_DENSE,
	TF_WCLASS_EMBED,
	TF_WCLASS_HEAD,
	TF_WCLASS_MTP,
	TF_WCLASS_ROUTER,
	TF_WCLASS_NORM,
	TF_WCLASS_OTHER,                /* a name none of the above covers */
	TF_WCLASS_COUNT
} tf_wclass;

/* The class of a checkpoint tensor, from its name and the layer schedule
 * (any quant format's names: <module>.weight, .trellis, .qweight ...). */
tf_wclass tf_wclass_of(const tf_model_config *cfg, const char *tensor_name);
/* "routed experts", "KDA attention", ... */
const char *tf_wclass_name(tf_wclass c);

/* --- a quant plugin's quantizer --- */

typedef struct tf_quantizer tf_quantizer;

/*
 * The usable quant plugin named `format` ("exl3", "example-int8") on the
 * plugin path ($TF_PLUGIN_PATH, then the build's plugin folder), kept
 * loaded until tf_quantizer_close.  TF_ERR_NOT_FOUND when there is none of
 * that name, TF_ERR_UNSUPPORTED when it has no quantize slot.
 */
int tf_quantizer_open(const char *format, tf_quantizer **out);
void tf_quantizer_close(tf_quantizer *q);

/* Its quantize slot (tf/quant.h), never NULL: call it with the caller's
 * own tf_host, whose error service records the quantizer's failures. */
tf_quantize_fn tf_quantizer_fn(const tf_quantizer *q);

/* Its draw slot (tf/quant.h), or NULL when the plugin has none; called
 * the same way. */
tf_quant_draw_fn tf_quantizer_draw_fn(const tf_quantizer *q);

#ifdef __cplusplus
}
#endif
#endif /* TF_CHECKPOINT_H */
