/*
 * kda_ref.h - a float64 KDA layer written from the spec alone (ling-arch.md
 * §1.5, §2.3), token by token, for checking the kda plugin.
 */
#ifndef TF_TEST_KDA_REF_H
#define TF_TEST_KDA_REF_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kda_ref_weights {
	int hidden, heads, dim, width;
	bool safe_gate;
	double lower_bound, eps;
	const float *wq, *wk, *wv, *wf, *wb, *wg, *wo;  /* [out, in] */
	/* Kimi's low-rank gates when rank > 0 (wf, wg unused):
	 * f = wfb (wfa x), [P, rank] x [rank, hidden]; same for g. */
	int rank;
	const float *wfa, *wfb, *wga, *wgb;
	const float *conv[3];                           /* q, k, v: [P, width] */
	const float *A_log, *dt_bias, *o_norm;
} kda_ref_weights;

typedef struct kda_ref_state {
	double *S;      /* [heads, dim, dim] */
	double *hist;   /* [3, P, width - 1], oldest first */
} kda_ref_state;

void kda_ref_state_init(kda_ref_state *s, const kda_ref_weights *w);
void kda_ref_state_free(kda_ref_state *s);

/* n tokens x[n, hidden] -> y[n, hidden], advancing the state. */
void kda_ref_forward(const kda_ref_weights *w, kda_ref_state *s, const float *x,
		     int64_t n, double *y);

/* The bare recurrence of one head (§2.3) on already-prepared inputs: q, k,
 * g [n, K], v [n, V], beta [n]; S [K, V]; o [n, V]. */
void kda_ref_delta(double *S, int K, int V, int64_t n, const float *q,
		   const float *k, const float *g, const float *v,
		   const float *beta, double *o);

#endif /* TF_TEST_KDA_REF_H */
