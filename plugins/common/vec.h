/*
 * vec.h - the float32 vector primitives the attention kernels are built on.
 *
 * Header-only so each plugin compiles them with its own SIMD flags.  The
 * scalar loop in each function is the reference; TF_SIMD_AVX2 (AVX2 + FMA)
 * and TF_SIMD_NEON add vector bodies that handle whole vectors and leave the
 * tail to the same scalar loop.  Sums are reassociated by the vector bodies,
 * so results agree with the reference to rounding, not bit for bit.
 */
#ifndef TF_PLUGIN_VEC_H
#define TF_PLUGIN_VEC_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(TF_SIMD_AVX2)
#include <immintrin.h>
#elif defined(TF_SIMD_NEON)
#include <arm_neon.h>
#endif

/* y += a * x */
static inline void tf_vec_axpy(float *restrict y, float a, const float *restrict x,
			       int64_t n)
{
	int64_t i = 0;
#if defined(TF_SIMD_AVX2)
	__m256 va = _mm256_set1_ps(a);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i),
							_mm256_loadu_ps(y + i)));
#elif defined(TF_SIMD_NEON)
	float32x4_t va = vdupq_n_f32(a);
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
#endif
	for (; i < n; i++)
		y[i] += a * x[i];
}

/* y *= a */
static inline void tf_vec_scale(float *y, float a, int64_t n)
{
	int64_t i = 0;
#if defined(TF_SIMD_AVX2)
	__m256 va = _mm256_set1_ps(a);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
#elif defined(TF_SIMD_NEON)
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), a));
#endif
	for (; i < n; i++)
		y[i] *= a;
}

/* y[i] += a[i] * b[i] */
static inline void tf_vec_mul_acc(float *restrict y, const float *restrict a,
				  const float *restrict b, int64_t n)
{
	int64_t i = 0;
#if defined(TF_SIMD_AVX2)
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i),
							_mm256_loadu_ps(y + i)));
#elif defined(TF_SIMD_NEON)
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), vld1q_f32(a + i), vld1q_f32(b + i)));
#endif
	for (; i < n; i++)
		y[i] += a[i] * b[i];
}

/* sum x[i] * y[i] */
static inline float tf_vec_dot(const float *x, const float *y, int64_t n)
{
	int64_t i = 0;
	float s = 0.0f;
#if defined(TF_SIMD_AVX2)
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
	for (; i + 16 <= n; i += 16) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
	}
	for (; i + 8 <= n; i += 8)
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
	a0 = _mm256_add_ps(a0, a1);
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	s = _mm_cvtss_f32(h);
#elif defined(TF_SIMD_NEON)
	float32x4_t a0 = vdupq_n_f32(0.0f);
	for (; i + 4 <= n; i += 4)
		a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
	s = vaddvq_f32(a0);
#endif
	for (; i < n; i++)
		s += x[i] * y[i];
	return s;
}

/*
 * y[0..n) += sum_t a[t] * X[t * ldx + 0..n): a combination of m rows, the
 * shape of S^T k, of p^T V and of every small matrix product in the
 * attention kernels.  The vector bodies keep a block of y in registers for
 * the whole row loop, so each row element costs one load and one FMA.
 */
