/* router.c - see router.h. */
#include "router.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/tensor_util.h"
#include "tf/backend.h"

static int check_config(const tf_host *h, const tf_model_config *c)
{
	if (c->hidden_size <= 0)
		return h->error(h, TF_ERR_INVALID, "config.json: hidden_size %d must be positive",
				c->hidden_size);
	if (c->num_experts <= 0)
		return h->error(h, TF_ERR_INVALID, "config.json: num_experts %d must be positive",
				c->num_experts);
	if (c->num_experts_per_tok <= 0 || c->num_experts_per_tok > c->num_experts)
		return h->error(h, TF_ERR_INVALID,
				"config.json: num_experts_per_tok %d must be in 1..num_experts (%d)",
				c->num_experts_per_tok, c->num_experts);
	if (c->n_group > 1) {
		if (c->num_experts % c->n_group)
			return h->error(h, TF_ERR_INVALID,
					"config.json: num_experts %d is not a multiple of n_group %d",
					c->num_experts, c->n_group);
		if (c->topk_group < 1 || c->topk_group > c->n_group)
			return h->error(h, TF_ERR_INVALID,
					"config.json: topk_group %d must be in 1..n_group (%d)",
					c->topk_group, c->n_group);
		/* Otherwise top-k would have to pick masked (-inf) experts. */
		if (c->num_experts_per_tok > c->topk_group * (c->num_experts / c->n_group))
			return h->error(h, TF_ERR_INVALID,
					"config.json: num_experts_per_tok %d exceeds the %d experts in topk_group %d groups",
					c->num_experts_per_tok,
					c->topk_group * (c->num_experts / c->n_group), c->topk_group);
	}
	if (!isfinite(c->routed_scaling_factor) || c->routed_scaling_factor <= 0)
		return h->error(h, TF_ERR_INVALID,
				"config.json: routed_scaling_factor %g must be positive",
				(double)c->routed_scaling_factor);
	return TF_OK;
}

int tf_router_init(tf_router *r, const tf_host *h, const char *prefix)
{
	const tf_model_config *c = h->model;
	char name[TF_TU_NAME_MAX];
	tf_tensor t;
	int rc;

	*r = (tf_router){ .host = h };
	snprintf(r->prefix, sizeof(r->prefix), "%s", prefix);
	rc = check_config(h, c);
	if (rc)
		return rc;
	r->hidden = c->hidden_size;
	r->n_experts = c->num_experts;
	r->top_k = c->num_experts_per_tok;
	r->n_group = c->n_group > 1 ? c->n_group : 1;
	r->topk_group = c->n_group > 1 ? c->topk_group : 1;
	r->sigmoid = c->score_sigmoid;
	r->norm_topk = c->norm_topk_prob;
	r->scaling = c->routed_scaling_factor;

	rc = tf_tu_lin_open(h, prefix, "gate", r->hidden, r->n_experts,
			    "in hidden_size, out num_experts", &r->gate);
	if (rc || !c->moe_router_enable_expert_bias)
		goto out;
	/* The second name is what some MTP checkpoints call the same buffer. */
	static const char *const bias_leaf[] = { "gate.expert_bias",
						 "gate.e_score_correction_bias" };
	int i;
	for (i = 0; i < 2; i++) {
		rc = tf_tu_name(h, name, prefix, bias_leaf[i]);
		if (rc || h->weight_get(h, name, &t) == TF_OK)
			break;
	}
	if (i == 2)
		rc = h->error(h, TF_ERR_NOT_FOUND,
			      "%s.%s: missing, and moe_router_enable_expert_bias is set",
			      prefix, bias_leaf[0]);
	if (!rc)
		rc = tf_tu_load_f32(h, name, 1, (int64_t[]){ r->n_experts }, &r->bias);
out:
	if (rc)
		tf_router_free(r);
	return rc;
}

void tf_router_free(tf_router *r)
{
	tf_tu_lin_close(r->host, &r->gate);
	free(r->bias);
	r->bias = NULL;
}

