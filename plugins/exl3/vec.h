/*
 * vec.h - the float vector type the linear kernels are written in.
 *
 * One set of inline operations over `tf_vf`, a register of TF_VL floats,
 * and `tf_vi`, TF_VL uint32 lanes (int32 for the integer-activation sums,
 * tf_vi_bsdot and tf_vi_cvt): 8 with AVX2 (F16C converts halves), 4
 * with NEON, 1 on the scalar path; 16 floats (no tf_vi) in a file built
 * again for AVX-512 with TF_VEC_AVX512.
 * Kernels written against these build unchanged on every target; the
 * scalar build doubles as the plain reference of the SIMD ones.
 */
#ifndef TF_EXL3_VEC_H
#define TF_EXL3_VEC_H

#include <stdint.h>

#include "tf/dtype.h"

#if defined(TF_VEC_AVX512)
/* The float subset sixteen floats a register, for kernels built a second
 * time with -mavx512f (plain_dot_avx512.c); no tf_vi. */
#include <immintrin.h>

#define TF_VL 16
typedef __m512 tf_vf;

static inline tf_vf tf_vf_zero(void) { return _mm512_setzero_ps(); }
static inline tf_vf tf_vf_set1(float a) { return _mm512_set1_ps(a); }
static inline tf_vf tf_vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void tf_vf_store(float *p, tf_vf a) { _mm512_storeu_ps(p, a); }
static inline tf_vf tf_vf_add(tf_vf a, tf_vf b) { return _mm512_add_ps(a, b); }
static inline tf_vf tf_vf_mul(tf_vf a, tf_vf b) { return _mm512_mul_ps(a, b); }
static inline tf_vf tf_vf_fma(tf_vf a, tf_vf b, tf_vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline tf_vf tf_vf_load_f16(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline tf_vf tf_vf_load_bf16(const uint16_t *p)
{
	__m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
	return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
static inline float tf_vf_sum(tf_vf a) { return _mm512_reduce_add_ps(a); }

#elif defined(TF_SIMD_AVX2)
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
static inline tf_vf tf_vf_min(tf_vf a, tf_vf b) { return _mm256_min_ps(a, b); }
static inline tf_vf tf_vf_max(tf_vf a, tf_vf b) { return _mm256_max_ps(a, b); }
static inline tf_vf tf_vf_abs(tf_vf a)
{
	return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
}
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
/* The Walsh-Hadamard butterflies inside one register, strides 1, 2 and 4:
 * lane i becomes x[i] + x[i^h] where bit h of i is clear, x[i^h] - x[i]
 * where it is set, the very sums the scalar stages form. */
static inline tf_vf tf_vf_had_lanes(tf_vf v)
{
	tf_vf s = _mm256_permute_ps(v, 0xB1);
	v = _mm256_blend_ps(_mm256_add_ps(v, s), _mm256_sub_ps(s, v), 0xAA);
	s = _mm256_permute_ps(v, 0x4E);
	v = _mm256_blend_ps(_mm256_add_ps(v, s), _mm256_sub_ps(s, v), 0xCC);
	s = _mm256_permute2f128_ps(v, v, 1);
	return _mm256_blend_ps(_mm256_add_ps(v, s), _mm256_sub_ps(s, v), 0xF0);
}

/* TF_VL uint32 lanes, for the trellis decode. */
typedef __m256i tf_vi;

static inline tf_vi tf_vi_load(const uint32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline tf_vi tf_vi_set1(uint32_t a) { return _mm256_set1_epi32((int)a); }
static inline tf_vi tf_vi_srl(tf_vi a, int n) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n)); }
static inline tf_vi tf_vi_sll(tf_vi a, int n) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n)); }
static inline tf_vi tf_vi_or(tf_vi a, tf_vi b) { return _mm256_or_si256(a, b); }
static inline tf_vi tf_vi_and(tf_vi a, tf_vi b) { return _mm256_and_si256(a, b); }
static inline tf_vi tf_vi_xor(tf_vi a, tf_vi b) { return _mm256_xor_si256(a, b); }
static inline tf_vi tf_vi_add(tf_vi a, tf_vi b) { return _mm256_add_epi32(a, b); }
static inline tf_vi tf_vi_mul(tf_vi a, tf_vi b) { return _mm256_mullo_epi32(a, b); }
/* Sum of the four bytes of each lane, as float. */
static inline tf_vf tf_vi_bytesum(tf_vi a)
{
	__m256i pairs = _mm256_maddubs_epi16(a, _mm256_set1_epi8(1));
	return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}
