/*
 * sampler.h - the sampler behind tf/sampler.h's parameters.
 *
 * The draw's random number is a pure function of (seed, stream, position):
 * a counter-based hash, never a shared stream of draws.  So a token does not
 * depend on how many other sequences were batched with it, nor on how many
 * tokens a drafter proposed and the verifier threw away: drafted == serial,
 * sampled.  The engine draws every sequence from stream 0.
 */
#ifndef TF_SAMPLER_IMPL_H
#define TF_SAMPLER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/sampler.h"

/* One candidate of the final distribution. */
typedef struct tf_sampler_cand {
	int32_t id;
	float p;
} tf_sampler_cand;

typedef struct tf_sampler {
	tf_sampler_params par;
	int n_vocab;
	float *logit;           /* penalised copy of the logits */
	tf_sampler_cand *cand;  /* n_vocab candidates */
	uint32_t *count;        /* n_vocab: occurrences in the penalty window */
	tf_logit_bias *bias;    /* the params' logit_bias, owned */
} tf_sampler;

/* Checks the ranges (TF_ERR_INVALID names the bad parameter). */
int tf_sampler_init(tf_sampler *s, const tf_sampler_params *p, int n_vocab);
void tf_sampler_free(tf_sampler *s);

/*
 * The token at position pos of sequence seq, given its logits[n_vocab] and
 * the tokens before it (for the penalties).  NaN logits count as -inf; all
 * -inf is TF_ERR_INVALID.  Not thread-safe per sampler (it owns scratch).
 */
int tf_sampler_sample(tf_sampler *s, const float *logits, const int32_t *history,
		      size_t n_history, uint64_t seq, uint64_t pos, int32_t *token);
/*
 * The distribution the draw is made from, most likely first: cand[0..*n)
 * with p summing to 1 (greedy: the argmax with p = 1).  The pointer is the
 * sampler's scratch, valid until the next call.  Speculative verification
 * with sampling needs these probabilities.
 */
int tf_sampler_dist(tf_sampler *s, const float *logits, const int32_t *history,
		    size_t n_history, const tf_sampler_cand **cand, size_t *n);

/*
 * Speculative sampling's accept rule: draft x was drawn from q; keep it
 * when u < p(x) / q(x), else draw from the residual max(0, p - q),
 * normalised, at v (u, v uniform in [0, 1), independent).  Either way the
 * token is distributed as p.  p and q are dense [n], each summing to 1.
 * Returns whether x was kept; *token is the token chosen.
 */
bool tf_sampler_accept(const float *p, const float *q, int n, int32_t x, double u, double v,
		       int32_t *token);

/* The uniform number in [0, 1) for (seed, seq, pos). */
double tf_sampler_uniform(uint64_t seed, uint64_t seq, uint64_t pos);

/*
 * The plain reference of tf_sampler_sample: sorts the whole vocabulary, cuts
 * and walks it.  The fast path selects the top k with a heap and sorts only
 * the most likely tokens that the top-p cut and the draw can reach; tests
 * check both pick the same token.
 */
int tf_sampler_sample_ref(tf_sampler *s, const float *logits, const int32_t *history,
			  size_t n_history, uint64_t seq, uint64_t pos, int32_t *token);

#endif /* TF_SAMPLER_IMPL_H */
