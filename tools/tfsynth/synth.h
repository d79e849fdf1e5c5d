/*
 * synth.h - tfsynth: tiny Ling-3 (bailing_hybrid) checkpoints from a seed.
 *
 * A generated checkpoint follows every rule of the real architecture (layer
 * schedule, tensor names, shapes and dtypes, MoE routing keys, SwiGLU clamp
 * lists, the MTP layer at index num_hidden_layers) so that the runtime and
 * the float64 reference in tests/reference/ can be run on it without real
 * weights.  The modules:
 *
 *   synth_shape.c   presets and "key=value" overrides of the model sizes
 *   synth_plan.c    the tensor list: names, shapes, dtypes, init rules
 *   synth_rng.c     counter-based random fill (order and thread independent)
 *   synth_vocab.c   vocab size and special ids from tokenizer.json
 *   synth_config.c  config.json and generation_config.json
 *   synth_write.c   streams the tensors into safetensors shards
 *   synth_exl3.c    the same plan as an EXL3 checkpoint, written directly
 */
#ifndef TF_SYNTH_H
#define TF_SYNTH_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "outdir.h"              /* tools/lib: quantization_config */
#include "recipe.h"              /* tools/lib: what is quantized, to what K */
#include "tf/dtype.h"

/* The sizes of a generated model: the config.json values tfsynth chooses. */
typedef struct tf_synth_shape {
	int hidden_size;
	int intermediate_size;          /* dense MLP */
	int num_hidden_layers;          /* main stack; the MTP layer comes after */
	int num_attention_heads;        /* shared by KDA and MLA */
	int head_dim;                   /* KDA head dim (K = V) */
	int layer_group_size;           /* MLA is the last layer of each group */
	int first_k_dense_replace;
	int num_experts;
	int num_experts_per_tok;
	int num_shared_experts;
	int moe_intermediate_size;
	int moe_shared_expert_intermediate_size;
	int n_group, topk_group;
	double routed_scaling_factor;
	int q_lora_rank;                /* 0 writes null: a plain q_proj */
	int kv_lora_rank;
	int qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
	double rope_theta;
	int max_position_embeddings;
	int vocab_size;                 /* 0: the tokenizer's, rounded up to 128 */
	/* YaRN context stretch: 0 writes rope_scaling null (the Ling-3.0
	 * value); else DeepSeek-V3's beta 32/1 and mscale 1/1, stretching
	 * max_position_embeddings / factor original positions. */
	double rope_yarn_factor;
	int short_conv_kernel_size;
	double kda_lower_bound;
	double rms_norm_eps;
	/* SwiGLU clamps: routed experts on the last clamp_layers layers of the
	 * main stack, the shared expert on one more; none on the MTP layer,
	 * which transformers' per-decoder-layer lists leave out (0: no clamps
	 * at all). */
	int clamp_layers;
	double swiglu_limit;
} tf_synth_shape;

/* Fills *s with the named preset ("ling-tiny", "ling-bench",
 * "ling-3.1-flash"). */
int tf_synth_shape_preset(const char *name, tf_synth_shape *s);
/* Applies one "key=value" override (keys are the config.json names). */
int tf_synth_shape_set(tf_synth_shape *s, const char *assignment);
/* Checks the sizes are consistent (routing groups, even rope dims, ...). */
int tf_synth_shape_check(const tf_synth_shape *s);
/* Prints every key and its value, one per line (for --help). */
void tf_synth_shape_print(const tf_synth_shape *s, FILE *f);
/* The layer schedule of the spec, MTP layer (index >= L) included. */
int tf_synth_is_mla(const tf_synth_shape *s, int layer);
int tf_synth_is_dense(const tf_synth_shape *s, int layer);
/* Clamp limits for a layer, 0 when unclamped. */
double tf_synth_expert_limit(const tf_synth_shape *s, int layer);
double tf_synth_shared_limit(const tf_synth_shape *s, int layer);

/* What the tokenizer fixes: the padded vocab and the special token ids. */
typedef struct tf_synth_vocab {
	int n_tokens;                   /* highest id in tokenizer.json + 1 */
	int vocab_size;                 /* n_tokens rounded up to 128 */
	int eos_id;                     /* <|role_end|> */
	int pad_id;                     /* <|endoftext|> */
} tf_synth_vocab;

int tf_synth_vocab_load(const char *path, tf_synth_vocab *v);
/* Copies tokenizer.json (and tokenizer_config.json beside it) into dir. */
int tf_synth_vocab_copy(const char *path, const char *dir);

int tf_synth_config_write(const tf_synth_shape *s, const tf_synth_vocab *v,
			  const char *dir);

/* How one tensor's values are drawn. */
typedef enum tf_synth_init {
	TF_SYNTH_GAUSS,                 /* a + b * N(0, 1) */
	TF_SYNTH_LOG_UNIFORM,           /* log(U(a, b)) */
	TF_SYNTH_BITS,                  /* uniform random 16-bit words (I16) */
	TF_SYNTH_SIGNS,                 /* ±a for the first b elements, then 0 */
	TF_SYNTH_CONST,                 /* a everywhere (I32) */
} tf_synth_init;

typedef struct tf_synth_tensor {
	char name[96];
	tf_dtype dtype;                 /* BF16 or F32; F16, I16, I32 in EXL3 */
	int ndim;
	int64_t shape[3];
	tf_synth_init init;
	double a, b;
} tf_synth_tensor;

typedef struct tf_synth_plan {
	tf_synth_tensor *t;
	size_t n, cap;
} tf_synth_plan;

int tf_synth_plan_init(tf_synth_plan *p, const tf_synth_shape *s, int vocab_size);
/* Appends a tensor named by the printf format; checks the shape's size. */
int tf_synth_plan_add(tf_synth_plan *p, tf_dtype dt, tf_synth_init init,
		      double a, double b, int ndim, const int64_t *shape,
		      const char *fmt, ...) __attribute__((format(printf, 8, 9)));
void tf_synth_plan_free(tf_synth_plan *p);
size_t tf_synth_tensor_bytes(const tf_synth_tensor *t);

/* Fills out (tf_synth_tensor_bytes(t) bytes) with t's deterministic values. */
void tf_synth_fill(const tf_synth_tensor *t, uint64_t seed, void *out);

/* Writes model.safetensors, or shards of at most shard_bytes each plus
 * model.safetensors.index.json when the model is larger (0: one file).
 * header_only: the tensors' bytes are holes (sparse files, nothing drawn),
 * a checkpoint tfrun --check can plan but nothing can run. */
int tf_synth_write(const tf_synth_plan *p, uint64_t seed, const char *dir,
		   uint64_t shard_bytes, int header_only);

/*
 * The EXL3 checkpoint tfquant would make of this plan, without its hours of
 * trellis search: any bitstream is a valid tail-biting trellis (spec
 * exl3.md §4.3), so every linear tfquant's recipe quantizes becomes random
 * `trellis` bits, `suh` = random signs x the tensor's RMS / the codebook's
 * RMS and `svh` = random signs (0 on padding) - the decoded
 * diag(suh)·H·Ŵ·H·diag(svh) has the RMS the bf16 draw would have, as the
 * Hadamards are orthonormal - plus the MUL1 marker, padded to multiples of
 * 128.  Everything else is kept, fp32 narrowed to fp16, as tfquant does.
 * dir/config.json (written before) gives the layer schedule; *meta gets
 * what quantization_config records.
 */
int tf_synth_exl3_plan(const tf_synth_plan *src, const tfq_recipe *r, const char *dir,
		       tf_synth_plan *out, tfq_meta *meta);

#endif /* TF_SYNTH_H */
