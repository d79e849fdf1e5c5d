/*
 * synth_config.c - config.json and generation_config.json of a generated
 * checkpoint, with every key of spec ling-arch.md 1.2 (the vestigial ones
 * too, so that readers meet what a real checkpoint has).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"              /* tools/lib */
#include "outdir.h"
#include "synth.h"

static int write_json(const cJSON *root, const char *dir, const char *name)
{
	char path[4096];
	char *text = cJSON_Print(root);
	int rc = TF_OK;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!text)
		return tfq_fail(TF_ERR_NOMEM, "%s: printing JSON", path);
	FILE *f = fopen(path, "w");
	if (!f) {
		rc = tfq_fail(TF_ERR_IO, "%s: %s", path, strerror(errno));
	} else {
		if (fputs(text, f) == EOF || fputc('\n', f) == EOF)
			rc = tfq_fail(TF_ERR_IO, "%s: write failed", path);
		if (fclose(f) && !rc)
			rc = tfq_fail(TF_ERR_IO, "%s: %s", path, strerror(errno));
	}
	free(text);
	return rc;
}

/* A per-layer list over the main stack: transformers wants one entry a
 * decoder layer, as the real checkpoints have; the MTP layer is unclamped. */
static cJSON *limit_list(const tf_synth_shape *s, double (*limit)(const tf_synth_shape *, int))
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; a && i < s->num_hidden_layers; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(limit(s, i)))) {
			cJSON_Delete(a);
			return NULL;
		}
	return a;
}

/* rope_scaling: null, or YaRN with DeepSeek-V3's constants. */
static cJSON *add_rope_scaling(cJSON *c, const tf_synth_shape *s)
{
	if (s->rope_yarn_factor == 0.0)
		return cJSON_AddNullToObject(c, "rope_scaling");
	cJSON *r = cJSON_AddObjectToObject(c, "rope_scaling");
	if (!r || !cJSON_AddStringToObject(r, "type", "yarn") ||
	    !cJSON_AddNumberToObject(r, "factor", s->rope_yarn_factor) ||
	    !cJSON_AddNumberToObject(r, "original_max_position_embeddings",
				     floor(s->max_position_embeddings / s->rope_yarn_factor)) ||
	    !cJSON_AddNumberToObject(r, "beta_fast", 32) ||
	    !cJSON_AddNumberToObject(r, "beta_slow", 1) ||
	    !cJSON_AddNumberToObject(r, "mscale", 1) ||
	    !cJSON_AddNumberToObject(r, "mscale_all_dim", 1))
		return NULL;
	return r;
}

