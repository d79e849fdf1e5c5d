/* test_sampler.c - greedy, the top-k/top-p/min-p masks, penalties, keyed
 * draws, the fast path against the reference, and the sampled frequencies
 * against softmax(logits / T). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"
#include "tf/diag.h"

#define NV 1000

static void random_logits(float *l, int n, unsigned seed)
{
	int i;

	srand(seed);
	for (i = 0; i < n; i++)
		l[i] = (float)rand() / RAND_MAX * 12.0f - 6.0f;
}

static tf_sampler make(tf_sampler_params p, int n)
{
	tf_sampler s;

	cr_assert_eq(tf_sampler_init(&s, &p, n), 0, "%s", tf_diag_msg());
	return s;
}

static tf_sampler_params params(float t)
{
	tf_sampler_params p;

	tf_sampler_params_default(&p);
	p.temperature = t;
	p.seed = 42;
	return p;
}

Test(sampler, greedy_is_argmax)
{
	float l[NV];
	tf_sampler s = make(params(0), NV);
	int32_t tok, best = 0, second = 1;
	int i;

	random_logits(l, NV, 1);
	for (i = 1; i < NV; i++) {
		if (l[i] > l[best]) {
			second = best;
			best = i;
		} else if (l[i] > l[second] || second == best) {
			second = i;
		}
	}
	cr_assert_eq(tf_sampler_sample(&s, l, NULL, 0, 0, 0, &tok), 0);
	cr_expect_eq(tok, best);
	l[best] = NAN;                  /* NaN never wins */
	cr_assert_eq(tf_sampler_sample(&s, l, NULL, 0, 0, 1, &tok), 0);
	cr_expect_eq(tok, second);
	tf_sampler_free(&s);
}

/* softmax(l / t) in double, for checking the masks independently. */
static void probs(const float *l, int n, float t, double *p)
{
	double mx = -INFINITY, z = 0;
	int i;

	for (i = 0; i < n; i++)
		mx = fmax(mx, l[i] / t);
	for (i = 0; i < n; i++)
		z += p[i] = exp(l[i] / t - mx);
	for (i = 0; i < n; i++)
		p[i] /= z;
}

static int rank_of(const double *p, int n, int id)
{
	int i, r = 0;

	for (i = 0; i < n; i++)
		r += p[i] > p[id] || (p[i] == p[id] && i < id);
	return r;
}

Test(sampler, masks_keep_the_right_tokens)
{
	float l[NV];
	double p[NV], mass = 0, pmax = 0;
	tf_sampler_params par = params(0.8f);
	const tf_sampler_cand *c;
	tf_sampler s;
	size_t n, i;
	int id;

	random_logits(l, NV, 2);
	probs(l, NV, 0.8f, p);

	par.top_k = 7;
	s = make(par, NV);
	cr_assert_eq(tf_sampler_dist(&s, l, NULL, 0, &c, &n), 0);
	cr_expect_eq(n, 7);
	for (i = 0; i < n; i++)
		cr_expect_eq(rank_of(p, NV, c[i].id), (int)i, "top-k keeps the 7 best, in order");
	tf_sampler_free(&s);

	par.top_k = 0;
	par.top_p = 0.5f;
	s = make(par, NV);
	cr_assert_eq(tf_sampler_dist(&s, l, NULL, 0, &c, &n), 0);
	for (i = 0; i < n; i++)
		mass += p[c[i].id];
	cr_expect_geq(mass, 0.5 - 1e-6, "top-p mass reaches p");
	cr_expect_lt(mass - p[c[n - 1].id], 0.5 + 1e-6, "and is the smallest such set");
	tf_sampler_free(&s);

	par.top_p = 1;
	par.min_p = 0.2f;
	s = make(par, NV);
	cr_assert_eq(tf_sampler_dist(&s, l, NULL, 0, &c, &n), 0);
	for (id = 0; id < NV; id++)
		pmax = fmax(pmax, p[id]);
	for (id = 0, mass = 0; id < NV; id++)
		mass += p[id] >= 0.2 * pmax;
	cr_expect_eq(n, (size_t)mass, "min-p keeps every p >= 0.2 p_max and nothing else");
	for (i = 0, mass = 0; i < n; i++) {
		cr_expect_geq(p[c[i].id], 0.2 * pmax * (1 - 1e-5));
		mass += c[i].p;
	}
	cr_expect_float_eq(mass, 1.0, 1e-5, "renormalised");
	tf_sampler_free(&s);
}

