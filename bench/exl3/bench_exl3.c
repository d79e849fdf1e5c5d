/*
 * bench_exl3.c - one-row (decode) throughput of the EXL3 linear against the
 * plain fp16 linear and this machine's read bandwidth, measured in the same
 * run (bench/exl3/README.md discusses the figures).
 *
 *     bench_exl3 [threads ...]            default: 1 2
 *     bench_exl3 rows [threads ...]       the rows table alone
 *     bench_exl3 kernels [threads ...]    the integer kernels' table alone
 *     bench_exl3 gemm [threads ...]       the integer kernels on a prefill chunk
 *
 * Layers go through exl3.so and backend-cpu.so exactly as the runtime
 * drives them (input/output Hadamards included): "exl3" (float
 * activations), "exl3-int" and "exl3-q8" (15-bit and 8-bit integer
 * activations, the best kernel this CPU runs) on the same MUL1 weights.  A second table times each
 * integer-activation kernel alone, forced, over the same tile columns.
 * The same kernels on a prefill chunk's rows (gemm) show what decoding a
 * strip once for all the rows buys.  Each configuration cycles through
 * enough copies of the layer to exceed the last-level cache, so weights
 * stream from memory as in a real decode.
 * A last table times forwards of several rows (a verify, a batch, a
 * prefill chunk) against one row.  Every figure is the median of REPEATS
 * timings.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "matmul_int.h"
#include "support/testhost.h"
#include "vec.h"

#define WORKING_SET (192u << 20)        /* bytes of weights cycled through */
#define BW_BYTES (512u << 20)           /* array read for the bandwidth ceiling */
#define MIN_SECONDS 0.1            /* per timing */
#define REPEATS 5

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

/* exl3.so's quant descriptor `name` (the testhost opens by match score,
 * which never picks "exl3-int"). */
