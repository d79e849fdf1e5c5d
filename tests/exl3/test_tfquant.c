/*
 * test_tfquant.c - tfquant's decisions without running a quantization:
 * which tensors get how many bits (the recipe), how --bits and an INI
 * change it, the refusals, and the quantization_config it writes.
 */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fail.h"
#include "outdir.h"
#include "recipe.h"
#include "weights/tmpdir.h"

/* Scratch space, made before a test and removed after it, failed or not
 * (Criterion runs .fini after a failed assertion too). */
static char *scratch_src, *scratch_dst;

static void scratch_init(void)
{
	scratch_src = tmpdir_make("/tmp/tfquant-src-XXXXXX");
	scratch_dst = tmpdir_make("/tmp/tfquant-dst-XXXXXX");
}

static void scratch_fini(void)
{
	if (scratch_src)
		tmpdir_free(scratch_src);
	if (scratch_dst)
		tmpdir_free(scratch_dst);
	scratch_src = scratch_dst = NULL;
}

/* Layers 0 dense+KDA, 1 MoE+MLA, 2 (= num_hidden_layers) the MTP layer. */
static const uint8_t attn[3] = { TF_ATTN_KDA, TF_ATTN_MLA, TF_ATTN_MLA };
static const uint8_t ffn[3] = { TF_FFN_DENSE, TF_FFN_MOE, TF_FFN_MOE };

static tf_model_config test_config(void)
{
	return (tf_model_config){ .struct_size = sizeof(tf_model_config),
				  .num_hidden_layers = 2, .n_layers_total = 3,
				  .layer_attn = attn, .layer_ffn = ffn };
}

static int bits_of(const tfq_recipe *r, const char *name, int ndim, int64_t out, int64_t in)
{
	tf_model_config cfg = test_config();
	tf_tensor t = { .name = name, .dtype = TF_DTYPE_BF16, .ndim = ndim,
			.shape = { out, in, 4 } };
	return tfq_recipe_bits(r, &cfg, &t);
}

