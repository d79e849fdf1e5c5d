/*
 * test_kda_cuda.c - the CUDA delta-rule kernels (plugins/kda-cuda) against
 * the plain CPU step (plugins/kda/delta.c's kda_delta_ref): a batch of
 * ragged segments and several heads per launch, random states and inputs,
 * outputs poisoned with NaN first.  Built on the SIMT harness
 * (test_kda_cuda_sim) and, for a GPU, on the CUDA runtime
 * (test_kda_cuda_gpu, run by scripts/gpu-check.sh).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/kda/delta.h"
#include "kda_cuda.h"
#include "support/testhost.h"

/* Max |err| / max |ref|.  Both kernels stay within 6e-7 of the fp32 plain
 * step here (their sums run in another order; with one row group the
 * recurrent kernel's order is the step's own, and it is exact); a wrong
 * index or a missed decay costs 1e-2 or more. */
#define KDA_CUDA_TOL 5e-6

enum kernel { RECURRENT, CHUNKED };

/* A batch on the host: rows of every segment, then the heads' states. */
struct batch {
	int heads, K, V, n_seg;
	int64_t rows, ldk, ldv, ldb, seg_n[8];
	float *q, *k, *g, *v, *beta, *o, *S;
};

static float *alloc_f(size_t n)
{
	float *p = malloc(n * sizeof(float));
	cr_assert(p);
	return p;
}

/* L2-normed q (scaled by K^-1/2) and k, gates uniform in [glo, ghi], beta
 * in [0, 1], states in [-0.3, 0.3]; row strides padded past the heads so
 * a stride mixed up with a width shows. */
static void batch_init(struct batch *b, int heads, int K, int V, const int64_t *seg_n,
		       int n_seg, float glo, float ghi, uint64_t seed)
{
	memset(b, 0, sizeof(*b));
	cr_assert(n_seg <= 8);
	b->heads = heads;
	b->K = K;
	b->V = V;
	b->n_seg = n_seg;
	for (int s = 0; s < n_seg; s++)
		b->rows += b->seg_n[s] = seg_n[s];
	b->ldk = (int64_t)heads * K + 3;
	b->ldv = (int64_t)heads * V + 5;
	b->ldb = heads + 1;
	size_t nk = (size_t)b->rows * b->ldk, nv = (size_t)b->rows * b->ldv;
	b->q = alloc_f(nk + 1);
	b->k = alloc_f(nk + 1);
	b->g = alloc_f(nk + 1);
	b->v = alloc_f(nv + 1);
	b->o = alloc_f(nv + 1);
	b->beta = alloc_f((size_t)b->rows * b->ldb + 1);
	b->S = alloc_f((size_t)n_seg * heads * K * V);
	tf_test_fill_uniform(b->q, nk, 1.0f, &seed);
	tf_test_fill_uniform(b->k, nk, 1.0f, &seed);
	tf_test_fill_uniform(b->g, nk, 0.5f, &seed);
	tf_test_fill_uniform(b->v, nv, 1.0f, &seed);
	tf_test_fill_uniform(b->beta, (size_t)b->rows * b->ldb, 0.5f, &seed);
	tf_test_fill_uniform(b->S, (size_t)n_seg * heads * K * V, 0.3f, &seed);
	for (int64_t r = 0; r < b->rows; r++) {
		for (int h = 0; h < heads; h++) {
			float *q = b->q + r * b->ldk + h * K, *k = b->k + r * b->ldk + h * K;
			float *g = b->g + r * b->ldk + h * K;
			float qs = 0.0f, ks = 0.0f;
			for (int i = 0; i < K; i++) {
				qs += q[i] * q[i];
				ks += k[i] * k[i];
			}
			for (int i = 0; i < K; i++) {
				q[i] /= sqrtf(qs) * sqrtf((float)K);
				k[i] /= sqrtf(ks);
				g[i] = glo + (ghi - glo) * (g[i] + 0.5f);
			}
			b->beta[r * b->ldb + h] += 0.5f;
		}
	}
}

static void batch_free(struct batch *b)
{
	free(b->q);
	free(b->k);
	free(b->g);
	free(b->v);
	free(b->o);
	free(b->beta);
	free(b->S);
}

/* The plain step over every (segment, head), on gathered dense copies
 * (kda_head_io has one stride for q and v); o and S updated in place. */
