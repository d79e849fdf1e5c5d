/*
 * plain_dot.h - the plain linear's dot products (plain_lin.c), written
 * against vec.h's tf_vf and built twice on x86-64: for the build's vector
 * unit in plain_lin.c, and sixteen floats a register in plain_dot_avx512.c
 * for CPUs with AVX-512 F.  The two sum in different orders: a CPU runs
 * one of them for every row count, so a row's bits are its own alone.
 */
#ifndef TF_EXL3_PLAIN_DOT_H
#define TF_EXL3_PLAIN_DOT_H

#include <stdint.h>

#include "tf/dtype.h"
#include "vec.h"

#define PLAIN_ROWS 4            /* input rows sharing one pass over a weight row */

typedef void (*plain_dot_fn)(const float *x, int64_t in, int nr, const void *w,
			     float *acc);

/*
 * acc[j] = x[j] · w for the nr (1..PLAIN_ROWS) rows x[j] = x + j·in.
 * Inlined with constant dt and nr so each case compiles to its own loop.
 */
static inline __attribute__((always_inline)) void
plain_dot(const float *x, int64_t in, int nr, const void *w, tf_dtype dt,
	  float *acc)
{
	tf_vf a[PLAIN_ROWS], b[PLAIN_ROWS];
	int64_t i = 0;

	/* The row loops unrolled, so that each row's sums stay in registers
	 * (rolled, gcc kept them in memory: 2 rows ran 2.3x one row's time). */
#pragma GCC unroll 4
	for (int j = 0; j < nr; j++)
		a[j] = b[j] = tf_vf_zero();
	/* Two accumulators per row hide the FMA latency on one-row decode. */
	for (; i + 2 * TF_VL <= in; i += 2 * TF_VL) {
		tf_vf w0 = tf_vf_load_as(w, i, dt);
		tf_vf w1 = tf_vf_load_as(w, i + TF_VL, dt);
#pragma GCC unroll 4
		for (int j = 0; j < nr; j++) {
			a[j] = tf_vf_fma(w0, tf_vf_load(x + j * in + i), a[j]);
			b[j] = tf_vf_fma(w1, tf_vf_load(x + j * in + i + TF_VL), b[j]);
		}
	}
#pragma GCC unroll 4
	for (int j = 0; j < nr; j++)
		acc[j] = tf_vf_sum(tf_vf_add(a[j], b[j]));
	for (; i < in; i++) {
		float wi = tf_f32_load_as(w, i, dt);
#pragma GCC unroll 4
		for (int j = 0; j < nr; j++)
			acc[j] += wi * x[j * in + i];
	}
}

/* A plain_dot_fn `name` for stored type dt, `linkage` static or empty. */
#define PLAIN_DOT_FOR(linkage, name, dt)                                        \
	linkage void name(const float *x, int64_t in, int nr, const void *w,    \
			  float *acc)                                           \
	{                                                                       \
		switch (nr) {                                                   \
		case 1: plain_dot(x, in, 1, w, dt, acc); break;                 \
		case 2: plain_dot(x, in, 2, w, dt, acc); break;                 \
		case 3: plain_dot(x, in, 3, w, dt, acc); break;                 \
		default: plain_dot(x, in, 4, w, dt, acc); break;                \
		}                                                               \
	}

#if defined(__x86_64__)
/* plain_dot_avx512.c; only where the CPU has AVX-512 F. */
void tf_plain_dot_avx512_f32(const float *x, int64_t in, int nr, const void *w, float *acc);
void tf_plain_dot_avx512_f16(const float *x, int64_t in, int nr, const void *w, float *acc);
void tf_plain_dot_avx512_bf16(const float *x, int64_t in, int nr, const void *w, float *acc);
#endif

#endif /* TF_EXL3_PLAIN_DOT_H */