static inline tf_vi tf_vi_zero(void) { return _mm256_setzero_si256(); }
static inline void tf_vi_store(uint32_t *p, tf_vi a) { _mm256_storeu_si256((__m256i *)p, a); }
/* Signed int32 lanes to float, and float to the nearest int32 (ties to
 * even, as lrintf). */
static inline tf_vf tf_vi_cvt(tf_vi a) { return _mm256_cvtepi32_ps(a); }
static inline tf_vi tf_vf_round(tf_vf a) { return _mm256_cvtps_epi32(a); }
/* acc += bytesum(a) · x per lane, int32, x the int16 in both halves of x2:
 * byte pairs (≤ 510) then one int16 multiply-add against the pair. */
static inline tf_vi tf_vi_bsdot(tf_vi acc, tf_vi a, uint32_t x2)
{
	__m256i pairs = _mm256_maddubs_epi16(a, _mm256_set1_epi8(1));
	return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi32((int)x2)));
}
/* Several rows (the k pairs of matmul_int_vec.h and gemm_vec.c): the byte
 * sums of a and b, a's in the low int16 of each lane.  Then tf_vacc, a
 * k-pair product's sums: tf_vacc_init starts them at a's int32 lanes,
 * tf_vacc_pairdot adds w_lo·x_lo + w_hi·x_hi to each lane, x2 two int16
 * activations, and tf_vacc_sum reads the lanes out (exact integers: the
 * unit may keep them as it adds best). */
#define TF_VI_KPAIR 1
static inline tf_vi tf_vi_bspair(tf_vi a, tf_vi b)
{
	const __m256i ones = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	__m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(a, ones), ones16);
	__m256i sb = _mm256_madd_epi16(_mm256_maddubs_epi16(b, ones), ones16);
	return _mm256_or_si256(sa, _mm256_slli_epi32(sb, 16));
}
typedef __m256i tf_vacc;
static inline tf_vacc tf_vacc_init(tf_vi a) { return a; }
static inline tf_vacc tf_vacc_pairdot(tf_vacc acc, tf_vi w, uint32_t x2)
{
	return _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_set1_epi32((int)x2)));
}
static inline tf_vi tf_vacc_sum(tf_vacc acc) { return acc; }
/* Pairing halves a row's work here (one vpmaddwd for two k, against a
 * byte sum and a multiply-add for each): the walk of several rows pairs k
 * too (matmul_int_vec.h). */
#define TF_VI_KPAIR_WALK 1
/* Each lane's two fp16 halves, widened and added. */
static inline tf_vf tf_vi_halfsum(tf_vi a)
{
	__m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(a));      /* lanes 0-3 */
	__m256 hi = _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1)); /* lanes 4-7 */
	__m256 s = _mm256_hadd_ps(lo, hi);                            /* 0 1 4 5 2 3 6 7 */
	return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), 0xD8));
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
static inline tf_vf tf_vf_min(tf_vf a, tf_vf b) { return vminq_f32(a, b); }
static inline tf_vf tf_vf_max(tf_vf a, tf_vf b) { return vmaxq_f32(a, b); }
static inline tf_vf tf_vf_abs(tf_vf a) { return vabsq_f32(a); }
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
/* As the AVX2 one, strides 1 and 2. */
static inline tf_vf tf_vf_had_lanes(tf_vf v)
{
	const uint32x4_t odd = { 0, ~0u, 0, ~0u }, high = { 0, 0, ~0u, ~0u };
	tf_vf s = vrev64q_f32(v);
	v = vbslq_f32(odd, vsubq_f32(s, v), vaddq_f32(v, s));
	s = vextq_f32(v, v, 2);
	return vbslq_f32(high, vsubq_f32(s, v), vaddq_f32(v, s));
}

typedef uint32x4_t tf_vi;