static void batch_reference(struct batch *b)
{
	const int K = b->K, V = b->V, W = K > V ? K : V;
	int64_t row0 = 0;
	for (int s = 0; s < b->n_seg; row0 += b->seg_n[s], s++) {
		const int64_t n = b->seg_n[s];
		float *d = alloc_f((size_t)(5 * n + 1) * W), *beta = alloc_f((size_t)n + 1);
		float *q = d, *k = d + n * W, *g = d + 2 * n * W, *v = d + 3 * n * W;
		float *o = d + 4 * n * W;
		for (int h = 0; h < b->heads; h++) {
			for (int64_t t = 0; t < n; t++) {
				const int64_t rk = (row0 + t) * b->ldk + h * K;
				const int64_t rv = (row0 + t) * b->ldv + h * V;
				memcpy(q + t * W, b->q + rk, K * sizeof(float));
				memcpy(k + t * W, b->k + rk, K * sizeof(float));
				memcpy(g + t * W, b->g + rk, K * sizeof(float));
				memcpy(v + t * W, b->v + rv, V * sizeof(float));
				beta[t] = b->beta[(row0 + t) * b->ldb + h];
			}
			kda_head_io io = { .q = q, .k = k, .g = g, .v = v, .beta = beta, .o = o,
					   .ld = W, .ldb = 1 };
			kda_delta_ref(b->S + ((size_t)s * b->heads + h) * K * V, K, V, n, &io);
			for (int64_t t = 0; t < n; t++)
				memcpy(b->o + (row0 + t) * b->ldv + h * V, o + t * W,
				       V * sizeof(float));
		}
		free(d);
		free(beta);
	}
}

/* Device copies of a batch; o and the states' spare bytes start as NaN. */
struct dev {
	float *q, *k, *g, *v, *beta, *o, *S;
	tf_kda_cuda_seg *seg;
	tf_kda_cuda_io io;
};

