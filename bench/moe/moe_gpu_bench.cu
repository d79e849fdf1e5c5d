/*
 * moe_gpu_bench.cu - plugins/moe-cuda's kernels timed on a GPU at
 * Ling-3.1 Flash's MoE shape (hidden 4096, 512 experts of 1280, top-8 in
 * 4 of 8 groups, one shared expert of 1280; vocabulary 157184), beside the
 * device-to-device copy bandwidth measured in the same run.
 *
 *     moe_gpu_bench [--quick]
 *
 * For 1, 8 and 64 tokens: the router, the dispatch, the routed experts'
 * MLPs over fp32 and over 3-bit EXL3 weights (the recipe's), and the whole
 * block (route, dispatch, routed and shared MLPs over fp32, combine).  The
 * experts' floor is reading the weights of every expert the tokens chose
 * once, so those rows give those bytes in GB/s and as a share of the copy
 * bandwidth.  For 512 and 2048 tokens (prefill) the EXL3 experts alone:
 * tokens/s through one layer's experts and the TFLOP/s of their products
 * (the GEMM's floor is the tensor cores there, gpu_check's table).  Weights are zero (EXL3: zero trellises, suh and svh of ones):
 * values do not change the time, and 512 experts of fp32 take 30 GiB.
 * Then backend-cuda's sampler (sample.cu) over 1 and 32 rows, greedy and
 * top-50.  Each figure is the median of 5 timings of `reps` calls.  --quick: a small
 * shape, one timing.  scripts/gpu-check.sh runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_bench.h"
#include "kernels.h"           /* backend-cuda's: the sampler */
#include "moe_cuda.h"

struct shape {
	int hidden, experts, top_k, groups, topk_group, inter, shared, vocab;
};

static const struct shape flash = { 4096, 512, 8, 8, 4, 1280, 1280, 157184 };
static const struct shape small = { 256, 64, 4, 4, 2, 128, 128, 4096 };

static int timings = 5;

