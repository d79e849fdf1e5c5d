/*
 * cuda_kernels.h - the EXL3 linear on an NVIDIA GPU (spec exl3.md §5.1).
 *
 * All pointers are device memory; every call queues work on `stream` and
 * returns the launch status (0 or a cudaError_t value).  The pieces of
 * y = Had128(Had128(x ⊙ suh) · Ŵ) ⊙ svh + b:
 *
 *  - tf_exl3_cuda_input:  xh = Had128(x ⊙ suh), zero-extended from in to k;
 *                         also as fp16 (xh16, may be NULL) for the GEMM;
 *  - tf_exl3_cuda_gemv:   yh = xh · Ŵ for 1..8 rows; every lane decodes the
 *                         8 positions of its mma B fragments straight from
 *                         the packed tile into registers and multiplies;
 *  - tf_exl3_cuda_reconstruct + tf_exl3_cuda_gemm: more rows: decode Ŵ to
 *                         fp16 once, then a tensor-core (WMMA) product;
 *  - tf_exl3_cuda_output: y = Had128(yh) ⊙ svh + bias, trimmed to out.
 */
#ifndef TF_EXL3_CUDA_KERNELS_H
#define TF_EXL3_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TF_EXL3_CUDA_GEMV_ROWS 8        /* most rows the GEMV path takes */

int tf_exl3_cuda_input(void *stream, const float *x, int64_t rows, int64_t in,
		       int64_t k, const float *suh, float *xh, uint16_t *xh16);
int tf_exl3_cuda_gemv(void *stream, const uint16_t *trellis, int64_t k, int64_t n,
		      int K, int cb, const float *xh, int64_t rows, float *yh);
/* w: fp16 [k][n] row-major. */
int tf_exl3_cuda_reconstruct(void *stream, const uint16_t *trellis, int64_t k,
			     int64_t n, int K, int cb, uint16_t *w);
/* yh [rows16][n] = xh16 [rows16][k] · w; rows16 a multiple of 16 whose
 * extra rows of xh16 are zero. */
int tf_exl3_cuda_gemm(void *stream, const uint16_t *xh16, int64_t rows16,
		      const uint16_t *w, int64_t k, int64_t n, float *yh);
int tf_exl3_cuda_output(void *stream, const float *yh, int64_t rows, int64_t n,
			int64_t out, const float *svh, const float *bias, float *y);

#ifdef __cplusplus
}
#endif
#endif /* TF_EXL3_CUDA_KERNELS_H */
