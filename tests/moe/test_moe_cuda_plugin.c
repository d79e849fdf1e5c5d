/*
 * test_moe_cuda_plugin.c - the ffn plugins of moe-cuda ("moe-cuda" and
 * "dense-cuda", built on the SIMT harness as moe-cuda-sim.so by
 * tests/simt) against moe.so's "moe" and "dense" layers on backend-cpu:
 * two test hosts holding the same random weights (F32 or BF16, which
 * both sides widen alike), the device one on backend-cuda-sim with the
 * device linears.  Rows 1, 3 and 17 (ragged against the kernels' tiles
 * of 4 rows and 8 columns); the dense MLPs, one expert over every row,
 * also 4, 5, 8, 9 and 16 (each side of the fp32 kernel's 4-row and the
 * EXL3 GEMV's 8-row passes); device outputs NaN-poisoned before each
 * forward; the same with EXL3 experts (random trellises, each expert at its
 * own bits and codebook, the shared expert at others, features padded to
 * 128) against moe.so over exl3.so's CPU linear, 4 EXL3 experts over 16
 * and 33 rows (several 8-row GEMV passes an expert), and an EXL3 dense MLP;
 * tensor parallel ranks, plain and EXL3 (each rank's output against
 * moe.so's same rank, the ranks' sum against the whole layer); then the
 * refusals: a host-memory backend, features that do not split over the
 * ranks, an expert with no weights, a set of experts part EXL3 and part
 * BF16, EXL3 experts split inside a Hadamard block, softmax scoring.
 * Built on the SIMT harness as test_moe_cuda_plugin_sim (tests/simt):
 * TF_MOE_CUDA, TF_CUDA_BACKEND and TF_CUDA_QUANT name the cuda-sim
 * modules, TF_CUDA_BACKEND_NAME the backend.  The same test on a GPU is
 * test_moe_cuda_plugin_gpu (scripts/gpu-check.sh), on the build's plugins.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffn_so.h"
#include "support/testhost.h"
#include "tf/backend.h"
#include "tf/ffn.h"

#ifndef TF_MOE_CUDA
#define TF_MOE_CUDA TF_PLUGIN_DIR "/moe-cuda.so"
#define TF_CUDA_BACKEND TF_PLUGIN_DIR "/backend-cuda.so"
#define TF_CUDA_QUANT TF_PLUGIN_DIR "/exl3-cuda.so"
#define TF_CUDA_BACKEND_NAME "cuda"
#endif

#define PREFIX "model.layers.1.mlp"
#define LAYER 1
/* test_moe_cuda.c's block bound: every sum re-ordered against the CPU's. */
#define PLUGIN_BOUND 2e-5
/* EXL3 experts: the device decodes each weight to fp16 exactly, the CPU's
 * fused decode skips that rounding (2.4e-4 a linear, test_plain_cuda.c's
 * EXL3_CUDA_TOL of 2e-3 on one linear); three linears deep here. */
#define EXL3_BOUND 2e-3

static const int rows_cases[] = { 1, 3, 17 };
/* A dense MLP is one expert over all the rows: each side of mlp.cu's
 * 4-row passes (MLP_ROWS) and exl3_mlp.cu's 8-row GEMV passes. */
static const int dense_rows[] = { 1, 3, 4, 5, 8, 9, 16, 17 };
#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

/* The pair of hosts a case runs on, holding the same tensors. */
struct pair {
	tf_testhost *cpu, *dev;
	tf_dtype dtype;
	uint64_t seed;
};

static struct pair pair_new(const tf_model_config *c, tf_dtype dtype, uint64_t seed)
{
	struct pair p = { .cpu = tf_testhost_new_with(c, 1, NULL, NULL),
			  .dev = tf_testhost_new_with(c, 1, TF_CUDA_BACKEND, TF_CUDA_QUANT),
			  .dtype = dtype, .seed = seed };
	cr_assert(p.cpu && p.dev);
	tf_testhost_set_conf(p.cpu, "plugins", "router", "ling-ref");
	return p;
}

static void pair_free(struct pair *p)
{
	tf_testhost_free(p->dev);
	tf_testhost_free(p->cpu);
}

