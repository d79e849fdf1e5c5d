/* moe_ref.c - see moe_ref.h. */
#include "moe_ref.h"

#include <math.h>
#include <stdlib.h>

struct ranked {
	double v;
	int i;
};

/* Descending by value, ascending by index on ties. */
static int by_value_desc(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->v != y->v)
		return x->v < y->v ? 1 : -1;
	return x->i - y->i;
}

void moe_ref_select(const moe_ref_router *r, const double *logits, int32_t *idx,
		    double *w)
{
	int E = r->n_experts, G = r->n_group > 1 ? r->n_group : 1, gs = E / G;
	double *s = malloc(sizeof(double) * E);
	struct ranked *rk = malloc(sizeof(*rk) * E);
	double max = -INFINITY, sum = 0;

	for (int e = 0; e < E; e++)
		max = fmax(max, logits[e]);
	for (int e = 0; e < E; e++) {
		s[e] = r->sigmoid ? 1 / (1 + exp(-logits[e])) : exp(logits[e] - max);
		sum += s[e];
	}
	for (int e = 0; !r->sigmoid && e < E; e++)
		s[e] /= sum;

	/* Rank groups by the sum of their two best biased scores, or without
	 * a bias by their best score. */
	struct ranked *grp = malloc(sizeof(*grp) * G);
	for (int g = 0; g < G; g++) {
		for (int j = 0; j < gs; j++)
			rk[j] = (struct ranked){ s[g * gs + j] + (r->bias ? r->bias[g * gs + j] : 0), j };
		qsort(rk, gs, sizeof(*rk), by_value_desc);
		grp[g] = (struct ranked){ rk[0].v + (gs > 1 && r->bias ? rk[1].v : 0), g };
	}
	qsort(grp, G, sizeof(*grp), by_value_desc);
	int n_keep = G > 1 ? r->topk_group : 1;

	int n = 0;
	for (int e = 0; e < E; e++) {
		int keep = 0;
		for (int j = 0; j < n_keep; j++)
			keep |= grp[j].i == e / gs;
		if (keep)
			rk[n++] = (struct ranked){ s[e] + (r->bias ? r->bias[e] : 0), e };
	}
	qsort(rk, n, sizeof(*rk), by_value_desc);

	double wsum = 0;
	for (int j = 0; j < r->top_k; j++) {
		idx[j] = rk[j].i;
		w[j] = s[rk[j].i];
		wsum += w[j];
	}
	for (int j = 0; j < r->top_k; j++)
		w[j] = (r->norm_topk && r->top_k > 1 ? w[j] / (wsum + 1e-20) : w[j]) * r->scaling;
	free(grp);
	free(rk);
	free(s);
}

void moe_ref_route(const moe_ref_router *r, const float *x, int32_t *idx, double *w)
{
	double *logits = malloc(sizeof(double) * r->n_experts);
	for (int e = 0; e < r->n_experts; e++) {
		logits[e] = 0;
		for (int c = 0; c < r->hidden; c++)
			logits[e] += (double)x[c] * r->weight[(size_t)e * r->hidden + c];
	}
	moe_ref_select(r, logits, idx, w);
	free(logits);
}

void moe_ref_mlp(const float *x, int hidden, int inter, const float *gate,
		 const float *up, const float *down, double limit, double *y)
{
	double *a = malloc(sizeof(double) * inter);
	for (int i = 0; i < inter; i++) {
		double g = 0, u = 0;
		for (int c = 0; c < hidden; c++) {
			g += (double)x[c] * gate[(size_t)i * hidden + c];
			u += (double)x[c] * up[(size_t)i * hidden + c];
		}
		double act = g / (1 + exp(-g));
		if (limit > 0) {
			act = fmin(act, limit);
			u = fmax(-limit, fmin(u, limit));
		}
		a[i] = act * u;
	}
	for (int c = 0; c < hidden; c++) {
		y[c] = 0;
		for (int i = 0; i < inter; i++)
			y[c] += a[i] * down[(size_t)c * inter + i];
	}
	free(a);
}
