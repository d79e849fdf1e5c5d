/*
 * exl3_cuda.cuh - the device functions of an EXL3 linear (spec exl3.md
 * §5.1), shared by exl3-cuda's kernels (cuda_kernels.cu) and moe-cuda's
 * grouped expert MLPs (plugins/moe-cuda/exl3_mlp.cu), so both decode a
 * trellis the one way:
 *
 *  - tf_exl3_had128_shared: the normalised Had128 of a 128-thread block's
 *    values in shared memory;
 *  - tf_exl3_tile_state, tf_exl3_cb_value, tf_exl3_pos_rc: a tile
 *    position's 16-bit state, its codebook value (bit-exact fp16, as
 *    exllamav3's codebook.cuh) and its (row, column) in the tile;
 *  - tf_exl3_gemv_col: one 16-column tile column of yh = xh · Ŵ for up to
 *    TF_EXL3_CUDA_GEMV_ROWS rows, by a block of TF_EXL3_GEMV_WARPS warps;
 *  - tf_exl3_gemm_tile: TF_EXL3_GEMM_COLS columns of yh for up to
 *    TF_EXL3_GEMM_ROWS rows on tensor cores (WMMA), each trellis tile
 *    decoded once into shared memory as fp16;
 *  - tf_exl3_product: either, by the shared memory it is given, at a K
 *    and codebook known only at run time (moe-cuda's experts each have
 *    their own).
 */
#ifndef TF_EXL3_CUDA_CUH
#define TF_EXL3_CUDA_CUH

#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

#include "cuda_kernels.h"
#include "tf_launch.h"

#define TF_EXL3_HAD 128
#define TF_EXL3_GEMV_WARPS 8

/* Had128 of the 128 values in sh[] (one per thread of a 128-thread block),
 * normalised; leaves the result in sh[threadIdx.x].  Starts and ends with
 * a barrier, so a thread may write its own sh[threadIdx.x] before and read
 * it after. */
__device__ static inline void tf_exl3_had128_shared(float *sh)
{
	const int t = threadIdx.x;
	for (int h = 1; h < TF_EXL3_HAD; h *= 2) {
		__syncthreads();
		float a = sh[t], b = sh[t ^ h];
		__syncthreads();
		sh[t] = (t & h) ? b - a : a + b;
	}
	__syncthreads();
	sh[t] *= 0.088388347648f;
	__syncthreads();
}

/* The 16-bit state of position t of a tile of 8·K little-endian words. */
template <int K>
__device__ __forceinline__ static uint32_t tf_exl3_tile_state(const uint32_t *w, int t)
{
	const int b1 = (t + 1) * K + 256 * K, nw = 8 * K;
	const int i0 = (b1 - 16) / 32, i1 = (b1 - 1) / 32, sh = (i1 + 1) * 32 - b1;
	const uint64_t pair = (uint64_t)__ldg(w + i0 % nw) << 32 | __ldg(w + i1 % nw);
	return (uint32_t)(pair >> sh) & 0xFFFFu;
}

/* Codebooks (tf_exl3_cb), as exllamav3's codebook.cuh (bit-exact fp16). */
template <int CB>
__device__ __forceinline__ static __half tf_exl3_cb_value(uint32_t s)
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
__device__ __forceinline__ static void tf_exl3_pos_rc(int t, int *r, int *c)
{
	const int lane = t / 8, j = t % 8, r0 = 2 * (lane % 4);
	*r = r0 + ((j & 1) | ((j & 2) << 2));   /* r0, r0+1, r0+8, r0+9 */
	*c = lane / 4 + (j >= 4 ? 8 : 0);
}

/* The block's reduction buffer for tf_exl3_gemv_col, a __shared__ array. */
typedef float tf_exl3_gemv_red[TF_EXL3_GEMV_WARPS][TF_EXL3_CUDA_GEMV_ROWS][16];

/*
 * yh[row * n + 16 j + c] = xh[row] · Ŵ[:, 16 j + c] for rows 0 .. rows - 1
 * (at most TF_EXL3_CUDA_GEMV_ROWS; xh rows k floats apart), trellis
 * [k/16][n/16][16 K].  A block of 32·TF_EXL3_GEMV_WARPS threads: warps
 * stride down the tile rows of column j; lane L decodes positions
 * 8L..8L+7 (rows r0, r0+1, r0+8, r0+9 of columns c0 and c0+8) and keeps 2
 * sums per input row.  Lanes 4m..4m+3 share columns: two shuffles reduce
 * them, `red` the warps.  Ends with a barrier, so a block may call it
 * again on other rows with the same `red`.
 */
