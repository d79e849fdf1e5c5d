/*
 * drafter_cases.c - every drafter against serial decoding.  Whatever a
 * drafter proposes, the engine verifies it, so with [draft] accept = exact
 * a sequence's tokens must be those it gets one token at a time with no
 * drafter: at depth 1 and at the drafter's most, greedy and seeded, one
 * sequence stepping alone (tf_seq_step) and three in one step
 * (tf_engine_step), and running into the context's end.  On the tiny test
 * model with the sampler held to its first 8 ids, so that the text
 * repeats and a drafter that follows it (ngram) has its drafts kept; the
 * random MTP head's are mostly rejected and undone.  A drafter that breaks
 * its contract must make its steps fail, naming it, never a crash or
 * other tokens: the bad test drafters on the path fail these cases.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance.h"
#include "tf/engine.h"

enum {
	SEQS = 3,               /* sequences of a batched step */
	PROMPT = 20,
	STEPS = 8,              /* speculative steps compared */
	SMALL = 8,              /* the sampler's vocabulary */
	ROOM = 7,               /* the context's end case: tokens after the prompt */
	MAXD = 4,               /* deeper drafters run at this depth */
};

/* An engine on the conformance model with [plugins] drafter = name and the
 * context given; NULL (the case fails) when it does not open. */
static tf_engine *cf_engine(const char *name, int context, cf_tally *t)
{
	char path[64] = "/tmp/tf-conf-drafter-XXXXXX.ini", text[512];
	int n = snprintf(text, sizeof(text),
			 "[model]\npath = %s\n[runtime]\ncontext = %d\nthreads = 2\n"
			 "sequences = %d\nprefill_chunk = 16\nkv_cache = f32\n"
			 "[plugins]\ndrafter = %s\n", TF_CONF_MODEL, context, SEQS, name);
	tf_engine *e = NULL;
	int fd = mkstemps(path, 4), rc = TF_ERR_IO;
	if (fd >= 0 && write(fd, text, (size_t)n) == n && close(fd) == 0)
		rc = tf_engine_open(path, NULL, 0, &e);
	else if (fd >= 0)
		close(fd);
	unlink(path);
	cf_case(t, rc == TF_OK, name, "open with [plugins] drafter = %s: %s", name,
		tf_engine_errmsg());
	return rc == TF_OK ? e : NULL;
}

/* Sequence i: its prompt fed, its sampler set (greedy, or seeded), the
 * logits of its last token in lg; -1 when that failed. */
static tf_seq_id cf_seq(tf_engine *e, int i, bool seeded, float *lg)
{
	tf_sampler_params p;
	int32_t prompt[PROMPT];
	uint64_t x = 77 + (uint64_t)i;
	tf_seq_id s;
	for (int j = 0; j < PROMPT; j++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		prompt[j] = (int32_t)((x >> 33) % SMALL);
	}
	tf_sampler_params_default(&p);
	p.temperature = seeded ? 0.8f : 0;
	p.seed = 5 + (uint64_t)i;
	const tf_batch b = { .n = PROMPT, .token = prompt, .one_seq = 0 };
	if (tf_seq_new(e, &s) || tf_seq_set_sampling(e, s, &p, SMALL))
		return -1;
	tf_batch bs = b;
	bs.one_seq = s;
	return tf_engine_forward(e, &bs, lg, NULL) ? -1 : s;
}

/* Up to n tokens of sequence i decoded one at a time, no drafter: the
 * reference; returns how many (fewer at the context's end). */
static int cf_serial(tf_engine *e, int i, bool seeded, int n, int32_t *out)
{
	float *lg = malloc((size_t)tf_engine_vocab(e) * sizeof(*lg));
	tf_seq_id s = lg ? cf_seq(e, i, seeded, lg) : -1;
	int k = 0;
	while (s >= 0 && k < n && tf_seq_len(e, s) < tf_engine_context(e)) {
		const tf_batch b = { .n = 1, .token = &out[k], .one_seq = s };
		if (tf_seq_sample(e, s, lg, &out[k]) || tf_engine_forward(e, &b, lg, NULL))
			break;
		k++;
	}
	if (s >= 0)
		tf_seq_free(e, s);
	free(lg);
	return k;
}

/* What one way of stepping made: each sequence's tokens, and why it
 * stopped early (a failed step's message). */
struct cf_run {
	int32_t tok[SEQS][STEPS * (MAXD + 1)];
	int n[SEQS];
	int kept;                       /* drafts kept */
	char why[256];
};

/* nseq sequences (1: tf_seq_speculate; more: tf_engine_step), STEPS
 * steps drafting d each (fewer at the context's end), not the drafter's
 * own choice of depth: every drafter drafts here. */
