/*
 * test_sample_cuda.c - backend-cuda's sampler kernels (sample.cu, on the
 * SIMT harness) against core's tf_sampler_sample_ref: the same token for
 * every row, on random logits with NaN, -inf and exact ties (logits on a
 * coarse grid), greedy and drawn, under several temperature / top-k /
 * top-p / min-p settings, 1, 3 and 17 rows, rows further apart than the
 * sampled vocabulary (a limit below a padded lm_head), and a row at
 * Ling's vocabulary size.
 *
 * Exact equality is the contract on the harness, where expf is the host's.
 * On a GPU, expf may differ from glibc's in the last bit, which can move a
 * draw whose u lies within that rounding of a candidate's boundary.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "engine/sampler.h"
#include "support/testhost.h"

/* Device copies of the rows (ld floats apart, the first V sampled), their
 * (seq, pos) and a poisoned token array. */
static void sample_on_device(const tf_cuda_sample_par *par, const float *logits, int rows,
			     int V, int ld, const uint64_t *seq, const uint64_t *pos,
			     int32_t *token)
{
	float *d_l;
	uint64_t *d_seq, *d_pos;
	int32_t *d_tok;
	void *d_scratch;

	cr_assert_eq(cudaMalloc((void **)&d_l, sizeof(float) * rows * ld), cudaSuccess);
	cr_assert_eq(cudaMalloc((void **)&d_seq, sizeof(uint64_t) * rows), cudaSuccess);
	cr_assert_eq(cudaMalloc((void **)&d_pos, sizeof(uint64_t) * rows), cudaSuccess);
	cr_assert_eq(cudaMalloc((void **)&d_tok, sizeof(int32_t) * rows), cudaSuccess);
	cr_assert_eq(cudaMalloc(&d_scratch, tf_cuda_sample_scratch_bytes(rows)), cudaSuccess);
	cudaMemset(d_scratch, 0xFF, tf_cuda_sample_scratch_bytes(rows));
	cudaMemcpy(d_l, logits, sizeof(float) * rows * ld, cudaMemcpyHostToDevice);
	cudaMemcpy(d_seq, seq, sizeof(uint64_t) * rows, cudaMemcpyHostToDevice);
	cudaMemcpy(d_pos, pos, sizeof(uint64_t) * rows, cudaMemcpyHostToDevice);
	cudaMemset(d_tok, 0x7F, sizeof(int32_t) * rows);
	cr_assert_eq(tf_cuda_sample(0, par, d_l, rows, V, ld, d_seq, d_pos, d_scratch, d_tok),
		     cudaSuccess);
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cudaMemcpy(token, d_tok, sizeof(int32_t) * rows, cudaMemcpyDeviceToHost);
	cudaFree(d_l);
	cudaFree(d_seq);
	cudaFree(d_pos);
	cudaFree(d_tok);
	cudaFree(d_scratch);
}

/* rows random rows over V tokens; `grid` > 0 rounds logits to multiples of
 * it (ties); a few NaN and -inf per row. */
static void random_logits(float *l, int rows, int V, float scale, float grid, uint64_t *seed)
{
	tf_test_fill_uniform(l, (size_t)rows * V, scale, seed);
	for (int r = 0; r < rows; r++) {
		float *row = l + (size_t)r * V;
		for (int i = 0; grid > 0 && i < V; i++)
			row[i] = grid * roundf(row[i] / grid);
		row[(r * 7 + 3) % V] = NAN;
		row[(r * 13 + 5) % V] = -INFINITY;
	}
}

/* rows rows of ld logits, the first V of each sampled: the lanes past V
 * hold the row's largest values, which a sampler reading them would pick. */
static void check_sample_ld(const tf_sampler_params *sp, int rows, int V, int ld, float grid,
			    uint64_t seed)
{
	float *l = malloc(sizeof(float) * rows * ld);
	uint64_t *seq = malloc(sizeof(uint64_t) * rows), *pos = malloc(sizeof(uint64_t) * rows);
	int32_t *tok = malloc(sizeof(int32_t) * rows);
	tf_sampler s;
	tf_cuda_sample_par par = { .temperature = sp->temperature, .top_p = sp->top_p,
				       .min_p = sp->min_p, .top_k = sp->top_k, .seed = sp->seed };

	random_logits(l, rows, ld, 8.0f, grid, &seed);
	for (int r = 0; r < rows; r++)
		for (int i = V; i < ld; i++)
			l[(size_t)r * ld + i] = 100.0f;
	for (int r = 0; r < rows; r++) {
		seq[r] = (uint64_t)r % 3;
		pos[r] = 100 + (uint64_t)r * 11;
	}
	sample_on_device(&par, l, rows, V, ld, seq, pos, tok);
	cr_assert_eq(tf_sampler_init(&s, sp, V), TF_OK);
	for (int r = 0; r < rows; r++) {
		int32_t want = -2;
		cr_assert_eq(tf_sampler_sample_ref(&s, l + (size_t)r * ld, NULL, 0, seq[r], pos[r],
						   &want), TF_OK);
		cr_assert_eq(tok[r], want,
			     "t %g top_k %d top_p %g min_p %g V %d row %d: token %d, CPU %d",
			     (double)sp->temperature, sp->top_k, (double)sp->top_p,
			     (double)sp->min_p, V, r, tok[r], want);
	}
	tf_sampler_free(&s);
	free(l);
	free(seq);
	free(pos);
	free(tok);
}

