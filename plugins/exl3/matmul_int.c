/* matmul_int.c - activation quantization, the reference integer-activation
 * product and the choice of kernel (matmul_int.h). */
#include "matmul_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_int_kern.h"
#include "tf/error.h"
#include "vec.h"

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

int tf_exl3_qx_init(tf_exl3_qx *q, int64_t k, int64_t rows, int qmax)
{
	size_t n = (size_t)(k * rows);

	*q = (tf_exl3_qx){ .k = k, .rows = rows, .qmax = qmax };
	q->pair = malloc(n * sizeof(uint32_t));
	q->kpair = malloc(n / 2 * sizeof(uint32_t));
	q->unit = malloc((size_t)(k / TF_EXL3_QBLOCK * rows) * sizeof(float));
	q->sum = malloc((size_t)rows * sizeof(float));
	if (!q->pair || !q->kpair || !q->unit || !q->sum) {
		tf_exl3_qx_free(q);
		return TF_ERR_NOMEM;
	}
	return TF_OK;
}

void tf_exl3_qx_free(tf_exl3_qx *q)
{
	free(q->pair);
	free(q->kpair);
	free(q->unit);
	free(q->sum);
	*q = (tf_exl3_qx){ 0 };
}

void tf_exl3_qx_set(tf_exl3_qx *q, int64_t row, const float *x)
{
	const int64_t blocks = q->k / TF_EXL3_QBLOCK;
	double sum = 0;

	for (int64_t b = 0; b < blocks; b++) {
		const float *xb = x + b * TF_EXL3_QBLOCK;
		uint32_t *pair = q->pair + row * q->k + b * TF_EXL3_QBLOCK;
		float lanes[TF_VL], amax = 0.0f, unit;
		tf_vf mx = tf_vf_zero(), bad = tf_vf_zero(), vsum = tf_vf_zero();

		/* x·0 is NaN exactly when x is NaN or infinite. */
		for (int i = 0; i < TF_EXL3_QBLOCK; i += TF_VL) {
			tf_vf v = tf_vf_load(xb + i);
			mx = tf_vf_max(mx, tf_vf_abs(v));
			bad = tf_vf_fma(v, tf_vf_zero(), bad);
		}
		tf_vf_store(lanes, mx);
		for (int l = 0; l < TF_VL; l++)      /* no NaN here: `bad` has them */
			amax = lanes[l] > amax ? lanes[l] : amax;
		/* A NaN or infinity makes the unit NaN, so the row's outputs
		 * are NaN as the float path's would be; an all-zero block
		 * quantizes to zeros with any unit. */
		if (isnan(tf_vf_sum(bad))) {
			for (int i = 0; i < TF_EXL3_QBLOCK; i++)
				pair[i] = 0;
			unit = NAN;
		} else {
			unit = amax > 0.0f ? amax / (float)q->qmax : 1.0f;
			/* |x / unit| ≤ qmax, so v needs no clamp; int16 in both
			 * halves of each word. */
			const tf_vf inv = tf_vf_set1(1.0f / unit);
			for (int i = 0; i < TF_EXL3_QBLOCK; i += TF_VL) {
				tf_vi v = tf_vf_round(tf_vf_mul(tf_vf_load(xb + i), inv));
				vsum = tf_vf_add(vsum, tf_vi_cvt(v));     /* exact: < 2^24 */
				tf_vi_store(pair + i, tf_vi_or(tf_vi_and(v, tf_vi_set1(0xFFFF)),
							       tf_vi_sll(v, 16)));
			}
		}
		q->unit[row * blocks + b] = unit;
		sum += (double)unit * (double)tf_vf_sum(vsum);
	}
	/* k pairs: the low halves of pair words 2i and 2i+1, read as one
	 * 64-bit load. */
	const uint32_t *pair = q->pair + row * q->k;
	uint32_t *kpair = q->kpair + row * (q->k / 2);
	for (int64_t i = 0; i < q->k / 2; i++) {
		uint64_t two;
		memcpy(&two, pair + 2 * i, sizeof(two));
		kpair[i] = (uint32_t)(two & 0xFFFF) | ((uint32_t)(two >> 32) & 0xFFFF0000u);
	}
	q->sum[row] = (float)sum;
}

void tf_exl3_qx_get(const tf_exl3_qx *q, int64_t row, float *out)
{
	const int64_t blocks = q->k / TF_EXL3_QBLOCK;

	for (int64_t i = 0; i < q->k; i++)
		out[i] = q->unit[row * blocks + i / TF_EXL3_QBLOCK] *
			 (float)(int16_t)(q->pair[row * q->k + i] & 0xFFFF);
}

/* The plain path: each weight's byte sum from the reference state
 * extraction, the affine weight and the dequantized activation in double. */