static inline tf_vi tf_vi_load(const uint32_t *p) { return vld1q_u32(p); }
static inline tf_vi tf_vi_set1(uint32_t a) { return vdupq_n_u32(a); }
static inline tf_vi tf_vi_srl(tf_vi a, int n) { return vshlq_u32(a, vdupq_n_s32(-n)); }
static inline tf_vi tf_vi_sll(tf_vi a, int n) { return vshlq_u32(a, vdupq_n_s32(n)); }
static inline tf_vi tf_vi_or(tf_vi a, tf_vi b) { return vorrq_u32(a, b); }
static inline tf_vi tf_vi_and(tf_vi a, tf_vi b) { return vandq_u32(a, b); }
static inline tf_vi tf_vi_xor(tf_vi a, tf_vi b) { return veorq_u32(a, b); }
static inline tf_vi tf_vi_add(tf_vi a, tf_vi b) { return vaddq_u32(a, b); }
static inline tf_vi tf_vi_mul(tf_vi a, tf_vi b) { return vmulq_u32(a, b); }
static inline tf_vf tf_vi_bytesum(tf_vi a)
{
	return vcvtq_f32_u32(vpaddlq_u16(vpaddlq_u8(vreinterpretq_u8_u32(a))));
}
static inline tf_vi tf_vi_zero(void) { return vdupq_n_u32(0); }
static inline void tf_vi_store(uint32_t *p, tf_vi a) { vst1q_u32(p, a); }
static inline tf_vf tf_vi_cvt(tf_vi a) { return vcvtq_f32_s32(vreinterpretq_s32_u32(a)); }
static inline tf_vi tf_vf_round(tf_vf a) { return vreinterpretq_u32_s32(vcvtnq_s32_f32(a)); }
static inline tf_vi tf_vi_bsdot(tf_vi acc, tf_vi a, uint32_t x2)
{
	uint32x4_t bs = vpaddlq_u16(vpaddlq_u8(vreinterpretq_u8_u32(a)));
	return vreinterpretq_u32_s32(vmlaq_n_s32(vreinterpretq_s32_u32(acc),
						 vreinterpretq_s32_u32(bs), (int16_t)(x2 & 0xFFFF)));
}
/* As AVX2's.  NEON has no pairwise multiply-add: lane l's two products
 * go to lanes 2l and 2l+1 of a widening one (two per 8 products), and
 * tf_vacc_sum adds the pairs.  The walk's multiply-add of each k's byte
 * sums takes two per 8 products as well, so only the GEMM pairs k here
 * (no TF_VI_KPAIR_WALK). */
#define TF_VI_KPAIR 1
static inline tf_vi tf_vi_bspair(tf_vi a, tf_vi b)
{
	uint32x4_t sa = vpaddlq_u16(vpaddlq_u8(vreinterpretq_u8_u32(a)));
	uint32x4_t sb = vpaddlq_u16(vpaddlq_u8(vreinterpretq_u8_u32(b)));
	return vsliq_n_u32(sa, sb, 16);
}
typedef struct { int32x4_t lo, hi; } tf_vacc;     /* lanes 0-1's products, 2-3's */
static inline tf_vacc tf_vacc_init(tf_vi a)
{
	const uint32x4_t z = vdupq_n_u32(0);
	return (tf_vacc){ vreinterpretq_s32_u32(vzip1q_u32(a, z)),
			  vreinterpretq_s32_u32(vzip2q_u32(a, z)) };
}
static inline tf_vacc tf_vacc_pairdot(tf_vacc acc, tf_vi w, uint32_t x2)
{
	const int16x8_t w16 = vreinterpretq_s16_u32(w), x16 = vreinterpretq_s16_u32(vdupq_n_u32(x2));

	acc.lo = vmlal_s16(acc.lo, vget_low_s16(w16), vget_low_s16(x16));
	acc.hi = vmlal_high_s16(acc.hi, w16, x16);
	return acc;
}
static inline tf_vi tf_vacc_sum(tf_vacc acc)
{
	return vreinterpretq_u32_s32(vpaddq_s32(acc.lo, acc.hi));
}
static inline tf_vf tf_vi_halfsum(tf_vi a)
{
	float16x8_t h = vreinterpretq_f16_u32(a);
	return vpaddq_f32(vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h));
}

#else /* scalar */
#include <math.h>

#define TF_VL 1
typedef float tf_vf;

