/* sampler.c - penalties, greedy, temperature, top-k/top-p/min-p, keyed draws. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"
#include "tf/diag.h"
#include "tf/error.h"

void tf_sampler_params_default(tf_sampler_params *p)
{
	*p = (tf_sampler_params){
		.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
		.repeat_penalty = 1.0f, .presence_penalty = 0.0f,
		.repeat_last_n = 64, .seed = 0,
	};
}

int tf_sampler_init(tf_sampler *s, const tf_sampler_params *p, int n_vocab)
{
	memset(s, 0, sizeof(*s));
	if (n_vocab <= 0)
		return tf_diag_set(TF_ERR_INVALID, "sampler: vocabulary size %d", n_vocab);
	if (!(p->temperature >= 0 && p->temperature < 1e6))
		return tf_diag_set(TF_ERR_INVALID, "sampler: temperature %g", p->temperature);
	if (p->top_k < 0)
		return tf_diag_set(TF_ERR_INVALID, "sampler: top_k %d", p->top_k);
	if (!(p->top_p > 0 && p->top_p <= 1))
		return tf_diag_set(TF_ERR_INVALID, "sampler: top_p %g (want 0 < p <= 1)", p->top_p);
	if (!(p->min_p >= 0 && p->min_p <= 1))
		return tf_diag_set(TF_ERR_INVALID, "sampler: min_p %g (want 0..1)", p->min_p);
	if (!(p->repeat_penalty > 0 && p->repeat_penalty < 1e6))
		return tf_diag_set(TF_ERR_INVALID, "sampler: repeat_penalty %g", p->repeat_penalty);
	if (!isfinite(p->presence_penalty))
		return tf_diag_set(TF_ERR_INVALID, "sampler: presence_penalty %g", p->presence_penalty);
	if (p->repeat_last_n < -1)
		return tf_diag_set(TF_ERR_INVALID, "sampler: repeat_last_n %d", p->repeat_last_n);
	if (!isfinite(p->frequency_penalty))
		return tf_diag_set(TF_ERR_INVALID, "sampler: frequency_penalty %g",
				   p->frequency_penalty);
	if (p->penalty_from < 0)
		return tf_diag_set(TF_ERR_INVALID, "sampler: penalty_from %lld",
				   (long long)p->penalty_from);
	if (p->n_logit_bias < 0 || (p->n_logit_bias && !p->logit_bias))
		return tf_diag_set(TF_ERR_INVALID, "sampler: %d logit biases", p->n_logit_bias);
	for (int i = 0; i < p->n_logit_bias; i++) {
		const tf_logit_bias *b = &p->logit_bias[i];
		if (b->id < 0 || b->id >= n_vocab)
			return tf_diag_set(TF_ERR_INVALID, "sampler: logit bias for token %d, "
					   "outside the vocabulary (0..%d)", b->id, n_vocab - 1);
		if (!(b->bias >= -100 && b->bias <= 100))
			return tf_diag_set(TF_ERR_INVALID, "sampler: logit bias %g for token %d "
					   "(want -100..100)", b->bias, b->id);
	}
	s->par = *p;
	s->n_vocab = n_vocab;
	s->logit = malloc((size_t)n_vocab * sizeof(*s->logit));
	s->cand = malloc((size_t)n_vocab * sizeof(*s->cand));
	s->count = calloc((size_t)n_vocab, sizeof(*s->count));
	if (p->n_logit_bias)
		s->bias = malloc((size_t)p->n_logit_bias * sizeof(*s->bias));
	if (!s->logit || !s->cand || !s->count || (p->n_logit_bias && !s->bias)) {
		tf_sampler_free(s);
		return tf_diag_set(TF_ERR_NOMEM, "sampler: out of memory");
	}
	if (p->n_logit_bias)
		memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof(*s->bias));
	s->par.logit_bias = s->bias;
	return TF_OK;
}

void tf_sampler_free(tf_sampler *s)
{
	free(s->logit);
	free(s->cand);
	free(s->count);
	free(s->bias);
	memset(s, 0, sizeof(*s));
}

/* splitmix64's finaliser: a bijection that scatters every input bit. */
static uint64_t mix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