static void check_sample(const tf_sampler_params *sp, int rows, int V, float grid,
			 uint64_t seed)
{
	check_sample_ld(sp, rows, V, V, grid, seed);
}

static tf_sampler_params params(float t, int top_k, float top_p, float min_p, uint64_t seed)
{
	tf_sampler_params p;
	tf_sampler_params_default(&p);
	p.temperature = t;
	p.top_k = top_k;
	p.top_p = top_p;
	p.min_p = min_p;
	p.seed = seed;
	return p;
}

static const int rows_cases[] = { 1, 3, 17 };

Test(sample_cuda, greedy_is_the_cpu_argmax)
{
	tf_sampler_params p = params(0, 0, 1, 0, 1);
	for (int i = 0; i < 3; i++) {
		check_sample(&p, rows_cases[i], 1000 + 77 * i, 0, 10 + i);
		check_sample(&p, rows_cases[i], 300, 0.5f, 20 + i);    /* ties: lower id */
	}
}

Test(sample_cuda, draws_are_the_cpu_draws)
{
	const tf_sampler_params ps[] = {
		params(0.7f, 40, 0.9f, 0, 42), params(1.0f, 64, 1, 0.05f, 7),
		params(1.3f, 1, 1, 0, 3), params(0.5f, 5, 0.5f, 0, 99),
		params(2.0f, 50, 0.95f, 0.01f, 1234), params(1.0f, 20, 1, 0, 5),
	};
	/* 17 rows once: each row costs top_k block reductions on the harness. */
	check_sample(&ps[0], 17, 1531, 0, 1);
	for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++)
		for (int i = 0; i < 2; i++) {
			check_sample(&ps[pi], rows_cases[i], 1531, 0, 100 * pi + i);
			check_sample(&ps[pi], 3, 777, 0.25f, 200 * pi + i);
		}
}

Test(sample_cuda, draws_over_many_rows)
{
	/* 48 rows drawn at different positions: tokens across the candidates. */
	tf_sampler_params p = params(1.0f, 8, 0.98f, 0, 77);
	check_sample(&p, 48, 97, 0, 5);
}

Test(sample_cuda, candidates_merged_over_slices)
{
	/* 5000 tokens: slices of 2048, 2048 and 904, ties across them; 4101:
	 * a last slice of 5 tokens, shorter than top-8 (padded); Ling's
	 * vocabulary: 64 slices (top-8 keeps the harness's reductions few). */
	const struct {
		tf_sampler_params p;
		int rows, V;
		float grid;
	} cases[] = {
		{ params(1.0f, 20, 0.9f, 0, 21), 3, 5000, 0.25f },
		{ params(0, 0, 1, 0, 21), 3, 5000, 0.5f },
		{ params(0.7f, 8, 1, 0.02f, 22), 3, 4101, 0.25f },
		{ params(0.8f, 8, 0.95f, 0, 11), 1, 157184, 0 },
		{ params(0, 0, 1, 0, 11), 1, 157184, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_sample(&cases[i].p, cases[i].rows, cases[i].V, cases[i].grid, 31 + i);
}

Test(sample_cuda, rows_wider_than_the_vocabulary)
{
	/* A sampling vocabulary below lm_head's rows (tf_seq_set_sampling's
	 * n_vocab): the padded lanes hold the largest logits and are skipped. */
	tf_sampler_params g = params(0, 0, 1, 0, 1), d = params(0.9f, 16, 0.9f, 0.01f, 8);
	check_sample_ld(&g, 3, 1000, 1031, 0, 61);
	check_sample_ld(&d, 3, 1000, 1031, 0.25f, 62);
	check_sample_ld(&d, 2, 4500, 4600, 0, 63);
}

Test(sample_cuda, all_minus_inf_is_minus_one)
{
	float l[40];
	uint64_t seq = 0, pos = 0;
	int32_t tok;
	for (int i = 0; i < 40; i++)
		l[i] = i % 2 ? -INFINITY : NAN;
	tf_cuda_sample_par par = { .temperature = 0 };
	sample_on_device(&par, l, 1, 40, 40, &seq, &pos, &tok);
	cr_assert_eq(tok, -1);
	par = (tf_cuda_sample_par){ .temperature = 1, .top_k = 8, .top_p = 1 };
	sample_on_device(&par, l, 1, 40, 40, &seq, &pos, &tok);
	cr_assert_eq(tok, -1);
}

Test(sample_cuda, refuses_what_it_cannot_draw)
{
	tf_cuda_sample_par par = { .temperature = 1, .top_k = 0, .top_p = 1 };
	cr_expect_eq(tf_cuda_sample(0, &par, NULL, 1, 10, 10, NULL, NULL, NULL, NULL),
		     cudaErrorInvalidValue);
	par.top_k = TF_CUDA_SAMPLE_MAX_K + 1;
	cr_expect_eq(tf_cuda_sample(0, &par, NULL, 1, 10, 10, NULL, NULL, NULL, NULL),
		     cudaErrorInvalidValue);
	par.top_k = 4;
	par.top_p = 0;
	cr_expect_eq(tf_cuda_sample(0, &par, NULL, 1, 10, 10, NULL, NULL, NULL, NULL),
		     cudaErrorInvalidValue);
	par.top_p = 1;          /* rows closer than the vocabulary */
	cr_expect_eq(tf_cuda_sample(0, &par, NULL, 1, 10, 9, NULL, NULL, NULL, NULL),
		     cudaErrorInvalidValue);
}
