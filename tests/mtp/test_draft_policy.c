/*
 * The drafters' depth policy (plugins/draft-policy/policy.c) on simulated
 * steps: a step at depth k takes cost(k) seconds, +-10% noise, and keeps
 * draft i with probability acc[i] when draft i - 1 was kept; the MTP
 * layer is fed the rows kept since the last draft before a drafting
 * step, and by a plain step once they would pass CHUNK + 1 (as under
 * tensor parallelism: the engine alone drops them instead).  Where
 * drafting cannot pay the policy must decode plainly nearly always and
 * lose under 3% to plain decoding at every reply length; where a depth
 * is best it must settle there and come within 3% of that depth held
 * fixed.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy.h"

enum { MAXD = 3, STEPS = 4000, CHUNK = 64 };

struct world {
	double cost[MAXD + 1];          /* seconds of a step at depth k */
	double acc[MAXD + 1];           /* [1..]: draft i kept, given i - 1 was */
	double preempted;               /* chance a step takes 2-3x its cost */
	double cut;                     /* chance p_min cuts a step's first draft */
	double catch_row;               /* seconds to feed the MTP layer a row */
	bool exact;                     /* no noise */
	int64_t pending;                /* rows the MTP layer has not been fed */
	uint64_t rng;
};

static double uniform(struct world *w)
{
	w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(w->rng >> 11) / 9007199254740992.0;
}

/* One step at depth k: its seconds, of them *catch_s feeding the MTP
 * layer *caught rows, and the drafts kept. */
static double step(struct world *w, int k, int *kept, double *catch_s, int64_t *caught)
{
	bool cut = k && uniform(w) < w->cut;    /* a plain step and one MTP row */
	*kept = 0;
	while (!cut && *kept < k && uniform(w) < w->acc[*kept + 1])
		(*kept)++;
	*caught = k || w->pending + 1 > CHUNK + 1 ? w->pending : 0;
	w->pending += 1 + *kept - *caught;
	*catch_s = (double)*caught * w->catch_row;
	double t = (cut ? 1.1 * w->cost[0] : w->cost[k]) *
		   (w->exact ? 1.0 : 0.9 + 0.2 * uniform(w));
	t = uniform(w) < w->preempted ? t * (2 + uniform(w)) : t;
	return t + *catch_s;
}

/* Tokens per second over `steps` steps, by the policy (fixed < 0) or at
 * a fixed depth (0: [mtp] off, the MTP layer never fed); *at counts the
 * policy's steps by depth. */
static double run_for(struct world w, int fixed, int at[MAXD + 1], int steps)
{
	tf_draft_policy p;
	double sec = 0, tokens = 0, catch_s;
	int64_t caught;
	tf_draft_policy_init(&p, MAXD, TF_DRAFT_BUDGET);
	if (fixed == 0)
		w.catch_row = 0;
	for (int i = 0; i < steps; i++) {
		int k = fixed >= 0 ? fixed : tf_draft_policy_depth(&p, w.pending), kept;
		double t = step(&w, k, &kept, &catch_s, &caught);
		if (fixed < 0) {
			tf_draft_policy_update(&p, k, kept, t, catch_s, caught);
			at[k]++;
		}
		sec += t;
		tokens += 1 + kept;
	}
	return tokens / sec;
}

static double run(struct world w, int fixed, int at[MAXD + 1])
{
	return run_for(w, fixed, at, STEPS);
}

/* In w the policy spends `share` of its steps at depth `best` and comes
 * within 3% of best held fixed. */
static void settles(struct world w, int best, double share)
{
	int at[MAXD + 1] = { 0 };
	double fixed = run(w, best, NULL), adaptive = run(w, -1, at);
	cr_expect_gt(at[best], STEPS * share, "depth %d: %d steps of %d", best, at[best], STEPS);
	cr_expect_gt(adaptive, 0.97 * fixed, "adaptive %.3f vs depth %d %.3f tok/s", adaptive,
		     best, fixed);
}

Test(mtp_policy, backs_off_where_drafting_cannot_pay)
{
	/* A CPU: a verify of k + 1 rows costs nearly k + 1 steps. */
	settles((struct world){ .cost = { 1.0, 2.1, 3.1, 4.1 }, .acc = { 0, 0.75, 0.65, 0.6 },
				.rng = 1 }, 0, 0.95);
}