double tf_sampler_uniform(uint64_t seed, uint64_t seq, uint64_t pos)
{
	uint64_t h = mix64(seed ^ mix64(seq ^ mix64(pos)));

	return (double)(h >> 11) * 0x1.0p-53;
}

/* ---- shared steps ---- */

/* s->logit = logits with NaN as -inf, the penalties applied to the
 * distinct tokens of the window (the CTRL rule for repeat_penalty; presence
 * once, frequency once per occurrence, as OpenAI's), then the bias. */
static void penalize(tf_sampler *s, const float *logits, const int32_t *hist, size_t n_hist)
{
	const tf_sampler_params *p = &s->par;
	size_t i, from = 0;

	for (i = 0; i < (size_t)s->n_vocab; i++)
		s->logit[i] = isnan(logits[i]) ? -INFINITY : logits[i];
	if (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
	    p->frequency_penalty == 0.0f)
		goto bias;
	if (p->repeat_last_n >= 0 && n_hist > (size_t)p->repeat_last_n)
		from = n_hist - (size_t)p->repeat_last_n;
	if ((int64_t)from < p->penalty_from)
		from = (size_t)p->penalty_from;
	for (i = from; i < n_hist; i++)
		if (hist[i] >= 0 && hist[i] < s->n_vocab)
			s->count[hist[i]]++;
	for (i = from; i < n_hist; i++) {
		int32_t id = hist[i];
		float *l;

		if (id < 0 || id >= s->n_vocab || !s->count[id])
			continue;
		l = &s->logit[id];
		*l = *l > 0 ? *l / p->repeat_penalty : *l * p->repeat_penalty;
		*l -= p->presence_penalty + p->frequency_penalty * (float)s->count[id];
		s->count[id] = 0;
	}
bias:
	for (int b = 0; b < p->n_logit_bias; b++) {
		float *l = &s->logit[p->logit_bias[b].id];
		*l = p->logit_bias[b].bias <= -100 ? -INFINITY : *l + p->logit_bias[b].bias;
	}
}

/* Larger p (a logit or a probability) first, lower id on ties: the one
 * order every path sorts and walks in. */