static float *upload(const float *x, size_t n)
{
	float *p = NULL;
	cr_assert_eq(cudaMalloc((void **)&p, n * sizeof(float)), cudaSuccess);
	cr_assert_eq(cudaMemcpy(p, x, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
	return p;
}

/* Every segment over all its rows. */
static void dev_segs(struct dev *d, const struct batch *b)
{
	tf_kda_cuda_seg seg[8];
	int64_t row0 = 0;
	for (int s = 0; s < b->n_seg; row0 += b->seg_n[s], s++)
		seg[s] = (tf_kda_cuda_seg){ .row0 = row0, .n = b->seg_n[s],
					    .S = d->S + (size_t)s * b->heads * b->K * b->V };
	cr_assert_eq(cudaMemcpy(d->seg, seg, b->n_seg * sizeof(*seg), cudaMemcpyHostToDevice),
		     cudaSuccess);
}

static void dev_init(struct dev *d, const struct batch *b)
{
	size_t nk = (size_t)b->rows * b->ldk + 1, nv = (size_t)b->rows * b->ldv + 1;
	d->q = upload(b->q, nk);
	d->k = upload(b->k, nk);
	d->g = upload(b->g, nk);
	d->v = upload(b->v, nv);
	d->beta = upload(b->beta, (size_t)b->rows * b->ldb + 1);
	d->S = upload(b->S, (size_t)b->n_seg * b->heads * b->K * b->V);
	cr_assert_eq(cudaMalloc((void **)&d->o, nv * sizeof(float)), cudaSuccess);
	cr_assert_eq(cudaMemset(d->o, 0xFF, nv * sizeof(float)), cudaSuccess);

	cr_assert_eq(cudaMalloc((void **)&d->seg, b->n_seg * sizeof(*d->seg)), cudaSuccess);
	dev_segs(d, b);
	d->io = (tf_kda_cuda_io){ .q = d->q, .k = d->k, .g = d->g, .v = d->v, .beta = d->beta,
				  .o = d->o, .ldk = b->ldk, .ldv = b->ldv, .ldb = b->ldb };
}

static void dev_free(struct dev *d)
{
	cudaFree(d->q);
	cudaFree(d->k);
	cudaFree(d->g);
	cudaFree(d->v);
	cudaFree(d->beta);
	cudaFree(d->o);
	cudaFree(d->S);
	cudaFree(d->seg);
}

static void run(enum kernel kn, const struct dev *d, const struct batch *b)
{
	int rc = kn == CHUNKED ?
		 tf_kda_cuda_chunked(0, &d->io, d->seg, b->n_seg, b->heads, b->K, b->V) :
		 tf_kda_cuda_recurrent(0, &d->io, d->seg, b->n_seg, b->heads, b->K, b->V);
	cr_assert_eq(rc, cudaSuccess, "launch: %s", cudaGetErrorString(rc));
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
}

/* The heads' outputs of every row (padding columns excluded) and the
 * states, downloaded. */
static void download(const struct dev *d, const struct batch *b, float *o, float *S)
{
	size_t nv = (size_t)b->rows * b->ldv + 1, ns = (size_t)b->n_seg * b->heads * b->K * b->V;
	float *full = alloc_f(nv);
	cr_assert_eq(cudaMemcpy(full, d->o, nv * sizeof(float), cudaMemcpyDeviceToHost),
		     cudaSuccess);
	for (int64_t r = 0; r < b->rows; r++)
		memcpy(o + r * b->heads * b->V, full + r * b->ldv,
		       (size_t)b->heads * b->V * sizeof(float));
	cr_assert_eq(cudaMemcpy(S, d->S, ns * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
	free(full);
}

/* The batch's heads' outputs, packed [rows, heads * V]. */
static void pack_o(const struct batch *b, float *o)
{
	for (int64_t r = 0; r < b->rows; r++)
		memcpy(o + r * b->heads * b->V, b->o + r * b->ldv,
		       (size_t)b->heads * b->V * sizeof(float));
}

static void check_kernel(enum kernel kn, int heads, int K, int V, const int64_t *seg_n,
			 int n_seg, float glo, float ghi, uint64_t seed)
{
	struct batch b;
	struct dev d;
	batch_init(&b, heads, K, V, seg_n, n_seg, glo, ghi, seed);
	dev_init(&d, &b);
	run(kn, &d, &b);

	size_t no = (size_t)b.rows * heads * V, ns = (size_t)n_seg * heads * K * V;
	float *o = alloc_f(no + 1), *S = alloc_f(ns), *o_ref = alloc_f(no + 1);
	download(&d, &b, o, S);
	batch_reference(&b);
	pack_o(&b, o_ref);
	double eo = tf_test_rel_err(o, o_ref, no, 1e-6), es = tf_test_rel_err(S, b.S, ns, 1e-6);
	cr_log_info("%s heads %d K %d V %d rows %lld g [%g, %g]: output %.3g state %.3g",
		    kn == CHUNKED ? "chunked" : "recurrent", heads, K, V, (long long)b.rows, glo,
		    ghi, eo, es);
	cr_expect(eo < KDA_CUDA_TOL && es < KDA_CUDA_TOL,
		  "%s heads %d K %d V %d g [%g, %g]: output err %.3g, state err %.3g",
		  kn == CHUNKED ? "chunked" : "recurrent", heads, K, V, glo, ghi, eo, es);
	free(o);
	free(S);
	free(o_ref);
	dev_free(&d);
	batch_free(&b);
}

/* Ragged segments in one launch, an empty one among them. */
static const int64_t ragged[] = { 1, 7, 0, 33, 100 };
#define N_RAGGED ((int)(sizeof(ragged) / sizeof(ragged[0])))

/* ling-nano's heads (4 x 32), ling-tiny's and Flash's head size (128), and
 * K != V to catch a swapped index. */
static void check_shapes(enum kernel kn, float glo, float ghi, uint64_t seed)
{
	check_kernel(kn, 4, 32, 32, ragged, N_RAGGED, glo, ghi, seed);
	check_kernel(kn, 2, 128, 128, ragged, N_RAGGED, glo, ghi, seed + 1);
	check_kernel(kn, 3, 24, 40, ragged, N_RAGGED, glo, ghi, seed + 2);
	check_kernel(kn, 1, 72, 16, ragged, N_RAGGED, glo, ghi, seed + 3);
}

Test(kda_cuda, recurrent_matches_plain_step) { check_shapes(RECURRENT, -5.0f, 0.0f, 11); }
Test(kda_cuda, chunked_matches_plain_step) { check_shapes(CHUNKED, -5.0f, 0.0f, 21); }

/* Chunk boundaries, gates near the safe bound, near no decay, and Kimi's
 * unbounded gate, which sends chunks down the exact-product path. */
Test(kda_cuda, chunked_gates_and_boundaries)
{
	static const int64_t edges[] = { 15, 16, 17, 32, 48 };
	static const float gates[][2] = { { -5.0f, -4.95f }, { -0.01f, 0.0f }, { -40.0f, 0.0f } };
	uint64_t seed = 31;
	for (int i = 0; i < 3; i++)
		check_kernel(CHUNKED, 2, 32, 32, edges, 5, gates[i][0], gates[i][1], seed++);
	check_kernel(CHUNKED, 1, 128, 128, edges + 4, 1, -40.0f, 0.0f, seed++);
}

/* Prefill through the chunked kernel, then decode token by token through
 * the recurrent one: the same outputs and states as the recurrent kernel
 * over every row. */
static void check_decode_after_prefill(int heads, int K, int V, uint64_t seed)
{
	static const int64_t seg_n[] = { 40, 100, 9 };
	const int64_t steps = 6;
	struct batch b;
	struct dev whole, split;
	batch_init(&b, heads, K, V, seg_n, 3, -5.0f, 0.0f, seed);
	dev_init(&whole, &b);
	dev_init(&split, &b);
	run(RECURRENT, &whole, &b);
	for (int s = 0; s < 3; s++)
		cr_assert(seg_n[s] > steps);
	/* Each segment's prefill leaves its last `steps` rows. */
	tf_kda_cuda_seg seg[3];
	for (int s = 0, row0 = 0; s < 3; row0 += seg_n[s], s++)
		seg[s] = (tf_kda_cuda_seg){ .row0 = row0, .n = seg_n[s] - steps,
					    .S = split.S + (size_t)s * heads * K * V };
	cr_assert_eq(cudaMemcpy(split.seg, seg, sizeof(seg), cudaMemcpyHostToDevice), cudaSuccess);
	run(CHUNKED, &split, &b);
	for (int64_t t = 0; t < steps; t++) {
		for (int s = 0; s < 3; s++) {
			seg[s].row0 += seg[s].n;
			seg[s].n = 1;
		}
		cr_assert_eq(cudaMemcpy(split.seg, seg, sizeof(seg), cudaMemcpyHostToDevice),
			     cudaSuccess);
		run(RECURRENT, &split, &b);
	}

	size_t no = (size_t)b.rows * heads * V, ns = (size_t)3 * heads * K * V;
	float *o1 = alloc_f(no), *S1 = alloc_f(ns), *o2 = alloc_f(no), *S2 = alloc_f(ns);
	download(&whole, &b, o1, S1);
	download(&split, &b, o2, S2);
	double eo = tf_test_rel_err(o2, o1, no, 1e-6), es = tf_test_rel_err(S2, S1, ns, 1e-6);
	cr_log_info("prefill + decode vs recurrent, heads %d K %d V %d: output %.3g state %.3g",
		    heads, K, V, eo, es);
	cr_expect(eo < KDA_CUDA_TOL && es < KDA_CUDA_TOL,
		  "prefill + decode vs recurrent, K %d V %d: output err %.3g, state err %.3g", K, V,
		  eo, es);
	free(o1);
	free(S1);
	free(o2);
	free(S2);
	dev_free(&whole);
	dev_free(&split);
	batch_free(&b);
}

Test(kda_cuda, decode_after_prefill_equals_recurrent)
{
	check_decode_after_prefill(2, 32, 32, 41);
	check_decode_after_prefill(2, 128, 128, 42);
}

/* Shapes past the kernels' limits are refused before any launch. */
Test(kda_cuda, refuses_bad_shapes)
{
	tf_kda_cuda_io io = { 0 };
	cr_expect_eq(tf_kda_cuda_recurrent(0, &io, NULL, 1, 1, KDA_CUDA_MAX_DIM + 1, 32),
		     cudaErrorInvalidValue);
	cr_expect_eq(tf_kda_cuda_chunked(0, &io, NULL, 1, 1, 32, KDA_CUDA_MAX_DIM + 1),
		     cudaErrorInvalidValue);
	cr_expect_eq(tf_kda_cuda_chunked(0, &io, NULL, 0, 1, 32, 32), cudaErrorInvalidValue);
	cr_expect_eq(tf_kda_cuda_recurrent(0, &io, NULL, 1, 0, 32, 32), cudaErrorInvalidValue);
}
