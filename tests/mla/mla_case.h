/*
 * mla_case.h - a small random gated MLA layer in a test host and its
 * float64 reference: the layer the mla unit tests and the conformance
 * suite's reference case both check the plugin on.
 */
#ifndef TF_TEST_MLA_CASE_H
#define TF_TEST_MLA_CASE_H

#include <stdbool.h>
#include <stdint.h>

#include "kda/attn_bufs.h"
#include "mla_ref.h"
#include "support/testhost.h"

#define MLA_CASE_PREFIX "model.layers.3.attention"

enum { YARN_NONE, YARN_FACTOR_ONLY, YARN_MSCALE };

struct mla_case {
	tf_model_config cfg;
	mla_ref_weights w;
	attn_bufs bufs;
	const char *kv_cache;           /* [runtime] kv_cache; NULL: the default (bf16) */
	int threads;                    /* the host's workers; 0: 2 */
};

/* hidden 48, 3 heads, rope 8 (q rank 20), nope dn, v dv, kv rank r. */
void mla_case_init_dims(struct mla_case *c, bool q_lora, bool head_wise, int yarn, int dn,
			int dv, int r, uint64_t seed);
/* nope 16 / v 12, kv rank 24. */
void mla_case_init(struct mla_case *c, bool q_lora, bool head_wise, int yarn, uint64_t seed);
void mla_case_free(struct mla_case *c);

/* The tensors under MLA_CASE_PREFIX in a new host of c->threads workers,
 * with c->kv_cache set;
 * `skip` (a leaf name) is left out. */
tf_testhost *mla_case_host(const struct mla_case *c, const char *skip);

/* The float64 reference layer's output for n tokens x at positions 0.., as float. */
void mla_case_reference(const struct mla_case *c, const float *x, int64_t n, float *yd);

#endif /* TF_TEST_MLA_CASE_H */
