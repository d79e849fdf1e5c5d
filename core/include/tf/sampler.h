/*
 * tf/sampler.h - how the next token is picked from logits.
 *
 * Order: repetition, presence and frequency penalties and the logit bias
 * on the logits; then greedy
 * (temperature <= 0) or temperature, top-k, softmax, top-p, min-p and a
 * draw.  The draw's random number is a pure function of (seed, position):
 * a token does not depend on which other sequences shared its step, nor on
 * how many tokens a drafter proposed and the verifier threw away.
 * tf_seq_sample (tf/engine.h) samples with a sequence's own parameters.
 */
#ifndef TF_SAMPLER_H
#define TF_SAMPLER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A token's logit bias, as OpenAI's logit_bias: added to its logit; -100
 * or less bans it. */
typedef struct tf_logit_bias {
	int32_t id;
	float bias;
} tf_logit_bias;

typedef struct tf_sampler_params {
	float temperature;      /* <= 0: greedy (argmax) */
	int top_k;              /* 0: off */
	float top_p;            /* >= 1: off */
	float min_p;            /* <= 0: off; else keep p >= min_p * p_max */
	float repeat_penalty;   /* 1: off; > 1 discourages recent tokens */
	float presence_penalty; /* 0: off; subtracted once per recent token */
	int repeat_last_n;      /* the penalties' window; -1: all history */
	uint64_t seed;
	/* Read by the host's sampler alone: a backend samples a sequence only
	 * while they are off. */
	float frequency_penalty;        /* 0: off; subtracted once per occurrence */
	int64_t penalty_from;           /* the penalties count tokens from here on */
	const tf_logit_bias *logit_bias;/* [n_logit_bias], copied by the sampler */
	int n_logit_bias;
} tf_sampler_params;

/* Greedy, no penalties, top_p 1, seed 0, no bias. */
void tf_sampler_params_default(tf_sampler_params *p);

#ifdef __cplusplus
}
#endif
#endif /* TF_SAMPLER_H */
