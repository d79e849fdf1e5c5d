/* kda_case.c - see kda_case.h. */
#include "kda_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kda_case_init_shape(struct kda_case *c, bool safe_gate, bool low_rank, float dt_shift,
			 int W, int nH, int D, uint64_t seed)
{
	memset(c, 0, sizeof(*c));
	attn_bufs *b = &c->bufs;
	const int H = 48, P = nH * D;
	c->cfg = (tf_model_config){
		.hidden_size = H, .num_attention_heads = nH, .head_dim = D,
		.short_conv_kernel_size = W, .no_kda_lora = !low_rank,
		.kda_safe_gate = safe_gate, .kda_lower_bound = -5.0f,
		.rms_norm_eps = 1e-6f,
	};
	kda_ref_weights *w = &c->w;
	*w = (kda_ref_weights){ .hidden = H, .heads = nH, .dim = D, .width = W,
				.safe_gate = safe_gate, .lower_bound = -5.0,
				.eps = 1e-6 };
	float s = 1.0f / sqrtf((float)H);
	w->wq = attn_bufs_random(b, (size_t)P * H, s, true, &seed);
	w->wk = attn_bufs_random(b, (size_t)P * H, s, true, &seed);
	w->wv = attn_bufs_random(b, (size_t)P * H, s, true, &seed);
	if (low_rank) {
		w->rank = D;
		w->wfa = attn_bufs_random(b, (size_t)D * H, s, true, &seed);
		w->wfb = attn_bufs_random(b, (size_t)P * D, 1.0f / sqrtf((float)D), true, &seed);
		w->wga = attn_bufs_random(b, (size_t)D * H, s, true, &seed);
		w->wgb = attn_bufs_random(b, (size_t)P * D, 1.0f / sqrtf((float)D), true, &seed);
	} else {
		w->wf = attn_bufs_random(b, (size_t)P * H, s, true, &seed);
		w->wg = attn_bufs_random(b, (size_t)P * H, s, true, &seed);
	}
	w->wb = attn_bufs_random(b, (size_t)nH * H, 2 * s, true, &seed);
	w->wo = attn_bufs_random(b, (size_t)H * P, 1.0f / sqrtf((float)P), true, &seed);
	for (int i = 0; i < 3; i++)
		w->conv[i] = attn_bufs_random(b, (size_t)P * W, 0.6f, false, &seed);
	w->A_log = attn_bufs_random(b, (size_t)nH, 0.5f, false, &seed);
	float *dt = attn_bufs_random(b, (size_t)P, 0.5f, false, &seed);
	for (int i = 0; i < P; i++)
		dt[i] += dt_shift;
	w->dt_bias = dt;
	float *on = attn_bufs_random(b, (size_t)D, 0.3f, false, &seed);
	for (int i = 0; i < D; i++)
		on[i] += 1.0f;
	w->o_norm = on;
}

void kda_case_init_gates(struct kda_case *c, bool safe_gate, bool low_rank, float dt_shift,
			 int W, uint64_t seed)
{
	kda_case_init_shape(c, safe_gate, low_rank, dt_shift, W, 3, 16, seed);
}

void kda_case_init(struct kda_case *c, bool safe_gate, float dt_shift, uint64_t seed)
{
	kda_case_init_gates(c, safe_gate, false, dt_shift, 4, seed);
}

void kda_case_free(struct kda_case *c)
{
	attn_bufs_free(&c->bufs);
}

tf_testhost *kda_case_host(const struct kda_case *c, const char *skip)
{
	const kda_ref_weights *w = &c->w;
	const int64_t H = w->hidden, nH = w->heads, D = w->dim, P = nH * D;
	tf_testhost *th = tf_testhost_new(&c->cfg, 2);
	const tf_test_tensor t[] = {
		{ "q_proj.weight", TF_DTYPE_BF16, 2, { P, H }, w->wq },
		{ "k_proj.weight", TF_DTYPE_BF16, 2, { P, H }, w->wk },
		{ "v_proj.weight", TF_DTYPE_BF16, 2, { P, H }, w->wv },
		{ "f_proj.weight", TF_DTYPE_BF16, 2, { P, H }, w->wf },
		{ "f_a_proj.weight", TF_DTYPE_BF16, 2, { w->rank, H }, w->wfa },
		{ "f_b_proj.weight", TF_DTYPE_BF16, 2, { P, w->rank }, w->wfb },
		{ "g_a_proj.weight", TF_DTYPE_BF16, 2, { w->rank, H }, w->wga },
		{ "g_b_proj.weight", TF_DTYPE_BF16, 2, { P, w->rank }, w->wgb },
		{ "b_proj.weight", TF_DTYPE_BF16, 2, { nH, H }, w->wb },
		{ "g_proj.weight", TF_DTYPE_BF16, 2, { P, H }, w->wg },
		{ "o_proj.weight", TF_DTYPE_BF16, 2, { H, P }, w->wo },
		{ "q_conv1d.weight", TF_DTYPE_F32, 3, { P, 1, w->width }, w->conv[0] },
		{ "k_conv1d.weight", TF_DTYPE_F32, 3, { P, 1, w->width }, w->conv[1] },
		{ "v_conv1d.weight", TF_DTYPE_F32, 3, { P, 1, w->width }, w->conv[2] },
		/* Kimi stores A_log as [1, 1, heads, 1] */
		{ "A_log", TF_DTYPE_F32, w->rank ? 4 : 1, { w->rank ? 1 : nH, 1, nH, 1 }, w->A_log },
		{ "dt_bias", TF_DTYPE_F32, 1, { P }, w->dt_bias },
		{ "o_norm.weight", TF_DTYPE_F32, 1, { D }, w->o_norm },
	};
	tf_testhost_add_layer(th, KDA_CASE_PREFIX, t, sizeof(t) / sizeof(t[0]), skip);
	return th;
}

void kda_case_reference(const struct kda_case *c, kda_ref_state *rs, const float *x, int64_t n,
			float *yd)
{
	const size_t m = (size_t)n * c->w.hidden;
	double *ref = malloc(m * sizeof(double));
	if (!ref)
		abort();
	kda_ref_forward(&c->w, rs, x, n, ref);
	for (size_t i = 0; i < m; i++)
		yd[i] = (float)ref[i];
	free(ref);
}
