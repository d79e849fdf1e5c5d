/*
 * ops_avx2.c - the row kernels with AVX2, FMA and F16C, 8 floats a step.
 *
 * Each kernel does what its namesake in ops_ref.c does (read that first);
 * tails shorter than a vector go through the same scalar arithmetic.
 * Built with -mavx2 -mfma -mf16c only when TF_SIMD is avx2.
 */
#include <immintrin.h>
#include <math.h>

#include "../common/vec.h"
#include "kernels.h"
#include "tf/dtype.h"

static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline float hmax(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

static void avx2_rmsnorm(float *y, const float *x, const float *w, int64_t n,
			 float eps)
{
	__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
		acc0 = _mm256_fmadd_ps(a, a, acc0);
		acc1 = _mm256_fmadd_ps(b, b, acc1);
	}
	for (; i + 8 <= n; i += 8) {
		__m256 a = _mm256_loadu_ps(x + i);
		acc0 = _mm256_fmadd_ps(a, a, acc0);
	}
	float ss = hsum(_mm256_add_ps(acc0, acc1));
	for (; i < n; i++)
		ss += x[i] * x[i];
	float scale = 1.0f / sqrtf(ss / (float)n + eps);
	__m256 s = _mm256_set1_ps(scale);
	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s),
						      _mm256_loadu_ps(w + i)));
	for (; i < n; i++)
		y[i] = x[i] * scale * w[i];
}

static void avx2_add(float *y, const float *a, const float *b, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i),
						      _mm256_loadu_ps(b + i)));
	for (; i < n; i++)
		y[i] = a[i] + b[i];
}

static void avx2_swiglu(float *y, const float *gate, const float *up, int64_t n,
			float limit)
{
	const __m256 hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
		__m256 s = tf_vx_silu(g);
		if (limit > 0.0f) {
			s = _mm256_min_ps(s, hi);
			u = _mm256_min_ps(_mm256_max_ps(u, lo), hi);
		}
		_mm256_storeu_ps(y + i, _mm256_mul_ps(s, u));
	}
	if (i < n)
		tf_cpu_ref.swiglu(y + i, gate + i, up + i, n - i, limit);
}

/* Four adjacent pairs a step: x*cos + swap(x)*(-sin, +sin). */
static void avx2_rope_gptj(float *x, const float *cos, const float *sin,
			   int64_t pairs)
{
	const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
	const __m256 neg_even = _mm256_setr_ps(-0.0f, 0.0f, -0.0f, 0.0f,
					       -0.0f, 0.0f, -0.0f, 0.0f);
	int64_t j = 0;
	for (; j + 4 <= pairs; j += 4) {
		__m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + j)), dup);
		__m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + j)), dup);
		__m256 v = _mm256_loadu_ps(x + 2 * j);
		__m256 swapped = _mm256_permute_ps(v, 0xb1);
		_mm256_storeu_ps(x + 2 * j, _mm256_fmadd_ps(v, c, _mm256_mul_ps(swapped,
						_mm256_xor_ps(s, neg_even))));
	}
	if (j < pairs)
		tf_cpu_ref.rope_gptj(x + 2 * j, cos + j, sin + j, pairs - j);
}

static void avx2_rope_neox(float *x, float *x2, const float *cos,
			   const float *sin, int64_t pairs)
{
	int64_t j = 0;
	for (; j + 8 <= pairs; j += 8) {
		__m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x2 + j);
		__m256 c = _mm256_loadu_ps(cos + j), s = _mm256_loadu_ps(sin + j);
		_mm256_storeu_ps(x + j, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
		_mm256_storeu_ps(x2 + j, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
	}
	if (j < pairs)
		tf_cpu_ref.rope_neox(x + j, x2 + j, cos + j, sin + j, pairs - j);
}

/* max_ps(v, acc) returns acc when v is NaN: NaN never wins, as fmaxf. */
static float avx2_max(const float *x, int64_t n)
{
	__m256 acc = _mm256_set1_ps(-INFINITY);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		acc = _mm256_max_ps(_mm256_loadu_ps(x + i), acc);
	float m = hmax(acc);
	for (; i < n; i++)
		m = fmaxf(m, x[i]);
	return m;
}

static void avx2_softmax(float *x, int64_t n)
{
	float max = avx2_max(x, n);
	__m256 vmax = _mm256_set1_ps(max), acc = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 e = tf_vx_exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
		_mm256_storeu_ps(x + i, e);
		acc = _mm256_add_ps(acc, e);
	}
	float sum = hsum(acc);
	for (; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	__m256 inv = _mm256_set1_ps(1.0f / sum);
	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
	for (; i < n; i++)
		x[i] *= 1.0f / sum;
}

/* The largest value first, then the first index holding it. */
static int64_t avx2_argmax(const float *x, int64_t n)
{
	float max = avx2_max(x, n);
	__m256 vmax = _mm256_set1_ps(max);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vmax,
							   _CMP_EQ_OQ));
		if (hit)
			return i + __builtin_ctz((unsigned)hit);
	}
	for (; i < n; i++)
		if (x[i] == max)
			return i;
	return 0;                       /* all NaN */
}

static void avx2_f16_to_f32(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = tf_f16_to_f32(x[i]);
}

static void avx2_bf16_to_f32(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
		_mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
	}
	for (; i < n; i++)
		y[i] = tf_bf16_to_f32(x[i]);
}

/* F16C rounds to nearest even, subnormals and overflow included. */
static void avx2_f32_to_f16(uint16_t *y, const float *x, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		y[i] = tf_f32_to_f16(x[i]);
}

/* tf_f32_to_bf16 on 8 lanes: add 0x7fff plus the kept lsb, keep NaN quiet. */
static void avx2_f32_to_bf16(uint16_t *y, const float *x, int64_t n)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
	const __m256i quiet = _mm256_set1_epi32(0x400000);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
		__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
		__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, lsb));
		r = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
		r = _mm256_srli_epi32(r, 16);
		__m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r),
						  _mm256_extracti128_si256(r, 1));
		_mm_storeu_si128((__m128i *)(y + i), packed);
	}
	for (; i < n; i++)
		y[i] = tf_f32_to_bf16(x[i]);
}

const tf_cpu_kernels tf_cpu_vec = {
	.isa = "avx2",
	.rmsnorm = avx2_rmsnorm,
	.add = avx2_add,
	.swiglu = avx2_swiglu,
	.rope_gptj = avx2_rope_gptj,
	.rope_neox = avx2_rope_neox,
	.softmax = avx2_softmax,
	.argmax = avx2_argmax,
	.f16_to_f32 = avx2_f16_to_f32,
	.bf16_to_f32 = avx2_bf16_to_f32,
	.f32_to_f16 = avx2_f32_to_f16,
	.f32_to_bf16 = avx2_f32_to_bf16,
};
