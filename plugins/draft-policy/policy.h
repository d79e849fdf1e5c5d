/*
 * policy.h - how deep one sequence drafts: [mtp] adaptive, [ngram]
 * adaptive.  A library the drafters link (tfdraftpolicy).
 *
 * The policy picks the depth k (0: a plain step, no drafts) with the most
 * tokens per second, from what the sequence measured itself:
 *
 *     rate(k) = tokens(k) / (seconds(k) + tokens(k) catch)
 *     tokens(k) = 1 + sum over i = 1..k of a_1 a_2 ... a_i
 *
 * a_i is an EMA of whether draft i was made and kept when draft i - 1 was
 * (a draft not made counts as not kept: one [mtp] p_min cuts, one ngram
 * found no match for), seconds(k) an EMA of a
 * step's wall time at depth k: the drafts, the wider verify, the undoing
 * of rejected drafts, all measured, so the union of experts a wider verify
 * reads and the machine's speed are in it.  `catch` is what feeding the
 * MTP layer one row costs (it follows the sequence lazily: a drafting
 * step feeds it every row it keeps; plain steps feed it nothing until the
 * next draft).  A depth not measured yet counts its acceptance as the
 * position before's and its seconds as depth 1's plus, per draft more,
 * what depth 1 costs over a plain step.  Every `probe` steps a depth next
 * to the choice is tried, so a depth left behind (plain decoding measures
 * no acceptance) is measured again; while probes confirm the choice the
 * interval doubles up to PROBE_MAX, and a depth that could not win even
 * keeping every draft is skipped but at PROBE_MAX.
 *
 * Drafting is bought from a budget ([mtp] budget): a step at depth k > 0
 * is taken only while what drafting has cost beyond plain decoding so far
 * (seconds, catching up included, less the plain steps its tokens would
 * have taken) plus what this step may cost beyond a plain one stays
 * within `budget` of the sequence's decoding time.  So where drafting
 * never pays, a reply is at most about `budget` slower than plain
 * decoding at any length, and where it pays, its gains fund the probes.  The first steps are plain
 * (their seconds are the yardstick); depth 1 is first tried once the
 * budget covers a verify of two rows at two plain steps' cost.
 * bench/mtp/README.md has the measurements behind the constants.
 */
#ifndef TF_DRAFT_POLICY_H
#define TF_DRAFT_POLICY_H

#include <stdint.h>

#include "tf/drafter.h"

/* [mtp] budget's default: 3% (adaptive's bound against [mtp] off, in
 * bench/mtp) less a margin for one step's misestimate and for feeding
 * the MTP layer while decoding plainly (ling-nano: 1.2%), which is not
 * the policy's choice. */
#define TF_DRAFT_BUDGET 0.02

typedef struct tf_draft_policy {
	int max;                                /* the drafter's max_depth */
	double budget;                          /* its budget key */
	double acc[TF_DRAFT_MAX_DEPTH + 1];     /* [1..max]: a_i, -1: not measured */
	double sec[TF_DRAFT_MAX_DEPTH + 1];     /* [0..max]: seconds(k), 0: not measured */
	int n_acc[TF_DRAFT_MAX_DEPTH + 1];      /* acceptance samples, capped */
	int64_t n_sec[TF_DRAFT_MAX_DEPTH + 1];  /* steps measured */
	int best;                               /* the choice */
	int64_t until;                          /* steps to the next probe */
	int64_t probe;                          /* the probe interval now */
	int side;                               /* the next probe: +1 deeper, -1 shallower */
	int probing;                            /* the depth being probed, or -1 */
	double catch_row;                       /* seconds to feed the MTP layer a row, 0: not measured */
	double spent;                           /* drafting's seconds beyond plain decoding */
	double elapsed;                         /* seconds of every step */
} tf_draft_policy;

void tf_draft_policy_init(tf_draft_policy *p, int max_depth, double budget);

/* The depth of the sequence's next step, when drafting would first feed
 * the MTP layer `pending` rows. */
int tf_draft_policy_depth(tf_draft_policy *p, int64_t pending);

/* A step asked for depth k took `seconds` and kept its first `accepted`
 * drafts; a draft not made counts as rejected (it gave no token).
 * Of those seconds, `catch_s` fed the MTP layer `caught` rows. */
void tf_draft_policy_update(tf_draft_policy *p, int k, int accepted, double seconds,
			    double catch_s, int64_t caught);

#endif /* TF_DRAFT_POLICY_H */
