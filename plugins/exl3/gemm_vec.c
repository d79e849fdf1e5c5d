/*
 * gemm_vec.c - the integer-activation product for many rows on the build's
 * vector unit (TF_EXL3_IPATH_GEMM_VEC), where vec.h pairs k
 * (TF_VI_KPAIR: AVX2's vpmaddwd, NEON's widening multiply-adds).
 *
 * tf_exl3_int_vec decodes each tile once per TF_EXL3_INT_ROWS rows, and
 * eight rows' sums do not fit the vector registers.  Here a strip of 128 k
 * (one activation block) by STRIP_TILES tile columns is decoded once for
 * all the rows into int16 byte sums, k-adjacent pairs in each 32-bit lane
 * (gemm_avx512.c's layout), and ROW_BLOCK rows at a time multiply it,
 * their sums in registers: one tf_vacc_pairdot per TF_VL outputs, 2 k and
 * a row.
 *
 * The bits are tf_exl3_int_vec's: each block's Σ bs·v is an exact int32,
 * folded into float in block order as fma(sum, unit, y) from y = 0, then
 * fma(y, K_INV, K_BIAS·Σxq).  A row's outputs do not depend on the row
 * count, the kernel or the thread split.
 */
#include "gemm_strip.h"
#include "matmul_int_kern.h"
#include "tile_vec.h"

#ifdef TF_VI_KPAIR

#if defined(TF_SIMD_NEON)
/* 32 registers, a tf_vacc of 4 outputs two of them: 2 rows of 16 take 16. */
#define STRIP_TILES 1                           /* tile columns a strip */
#else
/* 16 registers: 2 rows of 32 outputs take 8 (3 x 32 spilled, 4 x 16 ran
 * slower: bench/exl3/README.md). */
#define STRIP_TILES 2
#endif
#define ROW_BLOCK 2                             /* rows whose sums stay in registers */

/* w[kp][16t + c] = bs[2kp][c] | bs[2kp+1][c] << 16 for tile column j + t
 * (t < nt) and the block's tile rows i0 .. i0+7, decoded as
 * tf_exl3_int_vec decodes them. */
static inline __attribute__((always_inline)) void
strip_decode_k(const tf_exl3_mat *m, int K, int64_t i0, int64_t j, int nt,
	       uint32_t (*w)[STRIP_COLS])
{
	uint32_t sp[TILE_SPANS] __attribute__((aligned(32)));

	for (int t = 0; t < nt; t++)
		for (int i = 0; i < GEMM_BLOCK_TILES; i++) {
			tile_spans(mat_tile(m, i0 + i, j + t), K, sp);
#pragma GCC unroll 8
			for (int r = 0; r < TILE; r += 2)
#pragma GCC unroll 2
				for (int half = 0; half < 2; half++)
#pragma GCC unroll 8
					for (int v = 0; v < 8; v += TF_VL)
						tf_vi_store(w[(i * TILE + r) / 2] + t * TILE + 8 * half + v,
							    halfrow_kpair(sp, K, r, half, v));
		}
}

GEMM_STRIP_DECODE(STRIP_COLS)

/* y[row][..nt·16] = fma(Σ_kp w[kp]·x[row][kp], unit[row], y[row]) for rows
 * < nr; x row stride xs (in pairs), unit's us, y's ys; first and last as
 * gemm_apply_fn's. */
static inline __attribute__((always_inline)) void
strip_apply(const uint32_t (*w)[STRIP_COLS], int nt, const uint32_t *x, int64_t xs,
	    const float *unit, int64_t us, const float *sum, float *y, int64_t ys, int nr,
	    int first, int last)
{
	enum { VPS = STRIP_COLS / TF_VL };
	const int nv = nt * TILE / TF_VL;
	tf_vacc acc[ROW_BLOCK][VPS];

	for (int row = 0; row < nr; row++)
		for (int v = 0; v < nv; v++)
			acc[row][v] = tf_vacc_init(tf_vi_zero());
#pragma GCC unroll 2
	for (int kp = 0; kp < GEMM_KPAIRS; kp++)
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++) {
			const tf_vi wv = tf_vi_load(w[kp] + v * TF_VL);
#pragma GCC unroll 2
			for (int row = 0; row < nr; row++)
				acc[row][v] = tf_vacc_pairdot(acc[row][v], wv, x[row * xs + kp]);
		}
	for (int row = 0; row < nr; row++) {
		const tf_vf u = tf_vf_set1(unit[row * us]);
		for (int v = 0; v < nv; v++) {
			float *yv = y + row * ys + v * TF_VL;
			const tf_vf s = tf_vi_cvt(tf_vacc_sum(acc[row][v]));
			tf_vf o = first ? tf_vf_mul(s, u) : tf_vf_fma(s, u, tf_vf_load(yv));
			if (last)
				o = tf_vf_fma(o, tf_vf_set1(TF_EXL3_MUL1_K_INV),
					      tf_vf_set1(TF_EXL3_MUL1_K_BIAS * sum[row]));
			tf_vf_store(yv, o);
		}
	}
}

/* One copy per (rows, tiles) with constant bounds, the sums in registers. */
typedef void (*apply_fn)(const uint32_t (*w)[STRIP_COLS], const uint32_t *x, int64_t xs,
			 const float *unit, int64_t us, const float *sum, float *y, int64_t ys,
			 int first, int last);
#define APPLY_FN(nr, nt)                                                                  \
	static void apply_##nr##_##nt(const uint32_t (*w)[STRIP_COLS], const uint32_t *x, \
				      int64_t xs, const float *unit, int64_t us,             \
				      const float *sum, float *y, int64_t ys, int first,     \
				      int last)                                           \
	{                                                                                 \
		strip_apply(w, nt, x, xs, unit, us, sum, y, ys, nr, first, last);         \
	}
APPLY_FN(1, 1) APPLY_FN(2, 1)
#if STRIP_TILES == 2
APPLY_FN(1, 2) APPLY_FN(2, 2)
#define APPLY_ROW(nr) { NULL, apply_##nr##_1, apply_##nr##_2 }
#else
#define APPLY_ROW(nr) { NULL, apply_##nr##_1 }
#endif
_Static_assert(ROW_BLOCK == 2 && STRIP_TILES <= 2, "one apply_R_T per count");
static const apply_fn applies[ROW_BLOCK + 1][STRIP_TILES + 1] = {
	[1] = APPLY_ROW(1), [2] = APPLY_ROW(2),
};

GEMM_KERNEL(tf_exl3_int_gemm_vec, 32)

#endif /* TF_VI_KPAIR */
