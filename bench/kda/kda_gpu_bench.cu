/*
 * kda_gpu_bench.cu - plugins/kda-cuda's delta-rule kernels timed on a GPU
 * at Ling-3.x Flash's KDA shape (64 heads of 128 x 128), beside the
 * device-to-device copy bandwidth measured in the same run.
 *
 *     kda_gpu_bench [--quick]
 *
 * decode: the recurrent kernel stepping one token of each of B sequences.
 * Its floor is reading and writing every state once (B x 64 x 64 KiB each
 * way), so the table gives the state traffic in GB/s and as a share of the
 * copy bandwidth.  prefill: one sequence of T tokens through the chunked
 * and the recurrent kernel, tokens per second and their ratio.  Each
 * figure is the median of 5 timings of `reps` launches.  --quick: small
 * sizes, one timing (to run the program itself on the SIMT harness).
 * scripts/gpu-check.sh runs it on a machine with a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_bench.h"
#include "kda_cuda.h"

enum { HEADS = 64, DIM = 128 };

static int timings = 5;

/* n floats on the device, uniform in [shift - scale, shift + scale]. */
static float *dev_fill(size_t n, float scale, float shift, uint64_t *s)
{
	float *h = (float *)malloc(n * sizeof(float)), *d;
	if (!h)
		exit(2);
	for (size_t i = 0; i < n; i++)
		h[i] = scale * unit(s) + shift;
	CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
	CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* Activations of `rows` rows and `n_seg` zeroed states, rows split evenly. */
struct run {
	tf_kda_cuda_io io;
	tf_kda_cuda_seg *seg;
	float *S;
	int n_seg;
};

static void run_init(struct run *r, int64_t rows, int n_seg, uint64_t *s)
{
	const size_t n = (size_t)rows * HEADS * DIM, ns = (size_t)n_seg * HEADS * DIM * DIM;
	float *o;
	CHECK(cudaMalloc((void **)&o, n * sizeof(float)));
	CHECK(cudaMalloc((void **)&r->S, ns * sizeof(float)));
	CHECK(cudaMemset(r->S, 0, ns * sizeof(float)));
	r->io = (tf_kda_cuda_io){ dev_fill(n, 0.15f, 0.0f, s), dev_fill(n, 0.15f, 0.0f, s),
				  dev_fill(n, 0.1f, -0.15f, s), dev_fill(n, 1.0f, 0.0f, s),
				  dev_fill((size_t)rows * HEADS, 0.2f, 0.5f, s), o,
				  HEADS * DIM, HEADS * DIM, HEADS };
	tf_kda_cuda_seg *h = (tf_kda_cuda_seg *)malloc(n_seg * sizeof(*h));
	if (!h)
		exit(2);
	for (int i = 0; i < n_seg; i++)
		h[i] = (tf_kda_cuda_seg){ i * (rows / n_seg), rows / n_seg,
					  r->S + (size_t)i * HEADS * DIM * DIM, NULL };
	CHECK(cudaMalloc((void **)&r->seg, n_seg * sizeof(*h)));
	CHECK(cudaMemcpy(r->seg, h, n_seg * sizeof(*h), cudaMemcpyHostToDevice));
	free(h);
	r->n_seg = n_seg;
}

static void run_free(struct run *r)
{
	cudaFree((void *)r->io.q);
	cudaFree((void *)r->io.k);
	cudaFree((void *)r->io.g);
	cudaFree((void *)r->io.v);
	cudaFree((void *)r->io.beta);
	cudaFree(r->io.o);
	cudaFree(r->S);
	cudaFree(r->seg);
}

/* One launch of the chunked or the recurrent kernel over a run. */
struct launch {
	const struct run *r;
	bool chunked;
};

static void launch_once(const void *arg)
{
	const struct launch *l = (const struct launch *)arg;
	const struct run *r = l->r;
	CHECK(l->chunked ? tf_kda_cuda_chunked(0, &r->io, r->seg, r->n_seg, HEADS, DIM, DIM)
			 : tf_kda_cuda_recurrent(0, &r->io, r->seg, r->n_seg, HEADS, DIM, DIM));
}

/* Median seconds of one launch of the chunked or the recurrent kernel. */
static double time_launch(const struct run *r, bool chunked, int reps)
{
	struct launch l = { r, chunked };
	return tf_bench_median(launch_once, &l, reps, timings);
}

int main(int argc, char **argv)
{
	const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	static const int batches[] = { 1, 8, 32, 64 };
	const int n_batch = quick ? 1 : 4, reps = quick ? 1 : 20;
	const int64_t T = quick ? 40 : 4096;
	cudaDeviceProp prop;
	uint64_t s = 11;
	int dev = 0;
	if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
		fprintf(stderr, "kda_gpu_bench: no CUDA device\n");
		return 2;
	}
	if (quick)
		timings = 1;
	CHECK(cudaGetDeviceProperties(&prop, 0));
	const double bw = tf_bench_copy_bandwidth(quick ? (size_t)1 << 20 : (size_t)1 << 30);
	printf("device: %s (sm_%d%d); copy bandwidth %.0f GB/s; %d heads of %d x %d\n", prop.name,
	       prop.major, prop.minor, bw / 1e9, HEADS, DIM, DIM);

	printf("\n| decode, sequences | us per step | state GB/s | of copy bandwidth |\n|---|---|---|---|\n");
	for (int i = 0; i < n_batch; i++) {
		struct run r;
		run_init(&r, batches[i], batches[i], &s);
		double t = time_launch(&r, false, reps);
		double bytes = 2.0 * batches[i] * HEADS * DIM * DIM * sizeof(float);
		printf("| %d | %.1f | %.0f | %.0f%% |\n", batches[i], t * 1e6, bytes / t / 1e9,
		       bytes / t / bw * 100);
		run_free(&r);
	}

	struct run r;
	run_init(&r, T, 1, &s);
	double tc = time_launch(&r, true, quick ? 1 : 3), tr = time_launch(&r, false, quick ? 1 : 3);
	printf("\n| prefill, %lld tokens | tokens/s | vs recurrent |\n|---|---|---|\n", (long long)T);
	printf("| chunked | %.0f | %.2f |\n| recurrent | %.0f | 1.00 |\n", T / tc, tr / tc, T / tr);
	run_free(&r);
	return 0;
}
