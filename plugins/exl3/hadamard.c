/* hadamard.c - in-place fast Walsh-Hadamard transform per 128 (hadamard.h). */
#include "hadamard.h"

#include "vec.h"

#define HALF (TF_HAD_BLOCK / 2)
#define HALF_VECS (HALF / TF_VL)

void tf_had128_ref(float *v, int64_t n)
{
	for (int64_t b = 0; b < n; b += TF_HAD_BLOCK) {
		float *x = v + b;
		for (int h = 1; h < TF_HAD_BLOCK; h *= 2)
			for (int i = 0; i < TF_HAD_BLOCK; i++)
				if (!(i & h)) {
					const float a = x[i], c = x[i + h];
					x[i] = a + c;
					x[i + h] = a - c;
				}
		for (int i = 0; i < TF_HAD_BLOCK; i++)
			x[i] *= TF_HAD_SCALE;
	}
}

/*
 * Butterfly pairs (i, i+h): strides below a vector inside each register,
 * then the strides up to 32 on each half of the block held in registers,
 * then stride 64 and the scale in one pass.  The stages run in the same
 * order on every element (1, 2, 4, ..., 64), so the sums are the ones the
 * plain stage-by-stage loop forms; only the loads and stores went.
 */
void tf_had128(float *v, int64_t n)
{
	const tf_vf scale = tf_vf_set1(0.088388347648f);        /* 1/√128, as exllamav3 */

	for (int64_t b = 0; b < n; b += TF_HAD_BLOCK) {
		float *x = v + b;
		for (int half = 0; half < 2; half++) {
			float *xh = x + half * HALF;
			tf_vf r[HALF_VECS];
#pragma GCC unroll 64
			for (int i = 0; i < HALF_VECS; i++)
				r[i] = tf_vf_had_lanes(tf_vf_load(xh + i * TF_VL));
#pragma GCC unroll 8
			for (int h = 1; h < HALF_VECS; h *= 2)
#pragma GCC unroll 64
				for (int j = 0; j < HALF_VECS; j++)
					if (!(j & h)) {
						tf_vf a = r[j], c = r[j | h];
						r[j] = tf_vf_add(a, c);
						r[j | h] = tf_vf_sub(a, c);
					}
#pragma GCC unroll 64
			for (int i = 0; i < HALF_VECS; i++)
				tf_vf_store(xh + i * TF_VL, r[i]);
		}
#pragma GCC unroll 64
		for (int i = 0; i < HALF; i += TF_VL) {
			tf_vf a = tf_vf_load(x + i), c = tf_vf_load(x + i + HALF);
			tf_vf_store(x + i, tf_vf_mul(tf_vf_add(a, c), scale));
			tf_vf_store(x + i + HALF, tf_vf_mul(tf_vf_sub(a, c), scale));
		}
	}
}