/* A random rows x cols tensor `<prefix><leaf>` in both hosts. */
static void pair_add(struct pair *p, const char *prefix, const char *leaf, int64_t rows,
		     int64_t cols, float scale)
{
	char name[200];
	float *v = malloc(sizeof(float) * rows * cols);
	const int64_t shape[2] = { rows, cols };
	cr_assert(v);
	snprintf(name, sizeof(name), "%s%s", prefix, leaf);
	tf_test_fill_uniform(v, (size_t)(rows * cols), scale, &p->seed);
	tf_testhost_add_f32(p->cpu, name, p->dtype, rows == 1 ? 1 : 2,
			    rows == 1 ? shape + 1 : shape, v);
	tf_testhost_add_f32(p->dev, name, p->dtype, rows == 1 ? 1 : 2,
			    rows == 1 ? shape + 1 : shape, v);
	free(v);
}

static void pair_add_mlp(struct pair *p, const char *prefix, int hidden, int inter)
{
	pair_add(p, prefix, ".gate_proj.weight", inter, hidden, 0.2f);
	pair_add(p, prefix, ".up_proj.weight", inter, hidden, 0.2f);
	pair_add(p, prefix, ".down_proj.weight", hidden, inter, 0.15f);
}

/* A random EXL3 linear `<prefix><leaf>` at K bits, codebook cb, in both
 * hosts. */
static void pair_add_exl3(struct pair *p, const char *prefix, const char *leaf, int64_t in,
			  int64_t out, int K, int cb)
{
	char name[200];
	uint64_t s = p->seed;
	snprintf(name, sizeof(name), "%s%s", prefix, leaf);
	tf_testhost_add_exl3_as(p->cpu, name, in, out, K, cb, &s);
	tf_testhost_add_exl3_as(p->dev, name, in, out, K, cb, &p->seed);
}

/* An MLP with EXL3 linears: gate at K bits, up and down at K % 8 + 1 and
 * (K + 1) % 8 + 1 (every K from 1 to 8 over a layer's experts), the
 * codebooks rotating from cb. */
static void pair_add_mlp_exl3(struct pair *p, const char *prefix, int hidden, int inter, int K,
			      int cb)
{
	pair_add_exl3(p, prefix, ".gate_proj", hidden, inter, K, cb % 3);
	pair_add_exl3(p, prefix, ".up_proj", hidden, inter, K % 8 + 1, (cb + 1) % 3);
	pair_add_exl3(p, prefix, ".down_proj", inter, hidden, (K + 1) % 8 + 1, (cb + 2) % 3);
}

/* The router, the experts and the shared expert of c. */
static void pair_add_moe(struct pair *p, const tf_model_config *c)
{
	char name[160];
	pair_add(p, PREFIX, ".gate.weight", c->num_experts, c->hidden_size, 0.3f);
	if (c->moe_router_enable_expert_bias)
		pair_add(p, PREFIX, ".gate.expert_bias", 1, c->num_experts, 0.1f);
	for (int e = 0; e < c->num_experts; e++) {
		snprintf(name, sizeof(name), PREFIX ".experts.%d", e);
		pair_add_mlp(p, name, c->hidden_size, c->moe_intermediate_size);
	}
	if (c->num_shared_experts)
		pair_add_mlp(p, PREFIX ".shared_experts", c->hidden_size,
			     c->moe_shared_expert_intermediate_size * c->num_shared_experts);
}

static tf_model_config moe_config(int hidden, int E, int k, int G, int TG, int inter,
				  int shared_inter)
{
	return (tf_model_config){
		.hidden_size = hidden, .num_experts = E, .num_experts_per_tok = k,
		.n_group = G, .topk_group = TG, .routed_scaling_factor = 2.5f,
		.norm_topk_prob = true, .score_sigmoid = true,
		.moe_router_enable_expert_bias = true, .n_layers_total = 4,
		.num_shared_experts = shared_inter ? 1 : 0, .moe_intermediate_size = inter,
		.moe_shared_expert_intermediate_size = shared_inter,
	};
}