static cJSON *config_json(const tf_synth_shape *s, const tf_synth_vocab *v)
{
	cJSON *c = cJSON_CreateObject();
	cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
	if (!arch)
		goto fail;
	cJSON_AddItemToArray(arch, cJSON_CreateString("BailingMoeV3ForCausalLM"));

	struct { const char *key; double value; } nums[] = {
		{ "vocab_size", v->vocab_size },
		{ "hidden_size", s->hidden_size },
		{ "intermediate_size", s->intermediate_size },
		{ "num_hidden_layers", s->num_hidden_layers },
		{ "num_attention_heads", s->num_attention_heads },
		{ "num_key_value_heads", s->num_attention_heads },
		{ "head_dim", s->head_dim },
		{ "layer_group_size", s->layer_group_size },
		{ "first_k_dense_replace", s->first_k_dense_replace },
		{ "num_experts", s->num_experts },
		{ "num_experts_per_tok", s->num_experts_per_tok },
		{ "num_shared_experts", s->num_shared_experts },
		{ "moe_intermediate_size", s->moe_intermediate_size },
		{ "moe_shared_expert_intermediate_size", s->moe_shared_expert_intermediate_size },
		{ "n_group", s->n_group },
		{ "topk_group", s->topk_group },
		{ "routed_scaling_factor", s->routed_scaling_factor },
		{ "kv_lora_rank", s->kv_lora_rank },
		{ "qk_nope_head_dim", s->qk_nope_head_dim },
		{ "qk_rope_head_dim", s->qk_rope_head_dim },
		{ "v_head_dim", s->v_head_dim },
		{ "qk_head_dim", s->qk_nope_head_dim + s->qk_rope_head_dim },
		{ "rope_theta", s->rope_theta },
		/* Vestigial: the rotary covers the whole rope slice (spec 1.2). */
		{ "partial_rotary_factor", 0.5 },
		{ "rotary_dim", s->qk_rope_head_dim },
		{ "max_position_embeddings", s->max_position_embeddings },
		{ "short_conv_kernel_size", s->short_conv_kernel_size },
		{ "kda_lower_bound", s->kda_lower_bound },
		{ "rms_norm_eps", s->rms_norm_eps },
		{ "num_nextn_predict_layers", 1 },
		{ "mtp_loss_scaling_factor", 0 },
		{ "eos_token_id", v->eos_id },
		{ "pad_token_id", v->pad_id },
		{ "initializer_range", 0.02 },
	};
	struct { const char *key; const char *value; } strs[] = {
		{ "model_type", "bailing_hybrid" },
		{ "score_function", "sigmoid" },
		{ "router_dtype", "fp32" },
		{ "gated_attention_proj_granularity_type", "head_wise" },
		{ "hidden_act", "silu" },
		{ "torch_dtype", "bfloat16" },
	};
	struct { const char *key; int value; } flags[] = {
		{ "norm_topk_prob", 1 },
		{ "moe_router_enable_expert_bias", 1 },
		{ "rope_interleave", 1 },
		{ "no_kda_lora", 1 },
		{ "kda_safe_gate", 1 },
		{ "use_qkv_bias", 0 },
		{ "use_bias", 0 },
		{ "tie_word_embeddings", 0 },
		{ "use_cache", 1 },
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (!cJSON_AddNumberToObject(c, nums[i].key, nums[i].value))
			goto fail;
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (!cJSON_AddStringToObject(c, strs[i].key, strs[i].value))
			goto fail;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (!cJSON_AddBoolToObject(c, flags[i].key, flags[i].value))
			goto fail;
	if (s->q_lora_rank ? !cJSON_AddNumberToObject(c, "q_lora_rank", s->q_lora_rank)
			   : !cJSON_AddNullToObject(c, "q_lora_rank"))
		goto fail;
	if (!add_rope_scaling(c, s))
		goto fail;

	cJSON *e = limit_list(s, tf_synth_expert_limit);
	if (!e || !cJSON_AddItemToObject(c, "expert_swiglu_limit_list", e)) {
		cJSON_Delete(e);
		goto fail;
	}
	cJSON *sh = limit_list(s, tf_synth_shared_limit);
	if (!sh || !cJSON_AddItemToObject(c, "share_expert_swiglu_limit_list", sh)) {
		cJSON_Delete(sh);
		goto fail;
	}
	return c;
fail:
	cJSON_Delete(c);
	return NULL;
}

static cJSON *generation_json(const tf_synth_vocab *v)
{
	cJSON *g = cJSON_CreateObject();
	int eos[2] = { v->eos_id, v->pad_id };
	cJSON *ids = cJSON_CreateIntArray(eos, 2);
	if (!g || !ids || !cJSON_AddItemToObject(g, "eos_token_id", ids)) {
		cJSON_Delete(ids);
		goto fail;
	}
	if (!cJSON_AddNumberToObject(g, "pad_token_id", v->pad_id) ||
	    !cJSON_AddBoolToObject(g, "do_sample", 0))
		goto fail;
	return g;
fail:
	cJSON_Delete(g);
	return NULL;
}

int tf_synth_config_write(const tf_synth_shape *s, const tf_synth_vocab *v,
			  const char *dir)
{
	cJSON *c = config_json(s, v), *g = generation_json(v);
	int rc;

	if (!c || !g || tfq_config_floats(c))
		rc = tfq_fail(TF_ERR_NOMEM, "%s: building config.json", dir);
	else if (!(rc = write_json(c, dir, "config.json")))
		rc = write_json(g, dir, "generation_config.json");
	cJSON_Delete(c);
	cJSON_Delete(g);
	return rc;
}
