/*
 * test_moe_cuda_exl3.c - moe-cuda's EXL3 expert MLPs (tf_moe_cuda_exl3_mlp)
 * over experts of chosen, ragged row counts in one launch, so both of its
 * products run side by side: the GEMV (8 rows or fewer) and the WMMA GEMM
 * (more: one partial 64-row tile, exactly one or two fragments, one
 * more than a fragment, several tiles), and experts of another rank left
 * alone by both.  Each expert's rows against
 * moe.so's "dense" layer over the same expert's weights through exl3.so's
 * CPU linears (the CPU path's MLP, no clamp: dense never clamps).
 *
 * The weights are random trellises, each linear at its own K (every one
 * of 1..8 among the GEMM's experts) and codebook, loaded on the device by
 * moe-cuda's own upload (tf_moe_cuda_exl3_load, through a test host on the
 * device backend); inputs are fresh random values routed by a shuffled
 * assignment (an expert's tokens scattered); the scratch and outputs are
 * NaN-poisoned first.  Built on the SIMT harness into test_moe_cuda_sim
 * (tests/simt), on a GPU into test_moe_cuda_gpu (tests/moe).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_buf.h"
#include "ffn_so.h"
#include "moe_cuda.h"
#include "moe_cuda_exl3.h"
#include "support/testhost.h"
#include "tf/backend.h"
#include "tf/ffn.h"

#ifndef TF_CUDA_BACKEND
#define TF_CUDA_BACKEND TF_PLUGIN_DIR "/backend-cuda.so"
#endif

#define PREFIX "model.layers.1.mlp"
#define LAYER 1

/*
 * Relative error (max |err| / max |ref| over an expert's rows).  Both
 * products decode each weight to fp16 exactly, where the CPU's fused
 * decode skips that rounding (test_moe_cuda_plugin.c's EXL3_BOUND): the
 * GEMV's experts measure 3.6e-4 to 3.9e-4 three linears deep.  The GEMM
 * also rounds each linear's input (xh, after the input Hadamard) to fp16,
 * a relative error of at most 2^-11 = 4.9e-4 an element; those errors are
 * independent, so an output's error grows as the root of its squared
 * terms, about its typical size times 2^-11 / sqrt(3), not as their sum:
 * measured 4.1e-4 to 8.0e-4.  The bound, 2e-3, is four times the rounding
 * of one element; a wrong tile, row or codebook is off by the output's
 * own size.
 */
#define GEMM_BOUND 2e-3

/*
 * Experts with rows[e] rows each (top-1: token t's expert a shuffled
 * assignment), hidden H, inter I; linear j (gate, up, down) of expert e at
 * K = 1 + (3e + j + shift) % 8, codebook (e + j + shift) % 3.  Both hosts
 * get the same tensors; the CPU one runs moe.so's dense layer per expert.
 * With `elsewhere`, the experts it marks are another rank's ([tp] moe =
 * experts: not loaded, descriptors zero), their rows left as poisoned.
 */
