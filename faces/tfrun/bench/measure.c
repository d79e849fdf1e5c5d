/* measure.c - one test's timing on an engine; two engines' numbers side
 * by side; the memory's read bandwidth. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tf/diag.h"
#include "util.h"

/* Feeds n tokens of tok to s in prefill chunks, the last one's logits
 * asked for (into logits, or nowhere). */
static int feed(tf_engine *e, tf_seq_id s, const int32_t *tok, int64_t n, float *logits)
{
	int64_t chunk = tf_engine_prefill_chunk(e);
	int rc = TF_OK;

	for (int64_t at = 0; rc == TF_OK && at < n; at += chunk) {
		int64_t m = n - at < chunk ? n - at : chunk;
		const tf_batch b = { .n = m, .token = tok + at, .one_seq = s };
		rc = tf_engine_forward(e, &b, logits, NULL);
	}
	return rc;
}

/* Stage seconds since the reset, per token, into out. */
static void stages(tf_engine *e, int64_t tokens, double *out)
{
	for (int k = 0; k < tf_engine_stage_count(); k++)
		out[k] = tf_engine_stage_seconds(e, k) / (double)tokens;
}

/*
 * Decode with the engine's drafter: each step every sequence drafts (its
 * drafter's choice of depth, at most what it still has to make), one verify
 * keeps what it keeps.  The sequences' logits are their last tokens'.
 */
static int draft_steps(tf_engine *e, const bench_test *t, const tf_seq_id *sid, int seqs,
		       float *logits, int64_t *made, bench_sample *out)
{
	int depth = tf_engine_draft_depth(e), vocab = tf_engine_vocab(e), rc = TF_OK;
	tf_spec_step st[64];
	int32_t *toks = malloc((size_t)seqs * (size_t)(depth + 1) * sizeof(*toks));
	int64_t left[64];

	if (!toks)
		return tf_diag_set(TF_ERR_NOMEM, "bench: out of memory");
	*made = 0;
	for (int i = 0; i < seqs; i++)
		left[i] = t->tokens;
	while (rc == TF_OK) {
		int k = 0;
		for (int i = 0; i < seqs; i++) {
			if (!left[i])
				continue;
			st[k++] = (tf_spec_step){
				.seq = sid[i], .max_depth = (int)(left[i] - 1 < depth ? left[i] - 1 : depth),
				.logits = logits + (size_t)i * (size_t)vocab,
				.tokens = toks + (size_t)i * (size_t)(depth + 1) };
		}
		if (!k)
			break;
		rc = tf_engine_step(e, st, k);
		for (int j = 0; rc == TF_OK && j < k; j++) {
			if (st[j].status != TF_OK)
				rc = tf_diag_set(st[j].status, "%s", st[j].error);
			int i = (int)(st[j].tokens - toks) / (depth + 1);
			int64_t n = st[j].n < left[i] ? st[j].n : left[i];
			left[i] -= n;
			*made += n;
			out->drafted += st[j].drafted;
			out->accepted += st[j].n - 1;
		}
	}
	free(toks);
	return rc;
}