Test(sampler, penalties)
{
	float l[4] = { 5.0f, 4.9f, 1.0f, 0.0f }, neg[2] = { -1.0f, -1.1f };
	int32_t hist[] = { 0, 2, 3 }, tok;
	tf_sampler_params par = params(0);
	tf_sampler s;

	par.repeat_penalty = 1.2f;             /* 5 / 1.2 < 4.9 */
	s = make(par, 4);
	cr_assert_eq(tf_sampler_sample(&s, l, hist, 3, 0, 0, &tok), 0);
	cr_expect_eq(tok, 1);
	tf_sampler_free(&s);

	par.repeat_penalty = 2.0f;             /* negative logits are multiplied */
	s = make(par, 2);
	cr_assert_eq(tf_sampler_sample(&s, neg, hist, 1, 0, 0, &tok), 0);
	cr_expect_eq(tok, 1);
	tf_sampler_free(&s);

	par.repeat_penalty = 1.0f;
	par.presence_penalty = 0.5f;
	s = make(par, 4);
	cr_assert_eq(tf_sampler_sample(&s, l, hist, 3, 0, 0, &tok), 0);
	cr_expect_eq(tok, 1);
	tf_sampler_free(&s);

	par.repeat_last_n = 2;                 /* token 0 is outside the window */
	s = make(par, 4);
	cr_assert_eq(tf_sampler_sample(&s, l, hist, 3, 0, 0, &tok), 0);
	cr_expect_eq(tok, 0);
	/* the logits passed in are never changed */
	cr_expect_eq(l[0], 5.0f);
	tf_sampler_free(&s);
}

/* The logits every penalty and the bias make, written plainly: counts
 * over the window [max(from, n - last_n), n), then the bias. */
static void penalized_ref(const float *l, float *out, int n, const int32_t *hist, int n_hist,
			  const tf_sampler_params *p)
{
	int from = p->repeat_last_n < 0 || n_hist <= p->repeat_last_n ? 0 :
		   n_hist - p->repeat_last_n;
	from = from > (int)p->penalty_from ? from : (int)p->penalty_from;
	for (int v = 0; v < n; v++) {
		int c = 0;
		for (int i = from; i < n_hist; i++)
			c += hist[i] == v;
		out[v] = l[v];
		if (c) {
			out[v] = out[v] > 0 ? out[v] / p->repeat_penalty : out[v] * p->repeat_penalty;
			out[v] -= p->presence_penalty + p->frequency_penalty * (float)c;
		}
	}
	for (int b = 0; b < p->n_logit_bias; b++)
		out[p->logit_bias[b].id] = p->logit_bias[b].bias <= -100 ? -INFINITY :
					   out[p->logit_bias[b].id] + p->logit_bias[b].bias;
}

Test(sampler, frequency_penalty_window_and_bias_against_a_reference)
{
	float l[NV], want[NV];
	int32_t hist[64];
	tf_logit_bias bias[8];

	for (int trial = 0; trial < 40; trial++) {
		tf_sampler_params par = params(1.0f);
		const tf_sampler_cand *c;
		size_t m;
		double z = 0;

		random_logits(l, NV, 500 + (unsigned)trial);
		for (int i = 0; i < 64; i++)    /* few distinct ids: many repeats */
			hist[i] = rand() % 24;
		for (int b = 0; b < 8; b++)
			bias[b] = (tf_logit_bias){ .id = rand() % 32,
						   .bias = b == 0 ? -100.0f : (float)(rand() % 9) - 4 };
		for (int b = 1; b < 8; b++)     /* distinct ids: the order then does not matter */
			bias[b].id = 32 + b;
		par.presence_penalty = (float)(trial % 3) * 0.4f;
		par.frequency_penalty = (float)(trial % 4) * 0.3f - 0.2f;
		par.repeat_penalty = trial % 2 ? 1.0f : 1.25f;
		par.repeat_last_n = trial % 5 == 0 ? -1 : 16 + trial;
		par.penalty_from = trial % 3 == 0 ? 0 : 10 + trial;
		par.logit_bias = bias;
		par.n_logit_bias = trial % 2 ? 8 : 0;
		tf_sampler s = make(par, NV);
		penalized_ref(l, want, NV, hist, 64, &par);
		for (int v = 0; v < NV; v++)
			z += isinf(want[v]) ? 0 : exp((double)want[v]);
		cr_assert_eq(tf_sampler_dist(&s, l, hist, 64, &c, &m), 0, "%s", tf_diag_msg());
		for (size_t i = 0; i < m; i++) {
			double p = exp((double)want[c[i].id]) / z;
			cr_assert(fabs(c[i].p - p) <= 1e-5 + 1e-4 * p, "trial %d token %d: %g, want %g",
				  trial, c[i].id, c[i].p, p);
		}
		if (par.n_logit_bias)
			for (size_t i = 0; i < m; i++)
				cr_assert(c[i].id != bias[0].id || c[i].p == 0, "a banned token kept");
		tf_sampler_free(&s);
	}
	tf_sampler_params bad = params(1.0f);
	bad.logit_bias = bias;
	bad.n_logit_bias = 1;
	bias[0] = (tf_logit_bias){ .id = NV, .bias = 1 };
	cr_expect_eq(tf_sampler_init(&(tf_sampler){ 0 }, &bad, NV), TF_ERR_INVALID);
	bias[0] = (tf_logit_bias){ .id = 1, .bias = 101 };
	cr_expect_eq(tf_sampler_init(&(tf_sampler){ 0 }, &bad, NV), TF_ERR_INVALID);
	bad.n_logit_bias = 0;
	bad.frequency_penalty = NAN;
	cr_expect_eq(tf_sampler_init(&(tf_sampler){ 0 }, &bad, NV), TF_ERR_INVALID);
}