/* c with both clamps cutting (limits low for layer 1) and no expert bias. */
static tf_model_config clamped(tf_model_config c)
{
	static const float elim[4] = { 0, 0.3f, 0, 0 }, slim[4] = { 0, 0.4f, 0, 0 };
	c.moe_router_enable_expert_bias = false;
	c.expert_swiglu_limit = elim;
	c.shared_swiglu_limit = slim;
	return c;
}

/* moe.so's layer `index` on the CPU host against moe-cuda's on the device
 * host, each of the nrows row counts in turn, the device output poisoned
 * first. */
static void check_layer(struct pair *p, unsigned index, const char *type, const int *rows,
			size_t nrows, double bound)
{
	const tf_plugin_ffn *cpu = ffn_plugin(index), *dev = ffn_plugin_at(TF_MOE_CUDA, index);
	const tf_host *hc = tf_testhost_host(p->cpu), *hd = tf_testhost_host(p->dev);
	const tf_backend *be = hd->backend;
	const int H = hc->model->hidden_size;
	void *ic = NULL, *id = NULL;
	const char *why = NULL;

	cr_assert_str_eq(dev->layer_type, type);
	cr_assert_gt(dev->hdr.probe(hd, &why), 0, "probe: %s", why);
	cr_assert_eq(cpu->layer_init(hc, LAYER, PREFIX, &ic), TF_OK, "%s",
		     tf_testhost_last_error(p->cpu));
	cr_assert_eq(dev->layer_init(hd, LAYER, PREFIX, &id), TF_OK, "%s",
		     tf_testhost_last_error(p->dev));
	for (size_t ci = 0; ci < nrows; ci++) {
		const int n = rows[ci];
		const size_t bytes = sizeof(float) * n * H;
		float *x = malloc(bytes), *y = malloc(bytes), *dy = malloc(bytes);
		float *xd = be->alloc(hd->backend_ctx, bytes), *yd = be->alloc(hd->backend_ctx, bytes);
		cr_assert(x && y && dy && xd && yd);
		tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &p->seed);
		for (int i = 0; i < n * H; i++)
			dy[i] = NAN;
		cr_assert_eq(be->upload(hd->backend_ctx, xd, x, bytes), TF_OK);
		cr_assert_eq(be->upload(hd->backend_ctx, yd, dy, bytes), TF_OK);
		cr_assert_eq(cpu->forward(ic, x, n, y), TF_OK, "%s", tf_testhost_last_error(p->cpu));
		cr_assert_eq(dev->forward(id, xd, n, yd), TF_OK, "%s",
			     tf_testhost_last_error(p->dev));
		cr_assert_eq(be->sync(hd->backend_ctx), TF_OK);
		cr_assert_eq(be->download(hd->backend_ctx, dy, yd, bytes), TF_OK);
		double err = tf_test_rel_err(dy, y, (size_t)n * H, 1e-3);
		cr_log_info("%s n %d: rel err %.3g", dev->hdr.name, n, err);
		cr_assert(err <= bound, "%s n %d: rel err %g > %g", dev->hdr.name, n, err, bound);
		be->free(hd->backend_ctx, xd);
		be->free(hd->backend_ctx, yd);
		free(x);
		free(y);
		free(dy);
	}
	dev->layer_fini(id);
	cpu->layer_fini(ic);
}

/* y[n, H] = f's layer LAYER on th's backend over x[n, H] (host memory
 * both), the output poisoned first. */
