/* plain_cuda.cu - the plain linear's tiled product; see plain_cuda.h. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "plain_cuda.h"
#include "tf_launch.h"

/* Each block computes a TILE x TILE tile of y (rows x outputs), stepping
 * over `in` a TILE at a time through shared memory: a thread loads one x
 * and one (widened) weight per step.  The +1 column keeps the transposed
 * reads of ws off one bank. */
#define TILE 16

template <int E>
__device__ __forceinline__ static float plain_load(const void *w, int64_t i)
{
	if (E == TF_PLAIN_CUDA_F32)
		return ((const float *)w)[i];
	const unsigned short u = ((const unsigned short *)w)[i];
	if (E == TF_PLAIN_CUDA_F16)
		return __half2float(__ushort_as_half(u));
	return __uint_as_float((uint32_t)u << 16);
}

/* grid (out / TILE, rows / TILE) rounded up, block (TILE, TILE):
 * threadIdx.x picks the output, threadIdx.y the row. */
template <int E>
__global__ static void plain_matmul_kernel(const float *x, int64_t rows, int64_t in,
					   const void *w, int64_t out, const float *bias,
					   float *y)
{
	__shared__ float xs[TILE][TILE + 1];
	__shared__ float ws[TILE][TILE + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int64_t r0 = (int64_t)blockIdx.y * TILE, o0 = (int64_t)blockIdx.x * TILE;
	float acc = 0.0f;

	for (int64_t k0 = 0; k0 < in; k0 += TILE) {
		const int64_t k = k0 + tx, r = r0 + ty, o = o0 + ty;
		xs[ty][tx] = r < rows && k < in ? x[r * in + k] : 0.0f;
		ws[ty][tx] = o < out && k < in ? plain_load<E>(w, o * in + k) : 0.0f;
		__syncthreads();
		for (int j = 0; j < TILE; j++)
			acc += xs[ty][j] * ws[tx][j];
		__syncthreads();
	}
	const int64_t r = r0 + ty, o = o0 + tx;
	if (r < rows && o < out)
		y[r * out + o] = acc + (bias ? bias[o] : 0.0f);
}

extern "C" int tf_plain_cuda_matmul(void *stream, const float *x, int64_t rows, int64_t in,
				    const void *w, tf_plain_cuda_elem elem, int64_t out,
				    const float *bias, float *y)
{
	const int64_t gx = (out + TILE - 1) / TILE, gy = (rows + TILE - 1) / TILE;
	if (rows <= 0 || in <= 0 || out <= 0 || gx > 0x7fffffff || gy > 65535)
		return (int)cudaErrorInvalidValue;
	const dim3 grid((unsigned)gx, (unsigned)gy), block(TILE, TILE);
	cudaStream_t st = (cudaStream_t)stream;
	switch (elem) {
	case TF_PLAIN_CUDA_F32:
		TF_LAUNCH(grid, block, 0, st, plain_matmul_kernel<TF_PLAIN_CUDA_F32>)(x, rows, in, w,
										out, bias, y);
		break;
	case TF_PLAIN_CUDA_F16:
		TF_LAUNCH(grid, block, 0, st, plain_matmul_kernel<TF_PLAIN_CUDA_F16>)(x, rows, in, w,
										out, bias, y);
		break;
	case TF_PLAIN_CUDA_BF16:
		TF_LAUNCH(grid, block, 0, st, plain_matmul_kernel<TF_PLAIN_CUDA_BF16>)(x, rows, in, w,
										 out, bias, y);
		break;
	default:
		return (int)cudaErrorInvalidValue;
	}
	return (int)cudaGetLastError();
}
