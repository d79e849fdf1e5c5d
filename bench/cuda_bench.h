/*
 * cuda_bench.h - what the GPU benchmark programs (bench/exl3/gpu_check.cu,
 * bench/kda/kda_gpu_bench.cu, bench/moe/moe_gpu_bench.cu) share: CHECK,
 * which exits 2 naming a failed CUDA call; a small LCG for their random
 * data; the device-to-device copy bandwidth they set their kernels
 * against, measured in the same run; and a median timer.
 */
#ifndef TF_BENCH_CUDA_BENCH_H
#define TF_BENCH_CUDA_BENCH_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                  \
	do {                                                                         \
		cudaError_t e_ = (cudaError_t)(call);                                \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,          \
				cudaGetErrorString(e_));                             \
			exit(2);                                                     \
		}                                                                    \
	} while (0)

static inline uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 16;
}

/* Uniform in [-1, 1], in steps of 1e-3. */
static inline float unit(uint64_t *s) { return (float)((int)(lcg(s) % 2001) - 1000) / 1000.0f; }

/* Bytes read + written per second by 5 device-to-device copies of `bytes`. */
static inline double tf_bench_copy_bandwidth(size_t bytes)
{
	cudaEvent_t a, b;
	void *p, *q;
	float ms;
	CHECK(cudaEventCreate(&a));
	CHECK(cudaEventCreate(&b));
	CHECK(cudaMalloc(&p, bytes));
	CHECK(cudaMalloc(&q, bytes));
	CHECK(cudaMemcpy(q, p, bytes, cudaMemcpyDeviceToDevice));
	CHECK(cudaEventRecord(a));
	for (int i = 0; i < 5; i++)
		CHECK(cudaMemcpy(q, p, bytes, cudaMemcpyDeviceToDevice));
	CHECK(cudaEventRecord(b));
	CHECK(cudaEventSynchronize(b));
	CHECK(cudaEventElapsedTime(&ms, a, b));
	cudaFree(p);
	cudaFree(q);
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return 2.0 * 5 * bytes / (ms * 1e-3);
}

static inline int tf_bench_cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Seconds per call of fn(arg): the median of `timings` (1 .. 5) timings of
 * `reps` calls each, on the default stream. */
static inline double tf_bench_median(void (*fn)(const void *), const void *arg, int reps,
				     int timings)
{
	cudaEvent_t a, b;
	float ms[5];
	CHECK(cudaEventCreate(&a));
	CHECK(cudaEventCreate(&b));
	for (int t = 0; t < timings; t++) {
		CHECK(cudaEventRecord(a));
		for (int i = 0; i < reps; i++)
			fn(arg);
		CHECK(cudaEventRecord(b));
		CHECK(cudaEventSynchronize(b));
		CHECK(cudaEventElapsedTime(&ms[t], a, b));
	}
	qsort(ms, timings, sizeof(float), tf_bench_cmp_float);
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return ms[timings / 2] * 1e-3 / reps;
}

#endif /* TF_BENCH_CUDA_BENCH_H */
