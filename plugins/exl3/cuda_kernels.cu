/* cuda_kernels.cu - EXL3 decode, GEMV, reconstruct + WMMA GEMM, Hadamards; the
 * device functions they share with moe-cuda are exl3_cuda.cuh. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "exl3_cuda.cuh"

/* grid (k/128, rows), block 128 */
__global__ static void input_kernel(const float *x, int64_t in, int64_t k,
				    const float *suh, float *xh, __half *xh16)
{
	__shared__ float sh[TF_EXL3_HAD];
	const int64_t row = blockIdx.y, i = (int64_t)blockIdx.x * TF_EXL3_HAD + threadIdx.x;
	sh[threadIdx.x] = i < in ? x[row * in + i] * suh[i] : 0.0f;
	tf_exl3_had128_shared(sh);
	xh[row * k + i] = sh[threadIdx.x];
	if (xh16)
		xh16[row * k + i] = __float2half_rn(sh[threadIdx.x]);
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

/* grid (k/16 · n/16), block 256: one thread per tile position. */
template <int K, int CB>
__global__ static void reconstruct_kernel(const uint16_t *trellis, int64_t n, __half *out)
{
	const int64_t tile = blockIdx.x, tn = n / 16, i = tile / tn, j = tile % tn;
	const uint32_t *w = (const uint32_t *)(trellis + tile * 16 * K);
	int r, c;
	tf_exl3_pos_rc(threadIdx.x, &r, &c);
	out[(16 * i + r) * n + 16 * j + c] =
		tf_exl3_cb_value<CB>(tf_exl3_tile_state<K>(w, threadIdx.x));
}

/* grid (n/64, rows16/16), block 128: each warp one 16x16 tile of yh. */
__global__ static void gemm_kernel(const __half *a, const __half *b, int64_t k,
				   int64_t n, float *c)
{
	using namespace nvcuda;
	const int warp = threadIdx.x / 32;
	const int64_t row0 = (int64_t)blockIdx.y * 16, col0 = ((int64_t)blockIdx.x * 4 + warp) * 16;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;

	if (col0 >= n)
		return;
	wmma::fill_fragment(fc, 0.0f);
	for (int64_t kk = 0; kk < k; kk += 16) {
		wmma::load_matrix_sync(fa, a + row0 * k + kk, (unsigned)k);
		wmma::load_matrix_sync(fb, b + kk * n + col0, (unsigned)n);
		wmma::mma_sync(fc, fa, fb, fc);
	}
	wmma::store_matrix_sync(c + row0 * n + col0, fc, (unsigned)n, wmma::mem_row_major);
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
static void reconstruct_launch(cudaStream_t st, const uint16_t *trellis, int64_t k,
			       int64_t n, __half *w)
{
	TF_LAUNCH((unsigned)((k / 16) * (n / 16)), 256, 0, st, reconstruct_kernel<K, CB>)(trellis, n, w);
}

typedef void (*gemv_fn)(cudaStream_t, const uint16_t *, int64_t, int64_t, const float *,
			int, float *);
typedef void (*reconstruct_fn)(cudaStream_t, const uint16_t *, int64_t, int64_t, __half *);

#define BY_CB(f, K) { f<K, 0>, f<K, 1>, f<K, 2> }
#define BY_K(f) { { 0 }, BY_CB(f, 1), BY_CB(f, 2), BY_CB(f, 3), BY_CB(f, 4), \
		  BY_CB(f, 5), BY_CB(f, 6), BY_CB(f, 7), BY_CB(f, 8) }
static const gemv_fn gemv_fns[9][3] = BY_K(gemv_launch);
static const reconstruct_fn reconstruct_fns[9][3] = BY_K(reconstruct_launch);

extern "C" int tf_exl3_cuda_input(void *stream, const float *x, int64_t rows, int64_t in,
				  int64_t k, const float *suh, float *xh, uint16_t *xh16)
{
	TF_LAUNCH(dim3((unsigned)(k / TF_EXL3_HAD), (unsigned)rows), TF_EXL3_HAD, 0,
		  (cudaStream_t)stream, input_kernel)(x, in, k, suh, xh, (__half *)xh16);
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

extern "C" int tf_exl3_cuda_reconstruct(void *stream, const uint16_t *trellis, int64_t k,
					int64_t n, int K, int cb, uint16_t *w)
{
	if (K < 1 || K > 8 || cb < 0 || cb > 2)
		return (int)cudaErrorInvalidValue;
	reconstruct_fns[K][cb]((cudaStream_t)stream, trellis, k, n, (__half *)w);
	return (int)cudaGetLastError();
}

extern "C" int tf_exl3_cuda_gemm(void *stream, const uint16_t *xh16, int64_t rows16,
				 const uint16_t *w, int64_t k, int64_t n, float *yh)
{
	if (rows16 % 16 || k % 16 || n % 16)
		return (int)cudaErrorInvalidValue;
	TF_LAUNCH(dim3((unsigned)((n / 16 + 3) / 4), (unsigned)(rows16 / 16)), 128, 0,
		  (cudaStream_t)stream, gemm_kernel)((const __half *)xh16, (const __half *)w, k, n, yh);
	return (int)cudaGetLastError();
}

extern "C" int tf_exl3_cuda_output(void *stream, const float *yh, int64_t rows, int64_t n,
				   int64_t out, const float *svh, const float *bias, float *y)
{
	TF_LAUNCH(dim3((unsigned)(n / TF_EXL3_HAD), (unsigned)rows), TF_EXL3_HAD, 0,
		  (cudaStream_t)stream, output_kernel)(yh, n, out, svh, bias, y);
	return (int)cudaGetLastError();
}
