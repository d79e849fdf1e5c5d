/* policy.c - see policy.h. */
#include "policy.h"

#include <stdbool.h>

/* Acceptance: an EMA over ~16 drafts, the text's pace; until 16 came, the
 * mean of those there are and one prior sample of 1/2. */
#define ACC_N 16
/* A step's seconds: an EMA over ~8 steps, the mean cost of asking for the
 * depth.  Not a low quantile: with p_min a depth's steps are cheap (drafts
 * cut) or dear (drafted and verified), and a low quantile saw only the
 * cheap ones (ling-bench drafted at 5x a plain step's cost). */
#define SEC_W (1.0 / 8)
/* A depth's seconds are the least of its first WARM steps, and the first
 * WARM steps are plain: one preempted first step (2-3x) made plain
 * decoding look as dear as drafting for hundreds of steps. */
#define WARM 3
/* Steps between probes: from PROBE_MIN, doubling while probes lose. */
#define PROBE_MIN 8
#define PROBE_MAX 256
/* A probed depth within 10% of the choice's rate is probed again soon:
 * its acceptance, measured only while probed, may be what put it behind.
 * Once ACC_N drafts measured that acceptance, a probe that loses at all
 * has lost: where [mtp] p_min cuts nearly every draft of a head that is
 * never right, asking for depth 1 costs a plain step and one MTP row,
 * within 10% of plain, and was probed every PROBE_MIN steps for good
 * (ling-bench: 0.95x of plain decoding). */
#define CLOSE 0.9
/* The first try of depth k is costed at k + 1 plain steps more than a
 * plain one (a verify of k + 1 rows where rows cost alike: ling-bench
 * measured 2.2 for depth 1). */
#define FIRST_EXTRA(k) ((k) + 1)

void tf_draft_policy_init(tf_draft_policy *p, int max_depth, double budget)
{
	*p = (tf_draft_policy){ .max = max_depth, .budget = budget, .probe = PROBE_MIN, .side = 1,
			      .probing = -1 };
	for (int i = 1; i <= max_depth; i++)
		p->acc[i] = -1;         /* not measured: as the position before */
}


/* a_i as measured, or the nearest measured position before it (1: all
 * kept, until a draft is judged). */
static double acc_at(const tf_draft_policy *p, int i)
{
	while (i > 0 && p->acc[i] < 0)
		i--;
	return i > 0 ? p->acc[i] : 1.0;
}

/* seconds(k) as measured, or else each draft past depth 1 costing what
 * depth 1 costs over a plain step (a draft row and a verify row more);
 * 0: not known. */
static double sec_at(const tf_draft_policy *p, int k)
{
	if (p->sec[k] > 0 || k < 2 || p->sec[0] <= 0 || p->sec[1] <= 0)
		return p->sec[k];
	return p->sec[1] + (k - 1) * (p->sec[1] - p->sec[0]);
}

/* Expected tokens per second of depth k; with `all`, as if every draft
 * were kept (the most depth k can give).  Drafting at depth k for good
 * feeds the MTP layer every token it keeps. */
static double rate(const tf_draft_policy *p, int k, bool all)
{
	double tokens = 1.0, chain = 1.0, s = sec_at(p, k);
	for (int i = 1; i <= k; i++) {
		chain *= all ? 1.0 : acc_at(p, i);
		tokens += chain;
	}
	return s > 0 ? tokens / (s + (k ? tokens * p->catch_row : 0)) : 0;
}

/* Whether the budget covers a step at depth k > 0 after `pending` rows. */
static bool affordable(const tf_draft_policy *p, int k, int64_t pending)
{
	double extra = p->n_sec[1] ? sec_at(p, k) - p->sec[0] : FIRST_EXTRA(k) * p->sec[0];
	extra += (double)pending * p->catch_row;
	return p->spent + extra <= p->budget * (p->elapsed + p->sec[0]);
}

