/*
 * tf/model.h - the model description read from a checkpoint's config.json.
 *
 * Every Ling-3 value that varies between checkpoints is a field here, filled
 * by the core's config reader from config.json; no plugin hard-codes one.
 * The struct and its arrays live in host memory and are read-only.
 * Fields are only ever appended; struct_size tells a plugin which exist.
 */
#ifndef TF_MODEL_H
#define TF_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What sits in a layer's attention slot and its FFN slot, as config.json's
 * schedule says; since ABI 1.4 read the names (attn_type, ffn_type), which
 * a plugin may extend with types the core never heard of. */
typedef enum tf_layer_attn { TF_ATTN_KDA = 1, TF_ATTN_MLA = 2 } tf_layer_attn;
typedef enum tf_layer_ffn { TF_FFN_DENSE = 1, TF_FFN_MOE = 2 } tf_layer_ffn;

typedef enum tf_rope_kind { TF_ROPE_NONE = 0, TF_ROPE_DEFAULT, TF_ROPE_YARN } tf_rope_kind;

typedef struct tf_rope_scaling {
	tf_rope_kind kind;              /* NONE when rope_scaling is null */
	double factor;
	double original_max_position_embeddings;
	double beta_fast, beta_slow;
	double mscale, mscale_all_dim;  /* 0 when absent */
} tf_rope_scaling;

#define TF_MAX_EOS 8

typedef struct tf_model_config {
	uint32_t struct_size;

	char model_type[32];            /* "bailing_hybrid" */
	int vocab_size;
	int hidden_size;
	int intermediate_size;          /* dense MLP */
	int num_hidden_layers;          /* main stack, MTP excluded */
	int num_attention_heads;        /* shared by KDA and MLA */
	int num_key_value_heads;
	int head_dim;                   /* KDA head dim (K = V) */
	int layer_group_size;
	int first_k_dense_replace;

	/* MoE */
	int num_experts;
	int num_experts_per_tok;
	int num_shared_experts;
	int moe_intermediate_size;
	int moe_shared_expert_intermediate_size;
	int n_group, topk_group;
	float routed_scaling_factor;
	bool norm_topk_prob;
	bool score_sigmoid;             /* score_function "sigmoid" (else softmax) */
	bool moe_router_enable_expert_bias;

	/* MLA */
	int q_lora_rank;                /* 0 when null: plain q_proj */
	int kv_lora_rank;
	int qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
	double rope_theta;
	bool rope_interleave;
	tf_rope_scaling rope_scaling;
	int max_position_embeddings;
	bool gate_head_wise;            /* gated_attention_proj_granularity_type */

	/* KDA */
	int short_conv_kernel_size;
	bool no_kda_lora;
	bool kda_safe_gate;
	float kda_lower_bound;

	float rms_norm_eps;
	bool use_qkv_bias, use_bias, tie_word_embeddings;

	int num_nextn_predict_layers;   /* MTP layers, at index num_hidden_layers.. */

	/* Per-layer SwiGLU clamp, 0 = none; length n_layers_total. */
	const float *expert_swiglu_limit;
	const float *shared_swiglu_limit;

	int eos_token_id[TF_MAX_EOS];
	int n_eos;
	int pad_token_id;               /* -1 when absent */

	/* Derived: the layer schedule, MTP layers included (index >= num_hidden_layers). */
	int n_layers_total;
	const uint8_t *layer_attn;      /* tf_layer_attn per layer */
	const uint8_t *layer_ffn;       /* tf_layer_ffn per layer */

	/* Since ABI 1.4: the schedule by name, one per layer: "kda" or "mla",
	 * "dense" or "moe", or a type a plugin adds, which the INI gives a
	 * layer ([model] layer.<i>.attention); layer_attn and layer_ffn hold 0
	 * for such a layer. */
	const char *const *attn_type;
	const char *const *ffn_type;
} tf_model_config;

#ifdef __cplusplus
}
#endif
#endif /* TF_MODEL_H */
