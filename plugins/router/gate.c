/* gate.c - see gate.h. */
#include "gate.h"

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

int tf_gate_init(tf_gate *r, const tf_host *h, const char *prefix)
{
	const tf_model_config *c = h->model;
	char name[TF_TU_NAME_MAX];
	tf_tensor t;
	int rc;

	*r = (tf_gate){ .host = h };
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
		tf_gate_free(r);
	return rc;
}

void tf_gate_free(tf_gate *r)
{
	tf_tu_lin_close(r->host, &r->gate);
	free(r->bias);
	r->bias = NULL;
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

static void score(const tf_gate *r, const float *logits, float *s)
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

/*
 * One token from its fp32 logits [n_experts]: idx[top_k], w[top_k].
 * scratch: s[E], sb[E], tmp[E], gscore[G] floats; gidx: G ints.
 */
static void select_one(const tf_gate *r, tf_topk_fn top, const float *logits,
		       float *scratch, int32_t *gidx, int32_t *idx, float *w)
{
	int E = r->n_experts, G = r->n_group, k = r->top_k;
	float *s = scratch, *sb = s + E, *tmp = sb + E, *gscore = tmp + E;

	score(r, logits, s);
	for (int e = 0; e < E; e++)
		sb[e] = r->bias ? s[e] + r->bias[e] : s[e];

	if (G > 1) {
		int gs = E / G;

		for (int g = 0; g < G; g++)
			gscore[g] = group_score(sb + g * gs, gs, r->bias != NULL);
		top(gscore, G, r->topk_group, tmp, gidx);
		for (int g = 0; g < G; g++)
			tmp[g] = 0;
		for (int j = 0; j < r->topk_group; j++)
			tmp[gidx[j]] = 1;
		for (int g = 0; g < G; g++)
			if (!tmp[g])
				for (int e = g * gs; e < (g + 1) * gs; e++)
					sb[e] = -INFINITY;
	}

	top(sb, E, k, tmp, idx);
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

int tf_gate_route(const tf_gate *r, tf_topk_fn top, const float *x, int64_t n,
		  int32_t *idx, float *w)
{
	const tf_host *h = r->host;
	const tf_backend *be = h->backend;
	int64_t E = r->n_experts;
	float *logits = be->alloc(h->backend_ctx, (size_t)(n * E) * sizeof(float));
	float *scratch = malloc((size_t)(3 * E + r->n_group) * sizeof(float));
	int32_t *gidx = malloc((size_t)r->n_group * sizeof(int32_t));
	int rc;

	if (!logits || !scratch || !gidx) {
		rc = h->error(h, TF_ERR_NOMEM, "%s.gate: no memory to route %lld tokens",
			      r->prefix, (long long)n);
		goto out;
	}
	rc = tf_lin_forward(&r->gate, x, n, logits);
	for (int64_t t = 0; !rc && t < n; t++)
		select_one(r, top, logits + t * E, scratch, gidx, idx + t * r->top_k,
			   w + t * r->top_k);
out:
	if (logits)
		be->free(h->backend_ctx, logits);
	free(scratch);
	free(gidx);
	return rc;
}
