/*
 * vec.h - the float vector type the linear kernels are written in.
 *
 * One set of inline operations over `tf_vf`, a register of TF_VL floats:
 * 8 with AVX2 (F16C converts halves), 4 with NEON, 1 on the scalar path.
 * Kernels written against these build unchanged on every target; the
 * scalar build doubles as the plain reference of the SIMD ones.
 */
#ifndef TF_EXL3_VEC_H
#define TF_EXL3_VEC_H

#include <stdint.h>

#include "tf/dtype.h"

#if defined(TF_SIMD_AVX2)
#include <immintrin.h>

#define TF_VL 8
typedef __m256 tf_vf;

static inline tf_vf tf_vf_zero(void) { return _mm256_setzero_ps(); }
static inline tf_vf tf_vf_set1(float a) { return _mm256_set1_ps(a); }
static inline tf_vf tf_vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void tf_vf_store(float *p, tf_vf a) { _mm256_storeu_ps(p, a); }
static inline tf_vf tf_vf_add(tf_vf a, tf_vf b) { return _mm256_add_ps(a, b); }
static inline tf_vf tf_vf_sub(tf_vf a, tf_vf b) { return _mm256_sub_ps(a, b); }
static inline tf_vf tf_vf_mul(tf_vf a, tf_vf b) { return _mm256_mul_ps(a, b); }
/* a * b + c */
static inline tf_vf tf_vf_fma(tf_vf a, tf_vf b, tf_vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline tf_vf tf_vf_load_f16(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline tf_vf tf_vf_load_bf16(const uint16_t *p)
{
	__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
static inline float tf_vf_sum(tf_vf a)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

#elif defined(TF_SIMD_NEON)
#include <arm_neon.h>

#define TF_VL 4
typedef float32x4_t tf_vf;

static inline tf_vf tf_vf_zero(void) { return vdupq_n_f32(0.0f); }
static inline tf_vf tf_vf_set1(float a) { return vdupq_n_f32(a); }
static inline tf_vf tf_vf_load(const float *p) { return vld1q_f32(p); }
static inline void tf_vf_store(float *p, tf_vf a) { vst1q_f32(p, a); }
static inline tf_vf tf_vf_add(tf_vf a, tf_vf b) { return vaddq_f32(a, b); }
static inline tf_vf tf_vf_sub(tf_vf a, tf_vf b) { return vsubq_f32(a, b); }
static inline tf_vf tf_vf_mul(tf_vf a, tf_vf b) { return vmulq_f32(a, b); }
static inline tf_vf tf_vf_fma(tf_vf a, tf_vf b, tf_vf c) { return vfmaq_f32(c, a, b); }
static inline tf_vf tf_vf_load_f16(const uint16_t *p)
{
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
static inline tf_vf tf_vf_load_bf16(const uint16_t *p)
{
	return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
static inline float tf_vf_sum(tf_vf a) { return vaddvq_f32(a); }

#else /* scalar */

#define TF_VL 1
typedef float tf_vf;

static inline tf_vf tf_vf_zero(void) { return 0.0f; }
static inline tf_vf tf_vf_set1(float a) { return a; }
static inline tf_vf tf_vf_load(const float *p) { return *p; }
static inline void tf_vf_store(float *p, tf_vf a) { *p = a; }
static inline tf_vf tf_vf_add(tf_vf a, tf_vf b) { return a + b; }
static inline tf_vf tf_vf_sub(tf_vf a, tf_vf b) { return a - b; }
static inline tf_vf tf_vf_mul(tf_vf a, tf_vf b) { return a * b; }
static inline tf_vf tf_vf_fma(tf_vf a, tf_vf b, tf_vf c) { return a * b + c; }
static inline tf_vf tf_vf_load_f16(const uint16_t *p) { return tf_f16_to_f32(*p); }
static inline tf_vf tf_vf_load_bf16(const uint16_t *p) { return tf_bf16_to_f32(*p); }
static inline float tf_vf_sum(tf_vf a) { return a; }

#endif

/* TF_VL weights of a row stored as `dt` (F32, F16 or BF16), from element i. */
static inline __attribute__((always_inline)) tf_vf
tf_vf_load_as(const void *w, int64_t i, tf_dtype dt)
{
	if (dt == TF_DTYPE_F16)
		return tf_vf_load_f16((const uint16_t *)w + i);
	if (dt == TF_DTYPE_BF16)
		return tf_vf_load_bf16((const uint16_t *)w + i);
	return tf_vf_load((const float *)w + i);
}

/* One stored weight widened to float. */
static inline __attribute__((always_inline)) float
tf_f32_load_as(const void *w, int64_t i, tf_dtype dt)
{
	if (dt == TF_DTYPE_F16)
		return tf_f16_to_f32(((const uint16_t *)w)[i]);
	if (dt == TF_DTYPE_BF16)
		return tf_bf16_to_f32(((const uint16_t *)w)[i]);
	return ((const float *)w)[i];
}

#endif /* TF_EXL3_VEC_H */
