/* mtp_policy.c - see mtp_policy.h. */
#include "mtp_policy.h"

/* EMA weights: acceptance moves with the text over ~16 drafts, a step's
 * seconds over ~8 steps (timing noise on a shared CPU is +-10%). */
#define ACC_W (1.0 / 16)
#define SEC_W (1.0 / 8)
/* Steps between probes: from PROBE_MIN, doubling while probes lose. */
#define PROBE_MIN 8
#define PROBE_MAX 256

void tf_mtp_policy_init(tf_mtp_policy *p, int max_depth)
{
	*p = (tf_mtp_policy){ .max = max_depth, .best = max_depth, .probe = PROBE_MIN,
			      .side = -1, .probing = -1 };
	for (int i = 1; i <= max_depth; i++)
		p->acc[i] = 1.0;        /* optimistic until measured */
}

/* Expected tokens per second of depth k. */
static double rate(const tf_mtp_policy *p, int k)
{
	double tokens = 1.0, chain = 1.0;
	for (int i = 1; i <= k; i++) {
		chain *= p->acc[i];
		tokens += chain;
	}
	return tokens / p->sec[k];
}

int tf_mtp_policy_depth(tf_mtp_policy *p)
{
	for (int k = p->max; k >= 0; k--)
		if (p->sec[k] <= 0) {
			p->probing = k;
			return k;
		}
	if (p->until > 0) {
		p->until--;
		return p->best;
	}
	int k = p->best + p->side;
	if (k < 0 || k > p->max) {
		p->side = -p->side;
		k = p->best + p->side;
	}
	p->side = -p->side;
	p->until = p->probe;
	if (k < 0 || k > p->max)        /* max 0: nothing to probe */
		return p->best;
	p->probing = k;
	return k;
}

void tf_mtp_policy_update(tf_mtp_policy *p, int k, int drafted, int accepted, double seconds)
{
	int was = p->best;
	/* Drafts past the first rejected one say nothing of a_i. */
	for (int i = 1; i <= drafted && i <= accepted + 1; i++)
		p->acc[i] += ACC_W * ((i <= accepted ? 1.0 : 0.0) - p->acc[i]);
	if (seconds <= 0)
		seconds = 1e-9;
	p->sec[k] = p->sec[k] > 0 ? p->sec[k] + SEC_W * (seconds - p->sec[k]) : seconds;
	p->best = -1;
	for (int j = 0; j <= p->max; j++)
		if (p->sec[j] > 0 && (p->best < 0 || rate(p, j) > rate(p, p->best)))
			p->best = j;
	if (p->probing == k) {
		p->probe = p->best == was ? (p->probe * 2 < PROBE_MAX ? p->probe * 2 : PROBE_MAX)
					  : PROBE_MIN;
		p->probing = -1;
	}
}
