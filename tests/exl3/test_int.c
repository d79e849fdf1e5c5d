/*
 * test_int.c - the integer-activation MUL1 product (matmul_int.h), every
 * kernel this CPU runs forced in turn, at both activation precisions,
 * against two float64 references on random trellises and activations:
 *
 *  - "affine": Σ x·(bs·K_INV + K_BIAS) with the UNquantized x and the
 *    unrounded weights the kernels use.  Its error is the activation
 *    quantization alone: at most unit/2 = max|x_block|/(2·qmax) per
 *    element.  At 15 bits that is ~5e-5 of the RMS of blockwise Gaussian
 *    rows, so the norm-relative tolerance is 1e-4 (measured 4.4e-5 ..
 *    5.1e-5); at 8 bits ~128 times more, tolerance 1.5e-2 (measured
 *    5.5e-3 .. 6.9e-3);
 *  - "dense": the bit-exact fp16 Ŵ, as dequant gives it.  The kernels skip
 *    the final fp16 rounding of each weight (≤ 2^-11 relative), hence 1e-3
 *    as for the float path, plus the 8-bit quantization where it applies.
 *
 * The kernels against the plain "ref" kernel (same quantized activations,
 * double sums): the integer sums are exact, so they agree to float
 * rounding, 1e-5 (measured below 4e-7).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_int.h"
#include "tf/dtype.h"
#include "tf/error.h"

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 16;
}

/* Roughly Gaussian, with block-to-block scale changes like real
 * activations after the Hadamard. */
static float gauss(uint64_t *s)
{
	float a = 0;
	for (int i = 0; i < 4; i++)
		a += (float)(lcg(s) % 20001) / 10000.0f - 1.0f;
	return a;
}

struct int_case {
	int64_t k, n, rows;
	int K;
	uint16_t *tr;
	float *x;
	double *affine, *dense;         /* [rows][n] */
};

static void case_init(struct int_case *c, int64_t k, int64_t n, int64_t rows, int K,
		      uint64_t seed)
{
	const int64_t tn = n / 16, words = (k / 16) * tn * 16 * K;

	*c = (struct int_case){ .k = k, .n = n, .rows = rows, .K = K };
	c->tr = malloc(sizeof(uint16_t) * words);
	c->x = malloc(sizeof(float) * k * rows);
	c->affine = calloc(rows * n, sizeof(double));
	c->dense = calloc(rows * n, sizeof(double));
	cr_assert(c->tr && c->x && c->affine && c->dense);
	for (int64_t i = 0; i < words; i++)
		c->tr[i] = (uint16_t)lcg(&seed);
	for (int64_t i = 0; i < k * rows; i++)
		c->x[i] = gauss(&seed) * (float)(1 + (i / 128) % 5);

	double *wa = malloc(sizeof(double) * 256), *wd = malloc(sizeof(double) * 256);
	uint16_t h[TF_EXL3_TILE_N];
	for (int64_t i = 0; i < k / 16; i++)
		for (int64_t j = 0; j < tn; j++) {
			const uint16_t *tile = c->tr + (i * tn + j) * 16 * K;
			tf_exl3_tile_decode_ref(tile, K, TF_EXL3_CB_MUL1, h);
			for (int e = 0; e < 256; e++) {
				uint16_t s = tf_exl3_state(tile, K, tf_exl3_pos(e / 16, e % 16));
				wa[e] = tf_exl3_mul1_bytesum(s) * (double)TF_EXL3_MUL1_K_INV +
					TF_EXL3_MUL1_K_BIAS;
				wd[e] = tf_f16_to_f32(h[e]);
			}
			for (int64_t r = 0; r < rows; r++)
				for (int e = 0; e < 256; e++) {
					double xv = c->x[r * k + i * 16 + e / 16];
					c->affine[r * n + j * 16 + e % 16] += xv * wa[e];
					c->dense[r * n + j * 16 + e % 16] += xv * wd[e];
				}
		}
	free(wa);
	free(wd);
}

