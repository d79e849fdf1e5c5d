/* test_memplan.c - the memory plan of a small written checkpoint, byte for
 * byte, and the over-budget refusal. */
#include <criterion/criterion.h>
#include <string.h>

#include "conf/config.h"
#include "model/memplan.h"
#include "st_writer.h"
#include "tf/diag.h"
#include "tmpdir.h"
#include "model/weights.h"

/* 4 layers in groups of 2 (KDA, MLA, KDA, MLA), layer 0 dense, layer 4 MTP. */
static const char small_json[] =
	"{\"model_type\": \"bailing_hybrid\", \"vocab_size\": 16, \"hidden_size\": 8,"
	" \"intermediate_size\": 12, \"num_hidden_layers\": 4, \"num_attention_heads\": 2,"
	" \"head_dim\": 4, \"layer_group_size\": 2, \"first_k_dense_replace\": 1,"
	" \"num_experts\": 4, \"num_experts_per_tok\": 2, \"num_shared_experts\": 1,"
	" \"moe_intermediate_size\": 4, \"kv_lora_rank\": 6, \"qk_nope_head_dim\": 2,"
	" \"qk_rope_head_dim\": 2, \"v_head_dim\": 2, \"max_position_embeddings\": 128,"
	" \"short_conv_kernel_size\": 4, \"num_nextn_predict_layers\": 1}";

typedef struct wspec {
	const char *name;
	tf_dtype dt;
	int ndim;
	int64_t shape[3];
	tf_wclass cls;
} wspec;

