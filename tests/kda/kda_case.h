/*
 * kda_case.h - a small random KDA layer in a test host and its float64
 * reference: the layer the kda unit tests and the conformance suite's
 * reference case both check the plugin on.
 */
#ifndef TF_TEST_KDA_CASE_H
#define TF_TEST_KDA_CASE_H

#include <stdbool.h>
#include <stdint.h>

#include "attn_bufs.h"
#include "kda_ref.h"
#include "support/testhost.h"

#define KDA_CASE_PREFIX "model.layers.0.attention"

/* A small layer: all tensors as the reference sees them (bf16-rounded). */
struct kda_case {
	tf_model_config cfg;
	kda_ref_weights w;
	attn_bufs bufs;
};

/* dt_shift moves sigmoid(exp(A_log) (f + dt_bias)) towards 1 (gate near the
 * lower bound) or 0 (gate near zero).  low_rank: Kimi's f_a/f_b, g_a/g_b.
 * W: the short convolutions' width; nH heads of D channels. */
void kda_case_init_shape(struct kda_case *c, bool safe_gate, bool low_rank, float dt_shift,
			 int W, int nH, int D, uint64_t seed);
/* 3 heads of 16. */
void kda_case_init_gates(struct kda_case *c, bool safe_gate, bool low_rank, float dt_shift,
			 int W, uint64_t seed);
/* Full-rank gates, width 4. */
void kda_case_init(struct kda_case *c, bool safe_gate, float dt_shift, uint64_t seed);
void kda_case_free(struct kda_case *c);

/* The tensors under KDA_CASE_PREFIX in a new host; `skip` (a leaf name) is
 * left out. */
tf_testhost *kda_case_host(const struct kda_case *c, const char *skip);

/* n tokens x through the reference from state rs (kda_ref_state_init'ed),
 * its outputs as float in yd[n, hidden]. */
void kda_case_reference(const struct kda_case *c, kda_ref_state *rs, const float *x, int64_t n,
			float *yd);

#endif /* TF_TEST_KDA_CASE_H */