static void case_free(struct int_case *c)
{
	free(c->tr);
	free(c->x);
	free(c->affine);
	free(c->dense);
}

/* ||y - ref|| / ||ref|| over all rows; NaN anywhere counts as infinite. */
static double rel_err(const float *y, const double *ref, int64_t count)
{
	double e = 0, s = 0;
	for (int64_t i = 0; i < count; i++) {
		if (isnan(y[i]))
			return INFINITY;
		e += (y[i] - ref[i]) * (y[i] - ref[i]);
		s += ref[i] * ref[i];
	}
	return sqrt(e / s);
}

/* Run `path` over tile columns in ragged pieces (an odd first piece, so
 * kernels that pair tiles meet a lone one) into NaN-poisoned y. */
static float *run_path(const struct int_case *c, tf_exl3_ipath path, int qmax)
{
	const int64_t tn = c->n / 16, cut = tn > 3 ? 3 : 1;
	float *y = malloc(sizeof(float) * c->rows * c->n);
	tf_exl3_mat m;
	tf_exl3_qx q;

	cr_assert(y);
	for (int64_t i = 0; i < c->rows * c->n; i++)
		y[i] = NAN;
	cr_assert_eq(tf_exl3_mat_init(&m, c->tr, c->k, c->n, c->K, TF_EXL3_CB_MUL1), TF_OK);
	cr_assert_eq(tf_exl3_qx_init(&q, c->k, c->rows, qmax), TF_OK);
	for (int64_t r = 0; r < c->rows; r++)
		tf_exl3_qx_set(&q, r, c->x + r * c->k);
	tf_exl3_mat_mul_int(&m, &q, y, 0, cut, path);
	tf_exl3_mat_mul_int(&m, &q, y, cut, tn, path);
	tf_exl3_qx_free(&q);
	tf_exl3_mat_free(&m);
	return y;
}

/* Every supported kernel on one case at one precision: against both
 * float64 references, and the fast ones against "ref". */
static void check_case_at(const struct int_case *cp, int qmax, int with_ref)
{
	const struct int_case c = *cp;
	const int64_t k = c.k, n = c.n, rows = c.rows;
	const int K = c.K, i8 = qmax == TF_EXL3_QMAX_I8;
	const double tol_affine = i8 ? 1.5e-2 : 1e-4, tol_dense = i8 ? 1.5e-2 : 1e-3;
	float *yref = NULL;

	if (with_ref)
		yref = run_path(&c, TF_EXL3_IPATH_REF, qmax);
	for (int p = TF_EXL3_IPATH_REF; p < TF_EXL3_IPATH_COUNT; p++) {
		if (!tf_exl3_ipath_supported((tf_exl3_ipath)p) || (p == TF_EXL3_IPATH_REF && !with_ref))
			continue;
		float *y = p == TF_EXL3_IPATH_REF ? yref : run_path(&c, (tf_exl3_ipath)p, qmax);
		double ea = rel_err(y, c.affine, rows * n), ed = rel_err(y, c.dense, rows * n);
		cr_expect(ea < tol_affine, "%s i%d K=%d %lldx%lld rows %lld: %.3g vs float64 affine",
			  tf_exl3_ipath_name((tf_exl3_ipath)p), i8 ? 8 : 15, K, (long long)k,
			  (long long)n, (long long)rows, ea);
		cr_expect(ed < tol_dense, "%s i%d K=%d %lldx%lld rows %lld: %.3g vs float64 dense",
			  tf_exl3_ipath_name((tf_exl3_ipath)p), i8 ? 8 : 15, K, (long long)k,
			  (long long)n, (long long)rows, ed);
		if (yref && y != yref) {
			double *r64 = malloc(sizeof(double) * rows * n);
			for (int64_t i = 0; i < rows * n; i++)
				r64[i] = yref[i];
			double er = rel_err(y, r64, rows * n);
			cr_expect(er < 1e-5, "%s i%d K=%d rows %lld: %.3g vs the ref kernel",
				  tf_exl3_ipath_name((tf_exl3_ipath)p), i8 ? 8 : 15, K,
				  (long long)rows, er);
			free(r64);
		}
		if (y != yref)
			free(y);
	}
	free(yref);
}