/* The depth the estimates ask for: plain until measured, depth 1 until
 * measured, then the choice or every `probe` steps a depth next to it. */
static int choose(tf_draft_policy *p)
{
	for (int k = 0; k <= 1 && k <= p->max; k++)
		if (p->n_sec[k] < WARM) {
			p->probing = k;
			return k;
		}
	if (p->until > 0) {
		p->until--;
		return p->best;
	}
	int k = p->best + p->side;
	if (k < 0 || k > p->max)
		k = p->best - p->side;
	p->side = -p->side;
	p->until = p->probe;
	/* A depth that could not win by a margin even keeping every draft is
	 * not worth a step, but for the longest interval's refresh of its
	 * seconds.  The margin, as CLOSE's: its seconds are the least of its
	 * first steps, and a depth-1 step whose draft was kept (no undoing)
	 * is cheaper than the mean (ling-nano: 1.9 against 2.4 plain steps),
	 * which left depth 1 probed every 8, 16, 32 ... steps. */
	if (k < 0 || k > p->max || (p->probe < PROBE_MAX && p->n_sec[k] >= WARM &&
				    CLOSE * rate(p, k, true) < rate(p, p->best, false))) {
		p->probe = p->probe * 2 < PROBE_MAX ? p->probe * 2 : PROBE_MAX;
		return p->best;
	}
	p->probing = k;
	return k;
}

int tf_draft_policy_depth(tf_draft_policy *p, int64_t pending)
{
	int side = p->side, k = choose(p);
	if (k == 0 || affordable(p, k, pending))
		return k;
	/* Not yet: a probe waits for the budget, not for the next interval. */
	if (p->probing == k) {
		p->probing = -1;
		p->until = 0;
		p->side = side;
	}
	return 0;
}

void tf_draft_policy_update(tf_draft_policy *p, int k, int accepted, double seconds,
			    double catch_s, int64_t caught)
{
	int was = p->best;

	/* Drafting's account: its seconds less the plain steps its tokens
	 * would have taken (negative where it pays). */
	p->elapsed += seconds;
	if (k > 0)
		p->spent += seconds - (accepted + 1) * p->sec[0];
	if (caught > 0)
		p->catch_row += (catch_s / (double)caught - p->catch_row) *
				(p->catch_row > 0 ? SEC_W : 1.0);
	seconds -= catch_s;
	/* Drafts past the first one rejected, or cut by p_min, say nothing
	 * of a_i. */
	for (int i = 1; i <= k && i <= accepted + 1; i++) {
		if (p->acc[i] < 0) {
			p->acc[i] = 0.5;
			p->n_acc[i] = 1;
		}
		if (p->n_acc[i] < ACC_N)
			p->n_acc[i]++;
		p->acc[i] += ((i <= accepted ? 1.0 : 0.0) - p->acc[i]) / p->n_acc[i];
	}
	if (seconds <= 0)
		seconds = 1e-9;
	if (p->n_sec[k]++ < WARM)
		p->sec[k] = p->sec[k] > 0 && p->sec[k] < seconds ? p->sec[k] : seconds;
	else
		p->sec[k] += (seconds - p->sec[k]) * SEC_W;
	p->best = 0;
	for (int j = 1; j <= p->max; j++)
		if (rate(p, j, false) > rate(p, p->best, false))
			p->best = j;
	/* A probe that lost by a margin waits twice as long for the next;
	 * one that won, came close or was measured fewer than WARM times,
	 * soon. */
	if (p->probing == k) {
		double close = k > 0 && p->n_acc[1] >= ACC_N ? 1.0 : CLOSE;
		bool lost = p->best == was && p->n_sec[k] >= WARM &&
			    rate(p, k, false) < close * rate(p, p->best, false);
		p->probe = !lost ? PROBE_MIN : p->probe * 2 < PROBE_MAX ? p->probe * 2 : PROBE_MAX;
		p->probing = -1;
	}
}