/* Byte counts per class are worked out by hand in the test below. */
static const wspec small_tensors[] = {
	{ "model.word_embeddings.weight", TF_DTYPE_F16, 2, { 16, 8 }, TF_WCLASS_EMBED },
	{ "lm_head.weight", TF_DTYPE_F16, 2, { 16, 8 }, TF_WCLASS_HEAD },
	{ "model.norm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.0.input_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.0.post_attention_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.1.input_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.1.post_attention_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.2.input_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.2.post_attention_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.3.input_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	{ "model.layers.3.post_attention_layernorm.weight", TF_DTYPE_F32, 1, { 8 }, TF_WCLASS_NORM },
	/* layer 0: KDA, plain q_proj and an EXL3 o_proj; dense MLP */
	{ "model.layers.0.attention.q_proj.weight", TF_DTYPE_F16, 2, { 8, 8 }, TF_WCLASS_KDA },
	{ "model.layers.0.attention.o_proj.trellis", TF_DTYPE_I16, 3, { 1, 1, 32 }, TF_WCLASS_KDA },
	{ "model.layers.0.attention.o_proj.suh", TF_DTYPE_F16, 1, { 8 }, TF_WCLASS_KDA },
	{ "model.layers.0.attention.o_proj.svh", TF_DTYPE_F16, 1, { 8 }, TF_WCLASS_KDA },
	{ "model.layers.0.attention.o_proj.mcg", TF_DTYPE_I32, 0, { 0 }, TF_WCLASS_KDA },
	{ "model.layers.0.mlp.gate_proj.weight", TF_DTYPE_F16, 2, { 12, 8 }, TF_WCLASS_DENSE },
	{ "model.layers.0.mlp.up_proj.weight", TF_DTYPE_F16, 2, { 12, 8 }, TF_WCLASS_DENSE },
	{ "model.layers.0.mlp.down_proj.weight", TF_DTYPE_F16, 2, { 8, 12 }, TF_WCLASS_DENSE },
	/* layer 1: MLA, MoE */
	{ "model.layers.1.attention.kv_a_proj_with_mqa.weight", TF_DTYPE_F16, 2, { 8, 8 },
	  TF_WCLASS_MLA },
	{ "model.layers.1.mlp.gate.weight", TF_DTYPE_F32, 2, { 4, 8 }, TF_WCLASS_ROUTER },
	{ "model.layers.1.mlp.gate.expert_bias", TF_DTYPE_F32, 1, { 4 }, TF_WCLASS_ROUTER },
	{ "model.layers.1.mlp.experts.0.gate_proj.weight", TF_DTYPE_F16, 2, { 4, 8 }, TF_WCLASS_ROUTED },
	{ "model.layers.1.mlp.experts.1.up_proj.weight", TF_DTYPE_F16, 2, { 4, 8 }, TF_WCLASS_ROUTED },
	{ "model.layers.1.mlp.experts.2.down_proj.weight", TF_DTYPE_F16, 2, { 8, 4 }, TF_WCLASS_ROUTED },
	{ "model.layers.1.mlp.experts.3.down_proj.weight", TF_DTYPE_F16, 2, { 8, 4 }, TF_WCLASS_ROUTED },
	{ "model.layers.1.mlp.shared_experts.down_proj.weight", TF_DTYPE_F16, 2, { 8, 12 },
	  TF_WCLASS_SHARED },
	/* layer 2: KDA, MoE */
	{ "model.layers.2.attention.q_proj.weight", TF_DTYPE_F16, 2, { 8, 8 }, TF_WCLASS_KDA },
	{ "model.layers.2.mlp.gate.weight", TF_DTYPE_F32, 2, { 4, 8 }, TF_WCLASS_ROUTER },
	{ "model.layers.2.mlp.gate.expert_bias", TF_DTYPE_F32, 1, { 4 }, TF_WCLASS_ROUTER },
	{ "model.layers.2.mlp.experts.0.up_proj.weight", TF_DTYPE_F16, 2, { 24, 8 }, TF_WCLASS_ROUTED },
	{ "model.layers.2.mlp.experts.3.up_proj.weight", TF_DTYPE_F16, 2, { 24, 8 }, TF_WCLASS_ROUTED },
	{ "model.layers.2.mlp.shared_experts.up_proj.weight", TF_DTYPE_F16, 2, { 12, 8 },
	  TF_WCLASS_SHARED },
	{ "model.layers.2.stray.weight", TF_DTYPE_F32, 1, { 2 }, TF_WCLASS_OTHER },
	/* layer 3: MLA */
	{ "model.layers.3.attention.dense.weight", TF_DTYPE_F16, 2, { 8, 8 }, TF_WCLASS_MLA },
	/* layer 4: the MTP layer, whatever the module */
	{ "model.layers.4.eh_proj.weight", TF_DTYPE_F16, 2, { 8, 16 }, TF_WCLASS_MTP },
	{ "model.layers.4.attention.q_proj.weight", TF_DTYPE_F16, 2, { 8, 8 }, TF_WCLASS_MTP },
	{ "model.layers.4.mlp.experts.0.down_proj.weight", TF_DTYPE_F16, 2, { 8, 4 }, TF_WCLASS_MTP },
	{ "rotary.inv_freq", TF_DTYPE_F32, 1, { 4 }, TF_WCLASS_OTHER },
};
#define N_SMALL (sizeof(small_tensors) / sizeof(*small_tensors))

typedef struct fixture {
	char *dir;
	tf_model_config cfg;
	tf_weights *w;
	uint8_t data[4096];
} fixture;

static void fixture_open(fixture *fx)
{
	cr_assert_eq(tf_config_parse(small_json, strlen(small_json), "small/config.json",
				     &fx->cfg), TF_OK, "%s", tf_diag_msg());
	for (size_t i = 0; i < sizeof(fx->data); i++)
		fx->data[i] = (uint8_t)(i * 131 + 7);
	tf_st_writer *sw;
	cr_assert_eq(tf_st_writer_init(&sw), TF_OK);
	for (size_t i = 0; i < N_SMALL; i++) {
		const wspec *s = &small_tensors[i];
		cr_assert_eq(tf_st_writer_add(sw, s->name, s->dt, s->ndim, s->shape, fx->data),
			     TF_OK, "%s", tf_diag_msg());
	}
	fx->dir = tmpdir_new();
	cr_assert_eq(tf_st_writer_save_shards(sw, fx->dir, 1024), TF_OK, "%s", tf_diag_msg());
	tf_st_writer_free(sw);
	cr_assert_eq(tf_weights_open(fx->dir, &fx->w), TF_OK, "%s", tf_diag_msg());
}

/* The plan as tf_memplan_print writes it (free()). */
static char *plan_text(const tf_memplan *p)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	cr_assert(mem);
	tf_memplan_print(p, mem);
	fclose(mem);
	return text;
}

