/*
 * matmul_int_vec.h - the integer-activation product (matmul_int.h) on a
 * tf_vi vector unit, included once per instruction set: the includer
 * defines INT_BSDOT(acc, p, x2), acc += bytesum(p)·x per int32 lane with x
 * the int16 in both halves of x2, and INT_KERN, the kernel's name.
 *
 * Per half-row: the states, the MUL1 multiply and INT_BSDOT, exact in int32;
 * each 128-row block folds into float at its activation unit.  Where
 * pairing k halves a row's work (vec.h's TF_VI_KPAIR_WALK), several rows
 * take two tile rows' byte sums at once instead: one multiply-add a row
 * per two.
 */
#include "matmul_int_kern.h"
#include "tile_vec.h"

/* Tile columns walked together, as the float path does. */
#define INT_COLS 8

/* Whether `rows` rows take activations in k pairs (the sums are the same
 * exact integers either way). */
#ifdef TF_VI_KPAIR_WALK
#define INT_KPAIRS(rows) ((rows) > 1)
#else
#define INT_KPAIRS(rows) 0
#endif

/* acc is [rows][16/TF_VL]; x the activations of the tile's 16 rows as
 * tf_exl3_qx.pair (k pairs, .kpair, where INT_KPAIRS), row stride xstride. */
/* gcc -O3 cannot see that the rows read back are the rows written in, and
 * zeroing `a` would cost stores on every tile: silence that one warning. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
static inline __attribute__((always_inline)) void
tile_dot_int(const uint32_t *tile, int K, const uint32_t *x, int64_t xstride, int rows,
	     tf_vi *acc)
{
	enum { VPT = TILE / TF_VL };
	uint32_t tw[TILE_SPANS] __attribute__((aligned(32)));
	tf_vi a[TF_EXL3_INT_ROWS][VPT];

	/* Sums in locals: vector types may alias x, and sums kept through acc
	 * would be stored after every step. */
	for (int row = 0; row < rows; row++)
		for (int v = 0; v < VPT; v++)
			a[row][v] = acc[row * VPT + v];
	tile_spans(tile, K, tw);
#ifdef TF_VI_KPAIR_WALK
	/* Several rows: two tile rows' byte sums as int16 pairs, made once,
	 * then one multiply-add a row for both (x: tf_exl3_qx.kpair). */
	if (rows > 1) {
		tf_vacc p[TF_EXL3_INT_ROWS][VPT];
		for (int row = 0; row < rows; row++)
			for (int v = 0; v < VPT; v++)
				p[row][v] = tf_vacc_init(a[row][v]);
#pragma GCC unroll 8
		for (int r = 0; r < TILE; r += 2)
#pragma GCC unroll 2
			for (int half = 0; half < 2; half++)
#pragma GCC unroll 8
				for (int v = 0; v < 8; v += TF_VL) {
					tf_vi w = halfrow_kpair(tw, K, r, half, v);
#pragma GCC unroll 8
					for (int row = 0; row < rows; row++) {
						tf_vacc *pr = &p[row][(8 * half + v) / TF_VL];
						*pr = tf_vacc_pairdot(*pr, w, x[row * xstride + r / 2]);
					}
				}
		for (int row = 0; row < rows; row++)
			for (int v = 0; v < VPT; v++)
				a[row][v] = tf_vacc_sum(p[row][v]);
		goto out;
	}
#endif
#pragma GCC unroll 16
	for (int r = 0; r < TILE; r++)
		for (int half = 0; half < 2; half++)
			for (int v = 0; v < 8; v += TF_VL) {
				tf_vi p = tf_vi_mul(halfrow_state(tw, K, tf_exl3_row_base(r) + 4 * half, v),
						    tf_vi_set1(TF_EXL3_MUL1_MUL));
				for (int row = 0; row < rows; row++) {
					tf_vi *ar = &a[row][(8 * half + v) / TF_VL];
					*ar = INT_BSDOT(*ar, p, x[row * xstride + r]);
				}
			}
#ifdef TF_VI_KPAIR_WALK
out:
#endif
	for (int row = 0; row < rows; row++)
		for (int v = 0; v < VPT; v++)
			acc[row * VPT + v] = a[row][v];
}
#pragma GCC diagnostic pop