static void int_ref(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
		    int64_t j0, int64_t j1)
{
	const int64_t blocks = q->k / TF_EXL3_QBLOCK;
	uint16_t words[16 * TF_EXL3_K_MAX];

	for (int64_t row = 0; row < q->rows; row++)
		for (int64_t j = j0; j < j1; j++) {
			double y[TF_EXL3_TILE] = { 0 };
			for (int64_t ti = 0; ti < m->k / TF_EXL3_TILE; ti++) {
				tf_exl3_mat_tile_words(m, ti, j, words);
				for (int r = 0; r < TF_EXL3_TILE; r++) {
					const int64_t i = ti * TF_EXL3_TILE + r;
					double x = (double)q->unit[row * blocks + i / TF_EXL3_QBLOCK] *
						   (int16_t)(q->pair[row * q->k + i] & 0xFFFF);
					for (int c = 0; c < TF_EXL3_TILE; c++) {
						uint16_t s = tf_exl3_state(words, m->K, tf_exl3_pos(r, c));
						y[c] += x * ((double)tf_exl3_mul1_bytesum(s) * TF_EXL3_MUL1_K_INV +
							     TF_EXL3_MUL1_K_BIAS);
					}
				}
			}
			for (int c = 0; c < TF_EXL3_TILE; c++)
				yh[row * m->n + j * TF_EXL3_TILE + c] = (float)y[c];
		}
}

int tf_exl3_ipath_supported(tf_exl3_ipath path)
{
	switch (path) {
	case TF_EXL3_IPATH_AUTO:
	case TF_EXL3_IPATH_REF:
	case TF_EXL3_IPATH_VEC:
		return 1;
	case TF_EXL3_IPATH_VNNI:
	case TF_EXL3_IPATH_GEMM:
#if defined(__x86_64__)
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
		       __builtin_cpu_supports("avx512vbmi2");
#else
		return 0;
#endif
	case TF_EXL3_IPATH_GEMM_VEC:
#ifdef TF_VI_KPAIR
		return 1;
#else
		return 0;
#endif
	case TF_EXL3_IPATH_DOTPROD:
#if defined(__aarch64__) && defined(__linux__)
		return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
		return 0;
#endif
	default:
		return 0;
	}
}

tf_exl3_ipath tf_exl3_ipath_best(void)
{
	if (tf_exl3_ipath_supported(TF_EXL3_IPATH_VNNI))
		return TF_EXL3_IPATH_VNNI;
	if (tf_exl3_ipath_supported(TF_EXL3_IPATH_DOTPROD))
		return TF_EXL3_IPATH_DOTPROD;
	return TF_EXL3_IPATH_VEC;
}

const char *tf_exl3_ipath_name(tf_exl3_ipath path)
{
	static const char *const name[TF_EXL3_IPATH_COUNT] = {
		[TF_EXL3_IPATH_AUTO] = "auto", [TF_EXL3_IPATH_REF] = "ref",
		[TF_EXL3_IPATH_VEC] = "vec", [TF_EXL3_IPATH_VNNI] = "vnni",
		[TF_EXL3_IPATH_DOTPROD] = "dotprod", [TF_EXL3_IPATH_GEMM] = "gemm",
		[TF_EXL3_IPATH_GEMM_VEC] = "gemm-vec",
	};
	return (unsigned)path < TF_EXL3_IPATH_COUNT ? name[path] : "?";
}

static const tf_exl3_int_kern int_kerns[TF_EXL3_IPATH_COUNT] = {
	[TF_EXL3_IPATH_REF] = int_ref,
	[TF_EXL3_IPATH_VEC] = tf_exl3_int_vec,
#ifdef TF_VI_KPAIR
	[TF_EXL3_IPATH_GEMM_VEC] = tf_exl3_int_gemm_vec,
#endif
#if defined(__x86_64__)
	[TF_EXL3_IPATH_VNNI] = tf_exl3_int_vnni,
	[TF_EXL3_IPATH_GEMM] = tf_exl3_int_gemm_vnni,
#endif
#if defined(__aarch64__)
	[TF_EXL3_IPATH_DOTPROD] = tf_exl3_int_dotprod,
#endif
};

void tf_exl3_mat_mul_int(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
			 int64_t j0, int64_t j1, tf_exl3_ipath path)
{
	const int64_t blocks = q->k / TF_EXL3_QBLOCK;

	if (path == TF_EXL3_IPATH_AUTO && q->rows >= TF_EXL3_GEMM_ROWS)
		path = tf_exl3_ipath_supported(TF_EXL3_IPATH_GEMM) ? TF_EXL3_IPATH_GEMM
		       : tf_exl3_ipath_supported(TF_EXL3_IPATH_GEMM_VEC) ? TF_EXL3_IPATH_GEMM_VEC
		       : tf_exl3_ipath_best();
	else if (path == TF_EXL3_IPATH_AUTO)
		path = tf_exl3_ipath_best();
	if (path == TF_EXL3_IPATH_GEMM || path == TF_EXL3_IPATH_GEMM_VEC) {   /* all rows at once */
		int_kerns[path](m, q, yh, j0, j1);
		return;
	}
	/* The kernels hold TF_EXL3_INT_ROWS rows' sums; integer sums are
	 * exact, so how the rows are cut changes no bit. */
	for (int64_t r0 = 0; r0 < q->rows; r0 += TF_EXL3_INT_ROWS) {
		tf_exl3_qx part = *q;
		part.rows = q->rows - r0 < TF_EXL3_INT_ROWS ? q->rows - r0 : TF_EXL3_INT_ROWS;
		part.pair += r0 * q->k;
		part.kpair += r0 * q->k / 2;
		part.unit += r0 * blocks;
		part.sum += r0;
		int_kerns[path](m, &part, yh + r0 * m->n, j0, j1);
	}
}
