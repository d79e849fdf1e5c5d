/* topk.c - see topk.h. */
#include "topk.h"

/* A NaN never beats anything, but takes a pass's pick when it is the
 * first value not yet taken; picks stay distinct and in range. */
void tf_topk_ref(const float *v, int n, int k, float *taken, int32_t *out)
{
	for (int i = 0; i < n; i++)
		taken[i] = 0;
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int i = 0; i < n; i++)
			if (!taken[i] && (best < 0 || v[i] > v[best]))
				best = i;
		taken[best] = 1;
		out[j] = best;
	}
}

/* val[0..m) holds the best m values so far, largest first; a value enters
 * behind every equal one already there, so the lower index stays first.
 * A NaN enters only while the list is short, at its end. */
void tf_topk_fast(const float *v, int n, int k, float *val, int32_t *out)
{
	int m = 0;

	for (int i = 0; i < n; i++) {
		if (m == k && !(v[i] > val[k - 1]))
			continue;
		int j = m < k ? m++ : k - 1;
		for (; j > 0 && v[i] > val[j - 1]; j--) {
			val[j] = val[j - 1];
			out[j] = out[j - 1];
		}
		val[j] = v[i];
		out[j] = i;
	}
}
