/*
 * plain_dot.h - the plain linear's dot products (plain_lin.c), written
 * against vec.h's tf_vf and built twice on x86-64: for the build's vector
 * unit in plain_lin.c, and sixteen floats a register in plain_dot_avx512.c
 * for CPUs with AVX-512 F.  The two sum in different orders: a CPU runs
 * one of them for every row count, so a row's bits are its own alone.
 *
 * A kernel takes up to PLAIN_ROWS input rows against a block of outputs:
 * each row's activations are loaded once for the block, each weight once
 * for the rows.  Per (row, output) two sums run over the first and second
 * TF_VL of each 2·TF_VL elements whatever the block, so a row's bits do
 * not depend on the block either.
 */
#ifndef TF_EXL3_PLAIN_DOT_H
#define TF_EXL3_PLAIN_DOT_H

#include <math.h>
#include <stdint.h>

#include "tf/dtype.h"
#include "vec.h"

#define PLAIN_ROWS 4            /* input rows sharing one pass over the weights */
/* Outputs a block takes: two sums per row and output in 16 of AVX-512's 32
 * registers, 8 of the others' 16, the rest left for the operands. */
#define PLAIN_SUMS (TF_VL >= 16 ? 16 : 8)
#define PLAIN_OUTS(nr) (PLAIN_SUMS / (2 * (nr)) > 1 ? PLAIN_SUMS / (2 * (nr)) : 1)

/*
 * y[j·ldy + o] = x[j] · w_o (+ bias[o]) for the nr (1..PLAIN_ROWS) rows
 * x[j] = x + j·in and the no outputs w_o = w + o·ldw elements.
 */
typedef void (*plain_dot_fn)(const float *x, int64_t in, int nr, const void *w, int64_t ldw,
			     int64_t no, const float *bias, float *y, int64_t ldy);

/* no (≤ PLAIN_OUTS(nr)) outputs of plain_dot_fn; inlined with constant
 * dt, nr and no so each case compiles to its own loop, sums in registers. */
static inline __attribute__((always_inline)) void
plain_dot_block(const float *x, int64_t in, int nr, const void *w, int64_t ldw, int no,
		tf_dtype dt, const float *bias, float *y, int64_t ldy)
{
	const size_t es = tf_dtype_size(dt);
	tf_vf a[PLAIN_ROWS][PLAIN_SUMS / 2], b[PLAIN_ROWS][PLAIN_SUMS / 2];
	float s[PLAIN_ROWS][PLAIN_SUMS / 2];
	int64_t i = 0;

#pragma GCC unroll 4
	for (int j = 0; j < nr; j++)
#pragma GCC unroll 8
		for (int o = 0; o < no; o++)
			a[j][o] = b[j][o] = tf_vf_zero();
	for (; i + 2 * TF_VL <= in; i += 2 * TF_VL) {
		tf_vf xa[PLAIN_ROWS], xb[PLAIN_ROWS];
#pragma GCC unroll 4
		for (int j = 0; j < nr; j++) {
			xa[j] = tf_vf_load(x + j * in + i);
			xb[j] = tf_vf_load(x + j * in + i + TF_VL);
		}
#pragma GCC unroll 8
		for (int o = 0; o < no; o++) {
			const char *wo = (const char *)w + (size_t)(o * ldw) * es;
			const tf_vf wa = tf_vf_load_as(wo, i, dt), wb = tf_vf_load_as(wo, i + TF_VL, dt);
			/* The same lines of the next block's rows, into L2: the
			 * block reads its rows in turns, which the hardware
			 * prefetcher loses on short rows (ling-nano's 256 bf16:
			 * decode 0.91x the one-output kernel without this, 1.09x
			 * with it).  Past the last row it is only a hint. */
#pragma GCC unroll 4
			for (size_t c = 0; c < 2 * TF_VL * es; c += 64)
				__builtin_prefetch(wo + (size_t)(no * ldw) * es + (size_t)i * es + c, 0, 2);
#pragma GCC unroll 4
			for (int j = 0; j < nr; j++) {
				a[j][o] = tf_vf_fma(wa, xa[j], a[j][o]);
				b[j][o] = tf_vf_fma(wb, xb[j], b[j][o]);
			}
		}
	}
#pragma GCC unroll 4
	for (int j = 0; j < nr; j++)
#pragma GCC unroll 8
		for (int o = 0; o < no; o++)
			s[j][o] = tf_vf_sum(tf_vf_add(a[j][o], b[j][o]));
	/* fmaf, not a * b + c: the compiler may vectorise the tail across a
	 * block's outputs, and must not round it otherwise than alone. */
	for (; i < in; i++)
#pragma GCC unroll 8
		for (int o = 0; o < no; o++) {
			float wi = tf_f32_load_as((const char *)w + (size_t)(o * ldw) * es, i, dt);
#pragma GCC unroll 4
			for (int j = 0; j < nr; j++)
				s[j][o] = fmaf(wi, x[j * in + i], s[j][o]);
		}
#pragma GCC unroll 4
	for (int j = 0; j < nr; j++)
#pragma GCC unroll 8
		for (int o = 0; o < no; o++)
			y[j * ldy + o] = s[j][o] + (bias ? bias[o] : 0.0f);
}