static inline void tf_vec_axpy_rows(float *restrict y, const float *restrict a,
				    const float *restrict X, int64_t ldx, int64_t m,
				    int64_t n)
{
	int64_t j = 0;
#if defined(TF_SIMD_AVX2)
	/* 4 named accumulators (arrays would live on the stack): enough
	 * independent FMA chains to hide the latency. */
	for (; j + 32 <= n; j += 32) {
		__m256 c0 = _mm256_loadu_ps(y + j), c1 = _mm256_loadu_ps(y + j + 8);
		__m256 c2 = _mm256_loadu_ps(y + j + 16), c3 = _mm256_loadu_ps(y + j + 24);
		for (int64_t t = 0; t < m; t++) {
			__m256 at = _mm256_set1_ps(a[t]);
			const float *x = X + t * ldx + j;
			c0 = _mm256_fmadd_ps(at, _mm256_loadu_ps(x), c0);
			c1 = _mm256_fmadd_ps(at, _mm256_loadu_ps(x + 8), c1);
			c2 = _mm256_fmadd_ps(at, _mm256_loadu_ps(x + 16), c2);
			c3 = _mm256_fmadd_ps(at, _mm256_loadu_ps(x + 24), c3);
		}
		_mm256_storeu_ps(y + j, c0);
		_mm256_storeu_ps(y + j + 8, c1);
		_mm256_storeu_ps(y + j + 16, c2);
		_mm256_storeu_ps(y + j + 24, c3);
	}
	for (; j + 8 <= n; j += 8) {
		__m256 acc = _mm256_loadu_ps(y + j);
		for (int64_t t = 0; t < m; t++)
			acc = _mm256_fmadd_ps(_mm256_set1_ps(a[t]), _mm256_loadu_ps(X + t * ldx + j), acc);
		_mm256_storeu_ps(y + j, acc);
	}
#elif defined(TF_SIMD_NEON)
	for (; j + 16 <= n; j += 16) {
		float32x4_t c0 = vld1q_f32(y + j), c1 = vld1q_f32(y + j + 4);
		float32x4_t c2 = vld1q_f32(y + j + 8), c3 = vld1q_f32(y + j + 12);
		for (int64_t t = 0; t < m; t++) {
			const float *x = X + t * ldx + j;
			c0 = vfmaq_n_f32(c0, vld1q_f32(x), a[t]);
			c1 = vfmaq_n_f32(c1, vld1q_f32(x + 4), a[t]);
			c2 = vfmaq_n_f32(c2, vld1q_f32(x + 8), a[t]);
			c3 = vfmaq_n_f32(c3, vld1q_f32(x + 12), a[t]);
		}
		vst1q_f32(y + j, c0);
		vst1q_f32(y + j + 4, c1);
		vst1q_f32(y + j + 8, c2);
		vst1q_f32(y + j + 12, c3);
	}
	for (; j + 4 <= n; j += 4) {
		float32x4_t acc = vld1q_f32(y + j);
		for (int64_t t = 0; t < m; t++)
			acc = vfmaq_n_f32(acc, vld1q_f32(X + t * ldx + j), a[t]);
		vst1q_f32(y + j, acc);
	}
#endif
	for (; j < n; j++) {
		float s = y[j];
		for (int64_t t = 0; t < m; t++)
			s += a[t] * X[t * ldx + j];
		y[j] = s;
	}
}

/*
 * C[M, N] += A[M, K] B[K, N], rows ldc, lda, ldb floats apart.  The plain
 * form is one row combination per row of C; the AVX2 body computes 4 x 16
 * blocks of C in registers, so each loaded element of B serves 4 rows.
 */
static inline void tf_vec_gemm_acc(float *restrict C, int64_t ldc, const float *restrict A,
				   int64_t lda, const float *restrict B, int64_t ldb,
				   int64_t M, int64_t K, int64_t N)
{
	int64_t i = 0;
#if defined(TF_SIMD_AVX2)
	for (; i + 4 <= M; i += 4) {
		int64_t j = 0;
		for (; j + 16 <= N; j += 16) {
			float *c = C + i * ldc + j;
			const float *a = A + i * lda;
			__m256 c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
			__m256 c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
			__m256 c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
			__m256 c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
			for (int64_t k = 0; k < K; k++) {
				__m256 b0 = _mm256_loadu_ps(B + k * ldb + j);
				__m256 b1 = _mm256_loadu_ps(B + k * ldb + j + 8);
				__m256 a0 = _mm256_broadcast_ss(a + k);
				c00 = _mm256_fmadd_ps(a0, b0, c00);
				c01 = _mm256_fmadd_ps(a0, b1, c01);
				a0 = _mm256_broadcast_ss(a + lda + k);
				c10 = _mm256_fmadd_ps(a0, b0, c10);
				c11 = _mm256_fmadd_ps(a0, b1, c11);
				a0 = _mm256_broadcast_ss(a + 2 * lda + k);
				c20 = _mm256_fmadd_ps(a0, b0, c20);
				c21 = _mm256_fmadd_ps(a0, b1, c21);
				a0 = _mm256_broadcast_ss(a + 3 * lda + k);
				c30 = _mm256_fmadd_ps(a0, b0, c30);
				c31 = _mm256_fmadd_ps(a0, b1, c31);
			}
			_mm256_storeu_ps(c, c00);
			_mm256_storeu_ps(c + 8, c01);
			_mm256_storeu_ps(c + ldc, c10);
			_mm256_storeu_ps(c + ldc + 8, c11);
			_mm256_storeu_ps(c + 2 * ldc, c20);
			_mm256_storeu_ps(c + 2 * ldc + 8, c21);
			_mm256_storeu_ps(c + 3 * ldc, c30);
			_mm256_storeu_ps(c + 3 * ldc + 8, c31);
		}
		for (int r = 0; j < N && r < 4; r++)
			tf_vec_axpy_rows(C + (i + r) * ldc + j, A + (i + r) * lda, B + j, ldb, K, N - j);
	}
#endif
	for (; i < M; i++)
		tf_vec_axpy_rows(C + i * ldc, A + i * lda, B, ldb, K, N);
}

/*
 * tf_vx: one vector of TF_VX_LANES floats, and what tf_vec_map makes of it.
 *
 * exp of a vector: 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2)/2, with
 * the Cephes polynomial for exp(r) (about 1 ulp).  Results that would be
 * subnormal flush to 0; above 88 (near FLT_MAX) the input is clamped so
 * 2^n stays a normal float.  NaN stays NaN.
 */
