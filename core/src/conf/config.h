/*
 * config.h - a checkpoint's config.json into tf_model_config (tf/model.h).
 *
 * Accepted: model_type "bailing_hybrid", or architectures listing
 * "BailingMoeV3ForCausalLM"; anything else is TF_ERR_UNSUPPORTED naming it.
 *
 * Required keys (TF_ERR_NOT_FOUND naming key and file when missing):
 *   vocab_size hidden_size num_hidden_layers num_attention_heads
 *   layer_group_size num_experts num_experts_per_tok moe_intermediate_size
 *   kv_lora_rank qk_nope_head_dim qk_rope_head_dim v_head_dim
 *   max_position_embeddings
 *   intermediate_size (only when first_k_dense_replace > 0)
 *
 * Optional keys and their defaults:
 *   head_dim                  hidden_size / num_attention_heads
 *   num_key_value_heads       num_attention_heads
 *   first_k_dense_replace     0
 *   num_shared_experts        0
 *   moe_shared_expert_intermediate_size   moe_intermediate_size
 *   n_group, topk_group       1, 1
 *   routed_scaling_factor     1.0
 *   norm_topk_prob            true
 *   score_function (or scoring_func)      "sigmoid" ("softmax" also accepted)
 *   moe_router_enable_expert_bias         true
 *   q_lora_rank               null -> 0 (plain q_proj)
 *   qk_head_dim               checked = qk_nope + qk_rope when present
 *   rope_theta                10000
 *   rope_interleave           true
 *   rope_scaling              null -> TF_ROPE_NONE; {"type"|"rope_type":
 *                             "yarn"} needs factor, takes
 *                             original_max_position_embeddings
 *                             (default max_position_embeddings), beta_fast
 *                             32, beta_slow 1, mscale and mscale_all_dim 0;
 *                             "default" -> TF_ROPE_DEFAULT; others unsupported
 *   gated_attention_proj_granularity_type "head_wise" (or "element_wise")
 *   short_conv_kernel_size    4
 *   no_kda_lora, kda_safe_gate, kda_lower_bound   true, true, -5.0
 *   rms_norm_eps              1e-6
 *   use_qkv_bias, use_bias, tie_word_embeddings   false
 *   num_nextn_predict_layers  0 (null also 0)
 *   expert_swiglu_limit_list, share_expert_swiglu_limit_list
 *                             null -> no clamp; a shorter list is padded with
 *                             0 and null entries are 0 (no clamp); a list
 *                             longer than the layer count is an error
 *   eos_token_id              int or list of at most TF_MAX_EOS; none if absent
 *   pad_token_id              -1 if absent or null
 * Every other key (the vestigial ones of spec/ling-arch.md §1.2 included)
 * is ignored.
 *
 * Derived: the layer schedule of spec/ling-arch.md §1.3 for
 * n_layers_total = num_hidden_layers + num_nextn_predict_layers layers.  Layer
 * i < num_hidden_layers is MLA when (i+1) % layer_group_size == 0 or it sits
 * in the ragged tail past the last full group, else KDA; its FFN is dense
 * when i < first_k_dense_replace, else MoE.  MTP layers are MLA + MoE.
 *
 * A key of the wrong JSON type is TF_ERR_FORMAT naming it, and so is a
 * syntax error (naming file:line:column).
 * Values that cannot describe a model are TF_ERR_INVALID naming the key:
 * non-positive sizes, kv_lora_rank <= 0, n_group not dividing num_experts,
 * topk_group > n_group, more experts per token than the kept groups hold,
 * num_attention_heads not a multiple of num_key_value_heads, an odd
 * qk_rope_head_dim, first_k_dense_replace > num_hidden_layers.
 *
 * tf_config_free() releases the arrays the config points to; the struct
 * itself belongs to the caller.
 */
#ifndef TF_CONFIG_H
#define TF_CONFIG_H

#include <stddef.h>

#include "tf/model.h"

/* More layers than any model has; bounds the schedule allocation. */
#define TF_CONFIG_MAX_LAYERS 4096

/* Read and parse config.json at `path` into *cfg (zeroed first); failures
 * name the file and key in the diag.  Release with tf_config_free. */
int tf_config_load(const char *path, tf_model_config *cfg);
/* json need not be NUL-terminated; path_for_errors names it in messages. */
int tf_config_parse(const char *json, size_t len, const char *path_for_errors,
		    tf_model_config *cfg);
void tf_config_free(tf_model_config *cfg);

/* Give layer `layer` (0 .. n_layers_total-1) the attention type (ffn false)
 * or FFN type `type`, which must outlive cfg; a type the core has no enum
 * for leaves layer_attn or layer_ffn 0 there. */
void tf_config_set_layer_type(tf_model_config *cfg, int layer, bool ffn, const char *type);

#endif /* TF_CONFIG_H */
