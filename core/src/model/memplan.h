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
 *                     float32 per KDA layer;
 *   MTP rows          with [mtp] enabled, the final-normed rows a sequence
 *                     keeps for the MTP layer (at most chunk + 1: the
 *                     pipeline feeds it before a step would pass that)
 *                     and their snapshot: twice the power of two >= chunk
 *                     + 1 (at least 8) rows of hidden_size float32 and a
 *                     token each.
 * A layer whose attention type a plugin adds is counted by that plugin's
 * state_bytes, once the runtime has chosen it (tf_memplan_add_state).
 * Activation scratch is an estimate for one prefill step of `chunk` rows:
 * 3 hidden-size rows, the widest layer intermediate, one row of attention
 * scores per head over the context, and one row of logits, all float32.
 *
 * Tensor parallel: each tensor is divided as the sharded layers divide it
 * (issue 16's rules), tensor by tensor from its name and shape:
 *   column-parallel (outputs split): KDA q/k/v/f/g/b_proj, MLA q_proj,
 *     q_b_proj, kv_b_proj, g_proj (by heads), MLP gate_proj and up_proj
 *     (dense, shared and routed experts: by intermediate), lm_head (by
 *     vocabulary);
 *   row-parallel (inputs split): KDA o_proj, MLA dense, MLP down_proj;
 *   per channel: KDA A_log, dt_bias and the short convolutions;
 *   replicated: embeddings, norms (o_norm included), routers, MLA's latent
 *     projections (kv_a_proj_with_mqa, q_a_proj) and the MTP layer's
 *     eh_proj; with [tp] moe = experts, each routed expert whole on the
 *     rank tf_router_place_blocks (tf/router.h) gives it.
 * A split dimension divides in blocks of 128 features (EXL3's Hadamard
 * blocks: 8 tiles of a trellis) when its size allows, else of 1; rank r
 * gets blocks / tp_size, plus one while r < the remainder; a tensor with
 * fewer blocks than ranks is held whole by every rank.  For EXL3, suh
 * follows the inputs and svh the outputs; the codebook marker is
 * replicated.  KDA state splits with the heads; the MLA latent cache is
 * shared by all heads and kept whole on every rank.
 *
 * "Active" bytes are the weights one decoded token reads, the decode
 * roofline's numerator: every non-expert weight of the main stack, plus
 * num_experts_per_tok / num_experts of each MoE layer's routed experts,
 * plus one embedding row; the MTP layer is left out.  On a rank, the same
 * of its own shares (with whole experts per rank, top-k / num_experts of
 * its experts is what it reads on average).
 */
#ifndef TF_MEMPLAN_H
#define TF_MEMPLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tf/checkpoint.h"      /* tf_wclass, tf_wclass_of */
#include "tf/model.h"
#include "model/weights.h"

/* Default rows of one prefill step, when the caller has no [runtime]
 * prefill_chunk to give. */
#define TF_MEMPLAN_CHUNK 512

/* The most ranks a plan describes ([tp] size). */
#define TF_MEMPLAN_MAX_TP 64

typedef struct tf_memplan_opts {
	int64_t context;                /* tokens per sequence, >= 1 */
	int tp_size;                    /* ranks, 1 .. TF_MEMPLAN_MAX_TP */
	bool moe_experts;               /* [tp] moe = experts: whole experts per rank */
	int64_t chunk;                  /* rows per prefill step, >= 1 */
	int cache_elem;                 /* bytes per MLA latent cache element: 2 or 4 */
	int sequences;                  /* alive at once, >= 1 */
	bool mtp;                       /* [mtp] enabled: sequences keep MTP rows */
} tf_memplan_opts;

/* One rank's share: weights, and its per-sequence KDA state (its heads). */
typedef struct tf_memplan_rank {
	uint64_t weights[TF_WCLASS_COUNT];
	uint64_t weights_total;
	uint64_t kda_state, kda_conv;   /* per sequence */
	uint64_t total;                 /* weights + sequences x state + scratch */
} tf_memplan_rank;

/*
 * The rank-level fields (rank_weights, kda_state, seq_state, rank_total,
 * rank_active) are those of the largest rank, which the budget check holds
 * to the limit; ranks[] has every rank.
 */
typedef struct tf_memplan {
	tf_memplan_opts opts;
	int n_kda, n_mla;               /* layers holding state (MTP included) */

	uint64_t weights[TF_WCLASS_COUNT];      /* whole checkpoint */
	uint64_t weights_total;
	/* The same as weights, elements of the matrices they encode (an EXL3
	 * trellis its in x out): what a CPU bound by decoding them pays for. */
	uint64_t params[TF_WCLASS_COUNT];
	uint64_t rank_weights;                  /* the largest rank's share */
	tf_memplan_rank ranks[TF_MEMPLAN_MAX_TP];
	int largest;                            /* its index */

	/* Per sequence, on the largest rank. */
	uint64_t mla_cache, kda_state, kda_conv;
	uint64_t mla_cache_other;       /* the cache in the other element type */
	uint64_t mtp_rows;              /* the rows kept for the MTP layer */
	uint64_t other_state;           /* layers of types plugins add */
	int n_other;                    /* how many such layers */
	uint64_t seq_state;             /* mla_cache + kda_state + kda_conv + mtp_rows + other_state */
	uint64_t scratch;

	uint64_t rank_total;            /* rank_weights + sequences x seq_state + scratch */

	uint64_t active;                /* weight bytes per decoded token */
	uint64_t active_params;         /* ... and their elements */
	uint64_t rank_active;           /* the same on one rank */

	/* What tf_memplan_check held each rank to (0: not checked yet). */
	uint64_t limit;
	const char *limit_from;         /* "[runtime] memory_limit", ... */
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

/* The plan as a human-readable table; with tp_size > 1 also a line per
 * rank. */
void tf_memplan_print(const tf_memplan *p, FILE *f);

/* TF_ERR_RANGE, naming the rank, needed and allowed bytes, the context
 * and the sequence count, when rank_total exceeds limit_bytes, or when
 * limit_bytes is 0 the MemAvailable of /proc/meminfo (nothing is refused
 * where that cannot be read).  Records the limit in p for the printout. */
int tf_memplan_check(tf_memplan *p, uint64_t limit_bytes);

#endif /* TF_MEMPLAN_H */