static float *dev_random(size_t n, float scale, uint64_t *s)
{
	float *h = (float *)malloc(n * sizeof(float)), *d;
	if (!h)
		exit(2);
	for (size_t i = 0; i < n; i++)
		h[i] = scale * unit(s);
	CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
	CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* n experts' SwiGLU weights, zero, and the device pointer arrays to them. */
static tf_moe_cuda_mlp_w mlp_zero(int n, int hidden, int inter, float **block)
{
	size_t per = (size_t)hidden * inter;
	const float **ptr[3];
	void *arr[3];
	CHECK(cudaMalloc((void **)block, 3 * n * per * sizeof(float)));
	CHECK(cudaMemset(*block, 0, 3 * n * per * sizeof(float)));
	for (int p = 0; p < 3; p++) {
		ptr[p] = (const float **)malloc(n * sizeof(float *));
		if (!ptr[p])
			exit(2);
		for (int e = 0; e < n; e++)
			ptr[p][e] = *block + ((size_t)p * n + e) * per;
		CHECK(cudaMalloc(&arr[p], n * sizeof(float *)));
		CHECK(cudaMemcpy(arr[p], ptr[p], n * sizeof(float *), cudaMemcpyHostToDevice));
		free(ptr[p]);
	}
	return (tf_moe_cuda_mlp_w){ (const float *const *)arr[0], (const float *const *)arr[1],
				    (const float *const *)arr[2], hidden, inter, n, 0.0f };
}

/* n experts' EXL3 linears at K bits (mul1), zero trellises, every one's
 * suh and svh the same vector of ones; *block holds them all. */
static tf_moe_cuda_exl3_w exl3_zero(int n, int hidden, int inter, int K, void **block)
{
	const int64_t kh = TF_MOE_CUDA_EXL3_PAD(hidden), ki = TF_MOE_CUDA_EXL3_PAD(inter);
	const size_t tr = (size_t)(kh * ki * K / 8), ones_n = (size_t)(kh > ki ? kh : ki);
	const size_t desc = 3 * (size_t)n * sizeof(tf_moe_cuda_exl3);
	tf_moe_cuda_exl3 *d = (tf_moe_cuda_exl3 *)malloc(desc);
	float *ones = (float *)malloc(ones_n * sizeof(float));
	if (!d || !ones)
		exit(2);
	CHECK(cudaMalloc(block, desc + ones_n * sizeof(float) + 3 * n * tr));
	char *base = (char *)*block;
	const float *one = (const float *)(base + desc);
	const uint16_t *t = (const uint16_t *)(one + ones_n);
	for (size_t i = 0; i < ones_n; i++)
		ones[i] = 1.0f;
	CHECK(cudaMemset((void *)t, 0, 3 * n * tr));
	for (int i = 0; i < 3 * n; i++)
		d[i] = (tf_moe_cuda_exl3){ t + (size_t)i * (tr / 2), one, one, K, 2 };
	CHECK(cudaMemcpy(base, d, desc, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(base + desc, ones, ones_n * sizeof(float), cudaMemcpyHostToDevice));
	free(d);
	free(ones);
	const tf_moe_cuda_exl3 *dev = (const tf_moe_cuda_exl3 *)base;
	return (tf_moe_cuda_exl3_w){ dev, dev + n, dev + 2 * n, hidden, inter, n, 0.0f };
}

/* What one timed call launches. */
enum what { ROUTE, DISPATCH, EXPERTS, EXPERTS_EXL3, BLOCK, SAMPLE };

struct run {
	const struct shape *sh;
	tf_moe_cuda_router r;
	tf_moe_cuda_mlp_w routed, shared;
	tf_moe_cuda_exl3_w routed_q;
	tf_moe_cuda_plan plan;
	tf_cuda_sample_par par;
	float *x, *gate_logits, *w, *h, *o, *y, *logits;
	int32_t *idx, *tok;
	uint64_t *seq;
	void *sample_scratch;
	int64_t n;
};

static void call(const struct run *u, enum what what)
{
	const struct shape *sh = u->sh;
	switch (what) {
	case ROUTE:
		CHECK(tf_moe_cuda_route(0, &u->r, u->x, u->n, u->gate_logits, u->idx, u->w));
		break;
	case DISPATCH:
		CHECK(tf_moe_cuda_dispatch(0, &u->plan, u->idx, u->w, u->n, sh->experts, sh->top_k));
		break;
	case EXPERTS:
		CHECK(tf_moe_cuda_mlp(0, &u->routed, &u->plan, sh->top_k, u->x, u->n, u->h, u->o));
		break;
	case EXPERTS_EXL3:
		CHECK(tf_moe_cuda_exl3_mlp(0, &u->routed_q, &u->plan, sh->top_k, u->x, u->n, u->h,
					   u->o));
		break;
	case BLOCK:
		call(u, ROUTE);
		call(u, DISPATCH);
		call(u, EXPERTS);
		CHECK(tf_moe_cuda_mlp(0, &u->shared, NULL, 0, u->x, u->n, u->h, u->y));
		CHECK(tf_moe_cuda_combine(0, &u->plan, &u->routed, NULL, u->idx, u->n, sh->top_k,
					  u->o, u->y));
		break;
	case SAMPLE:
		CHECK(tf_cuda_sample(0, &u->par, u->logits, u->n, sh->vocab, sh->vocab, u->seq,
				     u->seq, u->sample_scratch, u->tok));
		break;
	}
}

struct timed {
	const struct run *u;
	enum what what;
};

static void call_timed(const void *arg)
{
	const struct timed *t = (const struct timed *)arg;
	call(t->u, t->what);
}

/* Median seconds of one call, after one to warm up. */
static double time_call(const struct run *u, enum what what, int reps)
{
	struct timed t = { u, what };
	call(u, what);
	return tf_bench_median(call_timed, &t, reps, timings);
}

int main(int argc, char **argv)
{
	const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	const struct shape *sh = quick ? &small : &flash;
	static const int tokens[] = { 1, 8, 64 }, prefill[] = { 512, 2048 };
	const int reps = quick ? 1 : 20, max_n = 2048;
	cudaDeviceProp prop;
	uint64_t s = 5;
	int dev = 0;
	const int exl3_bits = 3;
	float *routed_w, *shared_w;
	void *routed_q;
	struct run u;

	if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
		fprintf(stderr, "moe_gpu_bench: no CUDA device\n");
		return 2;
	}
	if (quick)
		timings = 1;
	CHECK(cudaGetDeviceProperties(&prop, 0));
	const double bw = tf_bench_copy_bandwidth(quick ? (size_t)1 << 20 : (size_t)1 << 30);
	printf("device: %s (sm_%d%d); copy bandwidth %.0f GB/s; hidden %d, %d experts of %d, "
	       "top-%d in %d of %d groups\n", prop.name, prop.major, prop.minor, bw / 1e9,
	       sh->hidden, sh->experts, sh->inter, sh->top_k, sh->topk_group, sh->groups);

	memset(&u, 0, sizeof(u));
	u.sh = sh;
	u.r = (tf_moe_cuda_router){ dev_random((size_t)sh->experts * sh->hidden, 0.05f, &s),
				    dev_random(sh->experts, 0.01f, &s), sh->hidden, sh->experts,
				    sh->top_k, sh->groups, sh->topk_group, 1, 2.5f };
	u.routed = mlp_zero(sh->experts, sh->hidden, sh->inter, &routed_w);
	u.shared = mlp_zero(1, sh->hidden, sh->shared, &shared_w);
	u.routed_q = exl3_zero(sh->experts, sh->hidden, sh->inter, exl3_bits, &routed_q);
	u.x = dev_random((size_t)max_n * sh->hidden, 1.0f, &s);
	const size_t nk = (size_t)max_n * sh->top_k;
	CHECK(cudaMalloc((void **)&u.w, nk * sizeof(float)));
	CHECK(cudaMalloc((void **)&u.gate_logits, (size_t)max_n * sh->experts * sizeof(float)));
	CHECK(cudaMalloc((void **)&u.idx, nk * sizeof(int32_t)));
	const size_t hf = nk * (sh->inter > sh->shared ? sh->inter : sh->shared);
	const size_t hq = tf_moe_cuda_exl3_scratch(&u.routed_q, (int64_t)nk);
	CHECK(cudaMalloc((void **)&u.h, (hf > hq ? hf : hq) * sizeof(float)));
	CHECK(cudaMalloc((void **)&u.o, nk * sh->hidden * sizeof(float)));
	CHECK(cudaMalloc((void **)&u.y, (size_t)max_n * sh->hidden * sizeof(float)));
	void *plan_mem;
	CHECK(cudaMalloc(&plan_mem, tf_moe_cuda_plan_bytes(sh->experts, sh->top_k, max_n)));

	printf("\n| tokens | route us | dispatch us | experts us | active experts | expert GB/s | of copy bandwidth | EXL3 %d-bit experts us | EXL3 GB/s | of copy bandwidth | block us |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|\n", exl3_bits);
	for (int i = 0; i < 3; i++) {
		int32_t active;
		u.n = tokens[i];
		tf_moe_cuda_plan_init(&u.plan, plan_mem, sh->experts, sh->top_k, u.n);
		double tr = time_call(&u, ROUTE, reps), td = time_call(&u, DISPATCH, reps);
		double te = time_call(&u, EXPERTS, reps), tq = time_call(&u, EXPERTS_EXL3, reps);
		double tb = time_call(&u, BLOCK, reps);
		CHECK(cudaMemcpy(&active, u.plan.n_active, sizeof(active), cudaMemcpyDeviceToHost));
		double bytes = 3.0 * active * sh->hidden * sh->inter * sizeof(float);
		double qbytes = bytes / sizeof(float) * exl3_bits / 8;
		printf("| %d | %.1f | %.1f | %.1f | %d | %.0f | %.0f%% | %.1f | %.0f | %.0f%% | %.1f |\n",
		       tokens[i], tr * 1e6, td * 1e6, te * 1e6, active, bytes / te / 1e9,
		       bytes / te / bw * 100, tq * 1e6, qbytes / tq / 1e9, qbytes / tq / bw * 100,
		       tb * 1e6);
	}

	/* Prefill: the EXL3 experts' rows past 8 go through the WMMA GEMM
	 * (exl3_mlp.cu), each tile decoded once per 64 rows. */
	printf("\n| prefill tokens | EXL3 %d-bit experts us | tokens/s through them | active experts | TFLOP/s |\n"
	       "|---|---|---|---|---|\n", exl3_bits);
	for (int i = 0; i < 2; i++) {
		const int n = prefill[i];
		int32_t active;
		u.n = n;
		tf_moe_cuda_plan_init(&u.plan, plan_mem, sh->experts, sh->top_k, u.n);
		call(&u, ROUTE);
		call(&u, DISPATCH);
		const double tq = time_call(&u, EXPERTS_EXL3, reps);
		CHECK(cudaMemcpy(&active, u.plan.n_active, sizeof(active), cudaMemcpyDeviceToHost));
		const double flops = 2.0 * 3 * n * sh->top_k * (double)sh->hidden * sh->inter;
		printf("| %d | %.1f | %.0f | %d | %.1f |\n", n, tq * 1e6, n / tq, active,
		       flops / tq / 1e12);
	}

	u.logits = dev_random((size_t)32 * sh->vocab, 8.0f, &s);
	CHECK(cudaMalloc((void **)&u.seq, 32 * sizeof(uint64_t)));
	CHECK(cudaMemset(u.seq, 0, 32 * sizeof(uint64_t)));
	CHECK(cudaMalloc((void **)&u.tok, 32 * sizeof(int32_t)));
	CHECK(cudaMalloc(&u.sample_scratch, tf_cuda_sample_scratch_bytes(32)));
	printf("\n| sampler, vocabulary %d | rows | us | logits GB/s (one pass) |\n|---|---|---|---|\n",
	       sh->vocab);
	for (int greedy = 1; greedy >= 0; greedy--)
		for (int rows = 1; rows <= 32; rows *= 32) {
			u.n = rows;
			u.par = (tf_cuda_sample_par){ greedy ? 0.0f : 0.8f, 0.95f, 0.0f,
						      greedy ? 0 : 50, 1 };
			double t = time_call(&u, SAMPLE, reps);
			printf("| %s | %d | %.1f | %.0f |\n", greedy ? "greedy" : "top-50, top-p 0.95",
			       rows, t * 1e6, (double)rows * sh->vocab * sizeof(float) / t / 1e9);
		}

	void *const mem[] = { (void *)u.r.gate, (void *)u.r.bias, (void *)u.routed.gate,
			      (void *)u.routed.up, (void *)u.routed.down, (void *)u.shared.gate,
			      (void *)u.shared.up, (void *)u.shared.down, routed_w, shared_w, routed_q, u.x,
			      u.gate_logits, u.w, u.idx, u.h, u.o, u.y, plan_mem, u.logits, u.seq, u.tok,
			      u.sample_scratch };
	for (size_t i = 0; i < sizeof(mem) / sizeof(mem[0]); i++)
		CHECK(cudaFree(mem[i]));
	return 0;
}