/* scratch: s[E], sb[E], taken[E], gscore[G], gtaken[G]. */
int64_t tf_router_scratch(const tf_router *r)
{
	return 3 * (int64_t)r->n_experts + 2 * (int64_t)r->n_group;
}

/*
 * out[0..k) = indices of the k largest v[i], largest first, the lower index
 * winning ties; taken[n] is left 1 at the picked indices.  A NaN never
 * beats anything, so the picks stay distinct and in range whatever the
 * input.  out may be NULL when only the flags are wanted.
 */
static void top_indices(const float *v, int n, int k, float *taken, int32_t *out)
{
	for (int i = 0; i < n; i++)
		taken[i] = 0;
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int i = 0; i < n; i++)
			if (!taken[i] && (best < 0 || v[i] > v[best]))
				best = i;
		taken[best] = 1;
		if (out)
			out[j] = best;
	}
}

/* A group's score: the sum of its two largest values, or with pair false
 * its largest.  A group of one has just its one value either way. */
static float group_score(const float *v, int n, bool pair)
{
	float a = v[0], b = -INFINITY;

	for (int i = 1; i < n; i++) {
		if (v[i] > a) {
			b = a;
			a = v[i];
		} else if (v[i] > b) {
			b = v[i];
		}
	}
	return pair && n > 1 ? a + b : a;
}

static void score(const tf_router *r, const float *logits, float *s)
{
	int E = r->n_experts;

	if (r->sigmoid) {
		for (int e = 0; e < E; e++)
			s[e] = tf_tu_sigmoid(logits[e]);
		return;
	}
	float max = logits[0], sum = 0;
	for (int e = 1; e < E; e++)
		max = logits[e] > max ? logits[e] : max;
	for (int e = 0; e < E; e++) {
		s[e] = expf(logits[e] - max);
		sum += s[e];
	}
	for (int e = 0; e < E; e++)
		s[e] /= sum;
}

void tf_router_select(const tf_router *r, const float *logits, float *scratch,
		      int32_t *idx, float *w)
{
	int E = r->n_experts, G = r->n_group, k = r->top_k;
	float *s = scratch, *sb = s + E, *taken = sb + E;
	float *gscore = taken + E, *gtaken = gscore + G;

	score(r, logits, s);
	for (int e = 0; e < E; e++)
		sb[e] = r->bias ? s[e] + r->bias[e] : s[e];

	if (G > 1) {
		int gs = E / G;

		for (int g = 0; g < G; g++)
			gscore[g] = group_score(sb + g * gs, gs, r->bias != NULL);
		top_indices(gscore, G, r->topk_group, gtaken, NULL);
		for (int g = 0; g < G; g++)
			if (!gtaken[g])
				for (int e = g * gs; e < (g + 1) * gs; e++)
					sb[e] = -INFINITY;
	}

	top_indices(sb, E, k, taken, idx);
	float sum = 0;
	for (int j = 0; j < k; j++) {
		w[j] = s[idx[j]];
		sum += w[j];
	}
	for (int j = 0; j < k; j++) {
		if (r->norm_topk && k > 1)
			w[j] /= sum + 1e-20f;
		w[j] *= r->scaling;
	}
}

int tf_router_route(const tf_router *r, const float *x, int64_t n,
		    int32_t *idx, float *w)
{
	const tf_host *h = r->host;
	const tf_backend *be = h->backend;
	int64_t E = r->n_experts;
	float *logits = be->alloc(h->backend_ctx, (size_t)(n * E) * sizeof(float));
	float *scratch = malloc((size_t)tf_router_scratch(r) * sizeof(float));
	int rc;

	if (!logits || !scratch) {
		rc = h->error(h, TF_ERR_NOMEM, "%s.gate: no memory to route %lld tokens",
			      r->prefix, (long long)n);
		goto out;
	}
	rc = tf_lin_forward(&r->gate, x, n, logits);
	for (int64_t t = 0; !rc && t < n; t++)
		tf_router_select(r, logits + t * E, scratch, idx + t * r->top_k,
				 w + t * r->top_k);
out:
	if (logits)
		be->free(h->backend_ctx, logits);
	free(scratch);
	return rc;
}