static void fixture_close(fixture *fx)
{
	tf_weights_close(fx->w);
	tf_config_free(&fx->cfg);
	tmpdir_free(fx->dir);
}

Test(memplan, classes_by_name)
{
	fixture fx;
	fixture_open(&fx);
	for (size_t i = 0; i < N_SMALL; i++)
		cr_expect_eq(tf_wclass_of(&fx.cfg, small_tensors[i].name), small_tensors[i].cls,
			     "%s: %s", small_tensors[i].name,
			     tf_wclass_name(tf_wclass_of(&fx.cfg, small_tensors[i].name)));
	/* Layer numbers past the schedule or not numbers at all. */
	cr_expect_eq(tf_wclass_of(&fx.cfg, "model.layers.5.attention.q_proj.weight"),
		     TF_WCLASS_OTHER);
	cr_expect_eq(tf_wclass_of(&fx.cfg, "model.layers.99999999999999.x"), TF_WCLASS_OTHER);
	cr_expect_eq(tf_wclass_of(&fx.cfg, "model.layers.x.attention.q"), TF_WCLASS_OTHER);
	cr_expect_eq(tf_wclass_of(&fx.cfg, "model.layers.1"), TF_WCLASS_OTHER);
	cr_expect_eq(tf_wclass_of(&fx.cfg, "model.layers.2.mlp.up_proj.weight"), TF_WCLASS_OTHER,
		     "a non-expert mlp tensor in a MoE layer fits no class");
	for (int k = 0; k < TF_WCLASS_COUNT; k++)
		cr_expect_str_neq(tf_wclass_name((tf_wclass)k), "invalid");
	fixture_close(&fx);
}