static inline tf_vf tf_vf_zero(void) { return 0.0f; }
static inline tf_vf tf_vf_set1(float a) { return a; }
static inline tf_vf tf_vf_load(const float *p) { return *p; }
static inline void tf_vf_store(float *p, tf_vf a) { *p = a; }
static inline tf_vf tf_vf_add(tf_vf a, tf_vf b) { return a + b; }
static inline tf_vf tf_vf_sub(tf_vf a, tf_vf b) { return a - b; }
static inline tf_vf tf_vf_mul(tf_vf a, tf_vf b) { return a * b; }
static inline tf_vf tf_vf_min(tf_vf a, tf_vf b) { return b < a ? b : a; }
static inline tf_vf tf_vf_max(tf_vf a, tf_vf b) { return b > a ? b : a; }
static inline tf_vf tf_vf_abs(tf_vf a) { return fabsf(a); }
/* Fused, as every vector unit's: the AVX-512 kernels beside a scalar build
 * must give a row the same bits (and a * b + c would round twice or once
 * as the compiler contracts it). */
static inline tf_vf tf_vf_fma(tf_vf a, tf_vf b, tf_vf c) { return fmaf(a, b, c); }
static inline tf_vf tf_vf_load_f16(const uint16_t *p) { return tf_f16_to_f32(*p); }
static inline tf_vf tf_vf_load_bf16(const uint16_t *p) { return tf_bf16_to_f32(*p); }
static inline float tf_vf_sum(tf_vf a) { return a; }
static inline tf_vf tf_vf_had_lanes(tf_vf a) { return a; }

typedef uint32_t tf_vi;

static inline tf_vi tf_vi_load(const uint32_t *p) { return *p; }
static inline tf_vi tf_vi_set1(uint32_t a) { return a; }
static inline tf_vi tf_vi_srl(tf_vi a, int n) { return a >> n; }
static inline tf_vi tf_vi_sll(tf_vi a, int n) { return a << n; }
static inline tf_vi tf_vi_or(tf_vi a, tf_vi b) { return a | b; }
static inline tf_vi tf_vi_and(tf_vi a, tf_vi b) { return a & b; }
static inline tf_vi tf_vi_xor(tf_vi a, tf_vi b) { return a ^ b; }
static inline tf_vi tf_vi_add(tf_vi a, tf_vi b) { return a + b; }
static inline tf_vi tf_vi_mul(tf_vi a, tf_vi b) { return a * b; }
static inline tf_vf tf_vi_bytesum(tf_vi a)
{
	return (float)((a & 0xFF) + (a >> 8 & 0xFF) + (a >> 16 & 0xFF) + (a >> 24));
}
static inline tf_vi tf_vi_zero(void) { return 0; }
static inline void tf_vi_store(uint32_t *p, tf_vi a) { *p = a; }
static inline tf_vf tf_vi_cvt(tf_vi a) { return (float)(int32_t)a; }
static inline tf_vi tf_vf_round(tf_vf a) { return (uint32_t)(int32_t)lrintf(a); }
static inline tf_vi tf_vi_bsdot(tf_vi acc, tf_vi a, uint32_t x2)
{
	int32_t bs = (int32_t)((a & 0xFF) + (a >> 8 & 0xFF) + (a >> 16 & 0xFF) + (a >> 24));
	return acc + (uint32_t)(bs * (int16_t)(x2 & 0xFFFF));
}
static inline tf_vf tf_vi_halfsum(tf_vi a)
{
	return tf_f16_to_f32((uint16_t)(a & 0xFFFF)) + tf_f16_to_f32((uint16_t)(a >> 16));
}

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

/* y[i] = a[i]·s[i] + b[i] (b NULL: + 0) for i < n, y apart from the
 * inputs: the EXL3 linears' scaling of inputs by suh and outputs by svh. */
static inline void tf_vec_mul_add(float *restrict y, const float *restrict a,
				  const float *restrict s, const float *restrict b, int64_t n)
{
	int64_t i = 0;
	for (; i + TF_VL <= n; i += TF_VL) {
		tf_vf v = tf_vf_mul(tf_vf_load(a + i), tf_vf_load(s + i));
		tf_vf_store(y + i, b ? tf_vf_add(v, tf_vf_load(b + i)) : v);
	}
	for (; i < n; i++)
		y[i] = a[i] * s[i] + (b ? b[i] : 0.0f);
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