static const tf_plugin_quant *quant_named(const char *name)
{
	void *so = dlopen(TF_PLUGIN_DIR "/exl3.so", RTLD_NOW | RTLD_LOCAL);
	const tf_plugin_quant *(*entry)(unsigned) =
		so ? (const tf_plugin_quant *(*)(unsigned))dlsym(so, "tf_plugin_quant_v1") : NULL;

	for (unsigned i = 0; entry && entry(i); i++)
		if (!strcmp(entry(i)->hdr.name, name))
			return entry(i);
	fprintf(stderr, "bench_exl3: exl3.so has no quant \"%s\"\n", name);
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Weights times rows per second of forwards of `rows` rows over a
 * cache-busting set, opened through quant `name` ("plain" for K = 0);
 * median of REPEATS. */
static double run(int threads, int64_t k, int64_t n, int K, const char *name, int rows)
{
	size_t bytes = K ? (size_t)(k * n * K / 8) : (size_t)(k * n * 2);
	int copies = (int)(WORKING_SET / bytes) + 1;
	tf_testhost *th = tf_testhost_new(NULL, threads);
	const tf_host *h = tf_testhost_host(th);
	const tf_plugin_quant *q = quant_named(name);
	tf_lin *lin = calloc((size_t)copies, sizeof(*lin));
	float *x = calloc((size_t)(k * rows), sizeof(float));
	float *y = calloc((size_t)(n * rows), sizeof(float));
	double rate[REPEATS];
	char pre[32];
	long calls = 0;

	add_layers(th, copies, k, n, K);
	for (int c = 0; c < copies; c++) {
		snprintf(pre, sizeof(pre), "l%d", c);
		lin[c].ops = q;
		if (q->open(h, pre, k, n, &lin[c].impl, &lin[c].info)) {
			fprintf(stderr, "bench_exl3: %s\n", tf_testhost_last_error(th));
			exit(1);
		}
	}
	for (int64_t i = 0; i < k * rows; i++)
		x[i] = (float)(i % 7) - 3.0f + (float)(i / k) * 0.25f;
	for (int c = 0; c < copies; c++)          /* warm: page in, spin up */
		tf_lin_forward(&lin[c], x, rows, y);
	for (int rep = 0; rep < REPEATS; rep++) {
		long start = calls;
		double t0 = now(), t;
		do {
			tf_lin_forward(&lin[calls % copies], x, rows, y);
			calls++;
			t = now() - t0;
		} while (t < MIN_SECONDS || calls - start < copies);
		rate[rep] = (double)(calls - start) * (double)(k * n * rows) / t;
	}
	for (int c = 0; c < copies; c++)
		q->close(lin[c].impl);
	free(lin);
	free(x);
	free(y);
	tf_testhost_free(th);
	qsort(rate, REPEATS, sizeof(double), cmp_double);
	return rate[REPEATS / 2];
}

struct kern_job {
	const tf_exl3_mat *m;
	const tf_exl3_qx *q;
	float *yh;
	tf_exl3_ipath path;
};

static void kern_cols(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct kern_job *j = arg;
	tf_exl3_mat_mul_int(j->m, j->q, j->yh, begin, end, j->path);
}

/* One integer-activation kernel alone (no Hadamards, no quantization) on
 * `rows` rows, split by tile columns as the plugin splits them: row-weights
 * a second, median of REPEATS. */
static double run_kernel(int threads, int64_t k, int64_t n, int K, tf_exl3_ipath path,
			 int qmax, int64_t rows)
{
	const size_t words = (size_t)(k * n * K / 16);
	const int copies = (int)(WORKING_SET / (words * 2)) + 1;
	tf_testhost *th = tf_testhost_new(NULL, threads);
	const tf_host *h = tf_testhost_host(th);
	uint16_t *tr = malloc(words * 2 * (size_t)copies);
	float *x = malloc(sizeof(float) * (size_t)k);
	float *yh = malloc(sizeof(float) * (size_t)(n * rows));
	tf_exl3_mat *m = malloc(sizeof(*m) * (size_t)copies);
	tf_exl3_qx q;
	double rate[REPEATS];
	uint64_t seed = 9;
	long calls = 0;

	if (!tr || !x || !yh || !m || tf_exl3_qx_init(&q, k, rows, qmax)) {
		fprintf(stderr, "bench_exl3: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < words * (size_t)copies; i++)
		tr[i] = (uint16_t)lcg(&seed);
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t i = 0; i < k; i++)
			x[i] = (float)((i + r) % 7) - 3.0f;
		tf_exl3_qx_set(&q, r, x);
	}
	for (int c = 0; c < copies; c++)
		if (tf_exl3_mat_init(&m[c], tr + words * (size_t)c, k, n, K, TF_EXL3_CB_MUL1)) {
			fprintf(stderr, "bench_exl3: out of memory\n");
			exit(1);
		}
	free(tr);
	struct kern_job job = { .q = &q, .yh = yh, .path = path };
	for (int rep = 0; rep < REPEATS; rep++) {
		long start = calls;
		double t0 = now(), t;
		do {
			job.m = &m[calls % copies];
			h->backend->parallel_for(h->backend_ctx, n / TF_EXL3_TILE, 8, kern_cols, &job);
			calls++;
			t = now() - t0;
		} while (t < MIN_SECONDS || calls - start < copies);
		rate[rep] = (double)(calls - start) * (double)(k * n * rows) / t;
	}
	tf_exl3_qx_free(&q);
	for (int c = 0; c < copies; c++)
		tf_exl3_mat_free(&m[c]);
	free(x);
	free(yh);
	free(m);
	tf_testhost_free(th);
	qsort(rate, REPEATS, sizeof(double), cmp_double);
	return rate[REPEATS / 2];
}

/*
 * Rows that pay: S rows in one forward against one row, as row-weights per
 * second.  A forward that reads (or decodes) each weight once for its rows
 * approaches S times the one-row rate until the rows' arithmetic bounds
 * it; S one-row forwards stay at 1.
 */
static void rows_table(const int *threads, int n_threads)
{
	static const int counts[] = { 1, 2, 4, 8, 9, 16, 64, 512 };
	static const char *const names[] = { "exl3", "exl3-int", "exl3-q8" };
	const int64_t k = 4096, n = 1280;

	printf("\nRows in one forward, %lldx%lld: G row-weights/s, and that over one "
	       "row's:\n\n| threads | format |", (long long)k, (long long)n);
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		printf(" %d |", counts[c]);
	printf("\n|---|---|");
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		printf("---|");
	printf("\n");
	for (int ti = 0; ti < n_threads; ti++)
		for (int f = -1; f < 3; f++)
			for (int K = 3; K <= (f < 0 ? 3 : 4); K++) {
				const char *name = f < 0 ? "plain" : names[f];
				double one = 0;
				if (f < 0)
					printf("| %d | fp16 |", threads[ti]);
				else
					printf("| %d | %s K=%d mul1 |", threads[ti], name, K);
				for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
					double w = run(threads[ti], k, n, f < 0 ? 0 : K, name, counts[c]);
					if (c == 0)
						one = w;
					printf(" %.2f (%.2fx) |", w / 1e9, w / one);
				}
				printf("\n");
				fflush(stdout);
			}
}

/* The layer shapes of the one-row tables: k x n. */
static const int64_t shapes[][2] = { { 4096, 1280 }, { 1280, 4096 }, { 4096, 4096 } };