Test(tfquant, default_recipe_by_class)
{
	tfq_recipe r;
	tfq_recipe_default(&r);
	static const struct { const char *name; int ndim; int64_t out; int bits; } cases[] = {
		{ "model.layers.1.mlp.experts.7.down_proj.weight", 2, 256, 3 },
		{ "model.layers.1.mlp.shared_experts.up_proj.weight", 2, 128, 5 },
		{ "model.layers.0.attention.q_proj.weight", 2, 256, 4 },
		{ "model.layers.0.mlp.gate_proj.weight", 2, 512, 4 },
		{ "model.layers.1.attention.kv_a_proj_with_mqa.weight", 2, 160, 6 },
		{ "model.layers.1.attention.dense.weight", 2, 256, 6 },
		{ "model.layers.2.attention.q_proj.weight", 2, 192, 4 },       /* MTP */
		{ "model.layers.2.eh_proj.weight", 2, 256, 4 },
		{ "lm_head.weight", 2, 2048, 6 },
		/* kept as stored */
		{ "model.layers.1.attention.kv_b_proj.weight", 2, 256, 0 },
		{ "model.layers.1.mlp.gate.weight", 2, 64, 0 },                /* router */
		{ "model.layers.0.attention.b_proj.weight", 2, 2, 0 },         /* per head */
		{ "model.layers.0.attention.q_conv1d.weight", 3, 256, 0 },
		{ "model.layers.0.input_layernorm.weight", 1, 256, 0 },
		{ "model.word_embeddings.weight", 2, 2048, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_eq(bits_of(&r, cases[i].name, cases[i].ndim, cases[i].out, 256),
			     cases[i].bits, "%s", cases[i].name);
}

Test(tfquant, bits_option_and_ini, .init = scratch_init, .fini = scratch_fini)
{
	tfq_recipe r;
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/recipe.ini", scratch_src);
	cr_assert(f = fopen(path, "w"), "%s", path);

	tfq_recipe_default(&r);
	cr_assert_eq(tfq_recipe_parse(&r, "routed=2,head=16", "--bits"), TF_OK);
	cr_expect_eq(bits_of(&r, "model.layers.1.mlp.experts.0.up_proj.weight", 2, 128, 256), 2);
	cr_expect_eq(bits_of(&r, "lm_head.weight", 2, 2048, 256), 0, "head=16 stays fp16");

	fprintf(f, "[bits]\nshared = 6\nmla=8\n");
	fclose(f);
	cr_assert_eq(tfq_recipe_load_ini(&r, path), TF_OK, "%s", tfq_errmsg());
	cr_expect_eq(bits_of(&r, "model.layers.1.mlp.shared_experts.up_proj.weight", 2, 128, 256), 6);
	cr_expect_eq(bits_of(&r, "model.layers.1.attention.dense.weight", 2, 256, 256), 8);

	f = fopen(path, "w");
	fprintf(f, "[quant]\nshared = 6\n");
	fclose(f);
	cr_expect_eq(tfq_recipe_load_ini(&r, path), TF_ERR_INVALID);
	cr_expect(strstr(tfq_errmsg(), "[quant]"), "%s", tfq_errmsg());
}

Test(tfquant, refuses_bad_bits)
{
	static const struct { const char *spec, *needle; } cases[] = {
		{ "routed=9", "routed" }, { "routed=0", "routed" }, { "kda=16", "kda" },
		{ "heads=6", "heads" }, { "routed", "routed" }, { "mla=x", "mla" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tfq_recipe r;
		tfq_recipe_default(&r);
		cr_expect_eq(tfq_recipe_parse(&r, cases[i].spec, "--bits"), TF_ERR_INVALID,
			     "%s accepted", cases[i].spec);
		cr_expect(strstr(tfq_errmsg(), cases[i].needle), "%s: '%s'", cases[i].spec,
			  tfq_errmsg());
	}
}

Test(tfquant, writes_quantization_config, .init = scratch_init, .fini = scratch_fini)
{
	const char *src = scratch_src, *dst = scratch_dst;
	char path[256];
	tfq_meta meta = { .bits = 3.4149, .head_bits = 6, .mtp_bits = 4, .format = "exl3",
			  .variant = "mul1" };
	snprintf(path, sizeof(path), "%s/config.json", src);
	FILE *f = fopen(path, "w");
	fprintf(f, "{\"model_type\": \"bailing_hybrid\", \"quantization_config\": {\"old\": 1}}");
	fclose(f);
	snprintf(path, sizeof(path), "%s/tokenizer.json", src);
	f = fopen(path, "w");
	fprintf(f, "{}");
	fclose(f);

	cr_assert_eq(tfq_outdir_config(src, dst, &meta), TF_OK, "%s", tfq_errmsg());
	cr_assert_eq(tfq_outdir_copy_files(src, dst), TF_OK, "%s", tfq_errmsg());
	snprintf(path, sizeof(path), "%s/tokenizer.json", dst);
	cr_expect_eq(access(path, R_OK), 0, "tokenizer.json not copied");

	snprintf(path, sizeof(path), "%s/config.json", dst);
	f = fopen(path, "r");
	char buf[4096] = { 0 };
	cr_assert(fread(buf, 1, sizeof(buf) - 1, f) > 0);
	fclose(f);
	cJSON *root = cJSON_Parse(buf);
	cJSON *q = cJSON_GetObjectItem(root, "quantization_config");
	cr_assert(cJSON_IsObject(q));
	cr_expect_str_eq(cJSON_GetObjectItem(root, "model_type")->valuestring, "bailing_hybrid");
	cr_expect_str_eq(cJSON_GetObjectItem(q, "quant_method")->valuestring, "exl3");
	cr_expect_str_eq(cJSON_GetObjectItem(q, "codebook")->valuestring, "mul1");
	cr_expect_eq(cJSON_GetObjectItem(q, "bits")->valuedouble, 3.41);
	cr_expect_eq(cJSON_GetObjectItem(q, "head_bits")->valueint, 6);
	cr_expect_eq(cJSON_GetObjectItem(q, "mtp_bits")->valueint, 4);
	cr_expect_null(cJSON_GetObjectItem(q, "old"), "the source's quantization_config is replaced");
	cJSON_Delete(root);
}

/* A source written with whole numbers for float-typed keys (older tfsynth):
 * the copy has them as JSON floats, which transformers' strict config class
 * needs; ints stay ints, other floats keep their digits. */
Test(tfquant, config_floats_stay_floats, .init = scratch_init, .fini = scratch_fini)
{
	char path[256], buf[4096] = { 0 };
	tfq_meta meta = { .bits = 4, .head_bits = 6, .mtp_bits = 4, .format = "exl3" };
	snprintf(path, sizeof(path), "%s/config.json", scratch_src);
	FILE *f = fopen(path, "w");
	fprintf(f, "{\"model_type\": \"bailing_hybrid\", \"kda_lower_bound\": -5,"
		   " \"rope_theta\": 6000000, \"routed_scaling_factor\": 2.5,"
		   " \"rms_norm_eps\": 1e-06, \"mtp_loss_scaling_factor\": 0,"
		   " \"hidden_size\": 256, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4,"
		   " \"original_max_position_embeddings\": 1024, \"beta_fast\": 32}}");
	fclose(f);

	cr_assert_eq(tfq_outdir_config(scratch_src, scratch_dst, &meta), TF_OK, "%s",
		     tfq_errmsg());
	snprintf(path, sizeof(path), "%s/config.json", scratch_dst);
	f = fopen(path, "r");
	cr_assert(fread(buf, 1, sizeof(buf) - 1, f) > 0);
	fclose(f);
	static const char *const want[] = {
		"\"kda_lower_bound\":\t-5.0,", "\"rope_theta\":\t6000000.0,",
		"\"routed_scaling_factor\":\t2.5,", "\"rms_norm_eps\":\t1e-06,",
		"\"mtp_loss_scaling_factor\":\t0.0,", "\"hidden_size\":\t256,",
		"\"factor\":\t4.0,", "\"original_max_position_embeddings\":\t1024,",
		"\"beta_fast\":\t32.0",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(strstr(buf, want[i]), "%s not in\n%s", want[i], buf);
	cJSON *root = cJSON_Parse(buf);
	cr_expect(cJSON_IsObject(root), "not JSON:\n%s", buf);
	cJSON_Delete(root);
}
