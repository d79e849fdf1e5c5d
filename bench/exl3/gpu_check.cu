/*
 * gpu_check.cu - exl3's CUDA kernels on a real GPU: checked against the
 * CPU reference (plugins/exl3/matmul.c) on random layers for every K and
 * codebook and for GEMV and GEMM row counts, then timed.
 *
 *     gpu_check [--check [--quick]]
 *
 * Exit status 1 when a check fails.  --check: no benchmark; --quick: one
 * GEMV row count (3 or 8, alternating) and one GEMM row count (33, or 77:
 * a whole tile of 64 rows and part of another) per K and codebook, on
 * 128x256 layers (the SIMT harness, tests/simt, runs it so: every kernel
 * and template, in CI time on a CPU).
 *
 * The tables: one-row GEMV, weights/s, GB/s of trellis read, share of the
 * device-to-device copy bandwidth measured in the same run, and the ratio
 * to a plain fp16 GEMV of the same shape (a simple coalesced kernel); then
 * the GEMM over 16 to 1024 rows against its floor (bench_gemm).
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_bench.h"
#include "cuda_kernels.h"
#include "tf_launch.h"
extern "C" {
#include "hadamard.h"
#include "matmul.h"
}


struct layer {
	int64_t k, n, in, out;
	int K, cb;
	uint16_t *tr;
	float *suh, *svh, *bias;
};

static void layer_init(struct layer *l, int64_t k, int64_t n, int K, int cb, uint64_t *s)
{
	size_t words = (size_t)(k * n * K / 16);
	*l = layer{ k, n, k - 5, n - 7, K, cb, NULL, NULL, NULL, NULL };
	l->tr = (uint16_t *)malloc(words * 2);
	l->suh = (float *)malloc(k * 4);
	l->svh = (float *)malloc(n * 4);
	l->bias = (float *)malloc(n * 4);
	for (size_t i = 0; i < words; i++)
		l->tr[i] = (uint16_t)lcg(s);
	for (int64_t i = 0; i < k; i++)
		l->suh[i] = unit(s);
	for (int64_t i = 0; i < n; i++) {
		l->svh[i] = unit(s);
		l->bias[i] = unit(s);
	}
}

/* y = Had(Had(x ⊙ suh) · Ŵ) ⊙ svh + b on the CPU, reference decode. */
static void cpu_forward(const struct layer *l, const float *x, int64_t rows, float *y)
{
	float *xh = (float *)calloc(rows * l->k, 4), *yh = (float *)malloc(rows * l->n * 4);
	tf_exl3_mat m;
	tf_exl3_mat_init(&m, l->tr, l->k, l->n, l->K, (tf_exl3_cb)l->cb);
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t i = 0; i < l->in; i++)
			xh[r * l->k + i] = x[r * l->in + i] * l->suh[i];
		tf_had128(xh + r * l->k, l->k);
	}
	tf_exl3_mat_mul_ref(&m, xh, rows, yh, 0, l->n / 16);
	for (int64_t r = 0; r < rows; r++) {
		tf_had128(yh + r * l->n, l->n);
		for (int64_t o = 0; o < l->out; o++)
			y[r * l->out + o] = yh[r * l->n + o] * l->svh[o] + l->bias[o];
	}
	tf_exl3_mat_free(&m);
	free(xh);
	free(yh);
}

