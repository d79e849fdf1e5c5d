/* viterbi.c - tail-biting trellis search per tile (viterbi.h). */
#include "viterbi.h"

#include <float.h>
#include <stdlib.h>

#include "tf/error.h"
#include "vec.h"

/*
 * The codebook is stored as 2^K rows, one per top-K-bits value k, of the
 * 2^(16-K) states k·2^(16-K) + e.  Rows are padded by one cache line: the
 * search reads all 2^K rows at once, and unpadded power-of-two strides
 * would pile them onto the same L1 sets.
 */
#define VIT_ROW(K) (((size_t)1 << (16 - (K))) + 16)

static inline size_t cb_index(int K, uint32_t s)
{
	return (s >> (16 - K)) * VIT_ROW(K) + (s & ((1u << (16 - K)) - 1));
}

int tf_exl3_viterbi_init(tf_exl3_viterbi *v, int K, tf_exl3_cb cb)
{
	*v = (tf_exl3_viterbi){ .K = K, .cb = cb };
	if (K < 1 || K > TF_EXL3_K_MAX)
		return TF_ERR_INVALID;
	v->cb_value = malloc(((size_t)1 << K) * VIT_ROW(K) * sizeof(float));
	v->cost = malloc((size_t)TF_EXL3_TILE_N * ((size_t)1 << (16 - K)) * sizeof(float));
	if (!v->cb_value || !v->cost) {
		tf_exl3_viterbi_free(v);
		return TF_ERR_NOMEM;
	}
	for (uint32_t s = 0; s < 65536; s++)
		v->cb_value[cb_index(K, s)] = tf_exl3_cb_f32((uint16_t)s, cb);
	return TF_OK;
}

void tf_exl3_viterbi_free(tf_exl3_viterbi *v)
{
	free(v->cb_value);
	free(v->cost);
	v->cb_value = v->cost = NULL;
}

static inline float sq(float a) { return a * a; }

/*
 * One trellis step: cur[e] = min over the 2^K states s ending in edge e of
 * prev[s >> K] + (cb(s) - x)².  Writing e = q·2^K + l, the states are
 * s = k·2^(16-K) + e and their predecessors k·2^(16-2K) + q, which do not
 * depend on l: the 2^K values of l are the vector lanes.  Inlined per K so
 * the loop over k unrolls.
 */
static inline __attribute__((always_inline)) void
step_k(const float *cbv, const float *prev, float *cur, float x, const int K)
{
	const int nk = 1 << K;
	const int64_t R = (int64_t)VIT_ROW(K), Q = (int64_t)1 << (16 - 2 * K);
	const tf_vf xv = tf_vf_set1(x);

	for (int64_t q = 0; q < Q; q++) {
		int l = 0;
		if (nk >= TF_VL)
			for (; l < nk; l += TF_VL) {
				/* Four independent minimum chains hide the latency. */
				tf_vf b[4];
				for (int i = 0; i < 4; i++)
					b[i] = tf_vf_set1(FLT_MAX);
#pragma GCC unroll 64
				for (int k = 0; k < nk; k++) {
					tf_vf d = tf_vf_sub(tf_vf_load(cbv + k * R + q * nk + l), xv);
					b[k % 4] = tf_vf_min(b[k % 4],
							     tf_vf_fma(d, d, tf_vf_set1(prev[k * Q + q])));
				}
				tf_vf_store(cur + q * nk + l,
					    tf_vf_min(tf_vf_min(b[0], b[1]), tf_vf_min(b[2], b[3])));
			}
		for (; l < nk; l++) {
			float best = FLT_MAX;
			for (int k = 0; k < nk; k++) {
				float c = prev[k * Q + q] + sq(cbv[k * R + q * nk + l] - x);
				best = c < best ? c : best;
			}
			cur[q * nk + l] = best;
		}
	}
}

static void step(const tf_exl3_viterbi *v, const float *prev, float *cur, float x)
{
	switch (v->K) {
	case 1: step_k(v->cb_value, prev, cur, x, 1); break;
	case 2: step_k(v->cb_value, prev, cur, x, 2); break;
	case 3: step_k(v->cb_value, prev, cur, x, 3); break;
	case 4: step_k(v->cb_value, prev, cur, x, 4); break;
	case 5: step_k(v->cb_value, prev, cur, x, 5); break;
	case 6: step_k(v->cb_value, prev, cur, x, 6); break;
	case 7: step_k(v->cb_value, prev, cur, x, 7); break;
	default: step_k(v->cb_value, prev, cur, x, 8); break;
	}
}

/*
 * Forward over the positions order[0..255], then trace back from edge
 * `last_edge` (or the cheapest when < 0).  With `first_pred` >= 0 the
 * first state must follow that edge.  Writes the states by position.
 */
static void search(tf_exl3_viterbi *v, const float *x, const int *order,
		   int first_pred, int last_edge, uint16_t *states)
{
	const int K = v->K, nk = 1 << K;
	const int64_t E = (int64_t)1 << (16 - K);
	const float *cbv = v->cb_value;
	float *cost = v->cost;

	/* First position: free, or only the 2^K states after first_pred. */
	for (int64_t e = 0; e < E; e++)
		cost[e] = FLT_MAX;
	for (int64_t s = 0; s < 65536; s++)
		if (first_pred < 0 || (s >> K) == first_pred) {
			float c = sq(cbv[cb_index(K, (uint32_t)s)] - x[order[0]]);
			if (c < cost[s & (E - 1)])
				cost[s & (E - 1)] = c;
		}
	for (int u = 1; u < TF_EXL3_TILE_N; u++)
		step(v, cost + (u - 1) * E, cost + u * E, x[order[u]]);

	int64_t e = last_edge;
	if (e < 0) {
		const float *c = cost + (TF_EXL3_TILE_N - 1) * E;
		e = 0;
		for (int64_t i = 1; i < E; i++)
			if (c[i] < c[e])
				e = i;
	}
	/* Recompute each argmin along the chosen path. */
	for (int u = TF_EXL3_TILE_N - 1; u >= 0; u--) {
		int64_t best_s = -1;
		float best = FLT_MAX;
		for (int k = 0; k < nk; k++) {
			int64_t s = k * E + e;
			float c = sq(cbv[cb_index(K, (uint32_t)s)] - x[order[u]]);
			if (u > 0)
				c += cost[(u - 1) * E + (s >> K)];
			else if (first_pred >= 0 && (s >> K) != first_pred)
				continue;
			if (best_s < 0 || c < best) {
				best = c;
				best_s = s;
			}
		}
		states[order[u]] = (uint16_t)best_s;
		e = best_s >> K;
	}
}

double tf_exl3_viterbi_run(tf_exl3_viterbi *v, const float x[TF_EXL3_TILE_N],
			   uint16_t states[TF_EXL3_TILE_N])
{
	int order[TF_EXL3_TILE_N];
	const int64_t E = (int64_t)1 << (16 - v->K);
	double err = 0;

	/* Pass 1 starts mid-tile so that position 255 sits in the middle
	 * of the path, far from both free ends. */
	for (int u = 0; u < TF_EXL3_TILE_N; u++)
		order[u] = (u + 128) % TF_EXL3_TILE_N;
	search(v, x, order, -1, -1, states);
	int edge = (int)(states[TF_EXL3_TILE_N - 1] & (E - 1));

	for (int u = 0; u < TF_EXL3_TILE_N; u++)
		order[u] = u;
	search(v, x, order, edge, edge, states);
	for (int t = 0; t < TF_EXL3_TILE_N; t++)
		err += sq(v->cb_value[cb_index(v->K, states[t])] - x[t]);
	return err;
}
