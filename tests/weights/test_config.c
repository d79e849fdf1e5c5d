/* test_config.c - config.json reading: the Ling-3.0-flash config gives the
 * published schedule; ragged tails, defaults, YaRN, clamp lists; missing
 * and inconsistent keys are refused naming the key and the file. */
#include <criterion/criterion.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "conf/config.h"
#include "tf/diag.h"
#include "tf/text.h"
#include "tmpdir.h"

/* Ling-3.0-flash, spec/ling-arch.md §1.2, with some vestigial keys. */
#define FLASH_JSON TF_SOURCE_DIR "/tests/weights/ling-3.0-flash.json"

static char *flash_json;
static size_t flash_len;

static void load_flash(void)
{
	cr_assert_eq(tf_text_read(FLASH_JSON, 1 << 20, &flash_json, &flash_len), TF_OK, "%s",
		     tf_diag_msg());
}

static void free_flash(void)
{
	free(flash_json);
}

TestSuite(config, .init = load_flash, .fini = free_flash);

static int parse_text(const char *json, tf_model_config *cfg)
{
	tf_diag_clear();
	return tf_config_parse(json, strlen(json), "ling/config.json", cfg);
}

/* The flash config with `edit` applied: {"key": value} pairs replace keys,
 * a null-valued "-key" deletes "key". */