#if defined(TF_SIMD_AVX2)
typedef __m256 tf_vx;
#define TF_VX_LANES 8
#define tf_vx_load _mm256_loadu_ps
#define tf_vx_store _mm256_storeu_ps
#elif defined(TF_SIMD_NEON)
typedef float32x4_t tf_vx;
#define TF_VX_LANES 4
#define tf_vx_load vld1q_f32
#define tf_vx_store vst1q_f32
#endif

#if defined(TF_SIMD_AVX2)
static inline __m256 tf_vx_exp(__m256 x)
{
	const __m256 lo = _mm256_set1_ps(-87.33654475f);
	__m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
	x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);        /* NaN passes */
	x = _mm256_max_ps(lo, x);
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
	p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
						       _mm256_set1_epi32(127)), 23);
	return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* x / (1 + exp(-x)) and 1 / (1 + exp(-x)), as tf_tu_silu and
 * tf_tu_sigmoid spell them. */
static inline __m256 tf_vx_silu(__m256 x)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	return _mm256_div_ps(x, _mm256_add_ps(one, tf_vx_exp(_mm256_xor_ps(x, sign))));
}

static inline __m256 tf_vx_sigmoid(__m256 x)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	return _mm256_div_ps(one, _mm256_add_ps(one, tf_vx_exp(_mm256_xor_ps(x, sign))));
}
#elif defined(TF_SIMD_NEON)
static inline float32x4_t tf_vx_exp(float32x4_t x)
{
	const float32x4_t lo = vdupq_n_f32(-87.33654475f);
	uint32x4_t tiny = vcltq_f32(x, lo);
	x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(88.0f)), lo);   /* NaN passes */
	float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504089f));
	float32x4_t r = vfmsq_n_f32(x, n, 0.693359375f);
	r = vfmsq_n_f32(r, n, -2.12194440e-4f);
	float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
	p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
	p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
	p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
	p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
	p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
	p = vfmaq_f32(r, p, vmulq_f32(r, r));
	p = vaddq_f32(p, vdupq_n_f32(1.0f));
	int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
	float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
	return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), tiny));
}

static inline float32x4_t tf_vx_silu(float32x4_t x)
{
	return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), tf_vx_exp(vnegq_f32(x))));
}

static inline float32x4_t tf_vx_sigmoid(float32x4_t x)
{
	const float32x4_t one = vdupq_n_f32(1.0f);
	return vdivq_f32(one, vaddq_f32(one, tf_vx_exp(vnegq_f32(x))));
}
#endif

enum tf_vec_fn { TF_VEC_EXP, TF_VEC_SIGMOID, TF_VEC_SILU };

/*
 * y[i] = f(x[i]) for f exp, sigmoid or silu; y may be x.  The tail goes
 * through the vector body too, in a padded copy, so each element's bits
 * depend on its value alone, not on n or where it sits (a verify's row
 * equals the row alone).  The scalar build calls libm's expf.
 */
static inline __attribute__((always_inline)) void
tf_vec_map(float *y, const float *x, int64_t n, enum tf_vec_fn f)
{
#if defined(TF_VX_LANES)
	int64_t i = 0;
	float t[TF_VX_LANES] = { 0 };
	for (; i < n; i += TF_VX_LANES) {
		const bool tail = n - i < TF_VX_LANES;
		const float *src = x + i;
		if (tail)
			src = memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
		const tf_vx v = tf_vx_load(src);
		const tf_vx r = f == TF_VEC_EXP ? tf_vx_exp(v)
				: f == TF_VEC_SIGMOID ? tf_vx_sigmoid(v) : tf_vx_silu(v);
		tf_vx_store(tail ? t : y + i, r);
		if (tail)
			memcpy(y + i, t, (size_t)(n - i) * sizeof(float));
	}
#else
	for (int64_t i = 0; i < n; i++) {
		const float e = expf(f == TF_VEC_EXP ? x[i] : -x[i]);
		y[i] = f == TF_VEC_EXP ? e : (f == TF_VEC_SILU ? x[i] : 1.0f) / (1.0f + e);
	}
#endif
}

static inline void tf_vec_exp(float *y, const float *x, int64_t n)
{
	tf_vec_map(y, x, n, TF_VEC_EXP);
}

static inline void tf_vec_sigmoid(float *y, const float *x, int64_t n)
{
	tf_vec_map(y, x, n, TF_VEC_SIGMOID);
}

static inline void tf_vec_silu(float *y, const float *x, int64_t n)
{
	tf_vec_map(y, x, n, TF_VEC_SILU);
}

#endif /* TF_PLUGIN_VEC_H */
