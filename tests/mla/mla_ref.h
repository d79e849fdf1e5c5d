/*
 * mla_ref.h - a float64 gated MLA layer written from the spec alone
 * (ling-arch.md §1.6, §3.2, §3.4): explicit per-head keys and values,
 * softmax over the whole causal prefix, for checking the mla plugin.
 */
#ifndef TF_TEST_MLA_REF_H
#define TF_TEST_MLA_REF_H

#include <stdbool.h>
#include <stdint.h>

typedef struct mla_ref_weights {
	int hidden, heads, dn, dr, dv, r, rq;
	bool gate_head_wise, interleave;
	bool bf16_cache;                        /* cache c and k_pe rounded to bf16 */
	double eps, theta;
	/* YaRN when factor > 0 */
	double factor, orig_ctx, beta_fast, beta_slow, mscale, mscale_all_dim;
	const float *wq;                        /* [heads*(dn+dr), hidden], rq == 0 */
	const float *wqa, *qa_norm, *wqb;       /* rq > 0 */
	const float *wkva, *kva_norm, *wkvb;    /* [r+dr, hidden], [r], [heads*(dn+dv), r] */
	const float *wg, *wdense;               /* [gate, hidden], [hidden, heads*dv] */
} mla_ref_weights;

typedef struct mla_ref_state {
	int64_t len, cap;
	double *k;      /* [cap, heads, dn + dr] full keys */
	double *v;      /* [cap, heads, dv] */
} mla_ref_state;

void mla_ref_state_init(mla_ref_state *s, const mla_ref_weights *w, int64_t cap);
void mla_ref_state_free(mla_ref_state *s);

/* n tokens at positions pos -> y[n, hidden], appending to the state. */
void mla_ref_forward(const mla_ref_weights *w, mla_ref_state *s, const float *x,
		     int64_t n, const int32_t *pos, double *y);

#endif /* TF_TEST_MLA_REF_H */
