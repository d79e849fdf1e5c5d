/*
 * rope.h - the rotary frequencies of the MLA rope slice, with YaRN.
 *
 * The rotation itself is the backend's rope op; this computes what it
 * needs from config.json: inv_freq[j] = theta^(-2j/d) for the d-dim slice,
 * blended towards theta^(-2j/d) / factor by the YaRN ramp when
 * rope_scaling is "yarn", the attention factor that scales cos and sin, and
 * the multiplier of the softmax scale (mscale_all_dim squared, as the
 * Hugging Face DeepSeek/Ling code applies it).
 */
#ifndef TF_MLA_ROPE_H
#define TF_MLA_ROPE_H

#include "tf/plugin.h"

typedef struct mla_rope {
	float *inv_freq;        /* [dim / 2] */
	float attn_factor;      /* cos/sin multiplier */
	float scale_mult;       /* softmax scale multiplier */
} mla_rope;

/* Fails naming the config.json key that is out of range. */
int mla_rope_init(const tf_host *h, int dim, mla_rope *r);
void mla_rope_free(mla_rope *r);

#endif /* TF_MLA_ROPE_H */
