/*
 * test_quantize.c - the quantizer: the Viterbi recovers an exactly
 * representable tile, lands at the spec's error on Gaussian tiles (§7.4),
 * and a quantized layer reloads through exl3.so and computes x·Wq.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/testhost.h"
#include "quantize.h"
#include "viterbi.h"

static double gauss(uint64_t *s)
{
	double u[2];
	for (int i = 0; i < 2; i++) {
		*s = *s * 6364136223846793005ull + 1442695040888963407ull;
		u[i] = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
	}
	return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* A path the trellis can take is found again, with zero error. */
Test(exl3_quantize, viterbi_recovers_valid_path)
{
	static const int ks[] = { 3, 5 };
	uint64_t seed = 5;
	for (size_t i = 0; i < 2; i++) {
		int K = ks[i];
		tf_exl3_viterbi v;
		uint16_t sym[TF_EXL3_TILE_N], tile[16 * TF_EXL3_K_MAX], st[TF_EXL3_TILE_N];
		float x[TF_EXL3_TILE_N];
		cr_assert_eq(tf_exl3_viterbi_init(&v, K, TF_EXL3_CB_MUL1), 0);
		for (int t = 0; t < TF_EXL3_TILE_N; t++)
			sym[t] = (uint16_t)(gauss(&seed) * 1000) & ((1u << K) - 1);
		tf_exl3_tile_pack(sym, K, tile);
		for (int t = 0; t < TF_EXL3_TILE_N; t++)
			x[t] = tf_exl3_cb_f32(tf_exl3_state(tile, K, t), TF_EXL3_CB_MUL1);
		double err = tf_exl3_viterbi_run(&v, x, st);
		cr_expect_eq(err, 0.0, "K=%d: error %g on a representable tile", K, err);
		/* The path found is tail-biting: it survives pack + unpack. */
		tf_exl3_tile_pack(st, K, tile);
		for (int t = 0; t < TF_EXL3_TILE_N; t++)
			cr_assert_eq(tf_exl3_state(tile, K, t), st[t], "K=%d t=%d", K, t);
		tf_exl3_viterbi_free(&v);
	}
}

/* Spec §7.4: relative MSE on Gaussian weights, K=3 0.017-0.018, K=4
 * 0.0043-0.0055 (a few tiles: allow some spread). */
Test(exl3_quantize, gaussian_layer_error_and_reload)
{
	static const struct { int K; tf_exl3_cb cb; double lo, hi; } cases[] = {
		{ 3, TF_EXL3_CB_MUL1, 0.014, 0.022 },
		{ 4, TF_EXL3_CB_3INST, 0.0035, 0.0065 },
	};
	const int64_t out = 200, in = 128, rows = 3;     /* out pads to 256 */
	uint64_t seed = 9;
	float *w = malloc(sizeof(float) * out * in), *x = malloc(sizeof(float) * rows * in);
	float *y = malloc(sizeof(float) * rows * out), *ref = malloc(sizeof(float) * rows * out);
	double *wq = malloc(sizeof(double) * 128 * 256);

	for (int64_t i = 0; i < out * in; i++)
		w[i] = (float)(0.02 * gauss(&seed));
	tf_test_fill_uniform(x, rows * in, 1.0f, &seed);
	for (size_t c = 0; c < 2; c++) {
		tf_exl3_qopts o = { .K = cases[c].K, .cb = cases[c].cb, .seed = 1, .threads = 2 };
		tf_exl3_qtensor q;
		cr_assert_eq(tf_exl3_quantize(w, out, in, &o, &q), 0);
		cr_expect_eq(q.k, 128);
		cr_expect_eq(q.n, 256);
		cr_expect(q.rel_mse > cases[c].lo && q.rel_mse < cases[c].hi,
			  "K=%d %s: rel mse %g", q.K, tf_exl3_cb_name(q.cb), q.rel_mse);

		/* Reload as stored tensors and check y = x·Wq. */
		tf_testhost *th = tf_testhost_new(NULL, 2);
		const tf_host *h = tf_testhost_host(th);
		int64_t ts[3] = { q.k / 16, q.n / 16, 16 * q.K };
		int32_t marker = TF_EXL3_MUL1_MARKER;
		tf_lin lin = { 0 };
		tf_testhost_add_tensor(th, "q.trellis", TF_DTYPE_I16, 3, ts, q.trellis);
		tf_testhost_add_tensor(th, "q.suh", TF_DTYPE_F16, 1, &q.k, q.suh);
		tf_testhost_add_tensor(th, "q.svh", TF_DTYPE_F16, 1, &q.n, q.svh);
		if (q.cb == TF_EXL3_CB_MUL1)
			tf_testhost_add_tensor(th, "q.mul1", TF_DTYPE_I32, 0, NULL, &marker);
		cr_assert_eq(h->lin_open(h, "q", in, out, &lin), 0, "%s", tf_testhost_last_error(th));
		cr_assert_eq(tf_exl3_reconstruct(&q, wq), 0);
		for (int64_t r = 0; r < rows; r++)
			for (int64_t j = 0; j < out; j++) {
				double s = 0;
				for (int64_t i = 0; i < in; i++)
					s += (double)x[r * in + i] * wq[i * q.n + j];
				ref[r * out + j] = (float)s;
			}
		for (int64_t i = 0; i < rows * out; i++)
			y[i] = NAN;
		cr_assert_eq(tf_lin_forward(&lin, x, rows, y), 0);
		double err = tf_test_rel_err(y, ref, rows * out, 1e-3);
		cr_expect_lt(err, 1e-3, "K=%d reload: rel err %g", q.K, err);
		h->lin_close(h, &lin);
		tf_testhost_free(th);
		tf_exl3_qtensor_free(&q);
	}
	free(w); free(x); free(y); free(ref); free(wq);
}

Test(exl3_quantize, refuses_bad_arguments)
{
	float w[4] = { 1, 2, 3, 4 };
	tf_exl3_qtensor q;
	tf_exl3_qopts o = { .K = 0, .cb = TF_EXL3_CB_MUL1, .threads = 1 };
	cr_expect_eq(tf_exl3_quantize(w, 2, 2, &o, &q), TF_ERR_INVALID);
	o.K = 9;
	cr_expect_eq(tf_exl3_quantize(w, 2, 2, &o, &q), TF_ERR_INVALID);
	o.K = 3;
	cr_expect_eq(tf_exl3_quantize(w, 0, 2, &o, &q), TF_ERR_INVALID);
}