static void check_ragged(const int *rows, int E, int H, int I, int shift,
			 const int32_t *elsewhere, uint64_t seed)
{
	static const char *const leaf[3] = { ".gate_proj", ".up_proj", ".down_proj" };
	tf_model_config c = {
		.hidden_size = H, .intermediate_size = I, .moe_intermediate_size = I,
		.num_experts = E, .num_experts_per_tok = 1, .n_layers_total = 4,
	};
	tf_testhost *cpu = tf_testhost_new_with(&c, 1, NULL, NULL);
	tf_testhost *dev = tf_testhost_new_with(&c, 1, TF_CUDA_BACKEND, NULL);
	const tf_host *hc = tf_testhost_host(cpu), *hd = tf_testhost_host(dev);
	char name[160];
	int n = 0;

	for (int e = 0; e < E; e++) {
		n += rows[e];
		for (int j = 0; j < 3; j++) {
			const int K = 1 + (3 * e + j + shift) % 8, cb = (e + j + shift) % 3;
			uint64_t s = seed + 100 * e + j;
			snprintf(name, sizeof(name), PREFIX ".experts.%d%s", e, leaf[j]);
			tf_testhost_add_exl3_as(cpu, name, j < 2 ? H : I, j < 2 ? I : H, K, cb, &s);
			s = seed + 100 * e + j;
			tf_testhost_add_exl3_as(dev, name, j < 2 ? H : I, j < 2 ? I : H, K, cb, &s);
		}
	}
	tf_moe_cuda_exl3_w w = { .hidden = H, .inter = I, .n_experts = E, .limit = 0 };
	tf_moe_cuda_exl3_mem wmem = { 0 };
	cr_assert_eq(tf_moe_cuda_exl3_load(hd, "test", PREFIX ".experts", true, 0, I, elsewhere,
					   &w, &wmem), TF_OK, "%s", tf_testhost_last_error(dev));

	/* Token t goes to expert idx[t]: the experts' shares, shuffled. */
	int32_t *idx = malloc(sizeof(int32_t) * n), *off = malloc(sizeof(int32_t) * (E + 1));
	int32_t *tok = malloc(sizeof(int32_t) * n);
	float *tw = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n * H);
	float *o = malloc(sizeof(float) * n * H), *xe = malloc(sizeof(float) * n * H);
	float *ye = malloc(sizeof(float) * n * H), r[1];
	cr_assert(idx && off && tok && tw && x && o && xe && ye);
	for (int e = 0, t = 0; e < E; e++)
		for (int i = 0; i < rows[e]; i++)
			idx[t++] = e;
	for (int t = n - 1; t > 0; t--) {
		tf_test_fill_uniform(r, 1, 1.0f, &seed);
		const int u = (int)((r[0] + 1.0f) * 0.5f * (t + 1)) % (t + 1);
		const int32_t v = idx[t];
		idx[t] = idx[u];
		idx[u] = v;
	}
	tf_test_fill_uniform(tw, (size_t)n, 1.0f, &seed);
	tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);

	tf_moe_cuda_plan p;
	void *pmem = dev_poisoned(tf_moe_cuda_plan_bytes(E, 1, n));
	int32_t *d_idx = dev_put(idx, sizeof(int32_t) * n);
	float *d_tw = dev_put(tw, sizeof(float) * n), *d_x = dev_put(x, sizeof(float) * n * H);
	float *d_h = dev_poisoned(tf_moe_cuda_exl3_scratch(&w, n) * sizeof(float));
	float *d_o = dev_poisoned(sizeof(float) * n * H);
	tf_moe_cuda_plan_init(&p, pmem, E, 1, n);
	cr_assert_eq(tf_moe_cuda_dispatch(0, &p, d_idx, d_tw, n, E, 1), cudaSuccess);
	cr_assert_eq(tf_moe_cuda_exl3_mlp(0, &w, &p, 1, d_x, n, d_h, d_o), cudaSuccess);
	dev_get(o, d_o, sizeof(float) * n * H);
	dev_get(off, p.off, sizeof(int32_t) * (E + 1));
	dev_get(tok, p.tok, sizeof(int32_t) * n);

	const tf_plugin_ffn *dense = ffn_plugin(1);
	for (int e = 0; e < E; e++) {
		const int m = off[e + 1] - off[e];
		void *inst = NULL;
		cr_assert_eq(m, rows[e], "expert %d: %d rows, want %d", e, m, rows[e]);
		if (elsewhere && elsewhere[e]) {
			const unsigned char *b = (const unsigned char *)(o + (size_t)off[e] * H);
			for (size_t i = 0; i < (size_t)m * H * sizeof(float); i++)
				cr_assert_eq(b[i], 0xFF, "expert %d (another rank's): rows written", e);
			continue;
		}
		if (!m)
			continue;
		for (int i = 0; i < m; i++)
			memcpy(xe + (size_t)i * H, x + (size_t)tok[off[e] + i] * H, sizeof(float) * H);
		snprintf(name, sizeof(name), PREFIX ".experts.%d", e);
		cr_assert_eq(dense->layer_init(hc, LAYER, name, &inst), TF_OK, "%s",
			     tf_testhost_last_error(cpu));
		cr_assert_eq(dense->forward(inst, xe, m, ye), TF_OK, "%s",
			     tf_testhost_last_error(cpu));
		dense->layer_fini(inst);
		const double err = tf_test_rel_err(o + (size_t)off[e] * H, ye, (size_t)m * H, 1e-3);
		cr_log_info("expert %d (K %d/%d/%d, cb %d/%d/%d) %d rows (%s): rel err %.3g", e,
			    1 + (3 * e + shift) % 8, 1 + (3 * e + 1 + shift) % 8,
			    1 + (3 * e + 2 + shift) % 8, (e + shift) % 3, (e + 1 + shift) % 3,
			    (e + 2 + shift) % 3, m, m > 8 ? "GEMM" : "GEMV", err);
		cr_expect(err <= GEMM_BOUND, "expert %d, %d rows: rel err %g > %g", e, m, err,
			  GEMM_BOUND);
	}
	tf_moe_cuda_exl3_free(hd, &wmem);
	cudaFree(pmem);
	cudaFree(d_idx);
	cudaFree(d_tw);
	cudaFree(d_x);
	cudaFree(d_h);
	cudaFree(d_o);
	free(idx); free(off); free(tok); free(tw); free(x); free(o); free(xe); free(ye);
	tf_testhost_free(dev);
	tf_testhost_free(cpu);
}

/* 0, 1 and 8 rows (the GEMV), 9 (the GEMM's fewest), 15, 16, 17 (one
 * fragment, less, more), 63 and 200 (a partial tile, three whole and a
 * partial); hidden 200 and inter 96 padded to 256 and 128. */
Test(moe_cuda_exl3, ragged_experts_match_cpu)
{
	static const int rows[] = { 0, 1, 15, 16, 17, 63, 200, 8, 9 };
	check_ragged(rows, 9, 200, 96, 0, NULL, 61);
}

/* Other bits and codebooks, hidden 128 and inter 256 (the GEMM's k and n
 * swap sides): 70 rows (a whole tile and 6 rows), 9, 33, 2; the experts of
 * 9 and of 2 rows another rank's, so one skipped by each product. */
Test(moe_cuda_exl3, ragged_experts_other_bits_match_cpu)
{
	static const int rows[] = { 70, 0, 9, 33, 2, 12 };
	static const int32_t elsewhere[] = { 0, 0, 1, 0, 1, 0 };
	check_ragged(rows, 6, 128, 256, 4, elsewhere, 62);
}
