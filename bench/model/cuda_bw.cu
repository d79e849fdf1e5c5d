/*
 * cuda_bw.cu - the device's memory bandwidth, the ceiling of a decode step
 * on backend-cuda that streams every active weight once.
 *
 *     cuda_bw [MiB]          (default 1024 MiB)
 *
 * Prints the device and the bytes read + written per second of
 * device-to-device copies (bench/cuda_bench.h), the figure the kernel
 * benchmarks set themselves against:
 *
 *     device NVIDIA H200 (sm_90) copy GB/s 4100.0
 */
#include "../cuda_bench.h"

int main(int argc, char **argv)
{
	const long mib = argc > 1 ? atol(argv[1]) : 1024;
	if (mib <= 0) {
		fprintf(stderr, "usage: cuda_bw [MiB]\n");
		return 2;
	}
	int dev;
	cudaDeviceProp prop;
	CHECK(cudaGetDevice(&dev));
	CHECK(cudaGetDeviceProperties(&prop, dev));
	const double bw = tf_bench_copy_bandwidth((size_t)mib << 20);
	printf("device %s (sm_%d%d) copy GB/s %.1f\n", prop.name, prop.major, prop.minor, bw / 1e9);
	return 0;
}