int bench_run(tf_engine *e, const bench_test *t, const int32_t *tok, int64_t n_tok,
	      bench_sample *out)
{
	int seqs = t->kind == BENCH_PREFILL ? 1 : t->seqs;
	int64_t need = t->depth + (t->kind == BENCH_PREFILL ? t->tokens : t->tokens + 1);
	tf_seq_id sid[64];
	int32_t step_tok[64];
	int made = 0, rc = TF_OK;
	double t0;

	if (seqs > 64 || need > n_tok)
		return tf_diag_set(TF_ERR_INVALID, "bench: %d sequences or %" PRId64 " tokens "
				   "past what it holds", seqs, need);
	/* The head runs as in use: each step's logits are written. */
	size_t vocab = (size_t)tf_engine_vocab(e);
	float *logits = malloc((size_t)seqs * vocab * sizeof(float));
	bool drafting = t->kind == BENCH_DECODE && tf_engine_draft_depth(e) > 0;
	int64_t tokens = t->tokens * (t->kind == BENCH_DECODE ? seqs : 1);
	if (!logits)
		return tf_diag_set(TF_ERR_NOMEM, "bench: out of memory");
	for (; made < seqs && rc == TF_OK; made++)
		rc = tf_seq_new(e, &sid[made]);
	if (rc != TF_OK) {
		made--;
		goto out;
	}
	/* The depth, and for decode each sequence's first token (its logits a
	 * drafting step starts from): untimed. */
	for (int i = 0; rc == TF_OK && i < seqs; i++)
		rc = feed(e, sid[i], tok + i, t->depth + (t->kind == BENCH_DECODE),
			  logits + (size_t)i * vocab);
	if (rc != TF_OK || (rc = tf_engine_logits_wait(e)) != TF_OK)
		goto out;
	tf_engine_stats_reset(e);
	t0 = tf_cli_now_s();
	if (t->kind == BENCH_PREFILL) {
		rc = feed(e, sid[0], tok + t->depth, t->tokens, logits);
	} else if (drafting) {
		rc = draft_steps(e, t, sid, seqs, logits, &tokens, out);
	} else {
		for (int64_t k = 0; rc == TF_OK && k < t->tokens; k++) {
			for (int i = 0; i < seqs; i++)
				step_tok[i] = tok[(t->depth + 1 + k + (int64_t)i) % n_tok];
			const tf_batch b = { .n = seqs, .token = step_tok, .seq = sid };
			rc = tf_engine_forward(e, &b, logits, NULL);
		}
	}
	double secs = tf_cli_now_s() - t0;
	if (rc == TF_OK) {
		out->tps = (double)tokens / secs;
		stages(e, tokens, out->stage);
	}
out:
	for (int i = 0; i < made; i++)
		tf_seq_free(e, sid[i]);
	free(logits);
	return rc;
}

/* KL(softmax a || softmax b) of one row, and its max |a - b| over max |a|. */
static void row_diff(const float *a, const float *b, int v, double *kl, double *rel)
{
	double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, d = 0, top = 0;

	for (int i = 0; i < v; i++) {
		ma = a[i] > ma ? a[i] : ma;
		mb = b[i] > mb ? b[i] : mb;
		d = fmax(d, fabs((double)a[i] - b[i]));
		top = fmax(top, fabs((double)a[i]));
	}
	for (int i = 0; i < v; i++) {
		za += exp(a[i] - ma);
		zb += exp(b[i] - mb);
	}
	double la = ma + log(za), lb = mb + log(zb), k = 0;
	for (int i = 0; i < v; i++) {
		double pa = exp(a[i] - la);
		k += pa * ((a[i] - la) - (b[i] - lb));
	}
	*kl = k > 0 ? k : 0;
	*rel = top > 0 ? d / top : d;
}

