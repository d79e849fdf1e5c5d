/*
 * sum.c - rank-order sums for all-reduce.
 */
#include "sum.h"
#include "tf/dtype.h"

void tf_sum_f32(float *out, const float *const *parts, int n, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		float s = parts[0][i];
		for (int r = 1; r < n; r++)
			s += parts[r][i];
		out[i] = s;
	}
}

void tf_sum_bf16(uint16_t *out, const uint16_t *const *parts, int n, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		float s = tf_bf16_to_f32(parts[0][i]);
		for (int r = 1; r < n; r++)
			s += tf_bf16_to_f32(parts[r][i]);
		out[i] = tf_f32_to_bf16(s);
	}
}
