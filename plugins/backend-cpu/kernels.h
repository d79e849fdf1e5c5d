/*
 * kernels.h - the CPU backend's row kernels, one table per instruction set.
 *
 * A kernel works on one contiguous row (or one head, for RoPE) on the
 * calling thread; ops.c splits the backend ops into rows and spreads them
 * over the thread pool.  tf_cpu_ref (ops_ref.c) is the plain C reference
 * every other table is tested against, and the scalar build's fast path.
 * The build compiles one vector table beside it: ops_avx2.c or ops_neon.c.
 */
#ifndef TF_CPU_KERNELS_H
#define TF_CPU_KERNELS_H

#include <stdint.h>

typedef struct tf_cpu_kernels {
	const char *isa;                /* "scalar", "avx2" or "neon" */

	/* y = x / sqrt(mean(x^2) + eps) * w over n; y may alias x. */
	void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n,
			float eps);
	void (*add)(float *y, const float *a, const float *b, int64_t n);
	/* silu(gate) * up; limit > 0 clamps as tf/backend.h describes. */
	void (*swiglu)(float *y, const float *gate, const float *up, int64_t n,
		       float limit);
	/* Rotate `pairs` pairs by (cos[j], sin[j]): adjacent pairs
	 * (x[2j], x[2j+1]) for GPT-J, split pairs (x[j], x2[j]) for NeoX. */
	void (*rope_gptj)(float *x, const float *cos, const float *sin,
			  int64_t pairs);
	void (*rope_neox)(float *x, float *x2, const float *cos, const float *sin,
			  int64_t pairs);
	/* In place; a row of only -inf gives NaN, as in PyTorch. */
	void (*softmax)(float *x, int64_t n);
	/* First index of the largest non-NaN value; 0 when all are NaN. */
	int64_t (*argmax)(const float *x, int64_t n);

	/* Round to nearest even; NaN stays NaN (payload may differ). */
	void (*f16_to_f32)(float *y, const uint16_t *x, int64_t n);
	void (*bf16_to_f32)(float *y, const uint16_t *x, int64_t n);
	void (*f32_to_f16)(uint16_t *y, const float *x, int64_t n);
	void (*f32_to_bf16)(uint16_t *y, const float *x, int64_t n);
} tf_cpu_kernels;

extern const tf_cpu_kernels tf_cpu_ref;

/* The table this build runs: the vector one, or the reference when the
 * build is scalar (TF_SIMD_SCALAR). */
#if defined(TF_SIMD_AVX2) || defined(TF_SIMD_NEON)
extern const tf_cpu_kernels tf_cpu_vec;
#define TF_CPU_FAST (&tf_cpu_vec)
#else
#define TF_CPU_FAST (&tf_cpu_ref)
#endif

#endif /* TF_CPU_KERNELS_H */
