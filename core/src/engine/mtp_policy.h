/*
 * mtp_policy.h - how deep one sequence drafts ([mtp] adaptive).
 *
 * The policy picks the depth k (0: a plain step, no drafts) with the most
 * tokens per second, from what the sequence measured itself:
 *
 *     rate(k) = tokens(k) / seconds(k)
 *     tokens(k) = 1 + sum over i = 1..k of a_1 a_2 ... a_i
 *
 * a_i is an EMA of whether draft i was made and kept when draft i - 1 was
 * (a draft [mtp] p_min cuts counts as not kept), seconds(k) an EMA of a
 * step's wall time at depth k: the drafts, the wider verify, the undoing
 * of rejected drafts, all measured, so the union of experts a wider verify
 * reads and the machine's speed are in it.  A depth not measured yet
 * counts its acceptance as the position before's and its seconds as depth
 * 1's plus, per draft more, what depth 1 costs over a plain step.  The
 * first steps alternate depth 1 and plain, three times; then the best depth
 * by this estimate is taken, and every `probe` steps a depth next to it is
 * tried, so a depth left behind (plain decoding measures no acceptance) is
 * measured again.  While probes confirm the choice the interval doubles
 * up to PROBE_MAX, and a depth that could not win even keeping every
 * draft is skipped but at PROBE_MAX: where drafting never pays (this CPU)
 * one step in PROBE_MAX drafts.  bench/mtp/README.md has the measurements
 * behind the constants.
 */
#ifndef TF_MTP_POLICY_H
#define TF_MTP_POLICY_H

#include <stdint.h>

#define TF_MTP_MAX_DEPTH 16     /* [mtp] max_depth's range ends here */

typedef struct tf_mtp_policy {
	int max;                                /* [mtp] max_depth */
	double acc[TF_MTP_MAX_DEPTH + 1];       /* [1..max]: a_i, -1: not measured */
	double sec[TF_MTP_MAX_DEPTH + 1];       /* [0..max]: seconds(k), 0: not measured */
	int n_acc[TF_MTP_MAX_DEPTH + 1];        /* acceptance samples, capped */
	int64_t n_sec[TF_MTP_MAX_DEPTH + 1];    /* steps measured */
	int best;                               /* the choice */
	int64_t until;                          /* steps to the next probe */
	int64_t probe;                          /* the probe interval now */
	int side;                               /* the next probe: +1 deeper, -1 shallower */
	int probing;                            /* the depth being probed, or -1 */
} tf_mtp_policy;

void tf_mtp_policy_init(tf_mtp_policy *p, int max_depth);

/* The depth of the sequence's next step. */
int tf_mtp_policy_depth(tf_mtp_policy *p);

/* A step asked for depth k took `seconds` and kept its first `accepted`
 * drafts; a draft [mtp] p_min cut counts as rejected (it gave no token). */
void tf_mtp_policy_update(tf_mtp_policy *p, int k, int accepted, double seconds);

#endif /* TF_MTP_POLICY_H */
