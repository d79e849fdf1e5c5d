/* hadamard.c - in-place fast Walsh-Hadamard transform per 128 (hadamard.h). */
#include "hadamard.h"

#include "vec.h"

void tf_had128(float *v, int64_t n)
{
	const float scale = 0.088388347648f;    /* 1/√128, as exllamav3 */

	for (int64_t b = 0; b < n; b += TF_HAD_BLOCK) {
		float *x = v + b;
		/* Butterfly pairs (i, i+h): strides below a vector inside each
		 * register, the rest between registers.  The stages commute,
		 * and each pair's sum and difference are the same either way. */
		for (int i = 0; i < TF_HAD_BLOCK; i += TF_VL)
			tf_vf_store(x + i, tf_vf_had_lanes(tf_vf_load(x + i)));
		for (int h = TF_VL; h < TF_HAD_BLOCK; h *= 2)
			for (int i = 0; i < TF_HAD_BLOCK; i += 2 * h)
				for (int j = 0; j < h; j += TF_VL) {
					tf_vf a = tf_vf_load(x + i + j);
					tf_vf c = tf_vf_load(x + i + j + h);
					tf_vf_store(x + i + j, tf_vf_add(a, c));
					tf_vf_store(x + i + j + h, tf_vf_sub(a, c));
				}
		tf_vf s = tf_vf_set1(scale);
		for (int i = 0; i < TF_HAD_BLOCK; i += TF_VL)
			tf_vf_store(x + i, tf_vf_mul(tf_vf_load(x + i), s));
	}
}
