/*
 * test_kda_cuda_layer.c - a whole KDA layer through plugins/kda-cuda's
 * kernels (prep, the delta rule, gated norm) against the float64 layer
 * (kda_ref.c), on the SIMT harness (test_kda_cuda_sim) or a GPU
 * (test_kda_cuda_gpu, scripts/gpu-check.sh).  The projections and o_proj, which a
 * device layer takes from the quant plugin, run on the host here.
 * Several sequences per forward, ragged, each carrying its recurrent and
 * conv state from one forward to the next: prefills, then decode steps.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kda/kda_case.h"
#include "kda_cuda.h"
#include "support/testhost.h"

/* Measured at most 3.4e-7 (max |err| / max |ref|); the kda plugin is held
 * to 2e-5 (test_kda.c). */
#define KDA_CUDA_LAYER_TOL 5e-6

#define N_SEQ 3

struct dev_layer {
	tf_kda_cuda_layer L;
	float *buf[6];                  /* the device copies L points into */
	float *S, *conv;                /* every sequence's, one after another */
};

static float *upload(const float *x, size_t n)
{
	float *p = NULL;
	cr_assert_eq(cudaMalloc((void **)&p, n * sizeof(float)), cudaSuccess);
	cr_assert_eq(cudaMemcpy(p, x, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
	return p;
}

static float *dev_zeros(size_t n)
{
	float *p = NULL;
	cr_assert_eq(cudaMalloc((void **)&p, n * sizeof(float)), cudaSuccess);
	cr_assert_eq(cudaMemset(p, 0, n * sizeof(float)), cudaSuccess);
	return p;
}

static void dev_layer_init(struct dev_layer *d, const kda_ref_weights *w)
{
	const size_t P = (size_t)w->heads * w->dim;
	float *a_exp = malloc((size_t)w->heads * sizeof(float));
	cr_assert(a_exp);
	for (int h = 0; h < w->heads; h++)
		a_exp[h] = expf(w->A_log[h]);
	for (int s = 0; s < 3; s++)
		d->buf[s] = upload(w->conv[s], P * w->width);
	d->buf[3] = upload(a_exp, (size_t)w->heads);
	d->buf[4] = upload(w->dt_bias, P);
	d->buf[5] = upload(w->o_norm, (size_t)w->dim);
	free(a_exp);
	d->L = (tf_kda_cuda_layer){
		.heads = w->heads, .dim = w->dim, .width = w->width, .safe_gate = w->safe_gate,
		.lower_bound = (float)w->lower_bound, .eps = (float)w->eps,
		.conv_w = { d->buf[0], d->buf[1], d->buf[2] }, .a_exp = d->buf[3],
		.dt_bias = d->buf[4], .o_norm = d->buf[5],
	};
	d->S = dev_zeros(N_SEQ * P * w->dim);
	d->conv = dev_zeros(N_SEQ * 3 * P * (w->width - 1));
}

static void dev_layer_free(struct dev_layer *d)
{
	for (int i = 0; i < 6; i++)
		cudaFree(d->buf[i]);
	cudaFree(d->S);
	cudaFree(d->conv);
}

/* y[r] = W x[r] for rows of `in`, W [out, in], summed in double. */
static void matmul(float *y, const float *W, const float *x, int64_t rows, int in, int out)
{
	for (int64_t r = 0; r < rows; r++)
		for (int o = 0; o < out; o++) {
			double acc = 0.0;
			for (int i = 0; i < in; i++)
				acc += (double)W[(size_t)o * in + i] * x[r * in + i];
			y[r * out + o] = (float)acc;
		}
}

/* One forward of rows[k] tokens of each sequence: the projections here,
 * prep, the chunked or the recurrent kernel, gated norm, o_proj here. */
static void forward(struct dev_layer *d, const kda_ref_weights *w, const int64_t *rows,
		    const float *x, int64_t n, bool chunked, float *y)
{
	const int H = w->hidden, nH = w->heads, D = w->dim;
	const int64_t P = (int64_t)nH * D;
	float *h[7];
	const float *W[6] = { w->wq, w->wk, w->wv, w->wf, w->wb, w->wg };
	for (int i = 0; i < 7; i++) {
		h[i] = malloc((size_t)n * P * sizeof(float));
		cr_assert(h[i]);
	}
	for (int i = 0; i < 6; i++)
		matmul(h[i], W[i], x, n, H, i == 4 ? nH : (int)P);

	float *dv[7];
	for (int i = 0; i < 6; i++)
		dv[i] = upload(h[i], (size_t)n * (i == 4 ? nH : P));
	cr_assert_eq(cudaMalloc((void **)&dv[6], (size_t)n * P * sizeof(float)), cudaSuccess);
	cr_assert_eq(cudaMemset(dv[6], 0xFF, (size_t)n * P * sizeof(float)), cudaSuccess);
	const tf_kda_cuda_act a = { .q = dv[0], .k = dv[1], .v = dv[2], .g = dv[3],
				    .beta = dv[4], .gate = dv[5], .o = dv[6] };

	tf_kda_cuda_seg seg[N_SEQ], *dseg = NULL;
	for (int k = 0, row0 = 0; k < N_SEQ; row0 += rows[k], k++)
		seg[k] = (tf_kda_cuda_seg){ .row0 = row0, .n = rows[k],
					    .S = d->S + (size_t)k * P * D,
					    .conv = d->conv + (size_t)k * 3 * P * (w->width - 1) };
	cr_assert_eq(cudaMalloc((void **)&dseg, sizeof(seg)), cudaSuccess);
	cr_assert_eq(cudaMemcpy(dseg, seg, sizeof(seg), cudaMemcpyHostToDevice), cudaSuccess);

	const tf_kda_cuda_io io = tf_kda_cuda_act_io(&d->L, &a);
	cr_assert_eq(tf_kda_cuda_prep(0, &d->L, &a, dseg, N_SEQ), cudaSuccess);
	cr_assert_eq(chunked ? tf_kda_cuda_chunked(0, &io, dseg, N_SEQ, nH, D, D) :
			       tf_kda_cuda_recurrent(0, &io, dseg, N_SEQ, nH, D, D),
		     cudaSuccess);
	cr_assert_eq(tf_kda_cuda_gated_norm(0, &d->L, &a, n), cudaSuccess);
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(cudaMemcpy(h[6], dv[6], (size_t)n * P * sizeof(float),
				cudaMemcpyDeviceToHost), cudaSuccess);
	matmul(y, w->wo, h[6], n, (int)P, H);

	for (int i = 0; i < 7; i++) {
		free(h[i]);
		cudaFree(dv[i]);
	}
	cudaFree(dseg);
}

/* Forwards of plan[f][k] tokens of sequence k, each against the float64
 * layer run on each sequence alone. */
static void check_layer(bool safe_gate, float dt_shift, int W, int nH, int D, uint64_t seed)
{
	static const int64_t plan[][N_SEQ] = { { 7, 33, 1 }, { 1, 1, 1 }, { 20, 0, 16 }, { 1, 1, 1 } };
	struct kda_case c;
	struct dev_layer d;
	kda_ref_state rs[N_SEQ];
	kda_case_init_shape(&c, safe_gate, false, dt_shift, W, nH, D, seed);
	dev_layer_init(&d, &c.w);
	for (int k = 0; k < N_SEQ; k++)
		kda_ref_state_init(&rs[k], &c.w);
	const int H = c.w.hidden;

	for (size_t f = 0; f < sizeof(plan) / sizeof(plan[0]); f++) {
		int64_t n = 0;
		for (int k = 0; k < N_SEQ; k++)
			n += plan[f][k];
		float *x = malloc((size_t)n * H * sizeof(float)), *y = malloc((size_t)n * H * sizeof(float));
		float *yd = malloc((size_t)n * H * sizeof(float));
		cr_assert(x && y && yd);
		tf_test_fill_uniform(x, (size_t)n * H, 1.0f, &seed);
		for (int64_t i = 0; i < n * H; i++)
			y[i] = NAN;
		const bool chunked = f % 2 == 0;
		forward(&d, &c.w, plan[f], x, n, chunked, y);
		for (int k = 0, row0 = 0; k < N_SEQ; row0 += plan[f][k], k++)
			kda_case_reference(&c, &rs[k], x + (size_t)row0 * H, plan[f][k],
					   yd + (size_t)row0 * H);
		double e = tf_test_rel_err(y, yd, (size_t)n * H, 1e-3);
		cr_log_info("layer safe %d dt %g W %d heads %d D %d, forward %zu (%s): rel err %.3g",
			    safe_gate, dt_shift, W, nH, D, f, chunked ? "chunked" : "recurrent", e);
		cr_expect(e < KDA_CUDA_LAYER_TOL,
			  "safe %d dt %g W %d heads %d D %d, forward %zu (%s): rel err %.3g vs f64",
			  safe_gate, dt_shift, W, nH, D, f, chunked ? "chunked" : "recurrent", e);
		free(x);
		free(y);
		free(yd);
	}
	for (int k = 0; k < N_SEQ; k++)
		kda_ref_state_free(&rs[k]);
	dev_layer_free(&d);
	kda_case_free(&c);
}

/* ling-nano's head size (32), ling-tiny's and Flash's (128), and the unit
 * tests' 16; the safe gate near its bound, Kimi's gate; conv widths 4 and 2. */
Test(kda_cuda_layer, matches_f64_layer)
{
	check_layer(true, 0.0f, 4, 3, 16, 51);
	check_layer(true, 3.0f, 4, 4, 32, 52);
	check_layer(true, 0.0f, 4, 2, 128, 53);
	check_layer(false, 0.0f, 4, 2, 32, 54);
	check_layer(true, -2.0f, 2, 2, 32, 55);
}