static void cf_spec(tf_engine *e, int nseq, bool seeded, int d, struct cf_run *run)
{
	int V = tf_engine_vocab(e);
	float *lg = malloc((size_t)nseq * (size_t)V * sizeof(*lg));
	tf_seq_id s[SEQS];
	tf_spec_step st[SEQS];
	memset(run, 0, sizeof(*run));
	for (int i = 0; i < nseq; i++)
		if (!lg || (s[i] = cf_seq(e, i, seeded, lg + (size_t)i * V)) < 0) {
			snprintf(run->why, sizeof(run->why), "setting up: %s", tf_engine_errmsg());
			nseq = i;
			goto out;
		}
	for (int k = 0; k < STEPS; k++) {
		int m = 0;
		for (int i = 0; i < nseq; i++) {
			int64_t room = tf_engine_context(e) - tf_seq_len(e, s[i]) - 1;
			if (room < 0)
				continue;
			st[m] = (tf_spec_step){ .seq = s[i], .max_depth = d < room ? d : (int)room,
						.fixed = true, .logits = lg + (size_t)i * V,
						.tokens = run->tok[i] + run->n[i] };
			m++;
		}
		if (!m)
			break;
		int rc;
		if (nseq == 1 && st[0].max_depth) {
			rc = tf_seq_speculate(e, st[0].seq, st[0].max_depth, st[0].logits,
					      st[0].tokens, &st[0].n);
			st[0].status = rc;
		} else {
			rc = tf_engine_step(e, st, m);
		}
		for (int j = 0; rc == TF_OK && j < m; j++)
			rc = st[j].status;
		if (rc != TF_OK) {
			const char *msg = tf_engine_errmsg();
			for (int j = 0; nseq > 1 && j < m; j++)
				msg = st[j].status ? st[j].error : msg;
			snprintf(run->why, sizeof(run->why), "step %d: %.200s", k, msg);
			goto out;
		}
		for (int j = 0, i = 0; j < m; j++, i++) {
			while (st[j].seq != s[i])
				i++;
			run->n[i] += st[j].n;
			run->kept += st[j].n - 1;
		}
	}
out:
	for (int i = 0; i < nseq; i++)
		tf_seq_free(e, s[i]);
	free(lg);
}

/* run against serial decoding, sequence by sequence: one case. */
static void cf_against(cf_tally *t, const char *name, tf_engine *plain, const struct cf_run *run,
		       int nseq, bool seeded, int d, const char *what)
{
	int32_t want[STEPS * (MAXD + 1)];
	bool ok = !run->why[0];
	int bad = -1;
	for (int i = 0; ok && i < nseq; i++) {
		int n = cf_serial(plain, i, seeded, run->n[i], want);
		ok = n == run->n[i] && !memcmp(want, run->tok[i], (size_t)n * sizeof(*want));
		bad = ok ? -1 : i;
	}
	cf_case(t, ok, name, "%s, %s, depth %d: %s (sequence %d)", what,
		seeded ? "seeded" : "greedy", d,
		run->why[0] ? run->why : "not the tokens of serial decoding", bad);
}

void cf_check_drafter(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		      const tf_host *h, cf_tally *t)
{
	(void)r;
	(void)ref;
	(void)h;
	tf_engine *plain = cf_engine("none", 256, t);
	tf_engine *e = cf_engine(impl->name, 256, t);
	tf_engine *end = cf_engine(impl->name, PROMPT + ROOM, t);
	tf_engine *end_plain = cf_engine("none", PROMPT + ROOM, t);
	struct cf_run run;
	int kept = 0;
	if (!plain || !e || !end || !end_plain)
		goto out;
	int most = tf_engine_draft_depth(e) < MAXD ? tf_engine_draft_depth(e) : MAXD;
	for (int seeded = 0; seeded < 2; seeded++)
		for (int d = 1; d <= most; d += most > 1 ? most - 1 : 1) {
			cf_spec(e, 1, seeded, d, &run);
			cf_against(t, impl->name, plain, &run, 1, seeded, d, "one sequence");
			kept += run.kept;
			cf_spec(e, SEQS, seeded, d, &run);
			cf_against(t, impl->name, plain, &run, SEQS, seeded, d, "batched");
			kept += run.kept;
			cf_spec(end, SEQS, seeded, d, &run);
			cf_against(t, impl->name, end_plain, &run, SEQS, seeded, d, "to the context's end");
		}
	printf("  %s: %d drafts kept\n", impl->name, kept);
out:
	tf_engine_close(plain);
	tf_engine_close(e);
	tf_engine_close(end);
	tf_engine_close(end_plain);
}
