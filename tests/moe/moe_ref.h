/*
 * moe_ref.h - a float64 reference of the Ling MoE block and dense MLP,
 * written from ling-arch.md §1.7-1.8 without the plugin's code: the
 * router sorts (instead of repeated argmax) and every sum is in double.
 */
#ifndef TF_TEST_MOE_REF_H
#define TF_TEST_MOE_REF_H

#include <stdbool.h>
#include <stdint.h>

typedef struct moe_ref_router {
	int hidden, n_experts, top_k, n_group, topk_group;
	bool sigmoid, norm_topk;
	double scaling;
	const float *weight;            /* [n_experts, hidden] */
	const float *bias;              /* [n_experts] or NULL */
} moe_ref_router;

/* idx[top_k] (best first, lower index on ties), w[top_k]; from x[hidden]. */
void moe_ref_route(const moe_ref_router *r, const float *x, int32_t *idx, double *w);
/* The same from given logits[n_experts]. */
void moe_ref_select(const moe_ref_router *r, const double *logits, int32_t *idx,
		    double *w);

/* y[hidden] = down(act(gate x, up x)); weights [inter, hidden] and
 * [hidden, inter]; limit 0 means no clamp. */
void moe_ref_mlp(const float *x, int hidden, int inter, const float *gate,
		 const float *up, const float *down, double limit, double *y);

#endif /* TF_TEST_MOE_REF_H */