Test(memplan, exact_bytes)
{
	fixture fx;
	tf_memplan p;
	fixture_open(&fx);
	tf_memplan_opts o = { .context = 100, .tp_size = 2, .chunk = 10, .cache_elem = 2, .sequences = 1 };
	cr_assert_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &o, &p), TF_OK, "%s", tf_diag_msg());

	static const uint64_t want[TF_WCLASS_COUNT] = {
		[TF_WCLASS_EMBED] = 256, [TF_WCLASS_HEAD] = 256,
		[TF_WCLASS_NORM] = 32 + 8 * 32,
		[TF_WCLASS_KDA] = 128 + 64 + 16 + 16 + 4 + 128,
		[TF_WCLASS_DENSE] = 3 * 192,
		[TF_WCLASS_MLA] = 128 + 128,
		[TF_WCLASS_ROUTER] = 2 * (128 + 16),
		[TF_WCLASS_ROUTED] = 4 * 64 + 2 * 384,
		[TF_WCLASS_SHARED] = 192 + 192,
		[TF_WCLASS_MTP] = 256 + 128 + 64,
		[TF_WCLASS_OTHER] = 8 + 16,
	};
	uint64_t total = 0;
	for (int k = 0; k < TF_WCLASS_COUNT; k++) {
		cr_expect_eq(p.weights[k], want[k], "%s: %llu", tf_wclass_name((tf_wclass)k),
			     (unsigned long long)p.weights[k]);
		total += want[k];
	}
	cr_expect_eq(p.weights_total, total);
	/*
	 * Each tensor as the sharded layers divide it (memplan.h), by hand:
	 * embeddings 256, norms 288, routers 288, other 24 and MLA's latent
	 * kv_a_proj_with_mqa 128 whole; lm_head by vocabulary 128; KDA: two
	 * q_proj 2 x 64 + o_proj (trellis of 1 tile: too few blocks, whole 64;
	 * suh by inputs 8; svh 16 and marker 4 whole) = 220; dense 3 x 96; MLA dense
	 * by inputs 64; routed 1024 / 2; shared 2 x 96; MTP: eh_proj 256
	 * whole, q_proj 64, an expert's down_proj 32.
	 */
	static const uint64_t rank[TF_WCLASS_COUNT] = {
		[TF_WCLASS_EMBED] = 256, [TF_WCLASS_HEAD] = 128, [TF_WCLASS_NORM] = 288,
		[TF_WCLASS_KDA] = 220, [TF_WCLASS_DENSE] = 288, [TF_WCLASS_MLA] = 192,
		[TF_WCLASS_ROUTER] = 288, [TF_WCLASS_ROUTED] = 512, [TF_WCLASS_SHARED] = 192,
		[TF_WCLASS_MTP] = 352, [TF_WCLASS_OTHER] = 24,
	};
	uint64_t rank_total = 0;
	for (int k = 0; k < TF_WCLASS_COUNT; k++) {
		for (int r = 0; r < 2; r++)
			cr_expect_eq(p.ranks[r].weights[k], rank[k], "rank %d %s: %llu", r,
				     tf_wclass_name((tf_wclass)k),
				     (unsigned long long)p.ranks[r].weights[k]);
		rank_total += rank[k];
	}
	cr_expect_eq(p.rank_weights, rank_total);
	cr_expect_eq(p.ranks[1].weights_total, rank_total);

	/* Active: non-expert main-stack weights, 2 of 4 experts, one embedding
	 * row of 8 F16 values; no MTP. */
	uint64_t active = 256 + 288 + 356 + 576 + 256 + 288 + 384 + 24;
	cr_expect_eq(p.active, active + 1024 * 2 / 4 + 16);
	cr_expect_eq(p.rank_active, 128 + 288 + 220 + 288 + 192 + 288 + 192 + 24 +
				    512 * 2 / 4 + 16);

	/* State: MLA layers 1, 3 and MTP 4; KDA layers 0 and 2. */
	cr_expect_eq(p.n_mla, 3);
	cr_expect_eq(p.n_kda, 2);
	cr_expect_eq(p.mla_cache, (6 + 2) * 100 * 3 * 2);
	cr_expect_eq(p.kda_state, 2 * 2 * 4 * 4 * 4 / 2);
	cr_expect_eq(p.kda_conv, 2 * 3 * 3 * 8 * 4 / 2);
	/* Widest row: KDA's 5 projections of 8 plus 2 betas = 42 floats. */
	cr_expect_eq(p.scratch, (10 * (3 * 8 + 42) + 2 * 100 + 16) * 4);
	cr_expect_eq(p.rank_total, p.rank_weights + p.mla_cache + p.kda_state + p.kda_conv +
				   p.scratch);
	cr_expect_eq(p.mla_cache_other, (6 + 2) * 100 * 3 * 4);

	/* The plain entry point: float32 cache, one rank. */
	cr_assert_eq(tf_memplan_compute(&fx.cfg, fx.w, 100, 1, &p), TF_OK);
	cr_expect_eq(p.mla_cache, (6 + 2) * 100 * 3 * 4);
	cr_expect_eq(p.rank_weights, p.weights_total);
	cr_expect_eq(p.opts.chunk, TF_MEMPLAN_CHUNK);

	char *text = plan_text(&p);
	cr_expect(strstr(text, "routed experts"), "%s", text);
	cr_expect(strstr(text, "active/token"), "%s", text);
	free(text);
	fixture_close(&fx);
}

/* [tp] moe = experts: each routed expert whole on its block's rank (3
 * ranks over 4 experts: 0 and 1 on rank 0, 2 on rank 1, 3 on rank 2);
 * uneven splits give the first ranks the remainder, heads included. */