static int cand_cmp(const void *a, const void *b)
{
	const tf_sampler_cand *x = a, *y = b;

	if (x->p != y->p)
		return x->p > y->p ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

static bool better(const tf_sampler_cand *a, const tf_sampler_cand *b)
{
	return a->p > b->p || (a->p == b->p && a->id < b->id);
}

static int argmax(const tf_sampler *s, int32_t *token)
{
	int32_t i, best = 0;

	for (i = 1; i < s->n_vocab; i++)
		if (s->logit[i] > s->logit[best])
			best = i;
	if (s->logit[best] == -INFINITY)
		return tf_diag_set(TF_ERR_INVALID, "sampler: every logit is -inf or NaN");
	*token = best;
	return TF_OK;
}

/* Turns cand[0..m).p from scaled logits into probabilities. */
static int softmax(tf_sampler_cand *c, size_t m)
{
	float mx = -INFINITY;
	double z = 0;
	size_t i;

	for (i = 0; i < m; i++)
		if (c[i].p > mx)
			mx = c[i].p;
	if (mx == -INFINITY)
		return tf_diag_set(TF_ERR_INVALID, "sampler: every logit is -inf or NaN");
	for (i = 0; i < m; i++) {
		c[i].p = expf(c[i].p - mx);
		z += c[i].p;
	}
	for (i = 0; i < m; i++)
		c[i].p = (float)(c[i].p / z);
	return TF_OK;
}

/* Keeps what min-p allows of cand[0..*m), then renormalises. */
static void min_p_cut(const tf_sampler *s, tf_sampler_cand *c, size_t *m)
{
	float mx = 0;
	double z = 0;
	size_t i, k = 0;

	if (s->par.min_p > 0) {
		for (i = 0; i < *m; i++)
			if (c[i].p > mx)
				mx = c[i].p;
		for (i = 0; i < *m; i++)
			if (c[i].p >= s->par.min_p * mx)
				c[k++] = c[i];
		*m = k;
	}
	for (i = 0; i < *m; i++)
		z += c[i].p;
	for (i = 0; i < *m; i++)
		c[i].p = (float)(c[i].p / z);
}

/* The first candidate, in order, at which the running sum passes u. */
static int32_t walk(const tf_sampler_cand *c, size_t m, double u)
{
	double acc = 0;
	size_t i;

	for (i = 0; i + 1 < m; i++) {
		acc += c[i].p;
		if (u < acc)
			break;
	}
	return c[i].id;
}

/* ---- fast path ---- */

/* The k best of all logits, sorted, into s->cand via a size-k min-heap. */
static size_t select_top_k(tf_sampler *s, size_t k, float t)
{
	tf_sampler_cand *h = s->cand, it, tmp;
	size_t n = 0, i, j, c;

	for (i = 0; i < (size_t)s->n_vocab; i++) {
		it = (tf_sampler_cand){ (int32_t)i, s->logit[i] / t };
		if (n < k) {
			/* sift up: the worst candidate stays at h[0] */
			for (j = n++; j && better(&h[(j - 1) / 2], &it); j = (j - 1) / 2)
				h[j] = h[(j - 1) / 2];
			h[j] = it;
		} else if (better(&it, &h[0])) {
			for (j = 0; (c = 2 * j + 1) < n; j = c) {
				if (c + 1 < n && better(&h[c], &h[c + 1]))
					c++;
				if (!better(&it, &h[c]))
					break;
				h[j] = h[c];
			}
			h[j] = it;
		}
	}
	/* heap order to best-first: repeatedly move the worst to the end */
	for (i = n; i > 1; i--) {
		tmp = h[0];
		h[0] = h[i - 1];
		h[i - 1] = tmp;
		it = h[0];
		for (j = 0; (c = 2 * j + 1) < i - 1; j = c) {
			if (c + 1 < i - 1 && better(&h[c], &h[c + 1]))
				c++;
			if (!better(&it, &h[c]))
				break;
			h[j] = h[c];
		}
		h[j] = it;
	}
	return n;
}

/*
 * Moves to the front and sorts the most likely candidates whose mass
 * reaches `need`; returns how many.  Everything left behind is less likely
 * than all of them, so the sorted front is a prefix of the full order.
 */
static size_t sorted_prefix(tf_sampler_cand *c, size_t m, double need)
{
	float mx = 0, t;
	size_t i, k;
	double mass;

	for (i = 0; i < m; i++)
		if (c[i].p > mx)
			mx = c[i].p;
	for (t = mx / 64;; t /= 64) {
		for (i = 0, mass = 0; i < m; i++)
			if (c[i].p >= t)
				mass += c[i].p;
		if (mass >= need || t == 0)
			break;
		if (t < 1e-30f)
			t = 0;
	}
	for (i = 0, k = 0; i < m; i++) {
		if (c[i].p >= t) {
			tf_sampler_cand x = c[k];

			c[k++] = c[i];
			c[i] = x;
		}
	}
	qsort(c, k, sizeof(*c), cand_cmp);
	return k;
}

/* The filtered, normalised candidates; *sorted when cand is best-first. */
static int prepare(tf_sampler *s, size_t *m, bool *sorted)
{
	const tf_sampler_params *p = &s->par;
	size_t i, k;
	double acc;
	int rc;

	if (p->top_k > 0 && p->top_k < s->n_vocab) {
		*m = select_top_k(s, (size_t)p->top_k, p->temperature);
		*sorted = true;
	} else {
		for (i = 0; i < (size_t)s->n_vocab; i++)
			s->cand[i] = (tf_sampler_cand){ (int32_t)i, s->logit[i] / p->temperature };
		*m = (size_t)s->n_vocab;
		*sorted = false;
	}
	if ((rc = softmax(s->cand, *m)))
		return rc;
	/* Distinct logits can round to one probability: re-order by it. */
	if (*sorted)
		qsort(s->cand, *m, sizeof(*s->cand), cand_cmp);
	if (p->top_p < 1) {
		k = *sorted ? *m : sorted_prefix(s->cand, *m, p->top_p);
		for (i = 0, acc = 0; i < k; i++) {
			acc += s->cand[i].p;
			if (acc >= p->top_p)
				break;
		}
		*m = i < k ? i + 1 : k;
		*sorted = true;
	}
	min_p_cut(s, s->cand, m);
	return TF_OK;
}

int tf_sampler_sample(tf_sampler *s, const float *logits, const int32_t *history,
		      size_t n_history, uint64_t seq, uint64_t pos, int32_t *token)
{
	double u = tf_sampler_uniform(s->par.seed, seq, pos);
	bool sorted;
	size_t m;
	int rc;

	penalize(s, logits, history, n_history);
	if (s->par.temperature <= 0)
		return argmax(s, token);
	if ((rc = prepare(s, &m, &sorted)))
		return rc;
	/* The walk stops once the running mass passes u: only the prefix
	 * holding u need be sorted, with a margin for the two sums' rounding. */
	if (!sorted)
		m = sorted_prefix(s->cand, m, u + 1e-6 < 1 ? u + 1e-6 : 1);
	*token = walk(s->cand, m, u);
	return TF_OK;
}

int tf_sampler_dist(tf_sampler *s, const float *logits, const int32_t *history,
		    size_t n_history, const tf_sampler_cand **cand, size_t *n)
{
	bool sorted;
	int32_t id = -1;                /* set when argmax succeeds */
	int rc;

	penalize(s, logits, history, n_history);
	if (s->par.temperature <= 0) {
		if ((rc = argmax(s, &id)))
			return rc;
		s->cand[0] = (tf_sampler_cand){ id, 1.0f };
		*n = 1;
	} else {
		if ((rc = prepare(s, n, &sorted)))
			return rc;
		if (!sorted)
			qsort(s->cand, *n, sizeof(*s->cand), cand_cmp);
	}
	*cand = s->cand;
	return TF_OK;
}

bool tf_sampler_accept(const float *p, const float *q, int n, int32_t x, double u, double v,
		       int32_t *token)
{
	double total = 0, acc = 0;
	if (u * q[x] < p[x]) {
		*token = x;
		return true;
	}
	for (int i = 0; i < n; i++)
		total += p[i] > q[i] ? p[i] - q[i] : 0;
	/* p == q to rounding: no residual, and p itself is the law to draw. */
	bool plain = !(total > 0);
	int32_t last = x;
	for (int i = 0; i < n; i++) {
		double r = plain ? p[i] : (p[i] > q[i] ? p[i] - q[i] : 0);
		if (r <= 0)
			continue;
		last = i;
		acc += r;
		if (acc > v * (plain ? 1.0 : total))
			break;
	}
	*token = last;
	return false;
}

/* ---- reference ---- */

int tf_sampler_sample_ref(tf_sampler *s, const float *logits, const int32_t *history,
			  size_t n_history, uint64_t seq, uint64_t pos, int32_t *token)
{
	const tf_sampler_params *p = &s->par;
	tf_sampler_cand *c = s->cand;
	size_t i, m = (size_t)s->n_vocab;
	double acc;
	int rc;

	penalize(s, logits, history, n_history);
	if (p->temperature <= 0)
		return argmax(s, token);
	for (i = 0; i < m; i++)
		c[i] = (tf_sampler_cand){ (int32_t)i, s->logit[i] / p->temperature };
	qsort(c, m, sizeof(*c), cand_cmp);
	if (p->top_k > 0 && (size_t)p->top_k < m)
		m = (size_t)p->top_k;
	if ((rc = softmax(c, m)))
		return rc;
	qsort(c, m, sizeof(*c), cand_cmp);
	if (p->top_p < 1) {
		for (i = 0, acc = 0; i < m; i++) {
			acc += c[i].p;
			if (acc >= p->top_p)
				break;
		}
		m = i < m ? i + 1 : m;
	}
	min_p_cut(s, c, &m);
	*token = walk(c, m, tf_sampler_uniform(p->seed, seq, pos));
	return TF_OK;
}
