/* rope.c - see rope.h; the formulas are HF transformers'
 * _compute_yarn_parameters (spec ling-arch.md §3.4). */
#include "rope.h"

#include <math.h>
#include <stdlib.h>

/* YaRN's magnitude correction for a context stretched by `scale`. */
static double yarn_mscale(double scale, double mscale)
{
	return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* The rotary dimension whose wavelength fits n_rot times in orig_ctx. */
static double yarn_corr_dim(double n_rot, int dim, double base, double orig_ctx)
{
	return dim * log(orig_ctx / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

int mla_rope_init(const tf_host *h, int dim, mla_rope *r)
{
	const tf_model_config *c = h->model;
	const tf_rope_scaling *s = &c->rope_scaling;
	const int half = dim / 2;

	r->inv_freq = NULL;
	r->attn_factor = 1.0f;
	r->scale_mult = 1.0f;
	if (dim <= 0 || dim % 2)
		return h->error(h, TF_ERR_INVALID,
				"config.json: qk_rope_head_dim %d must be positive and even", dim);
	if (!(c->rope_theta > 1.0))
		return h->error(h, TF_ERR_INVALID, "config.json: rope_theta %g must exceed 1",
				c->rope_theta);
	r->inv_freq = malloc((size_t)half * sizeof(float));
	if (!r->inv_freq)
		return h->error(h, TF_ERR_NOMEM, "rope: out of memory");

	if (s->kind != TF_ROPE_YARN) {
		for (int j = 0; j < half; j++)
			r->inv_freq[j] = (float)pow(c->rope_theta, -2.0 * j / dim);
		return TF_OK;
	}

	double factor = s->factor;
	double orig = s->original_max_position_embeddings > 0 ?
		      s->original_max_position_embeddings : c->max_position_embeddings;
	double beta_fast = s->beta_fast > 0 ? s->beta_fast : 32.0;
	double beta_slow = s->beta_slow > 0 ? s->beta_slow : 1.0;
	if (!(factor >= 1.0) || !(orig > 0)) {
		mla_rope_free(r);
		return h->error(h, TF_ERR_INVALID,
				"config.json: rope_scaling yarn needs factor >= 1 (got %g) and original_max_position_embeddings > 0 (got %g)",
				factor, orig);
	}
	double low = fmax(floor(yarn_corr_dim(beta_fast, dim, c->rope_theta, orig)), 0.0);
	double high = fmin(ceil(yarn_corr_dim(beta_slow, dim, c->rope_theta, orig)), dim - 1.0);
	if (low == high)
		high += 0.001;          /* as HF: keeps the ramp finite */
	for (int j = 0; j < half; j++) {
		double extrap = pow(c->rope_theta, -2.0 * j / dim);
		double ramp = fmin(fmax((j - low) / (high - low), 0.0), 1.0);
		double keep = 1.0 - ramp;       /* share of the unscaled frequency */
		r->inv_freq[j] = (float)(extrap / factor * (1.0 - keep) + extrap * keep);
	}
	if (s->mscale > 0 && s->mscale_all_dim > 0)
		r->attn_factor = (float)(yarn_mscale(factor, s->mscale) /
					 yarn_mscale(factor, s->mscale_all_dim));
	else
		r->attn_factor = (float)yarn_mscale(factor, 1.0);
	if (s->mscale_all_dim > 0) {
		double m = yarn_mscale(factor, s->mscale_all_dim);
		r->scale_mult = (float)(m * m);
	}
	return TF_OK;
}

void mla_rope_free(mla_rope *r)
{
	free(r->inv_freq);
	r->inv_freq = NULL;
}