static int parse_edited(const char *edit, tf_model_config *cfg)
{
	cJSON *root = cJSON_Parse(flash_json), *e = cJSON_Parse(edit), *it;
	cr_assert(root && e, "bad test JSON: %s", edit);
	cJSON_ArrayForEach(it, e) {
		if (it->string[0] == '-') {
			cJSON_DeleteItemFromObjectCaseSensitive(root, it->string + 1);
			continue;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(root, it->string);
		cJSON_AddItemToObject(root, it->string, cJSON_Duplicate(it, 1));
	}
	char *text = cJSON_PrintUnformatted(root);
	int rc = parse_text(text, cfg);
	free(text);
	cJSON_Delete(root);
	cJSON_Delete(e);
	return rc;
}

static void expect_schedule(const tf_model_config *c, const char *mla, const char *dense)
{
	for (int i = 0; i < c->n_layers_total; i++) {
		char want = mla[i] == 'M' ? TF_ATTN_MLA : TF_ATTN_KDA;
		cr_expect_eq(c->layer_attn[i], want, "layer %d attention", i);
		want = dense[i] == 'D' ? TF_FFN_DENSE : TF_FFN_MOE;
		cr_expect_eq(c->layer_ffn[i], want, "layer %d ffn", i);
	}
}

Test(config, ling_flash_values_and_schedule)
{
	tf_model_config c;
	cr_assert_eq(parse_text(flash_json, &c), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(c.struct_size, sizeof(c));
	cr_expect_str_eq(c.model_type, "bailing_hybrid");
	cr_expect_eq(c.vocab_size, 157184);
	cr_expect_eq(c.hidden_size, 2560);
	cr_expect_eq(c.intermediate_size, 6144);
	cr_expect_eq(c.num_hidden_layers, 42);
	cr_expect_eq(c.num_attention_heads, 32);
	cr_expect_eq(c.head_dim, 128);
	cr_expect_eq(c.num_experts, 512);
	cr_expect_eq(c.num_experts_per_tok, 8);
	cr_expect_eq(c.num_shared_experts, 1);
	cr_expect_eq(c.moe_shared_expert_intermediate_size, 768);
	cr_expect_eq(c.n_group, 8);
	cr_expect_eq(c.topk_group, 4);
	cr_expect_float_eq(c.routed_scaling_factor, 2.5f, 1e-7);
	cr_expect(c.norm_topk_prob && c.score_sigmoid && c.moe_router_enable_expert_bias);
	cr_expect_eq(c.q_lora_rank, 0);
	cr_expect_eq(c.kv_lora_rank, 512);
	cr_expect_eq(c.qk_nope_head_dim, 128);
	cr_expect_eq(c.qk_rope_head_dim, 64);
	cr_expect_eq(c.v_head_dim, 128);
	cr_expect_float_eq(c.rope_theta, 6e6, 1e-9);
	cr_expect(c.rope_interleave && c.gate_head_wise);
	cr_expect_eq(c.rope_scaling.kind, TF_ROPE_NONE);
	cr_expect_eq(c.max_position_embeddings, 262144);
	cr_expect_eq(c.short_conv_kernel_size, 4);
	cr_expect(c.no_kda_lora && c.kda_safe_gate);
	cr_expect_float_eq(c.kda_lower_bound, -5.0f, 1e-7);
	cr_expect_float_eq(c.rms_norm_eps, 1e-6f, 1e-12);
	cr_expect(!c.use_qkv_bias && !c.use_bias && !c.tie_word_embeddings);
	cr_expect_eq(c.num_nextn_predict_layers, 1);
	cr_expect_eq(c.n_eos, 1);
	cr_expect_eq(c.eos_token_id[0], 156895);
	cr_expect_eq(c.pad_token_id, 156892);

	/* §1.3: MLA = {5,11,...,41}, dense {0,1}, MTP 42 = MLA + MoE. */
	cr_assert_eq(c.n_layers_total, 43);
	expect_schedule(&c, "KKKKKMKKKKKMKKKKKMKKKKKMKKKKKMKKKKKMKKKKKMM",
			    "DD.........................................");

	/* Clamps: the list covers layers 0..41, the MTP layer is padded with 0;
	 * the null shared list means no clamp anywhere. */
	cr_expect_float_eq(c.expert_swiglu_limit[39], 4.0f, 0);
	cr_expect_float_eq(c.expert_swiglu_limit[41], 7.0f, 0);
	cr_expect_float_eq(c.expert_swiglu_limit[38], 0.0f, 0);
	cr_expect_float_eq(c.expert_swiglu_limit[42], 0.0f, 0);
	for (int i = 0; i < c.n_layers_total; i++)
		cr_expect_float_eq(c.shared_swiglu_limit[i], 0.0f, 0, "layer %d", i);
	tf_config_free(&c);
	cr_expect_null(c.layer_attn);
	tf_config_free(&c);             /* twice is harmless */
}

Test(config, ragged_tail_is_mla)
{
	tf_model_config c;
	/* 10 layers in groups of 4: 3 and 7 close groups, 8 and 9 are the tail. */
	cr_assert_eq(parse_edited("{\"num_hidden_layers\": 10, \"layer_group_size\": 4,"
				  " \"first_k_dense_replace\": 1, \"num_nextn_predict_layers\": 2,"
				  " \"expert_swiglu_limit_list\": null}", &c),
		     TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(c.n_layers_total, 12);
	expect_schedule(&c, "KKKMKKKMMMMM", "D...........");
	tf_config_free(&c);

	/* Ling-3.0-tiny: 24 layers, groups of 4, one dense layer. */
	cr_assert_eq(parse_edited("{\"num_hidden_layers\": 24, \"layer_group_size\": 4,"
				  " \"first_k_dense_replace\": 1, \"q_lora_rank\": 256,"
				  " \"expert_swiglu_limit_list\": null}", &c), TF_OK, "%s",
		     tf_diag_msg());
	expect_schedule(&c, "KKKMKKKMKKKMKKKMKKKMKKKMM", "D........................");
	cr_expect_eq(c.q_lora_rank, 256);
	tf_config_free(&c);
}

Test(config, defaults_and_alternative_spellings)
{
	tf_model_config c;
	cr_assert_eq(parse_edited("{\"-model_type\": null, \"-head_dim\": null,"
				  " \"-num_key_value_heads\": null, \"-score_function\": null,"
				  " \"scoring_func\": \"softmax\", \"-n_group\": null,"
				  " \"-topk_group\": null, \"-moe_shared_expert_intermediate_size\": null,"
				  " \"-rms_norm_eps\": null, \"-num_nextn_predict_layers\": null,"
				  " \"-pad_token_id\": null, \"eos_token_id\": [1, 2, 3],"
				  " \"-gated_attention_proj_granularity_type\": null,"
				  " \"-routed_scaling_factor\": null, \"-rope_theta\": null}", &c),
		     TF_OK, "%s", tf_diag_msg());
	cr_expect_str_eq(c.model_type, "bailing_hybrid", "from architectures");
	cr_expect_eq(c.head_dim, 2560 / 32);
	cr_expect_eq(c.num_key_value_heads, 32);
	cr_expect(!c.score_sigmoid);
	cr_expect_eq(c.n_group, 1);
	cr_expect_eq(c.topk_group, 1);
	cr_expect_eq(c.moe_shared_expert_intermediate_size, 768);
	cr_expect_float_eq(c.rms_norm_eps, 1e-6f, 1e-12);
	cr_expect_float_eq(c.routed_scaling_factor, 1.0f, 0);
	cr_expect_float_eq(c.rope_theta, 10000.0, 0);
	cr_expect_eq(c.num_nextn_predict_layers, 0);
	cr_expect_eq(c.n_layers_total, 42);
	cr_expect_eq(c.pad_token_id, -1);
	cr_expect(c.gate_head_wise);
	cr_expect_eq(c.n_eos, 3);
	cr_expect_eq(c.eos_token_id[2], 3);
	tf_config_free(&c);
}

Test(config, yarn_rope_scaling)
{
	tf_model_config c;
	cr_assert_eq(parse_edited("{\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 40,"
				  " \"original_max_position_embeddings\": 4096,"
				  " \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": 1.0,"
				  " \"mscale_all_dim\": 0.707}}", &c), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(c.rope_scaling.kind, TF_ROPE_YARN);
	cr_expect_float_eq(c.rope_scaling.factor, 40.0, 0);
	cr_expect_float_eq(c.rope_scaling.original_max_position_embeddings, 4096.0, 0);
	cr_expect_float_eq(c.rope_scaling.beta_fast, 32.0, 0);
	cr_expect_float_eq(c.rope_scaling.beta_slow, 1.0, 0);
	cr_expect_float_eq(c.rope_scaling.mscale, 1.0, 0);
	cr_expect_float_eq(c.rope_scaling.mscale_all_dim, 0.707, 1e-12);
	tf_config_free(&c);

	/* rope_type spelling; absent values take the documented defaults. */
	cr_assert_eq(parse_edited("{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
				  &c), TF_OK, "%s", tf_diag_msg());
	cr_expect_float_eq(c.rope_scaling.original_max_position_embeddings, 262144.0, 0);
	cr_expect_float_eq(c.rope_scaling.beta_fast, 32.0, 0);
	cr_expect_float_eq(c.rope_scaling.beta_slow, 1.0, 0);
	cr_expect_float_eq(c.rope_scaling.mscale_all_dim, 0.0, 0);
	tf_config_free(&c);
}

/* Real-valued keys as whole JSON ints (older tfsynth and tfquant wrote
 * -5): read as the floats they stand for (the flash file has -5.0). */
Test(config, reals_written_as_ints)
{
	tf_model_config c;
	cr_assert_eq(parse_edited("{\"kda_lower_bound\": -4, \"rope_theta\": 10000,"
				  " \"routed_scaling_factor\": 2, \"rms_norm_eps\": 1}", &c),
		     TF_OK, "%s", tf_diag_msg());
	cr_expect_float_eq(c.kda_lower_bound, -4.0f, 0);
	cr_expect_float_eq(c.rope_theta, 10000.0, 0);
	cr_expect_float_eq(c.routed_scaling_factor, 2.0f, 0);
	cr_expect_float_eq(c.rms_norm_eps, 1.0f, 0);
	tf_config_free(&c);
}

Test(config, clamp_lists)
{
	tf_model_config c;
	cr_assert_eq(parse_edited("{\"expert_swiglu_limit_list\": [null, 3.5, 0],"
				  " \"share_expert_swiglu_limit_list\": [1, null, 2]}", &c),
		     TF_OK, "%s", tf_diag_msg());
	cr_expect_float_eq(c.expert_swiglu_limit[0], 0.0f, 0);
	cr_expect_float_eq(c.expert_swiglu_limit[1], 3.5f, 0);
	cr_expect_float_eq(c.shared_swiglu_limit[0], 1.0f, 0);
	cr_expect_float_eq(c.shared_swiglu_limit[1], 0.0f, 0);
	cr_expect_float_eq(c.shared_swiglu_limit[2], 2.0f, 0);
	cr_expect_float_eq(c.shared_swiglu_limit[3], 0.0f, 0);
	tf_config_free(&c);
}

typedef struct bad_edit {
	const char *edit;
	int status;
	const char *msg;                /* must appear after "ling/config.json" */
} bad_edit;

static const bad_edit bad_edits[] = {
	{ "{\"-kv_lora_rank\": null}", TF_ERR_NOT_FOUND, "missing required key \"kv_lora_rank\"" },
	{ "{\"vocab_size\": null}", TF_ERR_NOT_FOUND, "\"vocab_size\"" },
	{ "{\"-hidden_size\": null}", TF_ERR_NOT_FOUND, "\"hidden_size\"" },
	{ "{\"-intermediate_size\": null}", TF_ERR_NOT_FOUND, "\"intermediate_size\"" },
	{ "{\"kv_lora_rank\": 0}", TF_ERR_INVALID, "\"kv_lora_rank\" is 0" },
	{ "{\"kv_lora_rank\": -512}", TF_ERR_INVALID, "\"kv_lora_rank\"" },
	{ "{\"hidden_size\": 2560.5}", TF_ERR_FORMAT, "\"hidden_size\" must be an integer" },
	{ "{\"hidden_size\": \"2560\"}", TF_ERR_FORMAT, "\"hidden_size\" must be a number" },
	{ "{\"norm_topk_prob\": 1}", TF_ERR_FORMAT, "\"norm_topk_prob\" must be true or false" },
	{ "{\"n_group\": 7}", TF_ERR_INVALID, "\"n_group\" 7 does not divide num_experts 512" },
	{ "{\"topk_group\": 9}", TF_ERR_INVALID, "\"topk_group\" 9 exceeds n_group 8" },
	{ "{\"num_experts_per_tok\": 300}", TF_ERR_INVALID, "\"num_experts_per_tok\"" },
	{ "{\"qk_head_dim\": 128}", TF_ERR_INVALID, "\"qk_head_dim\"" },
	{ "{\"qk_rope_head_dim\": 63, \"-qk_head_dim\": null}", TF_ERR_INVALID,
	  "\"qk_rope_head_dim\" 63 must be even" },
	{ "{\"num_key_value_heads\": 5}", TF_ERR_INVALID, "\"num_attention_heads\" 32" },
	{ "{\"-head_dim\": null, \"hidden_size\": 2500}", TF_ERR_INVALID, "\"head_dim\"" },
	{ "{\"first_k_dense_replace\": 43}", TF_ERR_INVALID, "\"first_k_dense_replace\"" },
	{ "{\"num_hidden_layers\": 100000}", TF_ERR_INVALID, "\"num_hidden_layers\"" },
	{ "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"]}",
	  TF_ERR_UNSUPPORTED, "model_type \"llama\"" },
	{ "{\"-model_type\": null, \"-architectures\": null}", TF_ERR_UNSUPPORTED,
	  "BailingMoeV3ForCausalLM" },
	{ "{\"score_function\": \"relu\"}", TF_ERR_UNSUPPORTED, "score_function \"relu\"" },
	{ "{\"gated_attention_proj_granularity_type\": \"none\"}", TF_ERR_UNSUPPORTED,
	  "gated_attention_proj_granularity_type \"none\"" },
	{ "{\"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8}}", TF_ERR_UNSUPPORTED,
	  "rope_scaling type \"llama3\"" },
	{ "{\"rope_scaling\": {\"type\": \"yarn\"}}", TF_ERR_INVALID, "\"factor\"" },
	{ "{\"rope_scaling\": {\"factor\": 2}}", TF_ERR_NOT_FOUND, "rope_type" },
	{ "{\"rope_scaling\": 2}", TF_ERR_FORMAT, "\"rope_scaling\"" },
	{ "{\"expert_swiglu_limit_list\": [1, -2]}", TF_ERR_INVALID,
	  "\"expert_swiglu_limit_list\"[1]" },
	{ "{\"share_expert_swiglu_limit_list\": \"x\"}", TF_ERR_FORMAT,
	  "\"share_expert_swiglu_limit_list\"" },
	{ "{\"expert_swiglu_limit_list\": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
	  "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}", TF_ERR_INVALID,
	  "has 44 entries for 43 layers" },
	{ "{\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", TF_ERR_RANGE, "eos_token_id" },
	{ "{\"eos_token_id\": [1, \"x\"]}", TF_ERR_INVALID, "\"eos_token_id\" entry 1" },
	{ "{\"eos_token_id\": 157184}", TF_ERR_INVALID, "vocab_size 157184" },
	{ "{\"eos_token_id\": \"</s>\"}", TF_ERR_FORMAT, "\"eos_token_id\"" },
	{ "{\"pad_token_id\": 200000}", TF_ERR_INVALID, "\"pad_token_id\"" },
};

Test(config, bad_values_are_named)
{
	for (size_t i = 0; i < sizeof(bad_edits) / sizeof(*bad_edits); i++) {
		const bad_edit *b = &bad_edits[i];
		tf_model_config c;
		int rc = parse_edited(b->edit, &c);
		cr_expect_eq(rc, b->status, "%s: status %d (%s)", b->edit, rc, tf_diag_msg());
		cr_expect(!strncmp(tf_diag_msg(), "ling/config.json", 16),
			  "%s: file not named: %s", b->edit, tf_diag_msg());
		cr_expect(strstr(tf_diag_msg(), b->msg), "%s: got \"%s\"", b->edit, tf_diag_msg());
		cr_expect_null(c.layer_attn, "%s: nothing left allocated", b->edit);
	}
}

Test(config, syntax_errors_and_files)
{
	tf_model_config c;
	cr_expect_eq(parse_text("{\n  \"a\": 1,\n  \"b\": }", &c), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "ling/config.json:3:"), "%s", tf_diag_msg());
	cr_expect_eq(parse_text("[1, 2]", &c), TF_ERR_FORMAT);
	cr_expect_eq(parse_text("{} {}", &c), TF_ERR_FORMAT);
	cr_expect_eq(parse_text("", &c), TF_ERR_FORMAT);
	/* Not NUL-terminated: only len bytes are read. */
	cr_expect_eq(tf_config_parse("{\"a\": 1}xxxx", 8, "t", &c), TF_ERR_UNSUPPORTED);

	char *dir = tmpdir_new();
	char path[512];
	snprintf(path, sizeof(path), "%s", tmpdir_path(dir, "config.json"));
	cr_expect_eq(tf_config_load(path, &c), TF_ERR_NOT_FOUND);
	cr_expect(strstr(tf_diag_msg(), "config.json"), "%s", tf_diag_msg());
	tmpdir_write(path, flash_json, flash_len);
	cr_assert_eq(tf_config_load(path, &c), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(c.n_layers_total, 43);
	tf_config_free(&c);
	cr_expect_eq(tf_config_load(dir, &c), TF_ERR_IO, "a folder is not a config");
	tmpdir_free(dir);
}
