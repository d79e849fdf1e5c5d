/*
 * ops_ref.c - the plain C kernels: the reference for every fast path and
 * the whole story on a scalar build.  Written for clarity, not speed.
 */
#include <math.h>

#include "kernels.h"
#include "tf/dtype.h"

static void ref_rmsnorm(float *y, const float *x, const float *w, int64_t n,
			float eps)
{
	float ss = 0.0f;
	for (int64_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	float scale = 1.0f / sqrtf(ss / (float)n + eps);
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] * scale * w[i];
}

static void ref_add(float *y, const float *a, const float *b, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}

static void ref_swiglu(float *y, const float *gate, const float *up, int64_t n,
		       float limit)
{
	for (int64_t i = 0; i < n; i++) {
		float g = gate[i], u = up[i];
		float s = g / (1.0f + expf(-g));
		if (limit > 0.0f) {
			s = fminf(s, limit);
			u = fminf(fmaxf(u, -limit), limit);
		}
		y[i] = s * u;
	}
}

static void ref_rope_gptj(float *x, const float *cos, const float *sin,
			  int64_t pairs)
{
	for (int64_t j = 0; j < pairs; j++) {
		float a = x[2 * j], b = x[2 * j + 1];
		x[2 * j] = a * cos[j] - b * sin[j];
		x[2 * j + 1] = a * sin[j] + b * cos[j];
	}
}

static void ref_rope_neox(float *x, float *x2, const float *cos,
			  const float *sin, int64_t pairs)
{
	for (int64_t j = 0; j < pairs; j++) {
		float a = x[j], b = x2[j];
		x[j] = a * cos[j] - b * sin[j];
		x2[j] = a * sin[j] + b * cos[j];
	}
}

static void ref_softmax(float *x, int64_t n)
{
	float max = -INFINITY;
	for (int64_t i = 0; i < n; i++)
		max = fmaxf(max, x[i]);
	float sum = 0.0f;
	for (int64_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	float inv = 1.0f / sum;
	for (int64_t i = 0; i < n; i++)
		x[i] *= inv;
}

static int64_t ref_argmax(const float *x, int64_t n)
{
	int64_t best = -1;
	for (int64_t i = 0; i < n; i++)
		if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
			best = i;
	return best < 0 ? 0 : best;
}

static void ref_f16_to_f32(float *y, const uint16_t *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = tf_f16_to_f32(x[i]);
}

static void ref_bf16_to_f32(float *y, const uint16_t *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = tf_bf16_to_f32(x[i]);
}

static void ref_f32_to_f16(uint16_t *y, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = tf_f32_to_f16(x[i]);
}

static void ref_f32_to_bf16(uint16_t *y, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = tf_f32_to_bf16(x[i]);
}

const tf_cpu_kernels tf_cpu_ref = {
	.isa = "scalar",
	.rmsnorm = ref_rmsnorm,
	.add = ref_add,
	.swiglu = ref_swiglu,
	.rope_gptj = ref_rope_gptj,
	.rope_neox = ref_rope_neox,
	.softmax = ref_softmax,
	.argmax = ref_argmax,
	.f16_to_f32 = ref_f16_to_f32,
	.bf16_to_f32 = ref_bf16_to_f32,
	.f32_to_f16 = ref_f32_to_f16,
	.f32_to_bf16 = ref_f32_to_bf16,
};
