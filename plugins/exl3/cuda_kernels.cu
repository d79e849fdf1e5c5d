/* cuda_kernels.cu - EXL3 GEMV, decode-once WMMA GEMM, Hadamards; the
 * device functions they share with moe-cuda are exl3_cuda.cuh. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "exl3_cuda.cuh"

/* grid (k/128, rows), block 128 */
__global__ static void input_kernel(const float *x, int64_t in, int64_t k,
				    const float *suh, float *xh)
{
	__shared__ float sh[TF_EXL3_HAD];
	const int64_t row = blockIdx.y, i = (int64_t)blockIdx.x * TF_EXL3_HAD + threadIdx.x;
	sh[threadIdx.x] = i < in ? x[row * in + i] * suh[i] : 0.0f;
	tf_exl3_had128_shared(sh);
	xh[row * k + i] = sh[threadIdx.x];
}

/* grid (n/128, rows), block 128 */
__global__ static void output_kernel(const float *yh, int64_t n, int64_t out,
				     const float *svh, const float *bias, float *y)
{
	__shared__ float sh[TF_EXL3_HAD];
	const int64_t row = blockIdx.y, o = (int64_t)blockIdx.x * TF_EXL3_HAD + threadIdx.x;
	sh[threadIdx.x] = yh[row * n + o];
	tf_exl3_had128_shared(sh);
	if (o < out)
		y[row * out + o] = sh[threadIdx.x] * svh[o] + (bias ? bias[o] : 0.0f);
}

/* grid (n/16), block 32·TF_EXL3_GEMV_WARPS: tile column blockIdx.x. */
template <int K, int CB>
__global__ static void __launch_bounds__(32 * TF_EXL3_GEMV_WARPS)
gemv_kernel(const uint16_t *trellis, int64_t k, int64_t n, const float *xh,
	    int rows, float *yh)
{
	__shared__ tf_exl3_gemv_red red;
	tf_exl3_gemv_col<K, CB>(trellis, k, n, blockIdx.x, xh, rows, yh, red);
}

/* grid (n/TF_EXL3_GEMM_COLS, row tiles), block 32·TF_EXL3_GEMM_WARPS. */
template <int K, int CB>
__global__ static void __launch_bounds__(32 * TF_EXL3_GEMM_WARPS)
gemm_kernel(const uint16_t *trellis, int64_t k, int64_t n, const float *xh, int64_t rows,
	    float *yh)
{
	__shared__ tf_exl3_gemm_smem sm;
	const int64_t r0 = (int64_t)blockIdx.y * TF_EXL3_GEMM_ROWS;
	const int m = rows - r0 < TF_EXL3_GEMM_ROWS ? (int)(rows - r0) : TF_EXL3_GEMM_ROWS;
	tf_exl3_gemm_tile<K, CB>(trellis, k, n, (int64_t)blockIdx.x * TF_EXL3_GEMM_COLS,
				 xh + r0 * k, m, yh + r0 * n, sm);
}

/* Launchers per (K, codebook), tabled so a runtime pair picks its kernel. */
template <int K, int CB>
static void gemv_launch(cudaStream_t st, const uint16_t *trellis, int64_t k, int64_t n,
			const float *xh, int rows, float *yh)
{
	TF_LAUNCH((unsigned)(n / 16), 32 * TF_EXL3_GEMV_WARPS, 0, st,
		  gemv_kernel<K, CB>)(trellis, k, n, xh, rows, yh);
}

template <int K, int CB>
static void gemm_launch(cudaStream_t st, const uint16_t *trellis, int64_t k, int64_t n,
			const float *xh, int64_t rows, float *yh)
{
	const unsigned tiles = (unsigned)((rows + TF_EXL3_GEMM_ROWS - 1) / TF_EXL3_GEMM_ROWS);
	TF_LAUNCH(dim3((unsigned)(n / TF_EXL3_GEMM_COLS), tiles), 32 * TF_EXL3_GEMM_WARPS, 0, st,
		  gemm_kernel<K, CB>)(trellis, k, n, xh, rows, yh);
}

typedef void (*gemv_fn)(cudaStream_t, const uint16_t *, int64_t, int64_t, const float *,
			int, float *);
typedef void (*gemm_fn)(cudaStream_t, const uint16_t *, int64_t, int64_t, const float *,
			int64_t, float *);

#define BY_CB(f, K) { f<K, 0>, f<K, 1>, f<K, 2> }
#define BY_K(f) { { 0 }, BY_CB(f, 1), BY_CB(f, 2), BY_CB(f, 3), BY_CB(f, 4), \
		  BY_CB(f, 5), BY_CB(f, 6), BY_CB(f, 7), BY_CB(f, 8) }
static const gemv_fn gemv_fns[9][3] = BY_K(gemv_launch);
static const gemm_fn gemm_fns[9][3] = BY_K(gemm_launch);

extern "C" int tf_exl3_cuda_input(void *stream, const float *x, int64_t rows, int64_t in,
				  int64_t k, const float *suh, float *xh)
{
	TF_LAUNCH(dim3((unsigned)(k / TF_EXL3_HAD), (unsigned)rows), TF_EXL3_HAD, 0,
		  (cudaStream_t)stream, input_kernel)(x, in, k, suh, xh);
	return (int)cudaGetLastError();
}

extern "C" int tf_exl3_cuda_gemv(void *stream, const uint16_t *trellis, int64_t k, int64_t n,
				 int K, int cb, const float *xh, int64_t rows, float *yh)
{
	if (rows < 1 || rows > TF_EXL3_CUDA_GEMV_ROWS || K < 1 || K > 8 || cb < 0 || cb > 2)
		return (int)cudaErrorInvalidValue;
	gemv_fns[K][cb]((cudaStream_t)stream, trellis, k, n, xh, (int)rows, yh);
	return (int)cudaGetLastError();
}

extern "C" int tf_exl3_cuda_gemm(void *stream, const uint16_t *trellis, int64_t k, int64_t n,
				 int K, int cb, const float *xh, int64_t rows, float *yh)
{
	if (rows < 1 || (rows + TF_EXL3_GEMM_ROWS - 1) / TF_EXL3_GEMM_ROWS > 65535 || K < 1 ||
	    K > 8 || cb < 0 || cb > 2 || k % TF_EXL3_GEMM_DEPTH || n % TF_EXL3_GEMM_COLS)
		return (int)cudaErrorInvalidValue;
	gemm_fns[K][cb]((cudaStream_t)stream, trellis, k, n, xh, rows, yh);
	return (int)cudaGetLastError();
}

extern "C" int tf_exl3_cuda_output(void *stream, const float *yh, int64_t rows, int64_t n,
				   int64_t out, const float *svh, const float *bias, float *y)
{
	TF_LAUNCH(dim3((unsigned)(n / TF_EXL3_HAD), (unsigned)rows), TF_EXL3_HAD, 0,
		  (cudaStream_t)stream, output_kernel)(yh, n, out, svh, bias, y);
	return (int)cudaGetLastError();
}
