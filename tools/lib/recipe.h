/*
 * recipe.h - which tensors tfquant quantizes, and to how many bits.
 *
 * Bits are given per weight class (memplan.h's classes) on the command
 * line ("routed=3,shared=5") or in an INI's [bits] section; the defaults
 * are the Ling-3 recipe.  A tensor is quantized when it is a 2-D linear
 * weight of a budgeted class; routers, norms, embeddings, kv_b_proj,
 * convolutions and projections with fewer than TFQ_MIN_OUT outputs keep
 * their stored form (fp32 narrowed to fp16).
 */
#ifndef TFQ_RECIPE_H
#define TFQ_RECIPE_H

#include "tf/checkpoint.h"      /* tf_wclass, tf_wclass_of */
#include "tf/tensor.h"

/* Fewer outputs than this stay unquantized: padding a per-head gate of 2
 * outputs to 128 would store more than it saves. */
#define TFQ_MIN_OUT 32

typedef struct tfq_recipe {
	int bits[TF_WCLASS_COUNT];      /* 0: class not budgeted */
} tfq_recipe;

/* routed 3, shared 5, KDA 4, dense 4, MLA 6, head 6, MTP 4. */
void tfq_recipe_default(tfq_recipe *r);

/* "class=K[,class=K...]" with class one of routed, shared, kda, mla,
 * dense, head, mtp; K 1..8 (head also 16 = unquantized).  TF_ERR_INVALID
 * naming the item on error. */
int tfq_recipe_parse(tfq_recipe *r, const char *spec, const char *origin);

/* The [bits] section of an INI file, same keys. */
int tfq_recipe_load_ini(tfq_recipe *r, const char *path);

/* Bits for this tensor, or 0 to keep it as stored. */
int tfq_recipe_bits(const tfq_recipe *r, const tf_model_config *cfg,
		    const tf_tensor *t);

#endif /* TFQ_RECIPE_H */