Test(memplan, tp_moe_experts_whole_on_their_rank)
{
	fixture fx;
	tf_memplan p;
	fixture_open(&fx);
	tf_memplan_opts o = { .context = 100, .tp_size = 3, .moe_experts = true, .chunk = 10,
			      .cache_elem = 2, .sequences = 1 };
	cr_assert_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &o, &p), TF_OK, "%s", tf_diag_msg());
	/* Layer 1: experts 0-3 of 64 bytes; layer 2: experts 0 and 3 of 384. */
	cr_expect_eq(p.ranks[0].weights[TF_WCLASS_ROUTED], 64 + 64 + 384);
	cr_expect_eq(p.ranks[1].weights[TF_WCLASS_ROUTED], 64);
	cr_expect_eq(p.ranks[2].weights[TF_WCLASS_ROUTED], 64 + 384);
	/* MTP: eh_proj whole, q_proj's 8 rows as 3 + 3 + 2, expert 0 on rank 0. */
	cr_expect_eq(p.ranks[0].weights[TF_WCLASS_MTP], 256 + 48 + 64);
	cr_expect_eq(p.ranks[1].weights[TF_WCLASS_MTP], 256 + 48);
	cr_expect_eq(p.ranks[2].weights[TF_WCLASS_MTP], 256 + 32);
	/* 2 KDA heads over 3 ranks: one each on ranks 0 and 1. */
	cr_expect_eq(p.ranks[0].kda_state, 2 * 4 * 16);
	cr_expect_eq(p.ranks[2].kda_state, 0);
	uint64_t sum = 0;
	for (int r = 0; r < 3; r++) {
		sum += p.ranks[r].weights[TF_WCLASS_ROUTED];
		cr_expect_leq(p.ranks[r].total, p.rank_total, "rank %d above the largest", r);
	}
	cr_expect_eq(sum, p.weights[TF_WCLASS_ROUTED]);
	cr_expect_eq(p.largest, 0);
	cr_expect_eq(p.rank_weights, p.ranks[0].weights_total);

	tf_diag_clear();
	cr_expect_eq(tf_memplan_check(&p, p.rank_total - 1), TF_ERR_RANGE);
	cr_expect(strstr(tf_diag_msg(), "on rank 0 of 3"), "%s", tf_diag_msg());

	char *text = plan_text(&p);
	cr_expect(strstr(text, "rank 2 "), "%s", text);
	free(text);
	fixture_close(&fx);
}

Test(memplan, over_budget_is_refused)
{
	fixture fx;
	tf_memplan p;
	fixture_open(&fx);
	cr_assert_eq(tf_memplan_compute(&fx.cfg, fx.w, 100, 1, &p), TF_OK);
	cr_expect_eq(tf_memplan_check(&p, p.rank_total), TF_OK);
	tf_diag_clear();
	cr_expect_eq(tf_memplan_check(&p, p.rank_total - 1), TF_ERR_RANGE);
	cr_expect(strstr(tf_diag_msg(), "memory_limit allows"), "%s", tf_diag_msg());
	char needs[64];
	snprintf(needs, sizeof(needs), "needs %llu bytes", (unsigned long long)p.rank_total);
	cr_expect(strstr(tf_diag_msg(), needs), "%s", tf_diag_msg());

	/* 2^50 tokens of context cannot fit in this machine's memory. */
	cr_assert_eq(tf_memplan_compute(&fx.cfg, fx.w, 1ll << 50, 1, &p), TF_OK);
	cr_expect_eq(tf_memplan_check(&p, 0), TF_ERR_RANGE);
	cr_expect(strstr(tf_diag_msg(), "MemAvailable in /proc/meminfo allows"), "%s",
		  tf_diag_msg());

	/* Absurd contexts saturate rather than wrap around to something small. */
	cr_assert_eq(tf_memplan_compute(&fx.cfg, fx.w, INT64_MAX, 1, &p), TF_OK);
	cr_expect_eq(p.rank_total, UINT64_MAX);
	cr_expect_eq(tf_memplan_check(&p, UINT64_MAX - 1), TF_ERR_RANGE);

	tf_memplan_opts bad = { .context = 0, .tp_size = 1, .chunk = 1, .cache_elem = 4, .sequences = 1 };
	cr_expect_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &bad, &p), TF_ERR_INVALID);
	bad = (tf_memplan_opts){ .context = 1, .tp_size = 0, .chunk = 1, .cache_elem = 4, .sequences = 1 };
	cr_expect_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &bad, &p), TF_ERR_INVALID);
	bad.tp_size = TF_MEMPLAN_MAX_TP + 1;
	cr_expect_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &bad, &p), TF_ERR_INVALID);
	bad = (tf_memplan_opts){ .context = 1, .tp_size = 1, .chunk = 1, .cache_elem = 4, .sequences = 0 };
	cr_expect_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &bad, &p), TF_ERR_INVALID);
	bad = (tf_memplan_opts){ .context = 1, .tp_size = 1, .chunk = 1, .cache_elem = 3, .sequences = 1 };
	cr_expect_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &bad, &p), TF_ERR_INVALID);
	fixture_close(&fx);
}