typedef void (*tile_dot_int_fn)(const uint32_t *tile, const uint32_t *x, int64_t xstride,
				int rows, tf_vi *acc);

/* One row (decode) gets its own copy with the row loop gone, and so do 2,
 * 4 and 8 rows (their sums in registers). */
#define TILE_INT_FN(K)                                                          \
	static void dot_int_##K(const uint32_t *t, const uint32_t *x, int64_t xs, \
				int rows, tf_vi *a)                              \
	{                                                                       \
		switch (rows) {                                                 \
		case 1: tile_dot_int(t, K, x, 0, 1, a); break;                  \
		case 2: tile_dot_int(t, K, x, xs, 2, a); break;                 \
		case 4: tile_dot_int(t, K, x, xs, 4, a); break;                 \
		case 8: tile_dot_int(t, K, x, xs, 8, a); break;                 \
		default: tile_dot_int(t, K, x, xs, rows, a);                    \
		}                                                               \
	}
TILE_INT_FN(1) TILE_INT_FN(2) TILE_INT_FN(3) TILE_INT_FN(4)
TILE_INT_FN(5) TILE_INT_FN(6) TILE_INT_FN(7) TILE_INT_FN(8)

static const tile_dot_int_fn tile_dot_ints[TF_EXL3_K_MAX + 1] = {
	[1] = dot_int_1, [2] = dot_int_2, [3] = dot_int_3, [4] = dot_int_4,
	[5] = dot_int_5, [6] = dot_int_6, [7] = dot_int_7, [8] = dot_int_8,
};

void INT_KERN(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh, int64_t j0, int64_t j1)
{
	enum { VPT = TILE / TF_VL, TILES_PER_BLOCK = TF_EXL3_QBLOCK / TILE };
	const tile_dot_int_fn dot = tile_dot_ints[m->K];
	const int64_t tiles_k = m->k / TILE;
	const int64_t blocks = m->k / TF_EXL3_QBLOCK;
	const int rows = (int)q->rows;
	const int per = INT_KPAIRS(rows) ? 2 : 1;        /* activations a lane */
	const uint32_t *xa = per == 2 ? q->kpair : q->pair;

	for (int64_t jg = j0; jg < j1; jg += INT_COLS) {
		const int nc = j1 - jg < INT_COLS ? (int)(j1 - jg) : INT_COLS;
		tf_vi acc[INT_COLS][TF_EXL3_INT_ROWS][VPT];
		tf_vf yf[INT_COLS][TF_EXL3_INT_ROWS][VPT];

		for (int c = 0; c < nc; c++)
			for (int row = 0; row < rows; row++)
				for (int v = 0; v < VPT; v++)
					yf[c][row][v] = tf_vf_zero();
		for (int64_t i = 0; i < tiles_k; i++) {
			if (i % TILES_PER_BLOCK == 0)
				for (int c = 0; c < nc; c++)
					for (int row = 0; row < rows; row++)
						for (int v = 0; v < VPT; v++)
							acc[c][row][v] = tf_vi_zero();
			for (int c = 0; c < nc; c++)
				dot(mat_tile(m, i, jg + c), xa + i * TILE / per, q->k / per, rows,
				    acc[c][0]);
			if (i % TILES_PER_BLOCK != TILES_PER_BLOCK - 1)
				continue;
			/* Block done: its int32 sums to float, at its scale. */
			for (int row = 0; row < rows; row++) {
				tf_vf unit = tf_vf_set1(q->unit[row * blocks + i / TILES_PER_BLOCK]);
				for (int c = 0; c < nc; c++)
					for (int v = 0; v < VPT; v++)
						yf[c][row][v] = tf_vf_fma(tf_vi_cvt(acc[c][row][v]), unit,
									  yf[c][row][v]);
			}
		}
		for (int row = 0; row < rows; row++) {
			tf_vf bias = tf_vf_set1(TF_EXL3_MUL1_K_BIAS * q->sum[row]);
			for (int c = 0; c < nc; c++)
				for (int v = 0; v < VPT; v++)
					tf_vf_store(yh + row * m->n + (jg + c) * TILE + v * TF_VL,
						    tf_vf_fma(yf[c][row][v],
							      tf_vf_set1(TF_EXL3_MUL1_K_INV), bias));
		}
	}
}
