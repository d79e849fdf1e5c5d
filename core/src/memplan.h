/*
 * memplan.h - how much memory a model needs, before anything is allocated.
 *
 * Weights are counted from the safetensors headers, by class.  A tensor's
 * class follows from its name, whatever the quant format (EXL3
 * `<module>.trellis/.suh/.svh/.mul1/.mcg/.bias`, plain `<module>.weight`):
 *
 *   model.word_embeddings.* (or embed_tokens)   EMBED
 *   lm_head.*                                   HEAD
 *   model.norm.*, layers.N.{input,post_attention}_layernorm.*   NORM
 *   model.layers.N.* with N >= num_hidden_layers                MTP
 *   layers.N.attention.*          KDA or MLA, by the layer schedule
 *   layers.N.mlp.experts.*        ROUTED
 *   layers.N.mlp.shared_experts.* SHARED
 *   layers.N.mlp.gate.*           ROUTER
 *   layers.N.mlp.* (dense layer)  DENSE
 *   anything else                 OTHER
 *
 * Per-sequence state for `context` tokens (what the attention plugins keep),
 * counted `sequences` times ([runtime] sequences: all may be full at once):
 *   MLA latent cache  (kv_lora_rank + qk_rope_head_dim) x context x MLA
 *                     layers (MTP included) x cache_elem bytes ([runtime]
 *                     kv_cache: 2 for bf16, 4 for f32; the plan shows the
 *                     other type's figure beside it);
 *   KDA state         num_attention_heads x head_dim^2 float32 per KDA layer;
 *   KDA conv state    3 x (short_conv_kernel_size - 1) x heads*head_dim
 *                     float32 per KDA layer.
 * A layer whose attention type a plugin adds is counted by that plugin's
 * state_bytes, once the runtime has chosen it (tf_memplan_add_state).
 * Activation scratch is an estimate for one prefill step of `chunk` rows:
 * 3 hidden-size rows, the widest layer intermediate, one row of attention
 * scores per head over the context, and one row of logits, all float32.
 *
 * Tensor parallel: ROUTED, SHARED, KDA, MLA, DENSE and MTP are split over
 * tp_size ranks (rounded up), the rest is replicated; KDA state splits with
 * the heads, the MLA latent cache is shared by all heads and is not split.
 *
 * "Active" bytes are the weights one decoded token reads, the decode
 * roofline's numerator: every non-expert weight of the main stack, plus
 * num_experts_per_tok / num_experts of each MoE layer's routed experts,
 * plus one embedding row; the MTP layer is left out.
 */
#ifndef TF_MEMPLAN_H
#define TF_MEMPLAN_H

#include <stdint.h>
#include <stdio.h>

#include "tf/checkpoint.h"      /* tf_wclass, tf_wclass_of */
#include "tf/model.h"
#include "weights.h"

/* Default rows of one prefill step, when the caller has no [runtime]
 * prefill_chunk to give. */
#define TF_MEMPLAN_CHUNK 512

typedef struct tf_memplan_opts {
	int64_t context;                /* tokens per sequence, >= 1 */
	int tp_size;                    /* ranks, >= 1 */
	int64_t chunk;                  /* rows per prefill step, >= 1 */
	int cache_elem;                 /* bytes per MLA latent cache element: 2 or 4 */
	int sequences;                  /* alive at once, >= 1 */
} tf_memplan_opts;

typedef struct tf_memplan {
	tf_memplan_opts opts;
	int n_kda, n_mla;               /* layers holding state (MTP included) */

	uint64_t weights[TF_WCLASS_COUNT];      /* whole checkpoint */
	uint64_t weights_total;
	uint64_t rank_weights;                  /* this rank's share */

	/* Per sequence, on one rank. */
	uint64_t mla_cache, kda_state, kda_conv;
	uint64_t mla_cache_other;       /* the cache in the other element type */
	uint64_t other_state;           /* layers of types plugins add */
	int n_other;                    /* how many such layers */
	uint64_t seq_state;             /* mla_cache + kda_state + kda_conv + other_state */
	uint64_t scratch;

	uint64_t rank_total;            /* rank_weights + sequences x seq_state + scratch */

	uint64_t active;                /* weight bytes per decoded token */
	uint64_t rank_active;           /* the same on one rank */
} tf_memplan;

/* One sequence, float32 cache, TF_MEMPLAN_CHUNK rows.  w may be NULL:
 * state only. */
int tf_memplan_compute(const tf_model_config *cfg, const tf_weights *w, int64_t context,
		       int tp_size, tf_memplan *out);
int tf_memplan_compute_opts(const tf_model_config *cfg, const tf_weights *w,
			    const tf_memplan_opts *opts, tf_memplan *out);

/* Count `bytes` more state per sequence for one layer of a type a plugin
 * adds, in seq_state and rank_total. */
void tf_memplan_add_state(tf_memplan *p, uint64_t bytes);

/* The plan as a human-readable table. */
void tf_memplan_print(const tf_memplan *p, FILE *f);

/* TF_ERR_RANGE, naming needed and allowed bytes, the context and the
 * sequence count, when rank_total exceeds limit_bytes, or when limit_bytes is 0 the MemAvailable of
 * /proc/meminfo (nothing is refused where that cannot be read). */
int tf_memplan_check(const tf_memplan *p, uint64_t limit_bytes);

#endif /* TF_MEMPLAN_H */