/* The same on the GPU through the plugin's kernels. */
static void gpu_forward(const struct layer *l, const float *x, int64_t rows, float *y)
{
	uint16_t *tr;
	float *suh, *svh, *bias, *dx, *dy, *xh, *yh;
	size_t tb = (size_t)(l->k * l->n * l->K / 8);

	CHECK(cudaMalloc(&tr, tb));
	CHECK(cudaMalloc(&suh, l->k * 4));
	CHECK(cudaMalloc(&svh, l->n * 4));
	CHECK(cudaMalloc(&bias, l->n * 4));
	CHECK(cudaMalloc(&dx, rows * l->in * 4));
	CHECK(cudaMalloc(&dy, rows * l->out * 4));
	CHECK(cudaMalloc(&xh, rows * l->k * 4));
	CHECK(cudaMalloc(&yh, rows * l->n * 4));
	CHECK(cudaMemcpy(tr, l->tr, tb, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(suh, l->suh, l->k * 4, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(svh, l->svh, l->n * 4, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(bias, l->bias, l->n * 4, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(dx, x, rows * l->in * 4, cudaMemcpyHostToDevice));
	CHECK((cudaError_t)tf_exl3_cuda_input(0, dx, rows, l->in, l->k, suh, xh));
	if (rows <= TF_EXL3_CUDA_GEMV_ROWS)
		CHECK((cudaError_t)tf_exl3_cuda_gemv(0, tr, l->k, l->n, l->K, l->cb, xh, rows, yh));
	else
		CHECK((cudaError_t)tf_exl3_cuda_gemm(0, tr, l->k, l->n, l->K, l->cb, xh, rows, yh));
	CHECK((cudaError_t)tf_exl3_cuda_output(0, yh, rows, l->n, l->out, svh, bias, dy));
	CHECK(cudaMemcpy(y, dy, rows * l->out * 4, cudaMemcpyDeviceToHost));
	cudaFree(tr); cudaFree(suh); cudaFree(svh); cudaFree(bias); cudaFree(dx);
	cudaFree(dy); cudaFree(xh); cudaFree(yh);
}

static int check_all(bool quick)
{
	static const int64_t rows_all[] = { 1, 3, 8, 9, 33, 77, 200 };
	const size_t nrows = quick ? 2 : sizeof(rows_all) / sizeof(rows_all[0]);
	const int64_t k = quick ? 128 : 256, n = quick ? 256 : 384;
	uint64_t s = 1;
	int failed = 0, passed = 0;
	for (int K = 1; K <= 8; K++)
		for (int cb = 0; cb < 3; cb++)
			for (size_t ri = 0; ri < nrows; ri++) {
				struct layer l;
				int64_t rows = !quick ? rows_all[ri]
						   : ri ? ((K + cb) % 2 ? 33 : 77) : (K + cb) % 2 ? 3 : 8;
				layer_init(&l, k, n, K, cb, &s);
				float *x = (float *)malloc(rows * l.in * 4);
				float *yc = (float *)malloc(rows * l.out * 4), *yg = (float *)malloc(rows * l.out * 4);
				for (int64_t i = 0; i < rows * l.in; i++)
					x[i] = unit(&s);
				for (int64_t i = 0; i < rows * l.out; i++)
					yg[i] = NAN;
				cpu_forward(&l, x, rows, yc);
				gpu_forward(&l, x, rows, yg);
				double err = 0, scale = 1e-3;
				for (int64_t i = 0; i < rows * l.out; i++) {
					scale = fmax(scale, fabs(yc[i]));
					err = fmax(err, isnan(yg[i]) ? INFINITY : fabs(yg[i] - yc[i]));
				}
				/* GEMV is float throughout; the GEMM rounds xh to fp16. */
				double tol = rows <= TF_EXL3_CUDA_GEMV_ROWS ? 1e-4 : 5e-3;
				if (err / scale > tol) {
					printf("FAIL K=%d cb=%d rows=%lld: rel err %g\n", K, cb,
					       (long long)rows, err / scale);
					failed++;
				} else {
					passed++;
				}
				free(x); free(yc); free(yg);
				free(l.tr); free(l.suh); free(l.svh); free(l.bias);
			}
	printf("%d passed, %d failed\n", passed, failed);
	return failed;
}

/* The peer: y = x · W for fp16 W [k][n], one warp per 32 output columns. */
__global__ static void f16_gemv(const __half *w, const float *x, int64_t k, int64_t n, float *y)
{
	const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= n)
		return;
	float s = 0.0f;
	for (int64_t i = 0; i < k; i++)
		s += x[i] * __half2float(w[i * n + c]);
	y[c] = s;
}

static float time_ms(cudaEvent_t a, cudaEvent_t b)
{
	float ms;
	CHECK(cudaEventSynchronize(b));
	CHECK(cudaEventElapsedTime(&ms, a, b));
	return ms;
}

/*
 * The GEMM (prefill: rows > TF_EXL3_CUDA_GEMV_ROWS) at the expert and
 * attention shapes, 3 and 5 bits (mul1): time, TFLOP/s of its products,
 * and its floor.  A block decodes its tiles once per TF_EXL3_GEMM_ROWS
 * rows, so it reads the trellis that many times over; the floor is the
 * larger of those bytes over the copy bandwidth and the products over
 * the tensor cores' peak, TF_BENCH_TENSOR_TFLOPS (fp16 in, fp32 sums,
 * dense; the H200's 989 unless set).  "of floor": the floor's time over
 * the measured one.
 */
static void bench_gemm(double bw)
{
	static const int64_t shapes[][2] = { { 4096, 1280 }, { 1280, 4096 }, { 4096, 4096 } };
	static const int64_t rows_all[] = { 16, 64, 256, 1024 };
	const char *env = getenv("TF_BENCH_TENSOR_TFLOPS");
	const double peak = (env ? atof(env) : 989.0) * 1e12;
	const int reps = 20;
	cudaEvent_t a, b;
	uint64_t s = 9;

	CHECK(cudaEventCreate(&a));
	CHECK(cudaEventCreate(&b));
	printf("\n| k x n | K | rows | us | TFLOP/s | trellis GB/s | of floor |\n"
	       "|---|---|---|---|---|---|---|\n");
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
		for (int K = 3; K <= 5; K += 2) {
			const int64_t k = shapes[si][0], n = shapes[si][1], rmax = 1024;
			const size_t tb = (size_t)(k * n * K / 8);
			uint16_t *tr, *h = (uint16_t *)malloc(tb);
			float *xh, *yh;
			for (size_t i = 0; i < tb / 2; i++)
				h[i] = (uint16_t)lcg(&s);
			CHECK(cudaMalloc(&tr, tb));
			CHECK(cudaMalloc(&xh, rmax * k * 4));
			CHECK(cudaMalloc(&yh, rmax * n * 4));
			CHECK(cudaMemcpy(tr, h, tb, cudaMemcpyHostToDevice));
			CHECK(cudaMemset(xh, 0, rmax * k * 4));
			for (size_t ri = 0; ri < sizeof(rows_all) / sizeof(rows_all[0]); ri++) {
				const int64_t rows = rows_all[ri];
				const int64_t tiles = (rows + TF_EXL3_GEMM_ROWS - 1) / TF_EXL3_GEMM_ROWS;
				CHECK((cudaError_t)tf_exl3_cuda_gemm(0, tr, k, n, K, 2, xh, rows, yh));
				CHECK(cudaEventRecord(a));
				for (int i = 0; i < reps; i++)
					tf_exl3_cuda_gemm(0, tr, k, n, K, 2, xh, rows, yh);
				CHECK(cudaEventRecord(b));
				const double t = time_ms(a, b) * 1e-3 / reps;
				const double flops = 2.0 * rows * k * n, bytes = (double)tiles * tb;
				const double floor = fmax(bytes / bw, flops / peak);
				printf("| %lldx%lld | %d | %lld | %.1f | %.1f | %.0f | %.0f%% |\n",
				       (long long)k, (long long)n, K, (long long)rows, t * 1e6,
				       flops / t / 1e12, bytes / t / 1e9, floor / t * 100);
			}
			cudaFree(tr);
			cudaFree(xh);
			cudaFree(yh);
			free(h);
		}
}

static void bench(void)
{
	static const int64_t shapes[][2] = { { 4096, 1280 }, { 1280, 4096 }, { 4096, 4096 }, { 8192, 8192 } };
	const size_t bw_bytes = (size_t)1 << 30;
	const int reps = 50;
	cudaEvent_t a, b;
	uint64_t s = 7;

	CHECK(cudaEventCreate(&a));
	CHECK(cudaEventCreate(&b));
	const double bw = tf_bench_copy_bandwidth(bw_bytes);

	printf("\n| k x n | format | G weights/s | GB/s read | of bandwidth | vs fp16 |\n|---|---|---|---|---|---|\n");
	printf("| copy bandwidth | - | - | %.0f | 100%% | - |\n", bw / 1e9);
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		int64_t k = shapes[si][0], n = shapes[si][1];
		float *x, *y;
		__half *w;
		CHECK(cudaMalloc(&x, k * 4));
		CHECK(cudaMalloc(&y, n * 4));
		CHECK(cudaMalloc(&w, k * n * 2));
		CHECK(cudaMemset(x, 0, k * 4));
		CHECK(cudaMemset(w, 0, k * n * 2));
		TF_LAUNCH((unsigned)((n + 255) / 256), 256, 0, 0, f16_gemv)(w, x, k, n, y);
		CHECK(cudaEventRecord(a));
		for (int i = 0; i < reps; i++)
			TF_LAUNCH((unsigned)((n + 255) / 256), 256, 0, 0, f16_gemv)(w, x, k, n, y);
		CHECK(cudaEventRecord(b));
		double f16 = (double)reps * k * n / (time_ms(a, b) * 1e-3);
		printf("| %lldx%lld | fp16 | %.1f | %.0f | %.0f%% | 1.00 |\n", (long long)k, (long long)n,
		       f16 / 1e9, f16 * 2 / 1e9, f16 * 2 / bw * 100);
		cudaFree(w);
		for (int K = 2; K <= 6; K++) {
			size_t tb = (size_t)(k * n * K / 8);
			uint16_t *tr, *h = (uint16_t *)malloc(tb);
			for (size_t i = 0; i < tb / 2; i++)
				h[i] = (uint16_t)lcg(&s);
			CHECK(cudaMalloc(&tr, tb));
			CHECK(cudaMemcpy(tr, h, tb, cudaMemcpyHostToDevice));
			CHECK((cudaError_t)tf_exl3_cuda_gemv(0, tr, k, n, K, 2, x, 1, y));
			CHECK(cudaEventRecord(a));
			for (int i = 0; i < reps; i++)
				tf_exl3_cuda_gemv(0, tr, k, n, K, 2, x, 1, y);
			CHECK(cudaEventRecord(b));
			double wps = (double)reps * k * n / (time_ms(a, b) * 1e-3);
			printf("| %lldx%lld | exl3 K=%d mul1 | %.1f | %.0f | %.0f%% | %.2f |\n",
			       (long long)k, (long long)n, K, wps / 1e9, wps * K / 8 / 1e9,
			       wps * K / 8 / bw * 100, wps / f16);
			cudaFree(tr);
			free(h);
		}
		cudaFree(x);
		cudaFree(y);
	}
	bench_gemm(bw);
}

int main(int argc, char **argv)
{
	const bool check_only = argc > 1 && !strcmp(argv[1], "--check");
	const bool quick = check_only && argc > 2 && !strcmp(argv[2], "--quick");
	cudaDeviceProp prop;
	int dev = 0;
	if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
		fprintf(stderr, "gpu_check: no CUDA device\n");
		return 2;
	}
	CHECK(cudaGetDeviceProperties(&prop, 0));
	printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
	int failed = check_all(quick);
	if (!check_only)
		bench();
	return failed ? 1 : 0;
}
