/*
 * ops_neon.c - the row kernels with AArch64 NEON, 4 floats a step.
 *
 * Each kernel does what its namesake in ops_ref.c does (read that first);
 * tails shorter than a vector go through the same scalar arithmetic.
 * Built only when TF_SIMD is neon (AArch64 always has it).
 */
#include <arm_neon.h>
#include <math.h>

#include "../common/vec.h"
#include "kernels.h"
#include "tf/dtype.h"

static void neon_rmsnorm(float *y, const float *x, const float *w, int64_t n,
			 float eps)
{
	float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
		acc0 = vfmaq_f32(acc0, a, a);
		acc1 = vfmaq_f32(acc1, b, b);
	}
	for (; i + 4 <= n; i += 4) {
		float32x4_t a = vld1q_f32(x + i);
		acc0 = vfmaq_f32(acc0, a, a);
	}
	float ss = vaddvq_f32(vaddq_f32(acc0, acc1));
	for (; i < n; i++)
		ss += x[i] * x[i];
	float scale = 1.0f / sqrtf(ss / (float)n + eps);
	for (i = 0; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale),
					   vld1q_f32(w + i)));
	for (; i < n; i++)
		y[i] = x[i] * scale * w[i];
}

static void neon_add(float *y, const float *a, const float *b, int64_t n)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
	for (; i < n; i++)
		y[i] = a[i] + b[i];
}

static void neon_swiglu(float *y, const float *gate, const float *up, int64_t n,
			float limit)
{
	const float32x4_t hi = vdupq_n_f32(limit), lo = vdupq_n_f32(-limit);
	int64_t i = 0;
	for (; i + 4 <= n; i += 4) {
		float32x4_t g = vld1q_f32(gate + i), u = vld1q_f32(up + i);
		float32x4_t s = tf_vx_silu(g);
		if (limit > 0.0f) {
			s = vminq_f32(s, hi);
			u = vminq_f32(vmaxq_f32(u, lo), hi);
		}
		vst1q_f32(y + i, vmulq_f32(s, u));
	}
	if (i < n)
		tf_cpu_ref.swiglu(y + i, gate + i, up + i, n - i, limit);
}

/* vld2q splits four adjacent pairs into their first and second halves. */
static void neon_rope_gptj(float *x, const float *cos, const float *sin,
			   int64_t pairs)
{
	int64_t j = 0;
	for (; j + 4 <= pairs; j += 4) {
		float32x4x2_t v = vld2q_f32(x + 2 * j);
		float32x4_t c = vld1q_f32(cos + j), s = vld1q_f32(sin + j);
		float32x4x2_t r = { {
			vfmsq_f32(vmulq_f32(v.val[0], c), v.val[1], s),
			vfmaq_f32(vmulq_f32(v.val[1], c), v.val[0], s),
		} };
		vst2q_f32(x + 2 * j, r);
	}
	if (j < pairs)
		tf_cpu_ref.rope_gptj(x + 2 * j, cos + j, sin + j, pairs - j);
}

static void neon_rope_neox(float *x, float *x2, const float *cos,
			   const float *sin, int64_t pairs)
{
	int64_t j = 0;
	for (; j + 4 <= pairs; j += 4) {
		float32x4_t a = vld1q_f32(x + j), b = vld1q_f32(x2 + j);
		float32x4_t c = vld1q_f32(cos + j), s = vld1q_f32(sin + j);
		vst1q_f32(x + j, vfmsq_f32(vmulq_f32(a, c), b, s));
		vst1q_f32(x2 + j, vfmaq_f32(vmulq_f32(b, c), a, s));
	}
	if (j < pairs)
		tf_cpu_ref.rope_neox(x + j, x2 + j, cos + j, sin + j, pairs - j);
}

/* vmaxnm ignores a NaN operand, as fmaxf does: NaN never wins. */
static float neon_max(const float *x, int64_t n)
{
	float32x4_t acc = vdupq_n_f32(-INFINITY);
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		acc = vmaxnmq_f32(acc, vld1q_f32(x + i));
	float m = vmaxnmvq_f32(acc);
	for (; i < n; i++)
		m = fmaxf(m, x[i]);
	return m;
}

static void neon_softmax(float *x, int64_t n)
{
	float max = neon_max(x, n);
	float32x4_t vmax = vdupq_n_f32(max), acc = vdupq_n_f32(0.0f);
	int64_t i = 0;
	for (; i + 4 <= n; i += 4) {
		float32x4_t e = tf_vx_exp(vsubq_f32(vld1q_f32(x + i), vmax));
		vst1q_f32(x + i, e);
		acc = vaddq_f32(acc, e);
	}
	float sum = vaddvq_f32(acc);
	for (; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	float inv = 1.0f / sum;
	for (i = 0; i + 4 <= n; i += 4)
		vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
	for (; i < n; i++)
		x[i] *= inv;
}

/* The largest value first, then the first index holding it. */
static int64_t neon_argmax(const float *x, int64_t n)
{
	float max = neon_max(x, n);
	float32x4_t vmax = vdupq_n_f32(max);
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		if (vmaxvq_u32(vceqq_f32(vld1q_f32(x + i), vmax)))
			break;
	for (; i < n; i++)
		if (x[i] == max)
			return i;
	return 0;                       /* all NaN */
}

static void neon_f16_to_f32(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
	for (; i < n; i++)
		y[i] = tf_f16_to_f32(x[i]);
}

static void neon_bf16_to_f32(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(x + i), 16)));
	for (; i < n; i++)
		y[i] = tf_bf16_to_f32(x[i]);
}

/* The FPCR's default rounding is to nearest even, subnormals included. */
static void neon_f32_to_f16(uint16_t *y, const float *x, int64_t n)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
	for (; i < n; i++)
		y[i] = tf_f32_to_f16(x[i]);
}

/* tf_f32_to_bf16 on 4 lanes: add 0x7fff plus the kept lsb, keep NaN quiet. */
static void neon_f32_to_bf16(uint16_t *y, const float *x, int64_t n)
{
	const uint32x4_t abs = vdupq_n_u32(0x7fffffff), inf = vdupq_n_u32(0x7f800000);
	int64_t i = 0;
	for (; i + 4 <= n; i += 4) {
		uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(x + i));
		uint32x4_t nan = vcgtq_u32(vandq_u32(u, abs), inf);
		uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
		uint32x4_t r = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), lsb));
		r = vbslq_u32(nan, vorrq_u32(u, vdupq_n_u32(0x400000)), r);
		vst1_u16(y + i, vshrn_n_u32(r, 16));
	}
	for (; i < n; i++)
		y[i] = tf_f32_to_bf16(x[i]);
}

const tf_cpu_kernels tf_cpu_vec = {
	.isa = "neon",
	.rmsnorm = neon_rmsnorm,
	.add = neon_add,
	.swiglu = neon_swiglu,
	.rope_gptj = neon_rope_gptj,
	.rope_neox = neon_rope_neox,
	.softmax = neon_softmax,
	.argmax = neon_argmax,
	.f16_to_f32 = neon_f16_to_f32,
	.bf16_to_f32 = neon_bf16_to_f32,
	.f32_to_f16 = neon_f32_to_f16,
	.f32_to_bf16 = neon_f32_to_bf16,
};