Test(sampler, draws_are_keyed_by_seed_sequence_position)
{
	float l[NV];
	tf_sampler_params par = params(1.0f);
	tf_sampler a, b;
	int32_t x, y, first = -1;
	int pos, differ = 0;

	random_logits(l, NV, 3);
	a = make(par, NV);
	b = make(par, NV);
	for (pos = 0; pos < 64; pos++) {
		cr_assert_eq(tf_sampler_sample(&a, l, NULL, 0, 7, (uint64_t)pos, &x), 0);
		/* other sequences and repeated calls in between change nothing */
		cr_assert_eq(tf_sampler_sample(&b, l, NULL, 0, 8, (uint64_t)pos, &y), 0);
		cr_assert_eq(tf_sampler_sample(&b, l, NULL, 0, 7, (uint64_t)pos, &y), 0);
		cr_expect_eq(x, y, "pos %d", pos);
		if (first < 0)
			first = x;
		differ += x != first;
	}
	cr_expect_gt(differ, 0, "positions draw different numbers");
	cr_expect_neq(tf_sampler_uniform(42, 7, 0), tf_sampler_uniform(43, 7, 0));
	cr_expect_neq(tf_sampler_uniform(42, 7, 0), tf_sampler_uniform(42, 8, 0));
	tf_sampler_free(&a);
	tf_sampler_free(&b);
}

Test(sampler, fast_path_matches_reference)
{
	static const int ks[] = { 0, 1, 5, 40 };
	static const float ps[] = { 1.0f, 0.9f, 0.3f }, mps[] = { 0.0f, 0.05f };
	float l[NV];
	int32_t hist[16], x, y;
	int trial, i;

	for (trial = 0; trial < 120; trial++) {
		tf_sampler_params par = params(0.3f + 0.1f * (float)(trial % 12));
		tf_sampler s;

		par.top_k = ks[trial % 4];
		par.top_p = ps[trial / 4 % 3];
		par.min_p = mps[trial / 12 % 2];
		par.repeat_penalty = trial % 5 ? 1.0f : 1.3f;
		par.seed = (uint64_t)trial;
		random_logits(l, NV, 100 + (unsigned)trial);
		for (i = 0; i < 16; i++)
			hist[i] = rand() % NV;
		s = make(par, NV);
		for (i = 0; i < 20; i++) {
			cr_assert_eq(tf_sampler_sample(&s, l, hist, 16, 1, (uint64_t)i, &x), 0);
			cr_assert_eq(tf_sampler_sample_ref(&s, l, hist, 16, 1, (uint64_t)i, &y), 0);
			cr_assert_eq(x, y, "trial %d draw %d: fast %d, reference %d", trial, i, x, y);
		}
		tf_sampler_free(&s);
	}
}

Test(sampler, frequencies_follow_the_distribution)
{
	float l[8] = { 1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f, -1.0f, 0.2f };
	double p[8], chi2 = 0;
	int count[8] = { 0 }, i, n = 40000;
	tf_sampler s = make(params(0.7f), 8);
	int32_t tok;

	probs(l, 8, 0.7f, p);
	for (i = 0; i < n; i++) {
		cr_assert_eq(tf_sampler_sample(&s, l, NULL, 0, 0, (uint64_t)i, &tok), 0);
		count[tok]++;
	}
	for (i = 0; i < 8; i++)
		chi2 += (count[i] - n * p[i]) * (count[i] - n * p[i]) / (n * p[i]);
	/* 7 degrees of freedom: P(chi2 > 24.3) = 0.001 */
	cr_expect_lt(chi2, 24.3, "chi-square %.1f", chi2);
	tf_sampler_free(&s);
}