static void run_layer(const tf_plugin_ffn *f, tf_testhost *th, const float *x, int n, float *y)
{
	const tf_host *h = tf_testhost_host(th);
	const tf_backend *be = h->backend;
	const size_t bytes = sizeof(float) * n * h->model->hidden_size;
	float *xb = be->alloc(h->backend_ctx, bytes), *yb = be->alloc(h->backend_ctx, bytes);
	void *inst = NULL;
	cr_assert(xb && yb);
	for (size_t i = 0; i < bytes / sizeof(float); i++)
		y[i] = NAN;
	cr_assert_eq(f->layer_init(h, LAYER, PREFIX, &inst), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_assert_eq(be->upload(h->backend_ctx, xb, x, bytes), TF_OK);
	cr_assert_eq(be->upload(h->backend_ctx, yb, y, bytes), TF_OK);
	cr_assert_eq(f->forward(inst, xb, n, yb), TF_OK, "%s", tf_testhost_last_error(th));
	cr_assert_eq(be->sync(h->backend_ctx), TF_OK);
	cr_assert_eq(be->download(h->backend_ctx, y, yb, bytes), TF_OK);
	f->layer_fini(inst);
	be->free(h->backend_ctx, xb);
	be->free(h->backend_ctx, yb);
}

/* Both hosts play rank r of `ranks` ([tp] moe = moe; r -1: one rank). */
static void pair_rank(struct pair *p, int r, int ranks, const char *moe)
{
	tf_testhost *th[2] = { p->cpu, p->dev };
	for (int i = 0; i < 2; i++) {
		tf_host *h = (tf_host *)tf_testhost_host(th[i]);  /* the test owns it */
		h->tp_rank = r < 0 ? 0 : r;
		h->tp_size = r < 0 ? 1 : ranks;
		tf_testhost_set_conf(th[i], "tp", "moe", moe);
	}
}

/*
 * Tensor parallel: the layer `index` as each of `ranks` ranks on both
 * hosts, n rows: each rank's device output against moe.so's same rank
 * (its partial sum), and the device ranks' outputs summed, as the
 * runtime's all-reduce sums them, against moe.so's whole layer.
 */
static void check_ranks(struct pair *p, unsigned index, int ranks, const char *moe, int n,
			double bound)
{
	const tf_plugin_ffn *cpu = ffn_plugin(index), *dev = ffn_plugin_at(TF_MOE_CUDA, index);
	const size_t m = (size_t)n * tf_testhost_host(p->cpu)->model->hidden_size;
	float *x = malloc(sizeof(float) * m), *whole = malloc(sizeof(float) * m);
	float *yc = malloc(sizeof(float) * m), *yd = malloc(sizeof(float) * m);
	float *sum = calloc(m, sizeof(float));
	cr_assert(x && whole && yc && yd && sum);
	tf_test_fill_uniform(x, m, 1.0f, &p->seed);
	pair_rank(p, -1, 1, moe);
	run_layer(cpu, p->cpu, x, n, whole);
	for (int r = 0; r < ranks; r++) {
		pair_rank(p, r, ranks, moe);
		run_layer(cpu, p->cpu, x, n, yc);
		run_layer(dev, p->dev, x, n, yd);
		for (size_t i = 0; i < m; i++)
			sum[i] += yd[i];
		double e = tf_test_rel_err(yd, yc, m, 1e-3);
		cr_log_info("%s rank %d of %d (%s) n %d: rel err %.3g vs the CPU's rank", dev->hdr.name,
			    r, ranks, moe, n, e);
		cr_expect(e <= bound, "%s rank %d of %d (%s) n %d: rel err %g vs the CPU's",
			  dev->hdr.name, r, ranks, moe, n, e);
	}
	double e = tf_test_rel_err(sum, whole, m, 1e-3);
	cr_log_info("%s %d ranks (%s) n %d: summed rel err %.3g vs the whole", dev->hdr.name, ranks,
		    moe, n, e);
	cr_expect(e <= bound, "%s %d ranks (%s) n %d: summed rel err %g vs the whole layer",
		  dev->hdr.name, ranks, moe, n, e);
	pair_rank(p, -1, 1, "split");
	free(x); free(whole); free(yc); free(yd); free(sum);
}

/* Features split (every expert's, the shared expert's) over 2 and 4
 * ranks, clamped; whole experts placed in blocks over 2 and 3 ranks (the
 * shared expert still split, 24 experts: 3 ranks of 8); a dense MLP over
 * 2 ranks.  Rows 1 and 17. */
Test(moe_cuda_plugin, tensor_parallel_ranks_match_cpu)
{
	float elim[4] = { 0, 0.3f, 0, 0 };
	tf_model_config c = moe_config(40, 24, 4, 4, 2, 32, 48);
	c.expert_swiglu_limit = elim;
	c.intermediate_size = 200;
	struct pair p = pair_new(&c, TF_DTYPE_BF16, 48);
	pair_add_moe(&p, &c);
	pair_add_mlp(&p, PREFIX, 40, 200);
	for (int n = 1; n <= 17; n += 16) {
		check_ranks(&p, 0, 2, "split", n, PLUGIN_BOUND);
		check_ranks(&p, 0, 4, "split", n, PLUGIN_BOUND);
		check_ranks(&p, 0, 2, "experts", n, PLUGIN_BOUND);
		check_ranks(&p, 0, 3, "experts", n, PLUGIN_BOUND);
		check_ranks(&p, 1, 2, "split", n, PLUGIN_BOUND);
	}
	pair_free(&p);
}

/* The router of c, EXL3 experts (expert e at 1 + e % 8 bits, codebook
 * e % 3) unless routed_plain (BF16), and an EXL3 shared expert at 5 bits
 * unless shared_plain. */
static void pair_add_moe_exl3(struct pair *p, const tf_model_config *c, bool routed_plain,
			      bool shared_plain)
{
	char name[160];
	const int H = c->hidden_size, S = c->moe_shared_expert_intermediate_size;
	pair_add(p, PREFIX, ".gate.weight", c->num_experts, H, 0.3f);
	if (c->moe_router_enable_expert_bias)
		pair_add(p, PREFIX, ".gate.expert_bias", 1, c->num_experts, 0.1f);
	for (int e = 0; e < c->num_experts; e++) {
		snprintf(name, sizeof(name), PREFIX ".experts.%d", e);
		if (routed_plain)
			pair_add_mlp(p, name, H, c->moe_intermediate_size);
		else
			pair_add_mlp_exl3(p, name, H, c->moe_intermediate_size, 1 + e % 8, e % 3);
	}
	if (S && shared_plain)
		pair_add_mlp(p, PREFIX ".shared_experts", H, S);
	else if (S)
		pair_add_mlp_exl3(p, PREFIX ".shared_experts", H, S, 5, 2);
}

/* A MoE layer of c as pair_add_moe_exl3 stores it. */
static void check_moe_exl3(const tf_model_config *c, bool routed_plain, bool shared_plain,
			   uint64_t seed)
{
	struct pair p = pair_new(c, TF_DTYPE_BF16, seed);
	pair_add_moe_exl3(&p, c, routed_plain, shared_plain);
	check_layer(&p, 0, "moe", rows_cases, N_ROWS(rows_cases), EXL3_BOUND);
	pair_free(&p);
}

/*
 * EXL3 experts as tensor parallel ranks, against moe.so over exl3.so's
 * CPU linears: features split over 2 ranks in whole Hadamard blocks
 * (inter 256: a block each; the EXL3 shared expert's 256 too, clamped) and
 * whole experts over 2 ranks beside it; over 3 ranks beside a BF16 shared
 * expert (48 features: 16 each); an EXL3 dense MLP over 2.  Rows 1 and
 * 17 for the split (the shared expert, and any expert given more than 8
 * rows, through the WMMA GEMM), 5 for the rest (the harness's time grows
 * with them).
 */
Test(moe_cuda_plugin, tensor_parallel_exl3_ranks_match_cpu)
{
	float elim[4] = { 0, 0.3f, 0, 0 }, slim[4] = { 0, 0.4f, 0, 0 };
	tf_model_config c = moe_config(128, 6, 2, 2, 1, 256, 256);
	c.expert_swiglu_limit = elim;
	c.shared_swiglu_limit = slim;
	c.intermediate_size = 256;
	struct pair p = pair_new(&c, TF_DTYPE_BF16, 54);
	pair_add_moe_exl3(&p, &c, false, false);
	pair_add_mlp_exl3(&p, PREFIX, 128, 256, 4, 0);
	check_ranks(&p, 0, 2, "split", 1, EXL3_BOUND);
	check_ranks(&p, 0, 2, "split", 17, EXL3_BOUND);
	check_ranks(&p, 0, 2, "experts", 5, EXL3_BOUND);
	check_ranks(&p, 1, 2, "split", 5, EXL3_BOUND);
	pair_free(&p);

	c = moe_config(128, 6, 2, 2, 1, 96, 48);
	p = pair_new(&c, TF_DTYPE_BF16, 55);
	pair_add_moe_exl3(&p, &c, false, true);
	check_ranks(&p, 0, 3, "experts", 5, EXL3_BOUND);
	pair_free(&p);
}

/* A MoE layer of c, its weights stored as dtype. */
static void check_moe(const tf_model_config *c, tf_dtype dtype, uint64_t seed)
{
	struct pair p = pair_new(c, dtype, seed);
	pair_add_moe(&p, c);
	check_layer(&p, 0, "moe", rows_cases, N_ROWS(rows_cases), PLUGIN_BOUND);
	pair_free(&p);
}

Test(moe_cuda_plugin, moe_ling_nano_bf16)
{
	tf_model_config c = moe_config(64, 16, 2, 4, 2, 32, 48);
	check_moe(&c, TF_DTYPE_BF16, 41);
}

Test(moe_cuda_plugin, moe_clamped_ungrouped_no_bias)
{
	tf_model_config c = clamped(moe_config(40, 24, 4, 1, 1, 36, 20));
	check_moe(&c, TF_DTYPE_F32, 42);
}

Test(moe_cuda_plugin, moe_without_shared_expert)
{
	tf_model_config c = moe_config(48, 32, 8, 8, 4, 24, 0);
	check_moe(&c, TF_DTYPE_F32, 43);
}

Test(moe_cuda_plugin, dense_mlp)
{
	tf_model_config c = moe_config(96, 16, 2, 1, 1, 32, 48);
	c.intermediate_size = 200;
	struct pair p = pair_new(&c, TF_DTYPE_BF16, 44);
	pair_add_mlp(&p, PREFIX, 96, 200);
	check_layer(&p, 1, "dense", dense_rows, N_ROWS(dense_rows), PLUGIN_BOUND);
	pair_free(&p);
}

/* EXL3 experts at every K and codebook, features padded (hidden 200 to
 * 256, inter 96 to 128, the shared expert's 160 to 256), top-4 of 16 in
 * 4/2 groups: at 17 rows the shared expert takes the WMMA GEMM. */
Test(moe_cuda_plugin, moe_exl3_mixed_bits)
{
	tf_model_config c = moe_config(200, 16, 4, 4, 2, 96, 160);
	check_moe_exl3(&c, false, false, 48);
}

/* EXL3 experts, both clamps cutting, no bias, BF16 shared expert. */
Test(moe_cuda_plugin, moe_exl3_clamped_plain_shared)
{
	tf_model_config c = clamped(moe_config(128, 8, 2, 1, 1, 128, 64));
	check_moe_exl3(&c, false, true, 49);
}

/* BF16 experts beside an EXL3 shared expert. */
Test(moe_cuda_plugin, moe_plain_experts_exl3_shared)
{
	tf_model_config c = moe_config(64, 8, 2, 4, 2, 32, 48);
	check_moe_exl3(&c, true, false, 50);
}

/* Few EXL3 experts over many rows: top-2 of 4 over 16 and 33 rows gives
 * an expert 8 and 16.5 rows on average, so most take several 8-row GEMV
 * passes, the last full or ragged, each at its own rows of the plan. */
Test(moe_cuda_plugin, moe_exl3_experts_over_several_passes)
{
	static const int rows[] = { 16, 33 };
	tf_model_config c = moe_config(128, 4, 2, 1, 1, 128, 0);
	struct pair p = pair_new(&c, TF_DTYPE_BF16, 56);
	pair_add_moe_exl3(&p, &c, false, false);
	check_layer(&p, 0, "moe", rows, N_ROWS(rows), EXL3_BOUND);
	pair_free(&p);
}

Test(moe_cuda_plugin, dense_mlp_exl3)
{
	tf_model_config c = moe_config(96, 16, 2, 1, 1, 32, 48);
	c.intermediate_size = 320;
	struct pair p = pair_new(&c, TF_DTYPE_BF16, 51);
	pair_add_mlp_exl3(&p, PREFIX, 96, 320, 3, 1);
	check_layer(&p, 1, "dense", dense_rows, N_ROWS(dense_rows), EXL3_BOUND);
	pair_free(&p);
}

/* layer_init of the device plugin `index` on th fails, its error naming
 * `what`. */
static void check_refused(tf_testhost *th, unsigned index, const char *what)
{
	const tf_plugin_ffn *dev = ffn_plugin_at(TF_MOE_CUDA, index);
	void *inst = NULL;
	cr_assert_neq(dev->layer_init(tf_testhost_host(th), LAYER, PREFIX, &inst), TF_OK);
	cr_assert_null(inst);
	cr_assert(strstr(tf_testhost_last_error(th), what), "error '%s' does not name '%s'",
		  tf_testhost_last_error(th), what);
}

Test(moe_cuda_plugin, refusals_name_what_they_refuse)
{
	tf_model_config c = moe_config(32, 8, 2, 1, 1, 16, 16);
	c.intermediate_size = 24;
	struct pair p = pair_new(&c, TF_DTYPE_F32, 45);
	const char *why = NULL;

	/* A host-memory backend: declined by probe and at layer_init. */
	pair_add_moe(&p, &c);
	pair_add_mlp(&p, PREFIX, 32, 24);
	for (unsigned i = 0; i < 2; i++) {
		const tf_plugin_ffn *dev = ffn_plugin_at(TF_MOE_CUDA, i);
		cr_assert_eq(dev->hdr.probe(tf_testhost_host(p.cpu), &why), 0);
		cr_assert(why && strstr(why, "backend " TF_CUDA_BACKEND_NAME " "), "%s",
			  why ? why : "(no reason)");
		check_refused(p.cpu, i, "backend cpu");
	}
	cr_assert_null(ffn_plugin_at(TF_MOE_CUDA, 2));

	/* Features that do not split over the ranks, named as moe.so names
	 * them (16 over 3). */
	pair_rank(&p, 0, 3, "split");
	check_refused(p.dev, 0, "moe_intermediate_size = 16 does not split evenly over [tp] size 3");
	pair_rank(&p, -1, 1, "split");
	pair_free(&p);

	/* An expert without a stored `.weight` (EXL3's trellis instead). */
	p = pair_new(&c, TF_DTYPE_F32, 46);
	pair_add(&p, PREFIX, ".gate.weight", 8, 32, 0.3f);
	pair_add(&p, PREFIX, ".gate.expert_bias", 1, 8, 0.1f);
	check_refused(p.dev, 0, PREFIX ".experts.0.gate_proj.weight: missing");
	pair_free(&p);

	/* A set of experts part EXL3, part BF16: expert 1's trellis missing. */
	p = pair_new(&c, TF_DTYPE_BF16, 52);
	pair_add(&p, PREFIX, ".gate.weight", 8, 32, 0.3f);
	pair_add(&p, PREFIX, ".gate.expert_bias", 1, 8, 0.1f);
	pair_add_mlp_exl3(&p, PREFIX ".experts.0", 32, 16, 3, 0);
	pair_add_mlp(&p, PREFIX ".experts.1", 32, 16);
	check_refused(p.dev, 0, PREFIX ".experts.1.gate_proj.trellis: missing");
	pair_free(&p);

	/* EXL3 experts split over 2 ranks: 16 features a rank cut a Hadamard
	 * block, refused naming the first trellis cut, as moe.so over exl3.so
	 * refuses it. */
	p = pair_new(&c, TF_DTYPE_BF16, 53);
	pair_add_moe_exl3(&p, &c, false, false);
	pair_rank(&p, 1, 2, "split");
	check_refused(p.dev, 0,
		      PREFIX ".experts.0.gate_proj.trellis: the part [8, 16) of its 128 output features cuts an EXL3 Hadamard block");
	void *inst = NULL;
	cr_assert_neq(ffn_plugin(0)->layer_init(tf_testhost_host(p.cpu), LAYER, PREFIX, &inst),
		      TF_OK);
	cr_assert(strstr(tf_testhost_last_error(p.cpu), "the part [8, 16) of its 128 output features"),
		  "%s", tf_testhost_last_error(p.cpu));
	pair_rank(&p, -1, 1, "split");
	pair_free(&p);

	/* Softmax scoring: the route kernel is sigmoid only. */
	c.score_sigmoid = false;
	p = pair_new(&c, TF_DTYPE_F32, 47);
	pair_add_moe(&p, &c);
	check_refused(p.dev, 0, "softmax");
	pair_free(&p);
}
