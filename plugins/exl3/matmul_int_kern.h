/*
 * matmul_int_kern.h - the integer-activation kernels, one per instruction
 * set, behind tf_exl3_mat_mul_int() (matmul_int.c picks one), and the
 * AVX-512 float kernel behind tf_exl3_mat_mul().
 *
 * Each computes yh for tile columns [j0, j1) and every row of q, exactly
 * as matmul_int.h describes: int32 sums per 128-row block, folded into
 * float with the block's unit, K_INV and K_BIAS applied at the end.
 */
#ifndef TF_EXL3_MATMUL_INT_KERN_H
#define TF_EXL3_MATMUL_INT_KERN_H

#include "matmul_int.h"

typedef void (*tf_exl3_int_kern)(const tf_exl3_mat *m, const tf_exl3_qx *q,
				 float *yh, int64_t j0, int64_t j1);

/* matmul.c: the build's vector unit (tf_vi), sharing the float path's
 * spans and state extraction (tile_vec.h). */
void tf_exl3_int_vec(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
		     int64_t j0, int64_t j1);

/* gemm_vec.c: each strip decoded once for all the rows, where vec.h
 * pairs k (TF_VI_KPAIR: AVX2, NEON): TF_EXL3_IPATH_GEMM_VEC. */
void tf_exl3_int_gemm_vec(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
			  int64_t j0, int64_t j1);

#if defined(__x86_64__)
/* matmul_avx512.c, built with AVX-512 F/BW/VL/VNNI/VBMI2 flags: call only
 * where tf_exl3_ipath_supported(TF_EXL3_IPATH_VNNI). */
void tf_exl3_int_vnni(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
		      int64_t j0, int64_t j1);

/* gemm_avx512.c, the same flags and condition: TF_EXL3_IPATH_GEMM. */
void tf_exl3_int_gemm_vnni(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
			   int64_t j0, int64_t j1);

/* matmul_avx512.c again: rows (1 or more, TF_EXL3_INT_ROWS at a time) of a MUL1
 * trellis with float activations (tf_exl3_mat_mul's fast path), yh[row]
 * [16j ..] for tile columns [j0, j1), row strides k and n; xsum[row] = Σ xh
 * of the row, for the codebook's offset.  Each weight is decoded once for
 * all the rows, each row's sums in the order of matmul.c's other kernels. */
void tf_exl3_mul1_rows_avx512(const tf_exl3_mat *m, const float *xh, int rows, float *yh,
			      const float *xsum, int64_t j0, int64_t j1);
#endif

#if defined(__aarch64__)
/* matmul_dotprod.c, built for ARMv8.2-A + dotprod. */
void tf_exl3_int_dotprod(const tf_exl3_mat *m, const tf_exl3_qx *q, float *yh,
			 int64_t j0, int64_t j1);
#endif

#endif /* TF_EXL3_MATMUL_INT_KERN_H */
