/*
 * test_synth_load.c - the generated ling-tiny checkpoint through the core's
 * own readers: config.json gives the spec's layer schedule and clamp lists,
 * the single-file and the sharded writes hold byte-identical tensors, and
 * the memory plan accepts the model.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "conf/config.h"
#include "model/memplan.h"
#include "tf/diag.h"
#include "model/weights.h"

#define TINY TF_BINARY_DIR "/tests/reference/ling-tiny"
#define SHARDED TF_BINARY_DIR "/tests/reference/ling-tiny-sharded"

Test(synth_load, config_schedule)
{
	tf_model_config cfg = { .struct_size = sizeof(cfg) };
	int rc = tf_config_load(TINY "/config.json", &cfg);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());

	int L = cfg.num_hidden_layers, g = cfg.layer_group_size;
	cr_assert_eq(cfg.num_nextn_predict_layers, 1);
	cr_assert_eq(cfg.n_layers_total, L + 1);
	cr_assert_eq(cfg.q_lora_rank, 0, "q_lora_rank null means a plain q_proj");
	for (int i = 0; i <= L; i++) {
		/* spec 1.3, written out again: MLA closes each group; MTP is MLA + MoE */
		int mla = (i + 1) % g == 0 || i >= L / g * g;
		cr_expect_eq(cfg.layer_attn[i], mla ? TF_ATTN_MLA : TF_ATTN_KDA, "layer %d", i);
		cr_expect_eq(cfg.layer_ffn[i], i < cfg.first_k_dense_replace ? TF_FFN_DENSE : TF_FFN_MOE,
			     "layer %d", i);
	}
	/* The lists cover the decoder layers, as transformers wants them: the
	 * MTP layer is padded with 0. */
	cr_expect_eq(cfg.expert_swiglu_limit[L], 0.0f, "the MTP layer is not clamped");
	cr_expect_gt(cfg.expert_swiglu_limit[L - 1], 0.0f);
	cr_expect_eq(cfg.expert_swiglu_limit[0], 0.0f);
	cr_expect_eq(cfg.shared_swiglu_limit[L], 0.0f);
	cr_expect_gt(cfg.shared_swiglu_limit[L - 1], 0.0f);
	cr_expect_gt(cfg.n_eos, 0);
	cr_expect_lt(cfg.eos_token_id[0], cfg.vocab_size);
	tf_config_free(&cfg);
}

Test(synth_load, shards_equal_single_file)
{
	tf_weights *one = NULL, *many = NULL;
	int rc = tf_weights_open(TINY, &one);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());
	rc = tf_weights_open(SHARDED, &many);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());

	size_t n = tf_weights_count(one);
	cr_assert_gt(n, 0);
	cr_assert_eq(tf_weights_count(many), n);
	for (size_t i = 0; i < n; i++) {
		const tf_tensor *a = tf_weights_at(one, i);
		tf_tensor b;
		cr_assert_eq(tf_weights_get(many, a->name, &b), TF_OK, "%s missing", a->name);
		cr_assert_eq(a->dtype, b.dtype, "%s", a->name);
		cr_assert_eq(a->ndim, b.ndim, "%s", a->name);
		cr_assert_eq(a->nbytes, b.nbytes, "%s", a->name);
		cr_assert_eq(memcmp(a->data, b.data, a->nbytes), 0, "%s differs", a->name);
		/* fp32 exactly where the checkpoint has it (spec 1.5, 1.8) */
		size_t len = strlen(a->name);
		int f32 = (len > 6 && !strcmp(a->name + len - 6, ".A_log")) ||
			  (len > 8 && !strcmp(a->name + len - 8, ".dt_bias")) ||
			  (len > 12 && !strcmp(a->name + len - 12, ".expert_bias"));
		cr_expect_eq(a->dtype, f32 ? TF_DTYPE_F32 : TF_DTYPE_BF16, "%s", a->name);
	}
	tf_weights_close(one);
	tf_weights_close(many);
}

Test(synth_load, memory_plan)
{
	tf_model_config cfg = { .struct_size = sizeof(cfg) };
	tf_weights *w = NULL;
	tf_memplan plan;

	cr_assert_eq(tf_config_load(TINY "/config.json", &cfg), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_weights_open(TINY, &w), TF_OK, "%s", tf_diag_msg());
	int rc = tf_memplan_compute(&cfg, w, 4096, 1, &plan);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());
	uint64_t bytes = 0;
	for (size_t i = 0; i < tf_weights_count(w); i++)
		bytes += tf_weights_at(w, i)->nbytes;
	cr_expect_eq(plan.weights_total, bytes, "every tensor falls in one weight class");
	cr_expect_eq(tf_memplan_check(&plan, 1ull << 30), TF_OK, "%s", tf_diag_msg());
	tf_weights_close(w);
	tf_config_free(&cfg);
}