static void check_case(int64_t k, int64_t n, int64_t rows, int K, uint64_t seed, int with_ref)
{
	struct int_case c;

	case_init(&c, k, n, rows, K, seed);
	check_case_at(&c, TF_EXL3_QMAX_I15, with_ref);
	check_case_at(&c, TF_EXL3_QMAX_I8, with_ref);
	case_free(&c);
}

Test(exl3_int, every_k_small)
{
	for (int K = 1; K <= 8; K++)
		for (int64_t rows = 1; rows <= 3; rows += 2)
			check_case(256, 384, rows, K, 100 + K, 1);
}

Test(exl3_int, ragged_rows_up_to_eight)
{
	for (int64_t rows = 2; rows <= TF_EXL3_INT_ROWS; rows += 3)
		check_case(384, 256, rows, 3, 200 + rows, 1);
	check_case(256, 128, TF_EXL3_INT_ROWS, 5, 299, 1);
}

Test(exl3_int, expert_shapes)
{
	check_case(4096, 1280, 1, 3, 301, 0);
	check_case(1280, 4096, 1, 3, 302, 0);
	check_case(1280, 4096, 2, 4, 303, 0);
	check_case(4096, 1280, 1, 2, 304, 0);
}

/* Rows of a prefill chunk: every path, and AUTO (which switches kernel at
 * TF_EXL3_GEMM_ROWS), gives each row the bits it has alone, at counts that
 * cross the kernels' row blocks and the GEMM's row chunks. */
Test(exl3_int, many_rows_have_their_bits_alone)
{
	static const int64_t counts[] = { TF_EXL3_GEMM_ROWS - 1, TF_EXL3_GEMM_ROWS, 70, 131 };

	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		struct int_case c;
		case_init(&c, 384, 208, counts[ci], 3, 400 + ci);
		for (int p = TF_EXL3_IPATH_AUTO; p < TF_EXL3_IPATH_COUNT; p++) {
			if (p == TF_EXL3_IPATH_REF || !tf_exl3_ipath_supported((tf_exl3_ipath)p))
				continue;
			for (int b = 0; b < 2; b++) {
				const int qmax = b ? TF_EXL3_QMAX_I8 : TF_EXL3_QMAX_I15;
				float *y = run_path(&c, (tf_exl3_ipath)p, qmax);
				for (int64_t r = 0; r < c.rows; r++) {
					struct int_case one = c;
					one.rows = 1;
					one.x = c.x + r * c.k;
					float *y1 = run_path(&one, (tf_exl3_ipath)p, qmax);
					cr_assert(!memcmp(y1, y + r * c.n, sizeof(float) * c.n),
						  "%s i%d: row %lld of %lld differs from alone",
						  tf_exl3_ipath_name((tf_exl3_ipath)p), b ? 8 : 15,
						  (long long)r, (long long)c.rows);
					free(y1);
				}
				free(y);
			}
		}
		case_free(&c);
	}
}

/* Every kernel gives every row the same bits (exact int32 block sums,
 * folded in one order): AUTO may switch kernel with the row count, so a
 * row's bits must not follow the kernel either.  One activation block
 * (the first is the last) and three. */
Test(exl3_int, every_path_gives_the_same_bits)
{
	static const int64_t counts[] = { 1, 3, TF_EXL3_GEMM_ROWS, 67 };

	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
		for (int K = 2; K <= 6; K += 2) {
			struct int_case c;
			case_init(&c, ci % 2 ? 3 * TF_EXL3_QBLOCK : TF_EXL3_QBLOCK, 96, counts[ci], K,
				  500 + ci * 10 + (size_t)K);
			for (int b = 0; b < 2; b++) {
				const int qmax = b ? TF_EXL3_QMAX_I8 : TF_EXL3_QMAX_I15;
				float *want = run_path(&c, TF_EXL3_IPATH_VEC, qmax);
				for (int p = TF_EXL3_IPATH_VEC + 1; p < TF_EXL3_IPATH_COUNT; p++) {
					if (!tf_exl3_ipath_supported((tf_exl3_ipath)p))
						continue;
					float *y = run_path(&c, (tf_exl3_ipath)p, qmax);
					cr_expect(!memcmp(y, want, sizeof(float) * c.rows * c.n),
						  "%s i%d K=%d, %lld rows: other bits than vec's",
						  tf_exl3_ipath_name((tf_exl3_ipath)p), b ? 8 : 15, K,
						  (long long)c.rows);
					free(y);
				}
				free(want);
			}
			case_free(&c);
		}
}

