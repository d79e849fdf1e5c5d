/* mla_case.c - see mla_case.h. */
#include "mla_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Norm weights around 1, exact in bf16 (some are stored so). */
static float *case_norm(struct mla_case *c, int n, uint64_t *seed)
{
	float *p = attn_bufs_random(&c->bufs, (size_t)n, 0.3f, false, seed);
	for (int i = 0; i < n; i++)
		p[i] = tf_bf16_to_f32(tf_f32_to_bf16(p[i] + 1.0f));
	return p;
}

void mla_case_init_dims(struct mla_case *c, bool q_lora, bool head_wise, int yarn, int dn,
			int dv, int r, uint64_t seed)
{
	memset(c, 0, sizeof(*c));
	attn_bufs *b = &c->bufs;
	const int H = 48, nH = 3, dr = 8, rq = q_lora ? 20 : 0;
	const int dq = dn + dr, gw = head_wise ? nH : nH * dv;
	c->cfg = (tf_model_config){
		.hidden_size = H, .num_attention_heads = nH, .q_lora_rank = rq,
		.kv_lora_rank = r, .qk_nope_head_dim = dn, .qk_rope_head_dim = dr,
		.v_head_dim = dv, .rope_theta = 10000.0, .rope_interleave = true,
		.max_position_embeddings = 4096, .gate_head_wise = head_wise,
		.rms_norm_eps = 1e-6f,
	};
	mla_ref_weights *w = &c->w;
	*w = (mla_ref_weights){ .hidden = H, .heads = nH, .dn = dn, .dr = dr, .dv = dv,
				.r = r, .rq = rq, .gate_head_wise = head_wise,
				.interleave = true, .eps = 1e-6, .theta = 10000.0 };
	if (yarn != YARN_NONE) {
		/* orig 32 puts the ramp inside the 4 rope pairs: one pair keeps its
		 * frequency, the rest are interpolated */
		c->cfg.rope_scaling = (tf_rope_scaling){
			.kind = TF_ROPE_YARN, .factor = 4.0, .original_max_position_embeddings = 32,
			.beta_fast = 32, .beta_slow = 1,
			.mscale = yarn == YARN_MSCALE ? 1.0 : 0.0,
			.mscale_all_dim = yarn == YARN_MSCALE ? 0.8 : 0.0,
		};
		w->factor = 4.0;
		w->orig_ctx = 32;
		w->beta_fast = 32;
		w->beta_slow = 1;
		w->mscale = c->cfg.rope_scaling.mscale;
		w->mscale_all_dim = c->cfg.rope_scaling.mscale_all_dim;
	}
	float s = 1.0f / sqrtf((float)H);
	if (q_lora) {
		w->wqa = attn_bufs_random(b, (size_t)rq * H, s, true, &seed);
		w->qa_norm = case_norm(c, rq, &seed);
		w->wqb = attn_bufs_random(b, (size_t)nH * dq * rq, 1.0f / sqrtf((float)rq), true, &seed);
	} else {
		w->wq = attn_bufs_random(b, (size_t)nH * dq * H, s, true, &seed);
	}
	w->wkva = attn_bufs_random(b, (size_t)(r + dr) * H, s, true, &seed);
	w->kva_norm = case_norm(c, r, &seed);
	w->wkvb = attn_bufs_random(b, (size_t)nH * (dn + dv) * r, 2.0f / sqrtf((float)r), true, &seed);
	w->wg = attn_bufs_random(b, (size_t)gw * H, 2 * s, true, &seed);
	w->wdense = attn_bufs_random(b, (size_t)H * nH * dv, 1.0f / sqrtf((float)(nH * dv)), true, &seed);
}

void mla_case_init(struct mla_case *c, bool q_lora, bool head_wise, int yarn, uint64_t seed)
{
	mla_case_init_dims(c, q_lora, head_wise, yarn, 16, 12, 24, seed);
}

void mla_case_free(struct mla_case *c)
{
	attn_bufs_free(&c->bufs);
}

tf_testhost *mla_case_host(const struct mla_case *c, const char *skip)
{
	const mla_ref_weights *w = &c->w;
	const int64_t H = w->hidden, nH = w->heads, dq = w->dn + w->dr, rq = w->rq;
	const int64_t gw = w->gate_head_wise ? nH : nH * w->dv;
	tf_testhost *th = tf_testhost_new(&c->cfg, c->threads ? c->threads : 2);
	if (c->kv_cache)
		tf_testhost_set_conf(th, "runtime", "kv_cache", c->kv_cache);
	const tf_test_tensor t[] = {
		{ "q_proj.weight", TF_DTYPE_BF16, 2, { nH * dq, H }, w->wq },
		{ "q_a_proj.weight", TF_DTYPE_BF16, 2, { rq, H }, w->wqa },
		{ "q_a_layernorm.weight", TF_DTYPE_BF16, 1, { rq }, w->qa_norm },
		{ "q_b_proj.weight", TF_DTYPE_BF16, 2, { nH * dq, rq }, w->wqb },
		{ "kv_a_proj_with_mqa.weight", TF_DTYPE_BF16, 2, { w->r + w->dr, H }, w->wkva },
		{ "kv_a_layernorm.weight", TF_DTYPE_F32, 1, { w->r }, w->kva_norm },
		{ "kv_b_proj.weight", TF_DTYPE_BF16, 2, { nH * (w->dn + w->dv), w->r }, w->wkvb },
		{ "g_proj.weight", TF_DTYPE_BF16, 2, { gw, H }, w->wg },
		{ "dense.weight", TF_DTYPE_BF16, 2, { H, nH * w->dv }, w->wdense },
	};
	tf_testhost_add_layer(th, MLA_CASE_PREFIX, t, sizeof(t) / sizeof(t[0]), skip);
	return th;
}

void mla_case_reference(const struct mla_case *c, const float *x, int64_t n, float *yd)
{
	const int H = c->w.hidden;
	double *ref = malloc((size_t)n * H * sizeof(double));
	int32_t *pos = malloc((size_t)n * sizeof(int32_t));
	mla_ref_state rs;

	for (int64_t i = 0; i < n; i++)
		pos[i] = (int32_t)i;
	mla_ref_state_init(&rs, &c->w, n);
	mla_ref_forward(&c->w, &rs, x, n, pos, ref);
	for (int64_t i = 0; i < n * H; i++)
		yd[i] = (float)ref[i];
	mla_ref_state_free(&rs);
	free(ref);
	free(pos);
}