Test(mtp_policy, preemption_does_not_fool_it)
{
	/* A loaded machine: one step in four descheduled for 1-2x its cost
	 * more, at any depth; ling-nano's measured costs and acceptance, then
	 * the GPU-like case, where probing the close depths 1 and 3 more
	 * often costs share but not speed. */
	settles((struct world){ .cost = { 1.0, 2.17, 2.93, 3.64 }, .acc = { 0, 0.46, 0.3, 0.5 },
				.preempted = 0.25, .rng = 4 }, 0, 0.95);
	settles((struct world){ .cost = { 1.0, 1.2, 1.4, 1.9 }, .acc = { 0, 0.8, 0.7, 0.2 },
				.preempted = 0.25, .rng = 5 }, 2, 0.75);
}

Test(mtp_policy, drafts_p_min_cuts_are_costed_as_they_come)
{
	/* ling-bench: p_min cuts 80% of first drafts (cheap), the rest cost
	 * 5x a plain step and are rejected; the mean cost of asking is 1.9x. */
	settles((struct world){ .cost = { 1.0, 5.1, 6.6, 6.5 }, .acc = { 0, 0, 0, 0 },
				.cut = 0.8, .preempted = 0.25, .rng = 6 }, 0, 0.95);
}

Test(mtp_policy, a_head_p_min_always_cuts_is_left_alone)
{
	/* ling-bench's random head under p_min = 0.4: every draft cut, so
	 * asking for depth 1 costs a plain step and one MTP row (1.1x),
	 * close to plain; once its acceptance is known to be nil, probes
	 * must back off like any that lose. */
	settles((struct world){ .cost = { 1.0, 5.1, 6.6, 6.5 }, .acc = { 0, 0, 0, 0 },
				.cut = 1.0, .rng = 7 }, 0, 0.98);
}

Test(mtp_policy, settles_on_the_best_depth)
{
	/* A GPU-like cost: drafts and wider verifies cheap.  Depth 2 is
	 * best: rates 1, 1.50, 1.69, 1.30 tokens per unit. */
	settles((struct world){ .cost = { 1.0, 1.2, 1.4, 1.9 }, .acc = { 0, 0.8, 0.7, 0.2 },
				.rng = 2 }, 2, 0.9);
}

Test(mtp_policy, follows_a_change_of_text)
{
	/* Acceptance collapses half way (a new kind of text): the policy
	 * must leave depth 3 for plain decoding. */
	struct world w = { .cost = { 1.0, 1.2, 1.4, 1.6 }, .acc = { 0, 0.9, 0.9, 0.9 },
			   .rng = 3 };
	tf_draft_policy p;
	int early = 0, late0 = 0, kept;
	double catch_s;
	int64_t caught;
	tf_draft_policy_init(&p, MAXD, TF_DRAFT_BUDGET);
	for (int i = 0; i < STEPS; i++) {
		if (i == STEPS / 2)
			w.acc[1] = w.acc[2] = w.acc[3] = 0.05;
		int k = tf_draft_policy_depth(&p, w.pending);
		early += i >= STEPS / 4 && i < STEPS / 2 && k == MAXD;
		double t = step(&w, k, &kept, &catch_s, &caught);
		tf_draft_policy_update(&p, k, kept, t, catch_s, caught);
		late0 += i >= STEPS * 3 / 4 && k == 0;
	}
	cr_expect_gt(early, STEPS / 4 * 0.9, "depth %d steps in the second quarter: %d", MAXD,
		     early);
	cr_expect_gt(late0, STEPS / 4 * 0.8, "plain steps in the last quarter: %d", late0);
}

Test(mtp_policy, within_3_percent_of_plain_at_every_length)
{
	/* Where drafting never pays, replies of every length: the measured
	 * ling-nano (a depth-1 step 2.2 plain steps, feeding the MTP layer a
	 * row 1.2% of one), ling-bench without p_min (3.2), and a depth 1 at
	 * 1.3 steps whose drafts are never kept; no noise, so only the
	 * policy's spending shows. */
	const struct world ws[] = {
		{ .cost = { 1.0, 2.19, 2.69, 3.42 }, .acc = { 0, 0.46, 0.3, 0.5 },
		  .catch_row = 0.012, .exact = true, .rng = 8 },
		{ .cost = { 1.0, 3.19, 3.85, 4.54 }, .catch_row = 0.005, .exact = true, .rng = 9 },
		{ .cost = { 1.0, 1.3, 1.6, 1.9 }, .catch_row = 0.01, .exact = true, .rng = 10 },
	};
	for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
		for (int n = 1; n <= 2048; n = n < 16 ? n + 1 : n * 5 / 4) {
			int at[MAXD + 1] = { 0 };
			double off = run_for(ws[i], 0, NULL, n), adaptive = run_for(ws[i], -1, at, n);
			cr_expect_geq(adaptive, 0.97 * off, "world %zu, %d tokens: %.4f of off",
				      i, n, adaptive / off);
		}
}