/*
 * The speculative accept rule against the analytic law: drafts drawn from
 * q, judged against p, come out distributed as p (chi-square), accepted
 * with probability sum min(p, q).  q puts mass where p has none and p
 * where q has none, so both the acceptance and the residual draw matter:
 * the drafts alone fail the same chi-square by far.
 */
Test(sampler, accept_rule_follows_the_target)
{
	enum { V = 6, N = 60000 };
	const float p[V] = { 0.30f, 0.25f, 0.20f, 0.15f, 0.10f, 0.00f };
	const float q[V] = { 0.05f, 0.40f, 0.00f, 0.15f, 0.10f, 0.30f };
	int count[V] = { 0 }, drafts[V] = { 0 }, kept = 0;
	double chi2 = 0, chi2_drafts = 0, overlap = 0;

	for (int i = 0; i < N; i++) {
		double u0 = tf_sampler_uniform(7, 3, (uint64_t)i), acc = 0;
		int32_t x = V - 1, tok = -1;
		for (int j = 0; j < V; j++)
			if ((acc += q[j]) > u0) {
				x = j;
				break;
			}
		drafts[x]++;
		kept += tf_sampler_accept(p, q, V, x, tf_sampler_uniform(7, 1, (uint64_t)i),
					  tf_sampler_uniform(7, 2, (uint64_t)i), &tok);
		cr_assert(tok >= 0 && tok < V && p[tok] > 0, "draw %d: token %d", i, tok);
		count[tok]++;
	}
	for (int j = 0; j < V; j++) {
		overlap += fmin(p[j], q[j]);
		if (p[j] > 0)
			chi2 += (count[j] - N * p[j]) * (count[j] - N * p[j]) / (N * p[j]);
		if (p[j] > 0)
			chi2_drafts += (drafts[j] - N * p[j]) * (drafts[j] - N * p[j]) / (N * p[j]);
	}
	/* 4 degrees of freedom (5 tokens p can give): P(chi2 > 18.5) = 0.001 */
	cr_expect_lt(chi2, 18.5, "chi-square %.1f", chi2);
	cr_expect_gt(chi2_drafts, 1000, "the drafts alone: chi-square %.1f", chi2_drafts);
	/* Acceptance: binomial, within 5 standard deviations. */
	double sd = sqrt(N * overlap * (1 - overlap));
	cr_expect_lt(fabs(kept - N * overlap), 5 * sd, "kept %d of %d, expected %.0f", kept, N,
		     N * overlap);
}

/* Point masses, as greedy sampling makes them: the rule keeps the draft
 * iff it is p's token, and otherwise gives p's token. */
Test(sampler, accept_rule_greedy_is_exact)
{
	const float p[4] = { 0, 0, 1, 0 };
	const float q1[4] = { 0, 0, 1, 0 }, q2[4] = { 0, 1, 0, 0 };
	int32_t tok;
	for (int i = 0; i < 100; i++) {
		double u = tf_sampler_uniform(1, 1, (uint64_t)i), v = tf_sampler_uniform(1, 2, (uint64_t)i);
		cr_assert(tf_sampler_accept(p, q1, 4, 2, u, v, &tok));
		cr_assert_eq(tok, 2);
		cr_assert(!tf_sampler_accept(p, q2, 4, 1, u, v, &tok));
		cr_assert_eq(tok, 2);
	}
}

Test(sampler, bad_parameters_and_logits)
{
	float l[4] = { -INFINITY, NAN, -INFINITY, NAN };
	tf_sampler_params par = params(1.0f);
	tf_sampler s;
	int32_t tok;

	par.top_p = 0;
	cr_expect_eq(tf_sampler_init(&s, &par, 4), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "top_p"));
	par = params(-1.0f);
	cr_expect_eq(tf_sampler_init(&s, &par, 4), TF_ERR_INVALID);
	par = params(NAN);
	cr_expect_eq(tf_sampler_init(&s, &par, 4), TF_ERR_INVALID);
	par = params(1.0f);
	par.top_k = -2;
	cr_expect_eq(tf_sampler_init(&s, &par, 4), TF_ERR_INVALID);
	cr_expect_eq(tf_sampler_init(&s, &(tf_sampler_params){ .top_p = 1, .repeat_penalty = 1 }, 0),
		     TF_ERR_INVALID);

	s = make(params(1.0f), 4);
	cr_expect_eq(tf_sampler_sample(&s, l, NULL, 0, 0, 0, &tok), TF_ERR_INVALID);
	tf_sampler_free(&s);
	s = make(params(0), 4);
	cr_expect_eq(tf_sampler_sample(&s, l, NULL, 0, 0, 0, &tok), TF_ERR_INVALID);
	tf_sampler_free(&s);
}