Test(exl3_int, best_path_is_supported)
{
	tf_exl3_ipath best = tf_exl3_ipath_best();
	cr_assert(tf_exl3_ipath_supported(best));
	cr_assert_neq(best, TF_EXL3_IPATH_REF);
	cr_assert_neq(best, TF_EXL3_IPATH_AUTO);
#if defined(__x86_64__)
	cr_log_info("x86-64: vnni %s", tf_exl3_ipath_supported(TF_EXL3_IPATH_VNNI) ? "yes" : "no");
#endif
	cr_assert(!tf_exl3_ipath_supported(TF_EXL3_IPATH_COUNT));
}

/* Quantization at precision qmax: v round-trips within half a unit, stays
 * within ±qmax, and zero, NaN and infinite blocks behave. */
static void check_quantize(int qmax)
{
	enum { k = 512 };
	float x[k], back[k];
	uint64_t seed = 7;
	tf_exl3_qx q;

	for (int i = 0; i < k; i++)
		x[i] = gauss(&seed) * (i < 128 ? 1e-3f : 10.0f);
	for (int i = 256; i < 384; i++)
		x[i] = 0.0f;
	cr_assert_eq(tf_exl3_qx_init(&q, k, 2, qmax), TF_OK);
	tf_exl3_qx_set(&q, 0, x);
	tf_exl3_qx_get(&q, 0, back);
	for (int i = 0; i < k; i++) {
		float unit = q.unit[i / 128];
		int16_t v = (int16_t)(q.pair[i] & 0xFFFF);
		cr_assert(v >= -qmax && v <= qmax, "element %d: %d", i, v);
		cr_assert_eq(q.pair[i] >> 16, q.pair[i] & 0xFFFF);
		cr_assert(fabsf(back[i] - x[i]) <= 0.5001f * unit, "element %d: %g vs %g", i,
			  back[i], x[i]);
	}
	for (int i = 256; i < 384; i++)
		cr_assert_eq(back[i], 0.0f);

	x[300] = NAN;
	x[10] = INFINITY;
	tf_exl3_qx_set(&q, 1, x);
	cr_assert(isnan(q.sum[1]));
	cr_assert(isnan(q.unit[4 + 0]) && isnan(q.unit[4 + 2]));
	cr_assert(isfinite(q.unit[4 + 1]));
	tf_exl3_qx_free(&q);
}

Test(exl3_int, quantize)
{
	check_quantize(TF_EXL3_QMAX_I15);
	check_quantize(TF_EXL3_QMAX_I8);
}

/* A NaN activation reaches the outputs of every kernel (no garbage). */
Test(exl3_int, nan_input_gives_nan)
{
	struct int_case c;

	case_init(&c, 256, 256, 1, 3, 55);
	c.x[17] = NAN;
	for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++) {
		if (!tf_exl3_ipath_supported((tf_exl3_ipath)p))
			continue;
		for (int b = 0; b < 2; b++) {
			float *y = run_path(&c, (tf_exl3_ipath)p, b ? TF_EXL3_QMAX_I8 : TF_EXL3_QMAX_I15);
			for (int64_t o = 0; o < c.n; o++)
				cr_assert(isnan(y[o]), "%s i%d output %lld",
					  tf_exl3_ipath_name((tf_exl3_ipath)p), b ? 8 : 15, (long long)o);
			free(y);
		}
	}
	case_free(&c);
}
