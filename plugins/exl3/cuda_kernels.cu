/* cuda_kernels.cu - EXL3 decode, GEMV, reconstruct + WMMA GEMM, Hadamards. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "cuda_kernels.h"
#include "tf_launch.h"

#define HAD 128

/* Had128 of the 128 values in sh[] (one per thread of a 128-thread block),
 * normalised; leaves the result in sh[threadIdx.x]. */
__device__ static void had128_shared(float *sh)
{
	const int t = threadIdx.x;
	for (int h = 1; h < HAD; h *= 2) {
		__syncthreads();
		float a = sh[t], b = sh[t ^ h];
		__syncthreads();
		sh[t] = (t & h) ? b - a : a + b;
	}
	__syncthreads();
	sh[t] *= 0.088388347648f;
	__syncthreads();
}

/* grid (k/128, rows), block 128 */
__global__ static void input_kernel(const float *x, int64_t in, int64_t k,
				    const float *suh, float *xh, __half *xh16)
{
	__shared__ float sh[HAD];
	const int64_t row = blockIdx.y, i = (int64_t)blockIdx.x * HAD + threadIdx.x;
	sh[threadIdx.x] = i < in ? x[row * in + i] * suh[i] : 0.0f;
	had128_shared(sh);
	xh[row * k + i] = sh[threadIdx.x];
	if (xh16)
		xh16[row * k + i] = __float2half_rn(sh[threadIdx.x]);
}

/* grid (n/128, rows), block 128 */
__global__ static void output_kernel(const float *yh, int64_t n, int64_t out,
				     const float *svh, const float *bias, float *y)
{
	__shared__ float sh[HAD];
	const int64_t row = blockIdx.y, o = (int64_t)blockIdx.x * HAD + threadIdx.x;
	sh[threadIdx.x] = yh[row * n + o];
	had128_shared(sh);
	if (o < out)
		y[row * out + o] = sh[threadIdx.x] * svh[o] + (bias ? bias[o] : 0.0f);
}

/* The 16-bit state of position t of a tile of 8·K little-endian words. */
template <int K>
__device__ __forceinline__ static uint32_t tile_state(const uint32_t *w, int t)
{
	const int b1 = (t + 1) * K + 256 * K, nw = 8 * K;
	const int i0 = (b1 - 16) / 32, i1 = (b1 - 1) / 32, sh = (i1 + 1) * 32 - b1;
	const uint64_t pair = (uint64_t)__ldg(w + i0 % nw) << 32 | __ldg(w + i1 % nw);
	return (uint32_t)(pair >> sh) & 0xFFFFu;
}

/* Codebooks, as exllamav3's codebook.cuh (bit-exact fp16). */
template <int CB>
__device__ __forceinline__ static __half cb_value(uint32_t s)
{
	if (CB == 2) {
		uint32_t x = s * 0x83DCD12Du;
		uint32_t bs = __dp4a(x, 0x01010101u, 0u);
		__half h = __ushort_as_half((unsigned short)(0x6400u + bs));
		return __hfma(h, __ushort_as_half(0x1EEE), __ushort_as_half(0xC931));
	}
	uint32_t x = CB == 1 ? s * 0xCBAC1FEDu : s * 89226354u + 64248484u;
	x = (x & 0x8FFF8FFFu) ^ 0x3B603B60u;
	return __hadd(__ushort_as_half((unsigned short)(x & 0xFFFF)),
		      __ushort_as_half((unsigned short)(x >> 16)));
}

/* Element (r, c) of position t (tensor-core order, trellis.h). */
__device__ __forceinline__ static void pos_rc(int t, int *r, int *c)
{
	const int lane = t / 8, j = t % 8, r0 = 2 * (lane % 4);
	*r = r0 + ((j & 1) | ((j & 2) << 2));   /* r0, r0+1, r0+8, r0+9 */
	*c = lane / 4 + (j >= 4 ? 8 : 0);
}

#define GEMV_WARPS 8

/*
 * grid (n/16), block 32·GEMV_WARPS.  Warps stride down the tile rows of
 * one tile column; lane L decodes positions 8L..8L+7 (rows r0, r0+1, r0+8,
 * r0+9 of columns c0 and c0+8) and keeps 2 sums per input row.  Lanes
 * 4m..4m+3 share columns: two shuffles reduce them, shared memory the warps.
 */
template <int K, int CB>
__global__ static void __launch_bounds__(32 * GEMV_WARPS)
gemv_kernel(const uint16_t *trellis, int64_t k, int64_t n, const float *xh,
	    int rows, float *yh)
{
	__shared__ float red[GEMV_WARPS][TF_EXL3_CUDA_GEMV_ROWS][16];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	const int64_t j = blockIdx.x, tn = n / 16;
	float acc[TF_EXL3_CUDA_GEMV_ROWS][2] = {};
	int r[8], c[8];

	for (int p = 0; p < 8; p++)
		pos_rc(8 * lane + p, &r[p], &c[p]);
	for (int64_t i = warp; i < k / 16; i += GEMV_WARPS) {
		const uint32_t *w = (const uint32_t *)(trellis + (i * tn + j) * 16 * K);
#pragma unroll
		for (int p = 0; p < 8; p++) {
			const float v = __half2float(cb_value<CB>(tile_state<K>(w, 8 * lane + p)));
#pragma unroll
			for (int row = 0; row < TF_EXL3_CUDA_GEMV_ROWS; row++)
				if (row < rows)
					acc[row][p >= 4] += xh[row * k + 16 * i + r[p]] * v;
		}
	}
#pragma unroll
	for (int row = 0; row < TF_EXL3_CUDA_GEMV_ROWS; row++)
#pragma unroll
		for (int half = 0; half < 2; half++) {
			float v = acc[row][half];
			v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
			v += __shfl_xor_sync(0xFFFFFFFFu, v, 2);
			if (lane % 4 == 0)
				red[warp][row][lane / 4 + 8 * half] = v;
		}
	__syncthreads();
	for (int e = threadIdx.x; e < rows * 16; e += blockDim.x) {
		float s = 0.0f;
		for (int w = 0; w < GEMV_WARPS; w++)
			s += red[w][e / 16][e % 16];
		yh[(e / 16) * n + 16 * j + e % 16] = s;
	}
}

/* grid (k/16 · n/16), block 256: one thread per tile position. */
template <int K, int CB>
__global__ static void reconstruct_kernel(const uint16_t *trellis, int64_t n, __half *out)
{
	const int64_t tile = blockIdx.x, tn = n / 16, i = tile / tn, j = tile % tn;
	const uint32_t *w = (const uint32_t *)(trellis + tile * 16 * K);
	int r, c;
	pos_rc(threadIdx.x, &r, &c);
	out[(16 * i + r) * n + 16 * j + c] = cb_value<CB>(tile_state<K>(w, threadIdx.x));
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
	TF_LAUNCH((unsigned)(n / 16), 32 * GEMV_WARPS, 0, st, gemv_kernel<K, CB>)(trellis, k, n, xh,
										 rows, yh);
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
	TF_LAUNCH(dim3((unsigned)(k / HAD), (unsigned)rows), HAD, 0, (cudaStream_t)stream,
		  input_kernel)(x, in, k, suh, xh, (__half *)xh16);
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
	TF_LAUNCH(dim3((unsigned)(n / HAD), (unsigned)rows), HAD, 0, (cudaStream_t)stream,
		  output_kernel)(yh, n, out, svh, bias, y);
	return (int)cudaGetLastError();
}