/* plain_dot_fn for nr rows: blocks of PLAIN_OUTS(nr) outputs, then one at
 * a time (each output's sums are the same in either). */
static inline __attribute__((always_inline)) void
plain_dot_rows(const float *x, int64_t in, int nr, const void *w, int64_t ldw, int64_t no,
	       tf_dtype dt, const float *bias, float *y, int64_t ldy)
{
	const int64_t step = PLAIN_OUTS(nr);
	const size_t es = tf_dtype_size(dt);
	int64_t o = 0;

	for (; o + step <= no; o += step)
		plain_dot_block(x, in, nr, (const char *)w + (size_t)(o * ldw) * es, ldw,
				(int)step, dt, bias ? bias + o : NULL, y + o, ldy);
	for (; o < no; o++)
		plain_dot_block(x, in, nr, (const char *)w + (size_t)(o * ldw) * es, ldw, 1, dt,
				bias ? bias + o : NULL, y + o, ldy);
}

/* A plain_dot_fn `name` for stored type dt, `linkage` static or empty. */
#define PLAIN_DOT_FOR(linkage, name, dt)                                                \
	linkage void name(const float *x, int64_t in, int nr, const void *w, int64_t ldw, \
			  int64_t no, const float *bias, float *y, int64_t ldy)         \
	{                                                                               \
		switch (nr) {                                                           \
		case 1: plain_dot_rows(x, in, 1, w, ldw, no, dt, bias, y, ldy); break;  \
		case 2: plain_dot_rows(x, in, 2, w, ldw, no, dt, bias, y, ldy); break;  \
		case 3: plain_dot_rows(x, in, 3, w, ldw, no, dt, bias, y, ldy); break;  \
		default: plain_dot_rows(x, in, 4, w, ldw, no, dt, bias, y, ldy); break; \
		}                                                                       \
	}

#if defined(__x86_64__)
/* plain_dot_avx512.c; only where the CPU has AVX-512 F. */
void tf_plain_dot_avx512_f32(const float *x, int64_t in, int nr, const void *w, int64_t ldw,
			     int64_t no, const float *bias, float *y, int64_t ldy);
void tf_plain_dot_avx512_f16(const float *x, int64_t in, int nr, const void *w, int64_t ldw,
			     int64_t no, const float *bias, float *y, int64_t ldy);
void tf_plain_dot_avx512_bf16(const float *x, int64_t in, int nr, const void *w, int64_t ldw,
			      int64_t no, const float *bias, float *y, int64_t ldy);
#endif

#endif /* TF_EXL3_PLAIN_DOT_H */
