/*
 * cuda_kernels.h - the EXL3 linear on an NVIDIA GPU (spec exl3.md §5.1).
 *
 * All pointers are device memory; every call queues work on `stream` and
 * returns the launch status (0 or a cudaError_t value).  The pieces of
 * y = Had128(Had128(x ⊙ suh) · Ŵ) ⊙ svh + b:
 *
 *  - tf_exl3_cuda_input:  xh = Had128(x ⊙ suh), zero-extended from in to k;
 *  - tf_exl3_cuda_gemv:   yh = xh · Ŵ for 1..8 rows; every lane decodes the
 *                         8 positions of its mma B fragments straight from
 *                         the packed tile into registers and multiplies;
 *  - tf_exl3_cuda_gemm:   the same for any rows on tensor cores (WMMA): a
 *                         block decodes its 64 columns' tiles once per 64
 *                         rows into shared memory as fp16 and multiplies
 *                         them by its rows of xh rounded to fp16, summing
 *                         in float (exl3_cuda.cuh's tf_exl3_gemm_tile,
 *                         which moe-cuda's experts share);
 *  - tf_exl3_cuda_output: y = Had128(yh) ⊙ svh + bias, trimmed to out.
 */
#ifndef TF_EXL3_CUDA_KERNELS_H
#define TF_EXL3_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Most rows the GEMV path takes.  Above it the GEMM: the GEMV decodes each
 * tile once per 8 rows, the GEMM once per TF_EXL3_GEMM_ROWS; at 8 rows or
 * fewer both decode once and the GEMV skips the GEMM's staging through
 * shared memory and its 16-row fragments (half idle or more).
 */
#define TF_EXL3_CUDA_GEMV_ROWS 8
/* The GEMM's tile of yh: rows and columns a block takes. */
#define TF_EXL3_GEMM_ROWS 64
#define TF_EXL3_GEMM_COLS 64

int tf_exl3_cuda_input(void *stream, const float *x, int64_t rows, int64_t in,
		       int64_t k, const float *suh, float *xh);
int tf_exl3_cuda_gemv(void *stream, const uint16_t *trellis, int64_t k, int64_t n,
		      int K, int cb, const float *xh, int64_t rows, float *yh);
int tf_exl3_cuda_gemm(void *stream, const uint16_t *trellis, int64_t k, int64_t n,
		      int K, int cb, const float *xh, int64_t rows, float *yh);
int tf_exl3_cuda_output(void *stream, const float *yh, int64_t rows, int64_t n,
			int64_t out, const float *svh, const float *bias, float *y);

#ifdef __cplusplus
}
#endif
#endif /* TF_EXL3_CUDA_KERNELS_H */
