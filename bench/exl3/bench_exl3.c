/*
 * bench_exl3.c - one-row (decode) throughput of the EXL3 linear against the
 * plain fp16 linear and this machine's read bandwidth, measured in the same
 * run (bench/exl3/README.md discusses the figures).
 *
 *     bench_exl3 [threads ...]            default: 1 2
 *
 * Layers go through exl3.so and backend-cpu.so exactly as the runtime
 * drives them (input/output Hadamards included).  Each configuration
 * cycles through enough copies of the layer to exceed the last-level cache,
 * so weights stream from memory as in a real decode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/testhost.h"
#include "vec.h"

#define WORKING_SET (192u << 20)        /* bytes of weights cycled through */
#define BW_BYTES (512u << 20)           /* array read for the bandwidth ceiling */
#define MIN_SECONDS 0.3

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct bw_job {
	const float *a;
	double sum[64];
};

/* Sum 1024-float blocks with four vector accumulators: load-bound. */
static void bw_range(void *arg, int64_t begin, int64_t end, int worker)
{
	struct bw_job *j = arg;
	tf_vf s[4] = { tf_vf_zero(), tf_vf_zero(), tf_vf_zero(), tf_vf_zero() };
	for (int64_t i = begin * 1024; i < end * 1024; i += 4 * TF_VL)
		for (int u = 0; u < 4; u++)
			s[u] = tf_vf_add(s[u], tf_vf_load(j->a + i + u * TF_VL));
	j->sum[worker & 63] += tf_vf_sum(tf_vf_add(tf_vf_add(s[0], s[1]), tf_vf_add(s[2], s[3])));
}

/* Read bandwidth through the backend's own thread pool, best of 3. */
static double bandwidth(const tf_host *h)
{
	size_t n = BW_BYTES / sizeof(float);
	float *a = malloc(BW_BYTES);
	struct bw_job job = { .a = a };
	double best = 0;
	for (size_t i = 0; i < n; i++)
		a[i] = (float)(i & 7);
	for (int rep = 0; rep < 3; rep++) {
		double t = now();
		h->backend->parallel_for(h->backend_ctx, (int64_t)(n / 1024), 256, bw_range, &job);
		t = now() - t;
		if (BW_BYTES / t > best)
			best = BW_BYTES / t;
	}
	free(a);
	return best;
}

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 16;
}

/* Add `copies` layers "l<c>" of k x n: EXL3 at K bits (MUL1), or fp16
 * `.weight` when K is 0. */
static void add_layers(tf_testhost *th, int copies, int64_t k, int64_t n, int K)
{
	uint64_t seed = 42;
	size_t words = K ? (size_t)(k * n * K / 16) : (size_t)(k * n);
	uint16_t *d = malloc(words * 2);
	float *v = malloc(sizeof(float) * (size_t)(k > n ? k : n));
	char name[64];
	int32_t marker = -2082680531;
	for (size_t i = 0; i < words; i++)
		d[i] = K ? (uint16_t)lcg(&seed) : tf_f32_to_f16((float)((int)(lcg(&seed) % 2001) - 1000) / 1e4f);
	for (int64_t i = 0; i < (k > n ? k : n); i++)
		v[i] = (lcg(&seed) & 1) ? 0.01f : -0.01f;
	for (int c = 0; c < copies; c++) {
		if (K) {
			int64_t ts[3] = { k / 16, n / 16, 16 * K };
			snprintf(name, sizeof(name), "l%d.trellis", c);
			tf_testhost_add_tensor(th, name, TF_DTYPE_I16, 3, ts, d);
			snprintf(name, sizeof(name), "l%d.suh", c);
			tf_testhost_add_f32(th, name, TF_DTYPE_F16, 1, &k, v);
			snprintf(name, sizeof(name), "l%d.svh", c);
			tf_testhost_add_f32(th, name, TF_DTYPE_F16, 1, &n, v);
			snprintf(name, sizeof(name), "l%d.mul1", c);
			tf_testhost_add_tensor(th, name, TF_DTYPE_I32, 0, NULL, &marker);
		} else {
			int64_t ws[2] = { n, k };
			snprintf(name, sizeof(name), "l%d.weight", c);
			tf_testhost_add_tensor(th, name, TF_DTYPE_F16, 2, ws, d);
		}
	}
	free(d);
	free(v);
}