template <int K, int CB>
__device__ static void tf_exl3_gemv_col(const uint16_t *trellis, int64_t k, int64_t n,
					int64_t j, const float *xh, int rows, float *yh,
					tf_exl3_gemv_red &red)
{
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	const int64_t tn = n / 16;
	float acc[TF_EXL3_CUDA_GEMV_ROWS][2] = {};
	int r[8], c[8];

	for (int p = 0; p < 8; p++)
		tf_exl3_pos_rc(8 * lane + p, &r[p], &c[p]);
	for (int64_t i = warp; i < k / 16; i += TF_EXL3_GEMV_WARPS) {
		const uint32_t *w = (const uint32_t *)(trellis + (i * tn + j) * 16 * K);
#pragma unroll
		for (int p = 0; p < 8; p++) {
			const float v =
				__half2float(tf_exl3_cb_value<CB>(tf_exl3_tile_state<K>(w, 8 * lane + p)));
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
		for (int w = 0; w < TF_EXL3_GEMV_WARPS; w++)
			s += red[w][e / 16][e % 16];
		yh[(e / 16) * n + 16 * j + e % 16] = s;
	}
	__syncthreads();
}

/* The GEMM's block: TF_EXL3_GEMM_WARPS warps, one thread per position of
 * a trellis tile; each warp owns one 16-column slice of the block's
 * columns and every other 16-row slice of its rows. */
#define TF_EXL3_GEMM_WARPS 8
#define TF_EXL3_GEMM_DEPTH 64           /* k decoded per step */
#define TF_EXL3_GEMM_FRAGS (TF_EXL3_GEMM_ROWS / 16 / (TF_EXL3_GEMM_WARPS / (TF_EXL3_GEMM_COLS / 16)))
static_assert(32 * TF_EXL3_GEMM_WARPS == 256, "the GEMM's decode: a thread per tile position");

/* The GEMM's shared memory, a __shared__ variable: the steps' operands,
 * then (past a barrier) the sums over them, 18 KiB.  Rows padded by 8
 * halves (4 floats) so WMMA's row-major loads spread over the banks;
 * every fragment's start stays 32-byte aligned, as WMMA requires. */
union alignas(32) tf_exl3_gemm_smem {
	struct {
		__half a[TF_EXL3_GEMM_ROWS][TF_EXL3_GEMM_DEPTH + 8];    /* xh rows, fp16 */
		__half w[TF_EXL3_GEMM_DEPTH][TF_EXL3_GEMM_COLS + 8];    /* decoded Ŵ */
	} in;
	float c[TF_EXL3_GEMM_ROWS][TF_EXL3_GEMM_COLS + 4];              /* the sums */
};

/*
 * yh[row * n + col0 + c] = xh[row] · Ŵ[:, col0 + c] for c < TF_EXL3_GEMM_COLS
 * and rows 0 .. rows - 1 (1 to TF_EXL3_GEMM_ROWS; xh rows k floats apart),
 * trellis [k/16][n/16][16 K]; col0 a multiple of TF_EXL3_GEMM_COLS.  A
 * block of 32·TF_EXL3_GEMM_WARPS threads.  Each step of
 * TF_EXL3_GEMM_DEPTH features: the block rounds its rows of xh to fp16
 * (zero past `rows`) and decodes the step's trellis tiles, thread t
 * position t of each, into shared memory, then each warp multiplies its
 * 16x16 fragments, summing in float; fragments wholly past `rows` are
 * skipped.  The sums go out through shared memory, so rows past `rows`
 * are never written.  Ends with a barrier, so a block may call it again
 * with the same `sm`.
 */
template <int K, int CB>
__device__ static void tf_exl3_gemm_tile(const uint16_t *trellis, int64_t k, int64_t n,
					 int64_t col0, const float *xh, int rows, float *yh,
					 tf_exl3_gemm_smem &sm)
{
	using namespace nvcuda;
	const int t = threadIdx.x, warp = t / 32, slices = TF_EXL3_GEMM_COLS / 16;
	const int cf = warp % slices, rf0 = warp / slices, used = 16 * ((rows + 15) / 16);
	const int rstep = TF_EXL3_GEMM_WARPS / slices;
	const int64_t tn = n / 16;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[TF_EXL3_GEMM_FRAGS];
	int pr, pc;

	tf_exl3_pos_rc(t, &pr, &pc);
	for (int f = 0; f < TF_EXL3_GEMM_FRAGS; f++)
		wmma::fill_fragment(acc[f], 0.0f);
	for (int64_t k0 = 0; k0 < k; k0 += TF_EXL3_GEMM_DEPTH) {
		for (int e = t; e < used * TF_EXL3_GEMM_DEPTH; e += blockDim.x) {
			const int r = e / TF_EXL3_GEMM_DEPTH, c = e % TF_EXL3_GEMM_DEPTH;
			sm.in.a[r][c] = __float2half_rn(r < rows ? xh[r * k + k0 + c] : 0.0f);
		}
		for (int i = 0; i < TF_EXL3_GEMM_DEPTH / 16; i++)
			for (int j = 0; j < slices; j++) {
				const uint32_t *w = (const uint32_t *)
					(trellis + ((k0 / 16 + i) * tn + col0 / 16 + j) * 16 * K);
				sm.in.w[16 * i + pr][16 * j + pc] =
					tf_exl3_cb_value<CB>(tf_exl3_tile_state<K>(w, t));
			}
		__syncthreads();
		for (int kk = 0; kk < TF_EXL3_GEMM_DEPTH; kk += 16) {
			wmma::load_matrix_sync(fb, &sm.in.w[kk][16 * cf], TF_EXL3_GEMM_COLS + 8);
			for (int f = 0; f < TF_EXL3_GEMM_FRAGS; f++) {
				const int rf = rf0 + f * rstep;
				if (16 * rf >= used)
					break;
				wmma::load_matrix_sync(fa, &sm.in.a[16 * rf][kk], TF_EXL3_GEMM_DEPTH + 8);
				wmma::mma_sync(acc[f], fa, fb, acc[f]);
			}
		}
		__syncthreads();
	}
	for (int f = 0; f < TF_EXL3_GEMM_FRAGS; f++) {
		const int rf = rf0 + f * rstep;
		if (16 * rf >= used)
			break;
		wmma::store_matrix_sync(&sm.c[16 * rf][16 * cf], acc[f], TF_EXL3_GEMM_COLS + 4,
					wmma::mem_row_major);
	}
	__syncthreads();
	for (int e = t; e < rows * TF_EXL3_GEMM_COLS; e += blockDim.x) {
		const int r = e / TF_EXL3_GEMM_COLS, c = e % TF_EXL3_GEMM_COLS;
		yh[r * n + col0 + c] = sm.c[r][c];
	}
	__syncthreads();
}

/* yh = xh · Ŵ over columns [col0, ...) at compile-time K and CB: the
 * GEMV's tile column (col0 / 16) with its reduction buffer, the GEMM's
 * tile with its shared memory. */
template <int K, int CB>
__device__ static void tf_exl3_product_at(tf_exl3_gemv_red &red, const uint16_t *trellis,
					  int64_t k, int64_t n, int64_t col0, const float *xh,
					  int rows, float *yh)
{
	tf_exl3_gemv_col<K, CB>(trellis, k, n, col0 / 16, xh, rows, yh, red);
}

template <int K, int CB>
__device__ static void tf_exl3_product_at(tf_exl3_gemm_smem &sm, const uint16_t *trellis,
					  int64_t k, int64_t n, int64_t col0, const float *xh,
					  int rows, float *yh)
{
	tf_exl3_gemm_tile<K, CB>(trellis, k, n, col0, xh, rows, yh, sm);
}

/* The same at a K (1..8) and codebook (0..2) known only at run time;
 * every thread of a block must pass the same, so all reach the same
 * barriers. */
#define TF_EXL3_BY_CB(K_)                                                              \
	case K_:                                                                       \
		if (cb == 0)                                                           \
			tf_exl3_product_at<K_, 0>(smem, trellis, k, n, col0, xh, rows, yh); \
		else if (cb == 1)                                                      \
			tf_exl3_product_at<K_, 1>(smem, trellis, k, n, col0, xh, rows, yh); \
		else                                                                   \
			tf_exl3_product_at<K_, 2>(smem, trellis, k, n, col0, xh, rows, yh); \
		break
template <class S>
__device__ static void tf_exl3_product(S &smem, int K, int cb, const uint16_t *trellis,
				       int64_t k, int64_t n, int64_t col0, const float *xh,
				       int rows, float *yh)
{
	switch (K) {
		TF_EXL3_BY_CB(1);
		TF_EXL3_BY_CB(2);
		TF_EXL3_BY_CB(3);
		TF_EXL3_BY_CB(4);
		TF_EXL3_BY_CB(5);
		TF_EXL3_BY_CB(6);
		TF_EXL3_BY_CB(7);
		TF_EXL3_BY_CB(8);
	}
}
#undef TF_EXL3_BY_CB

#endif /* TF_EXL3_CUDA_CUH */