/* Each integer-activation kernel alone, forced, one row, both precisions. */
static void kernels_table(const int *threads, int n_threads)
{
	printf("Integer-activation kernels alone (G weights/s, MUL1, one row), with "
	       "15-bit and 8-bit activations:\n\n");
	printf("| threads | k x n | K |");
	for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++)
		if (tf_exl3_ipath_supported((tf_exl3_ipath)p))
			printf(" %s i15 | %s i8 |", tf_exl3_ipath_name((tf_exl3_ipath)p),
			       tf_exl3_ipath_name((tf_exl3_ipath)p));
	printf("\n|---|---|---|");
	for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++)
		if (tf_exl3_ipath_supported((tf_exl3_ipath)p))
			printf("---|---|");
	printf("\n");
	for (int ti = 0; ti < n_threads; ti++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (int K = 3; K <= 6; K++) {
				printf("| %d | %lldx%lld | %d |", threads[ti], (long long)shapes[s][0],
				       (long long)shapes[s][1], K);
				for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++)
					for (int b = 0; b < 2 && tf_exl3_ipath_supported((tf_exl3_ipath)p); b++)
						printf(" %.2f |", run_kernel(threads[ti], shapes[s][0],
									     shapes[s][1], K, (tf_exl3_ipath)p,
									     b ? TF_EXL3_QMAX_I8 :
									     TF_EXL3_QMAX_I15, 1) / 1e9);
				printf("\n");
				fflush(stdout);
			}
}

/* The kernels that take many rows against those that take a few, forced,
 * on GEMM_CHUNK rows with 15-bit activations. */
#define GEMM_CHUNK 64
static void gemm_table(const int *threads, int n_threads)
{
	printf("Integer-activation kernels on %d rows (G row-weights/s, MUL1, 15-bit):\n\n"
	       "| threads | k x n | K |", GEMM_CHUNK);
	for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++)
		if (tf_exl3_ipath_supported((tf_exl3_ipath)p))
			printf(" %s |", tf_exl3_ipath_name((tf_exl3_ipath)p));
	printf("\n|---|---|---|");
	for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++)
		if (tf_exl3_ipath_supported((tf_exl3_ipath)p))
			printf("---|");
	printf("\n");
	for (int ti = 0; ti < n_threads; ti++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (int K = 3; K <= 6; K += 3) {
				printf("| %d | %lldx%lld | %d |", threads[ti], (long long)shapes[s][0],
				       (long long)shapes[s][1], K);
				for (int p = TF_EXL3_IPATH_VEC; p < TF_EXL3_IPATH_COUNT; p++)
					if (tf_exl3_ipath_supported((tf_exl3_ipath)p))
						printf(" %.2f |",
						       run_kernel(threads[ti], shapes[s][0], shapes[s][1],
								  K, (tf_exl3_ipath)p, TF_EXL3_QMAX_I15,
								  GEMM_CHUNK) / 1e9);
				printf("\n");
				fflush(stdout);
			}
}

int main(int argc, char **argv)
{
	const int rows_only = argc > 1 && !strcmp(argv[1], "rows");
	const int kernels_only = argc > 1 && !strcmp(argv[1], "kernels");
	const int gemm_only = argc > 1 && !strcmp(argv[1], "gemm");
	const int first = 1 + rows_only + kernels_only + gemm_only;
	int threads[8] = { 1, 2 }, n_threads = 2;

	if (argc > first) {
		n_threads = 0;
		for (int i = first; i < argc && n_threads < 8; i++)
			threads[n_threads++] = atoi(argv[i]);
	}
	if (rows_only) {
		rows_table(threads, n_threads);
		return 0;
	}
	if (kernels_only) {
		kernels_table(threads, n_threads);
		return 0;
	}
	if (gemm_only) {
		gemm_table(threads, n_threads);
		return 0;
	}
	printf("exl3-int kernel here: %s\n\n", tf_exl3_ipath_name(tf_exl3_ipath_best()));
	printf("| threads | k x n | format | G weights/s | GB/s read | of bandwidth | vs fp16 |\n");
	printf("|---|---|---|---|---|---|---|\n");
	for (int ti = 0; ti < n_threads; ti++) {
		tf_testhost *th = tf_testhost_new(NULL, threads[ti]);
		double bw = bandwidth(tf_testhost_host(th));
		tf_testhost_free(th);
		printf("| %d | read bandwidth | - | - | %.1f | 100%% | - |\n", threads[ti], bw / 1e9);
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			int64_t k = shapes[s][0], n = shapes[s][1];
			double f16 = run(threads[ti], k, n, 0, "plain", 1);
			printf("| %d | %lldx%lld | fp16 | %.2f | %.1f | %.0f%% | 1.00 |\n", threads[ti],
			       (long long)k, (long long)n, f16 / 1e9, f16 * 2 / 1e9, f16 * 2 / bw * 100);
			for (int K = 2; K <= 6; K++)
				for (int d = 0; d < 3; d++) {
					static const char *const names[] = { "exl3", "exl3-int", "exl3-q8" };
					const char *name = names[d];
					double w = run(threads[ti], k, n, K, name, 1);
					double gbs = w * K / 8;
					printf("| %d | %lldx%lld | %s K=%d mul1 | %.2f | %.1f | %.0f%% | %.2f |\n",
					       threads[ti], (long long)k, (long long)n, name, K, w / 1e9,
					       gbs / 1e9, gbs / bw * 100, w / f16);
				}
		}
	}

	printf("\n");
	kernels_table(threads, n_threads);
	rows_table(threads, n_threads);
	return 0;
}
