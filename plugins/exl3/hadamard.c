/* hadamard.c - in-place fast Walsh-Hadamard transform per 128 (hadamard.h). */
#include "hadamard.h"

#include "vec.h"

void tf_had128(float *v, int64_t n)
{
	const float scale = 0.088388347648f;    /* 1/√128, as exllamav3 */

	for (int64_t b = 0; b < n; b += TF_HAD_BLOCK) {
		float *x = v + b;
		/* Butterfly pairs (i, i+h); strides of a whole vector or more
		 * go through the vector unit, the first few stay scalar. */
		for (int h = 1; h < TF_HAD_BLOCK; h *= 2) {
			for (int i = 0; i < TF_HAD_BLOCK; i += 2 * h) {
				int j = 0;
				if (h >= TF_VL)
					for (; j < h; j += TF_VL) {
						tf_vf a = tf_vf_load(x + i + j);
						tf_vf c = tf_vf_load(x + i + j + h);
						tf_vf_store(x + i + j, tf_vf_add(a, c));
						tf_vf_store(x + i + j + h, tf_vf_sub(a, c));
					}
				for (; j < h; j++) {
					float a = x[i + j], c = x[i + j + h];
					x[i + j] = a + c;
					x[i + j + h] = a - c;
				}
			}
		}
		tf_vf s = tf_vf_set1(scale);
		for (int i = 0; i < TF_HAD_BLOCK; i += TF_VL)
			tf_vf_store(x + i, tf_vf_mul(tf_vf_load(x + i), s));
	}
}