/* Weights per second of one-row forwards over a cache-busting set. */
static double run(int threads, int64_t k, int64_t n, int K, size_t *bytes_per_call)
{
	size_t bytes = K ? (size_t)(k * n * K / 8) : (size_t)(k * n * 2);
	int copies = (int)(WORKING_SET / bytes) + 1;
	tf_testhost *th = tf_testhost_new(NULL, threads);
	const tf_host *h = tf_testhost_host(th);
	tf_lin *lin = calloc((size_t)copies, sizeof(*lin));
	float *x = calloc((size_t)k, sizeof(float)), *y = calloc((size_t)n, sizeof(float));
	char name[32];
	long calls = 0;

	add_layers(th, copies, k, n, K);
	for (int c = 0; c < copies; c++) {
		snprintf(name, sizeof(name), "l%d", c);
		if (h->lin_open(h, name, k, n, &lin[c])) {
			fprintf(stderr, "bench_exl3: %s\n", tf_testhost_last_error(th));
			exit(1);
		}
	}
	for (int64_t i = 0; i < k; i++)
		x[i] = (float)(i % 7) - 3.0f;
	for (int c = 0; c < copies; c++)          /* warm: page in, spin up */
		tf_lin_forward(&lin[c], x, 1, y);
	double t0 = now(), t;
	do {
		tf_lin_forward(&lin[calls % copies], x, 1, y);
		calls++;
		t = now() - t0;
	} while (t < MIN_SECONDS || calls < copies);
	for (int c = 0; c < copies; c++)
		h->lin_close(h, &lin[c]);
	free(lin);
	free(x);
	free(y);
	tf_testhost_free(th);
	*bytes_per_call = bytes;
	return (double)calls * (double)(k * n) / t;
}

int main(int argc, char **argv)
{
	static const int64_t shapes[][2] = { { 4096, 1280 }, { 1280, 4096 }, { 4096, 4096 } };
	int threads[8] = { 1, 2 }, n_threads = 2;

	if (argc > 1) {
		n_threads = 0;
		for (int i = 1; i < argc && n_threads < 8; i++)
			threads[n_threads++] = atoi(argv[i]);
	}
	printf("| threads | k x n | format | G weights/s | GB/s read | of bandwidth | vs fp16 |\n");
	printf("|---|---|---|---|---|---|---|\n");
	for (int ti = 0; ti < n_threads; ti++) {
		tf_testhost *th = tf_testhost_new(NULL, threads[ti]);
		double bw = bandwidth(tf_testhost_host(th));
		tf_testhost_free(th);
		printf("| %d | read bandwidth | - | - | %.1f | 100%% | - |\n", threads[ti], bw / 1e9);
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			int64_t k = shapes[s][0], n = shapes[s][1];
			size_t bytes;
			double f16 = run(threads[ti], k, n, 0, &bytes);
			printf("| %d | %lldx%lld | fp16 | %.2f | %.1f | %.0f%% | 1.00 |\n", threads[ti],
			       (long long)k, (long long)n, f16 / 1e9, f16 * 2 / 1e9, f16 * 2 / bw * 100);
			for (int K = 2; K <= 6; K++) {
				double w = run(threads[ti], k, n, K, &bytes);
				double gbs = w * K / 8;
				printf("| %d | %lldx%lld | exl3 K=%d mul1 | %.2f | %.1f | %.0f%% | %.2f |\n",
				       threads[ti], (long long)k, (long long)n, K, w / 1e9, gbs / 1e9,
				       gbs / bw * 100, w / f16);
			}
		}
	}
	return 0;
}