static int32_t argmax(const float *x, int v)
{
	int32_t best = 0;

	for (int i = 1; i < v; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* Every position's logits of prompt on e, [n, vocab]. */
static int all_logits(tf_engine *e, tf_seq_id s, const int32_t *prompt, int64_t n, float *out)
{
	int64_t chunk = tf_engine_prefill_chunk(e);
	uint8_t *every = malloc((size_t)chunk);
	int rc = every ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "bench: out of memory");

	if (every)
		memset(every, 1, (size_t)chunk);
	for (int64_t at = 0; rc == TF_OK && at < n; at += chunk) {
		int64_t m = n - at < chunk ? n - at : chunk;
		const tf_batch b = { .n = m, .token = prompt + at, .one_seq = s, .out = every };
		rc = tf_engine_forward(e, &b, out + at * tf_engine_vocab(e), NULL);
	}
	free(every);
	return rc;
}

int bench_numbers_take(tf_engine *e, const int32_t *prompt, int64_t n, int64_t gen,
		  bench_numbers *out)
{
	int v = tf_engine_vocab(e);
	tf_seq_id s = -1;
	int rc;

	*out = (bench_numbers){ .n = n, .vocab = v, .gen = gen };
	out->logits = malloc((size_t)(n + 1) * (size_t)v * sizeof(float));
	out->greedy = malloc((size_t)(gen ? gen : 1) * sizeof(int32_t));
	if (!out->logits || !out->greedy) {
		rc = tf_diag_set(TF_ERR_NOMEM, "bench: out of memory for %" PRId64 " rows", n);
		goto out;
	}
	if ((rc = tf_seq_new(e, &s)) || (rc = all_logits(e, s, prompt, n, out->logits)))
		goto out;
	/* Greedy on from the last row; its logits go to the spare row n. */
	const float *r = out->logits + (n - 1) * v;
	float *next = out->logits + n * v;
	for (int64_t i = 0; i < gen; i++) {
		out->greedy[i] = argmax(r, v);
		const tf_batch b = { .n = 1, .token = &out->greedy[i], .one_seq = s };
		if (i + 1 < gen && (rc = tf_engine_forward(e, &b, next, NULL)))
			goto out;
		r = next;
	}
out:
	if (s >= 0)
		tf_seq_free(e, s);
	if (rc)
		bench_numbers_free(out);
	return rc;
}

void bench_numbers_free(bench_numbers *x)
{
	free(x->logits);
	free(x->greedy);
	x->logits = NULL;
	x->greedy = NULL;
}

int bench_diff(const bench_numbers *a, const bench_numbers *b, bench_exact *out)
{
	const int v = a->vocab;
	const int64_t n = a->n;

	memset(out, 0, sizeof(*out));
	if (b->vocab != v || b->n != n || b->gen != a->gen)
		return tf_diag_set(TF_ERR_INVALID, "bench: A's vocabulary has %d tokens, B's %d",
				   v, b->vocab);
	out->positions = n;
	for (int64_t r = 0; r < n; r++) {
		const float *x = a->logits + r * v, *y = b->logits + r * v;
		double kl, rel;
		row_diff(x, y, v, &kl, &rel);
		out->max_rel = fmax(out->max_rel, rel);
		out->mean_kl += kl / (double)n;
		out->top1 += (argmax(x, v) == argmax(y, v)) / (double)n;
	}
	out->greedy_of = a->gen;
	while (out->greedy < a->gen && a->greedy[out->greedy] == b->greedy[out->greedy])
		out->greedy++;
	return TF_OK;
}

int bench_compare(tf_engine *a, tf_engine *b, const int32_t *prompt, int64_t n,
		  int64_t gen, bench_exact *out)
{
	bench_numbers na = { 0 }, nb = { 0 };
	int rc;

	memset(out, 0, sizeof(*out));
	if (!(rc = bench_numbers_take(a, prompt, n, gen, &na)) &&
	    !(rc = bench_numbers_take(b, prompt, n, gen, &nb)))
		rc = bench_diff(&na, &nb, out);
	bench_numbers_free(&na);
	bench_numbers_free(&nb);
	return rc;
}

/* ---- read bandwidth ---- */

struct reader {
	const uint64_t *p;
	size_t n;
	uint64_t sum;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

	for (size_t i = 0; i + 4 <= r->n; i += 4) {
		s0 += r->p[i];
		s1 += r->p[i + 1];
		s2 += r->p[i + 2];
		s3 += r->p[i + 3];
	}
	r->sum = s0 ^ s1 ^ s2 ^ s3;
	return NULL;
}

double bench_read_bandwidth(int threads)
{
	const size_t bytes = (size_t)256 << 20;  /* past any cache */
	size_t words = bytes / sizeof(uint64_t);
	uint64_t *buf = malloc(bytes);
	struct reader r[64];
	pthread_t th[64];
	bool started[64];
	double best[5];

	if (!buf)
		return NAN;
	threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
	for (size_t i = 0; i < words; i++)
		buf[i] = i * 0x9E3779B97F4A7C15ull;
	for (int round = 0; round < 5; round++) {
		double t0 = tf_cli_now_s();
		for (int k = 0; k < threads; k++) {
			r[k] = (struct reader){ .p = buf + words / (size_t)threads * (size_t)k,
						.n = words / (size_t)threads };
			started[k] = !pthread_create(&th[k], NULL, read_all, &r[k]);
			if (!started[k])
				read_all(&r[k]);
		}
		for (int k = 0; k < threads; k++)
			if (started[k])
				pthread_join(th[k], NULL);
		best[round] = (double)bytes / (tf_cli_now_s() - t0);
	}
	free(buf);
	return bench_median(best, 5);
}