/* [runtime] sequences: every sequence may be full at once, so the state
 * counts that many times, and a refusal names the count and the context. */
Test(memplan, sequences_multiply_the_state)
{
	fixture fx;
	tf_memplan one, four;
	fixture_open(&fx);
	tf_memplan_opts o = { .context = 100, .tp_size = 1, .chunk = 10, .cache_elem = 2, .sequences = 1 };
	cr_assert_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &o, &one), TF_OK, "%s", tf_diag_msg());
	o.sequences = 4;
	cr_assert_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &o, &four), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(one.seq_state, one.mla_cache + one.kda_state + one.kda_conv);
	cr_expect_eq(four.seq_state, one.seq_state);
	cr_expect_eq(four.rank_total, one.rank_total + 3 * one.seq_state);
	cr_expect_eq(one.mla_cache_other, 2 * one.mla_cache, "the f32 figure beside bf16");
	cr_expect_eq(one.mtp_rows, 0, "[mtp] off keeps no rows");

	/* [mtp] enabled: chunk 10 keeps up to 11 rows, in buffers of 16, and
	 * their snapshot's: 2 x 16 x (hidden 8 floats + a token). */
	tf_memplan mtp;
	o.sequences = 4;
	o.mtp = true;
	cr_assert_eq(tf_memplan_compute_opts(&fx.cfg, fx.w, &o, &mtp), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(mtp.mtp_rows, 2 * 16 * (8 * 4 + 4), "%llu", (unsigned long long)mtp.mtp_rows);
	cr_expect_eq(mtp.seq_state, four.seq_state + mtp.mtp_rows);
	cr_expect_eq(mtp.rank_total, four.rank_total + 4 * mtp.mtp_rows);
	char *mtext = plan_text(&mtp);
	cr_expect(strstr(mtext, "MTP rows"), "%s", mtext);
	free(mtext);

	tf_diag_clear();
	cr_expect_eq(tf_memplan_check(&four, one.rank_total), TF_ERR_RANGE);
	cr_expect(strstr(tf_diag_msg(), "x 4 sequences"), "%s", tf_diag_msg());
	cr_expect(strstr(tf_diag_msg(), "context of 100 tokens"), "%s", tf_diag_msg());

	char *text = plan_text(&four);
	cr_expect(strstr(text, "4 sequences"), "%s", text);
	cr_expect(strstr(text, "bf16 (f32: "), "%s", text);
	free(text);
	fixture_close(&fx);
}

/* spec/ling-arch.md §1.13 figures from the Ling-3.0-flash config, state
 * only (no weights): 35 KDA layers of 32 x 128 x 128 float32 = 73 MB; the
 * latent cache 576 elements per token on 7 MLA layers + the MTP layer. */
Test(memplan, ling_flash_state_matches_the_spec)
{
	tf_model_config c;
	tf_memplan p;
	cr_assert_eq(tf_config_load(TF_SOURCE_DIR "/tests/weights/ling-3.0-flash.json", &c),
		     TF_OK, "%s", tf_diag_msg());
	tf_memplan_opts o = { .context = 262144, .tp_size = 1, .chunk = 1, .cache_elem = 2, .sequences = 1 };
	cr_assert_eq(tf_memplan_compute_opts(&c, NULL, &o, &p), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(p.n_kda, 35);
	cr_expect_eq(p.n_mla, 8);
	cr_expect_eq(p.kda_state, 35ull * 32 * 128 * 128 * 4);
	cr_expect_eq(p.mla_cache, 576ull * 2 * 8 * 262144);
	cr_expect_eq(p.mla_cache / 8 * 7 / 262144, 8064, "8064 B/token bf16 without MTP");
	cr_expect_eq(p.kda_conv, 35ull * 3 * 3 * 4096 * 4);
	cr_expect_eq(p.weights_total, 0);
	cr_expect_eq(p.active, 0);
	tf_config_free(&c);
}
