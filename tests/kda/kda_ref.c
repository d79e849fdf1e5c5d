/* kda_ref.c - see kda_ref.h.  Plain loops in double, nothing shared with
 * the plugin. */
#include "kda_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double silu(double x) { return x * sigmoid(x); }
static double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }

/* y[out] = W[out, in] x[in] */
static void matvec(const float *W, int out, int in, const double *x, double *y)
{
	for (int o = 0; o < out; o++) {
		double s = 0.0;
		for (int i = 0; i < in; i++)
			s += (double)W[(int64_t)o * in + i] * x[i];
		y[o] = s;
	}
}

void kda_ref_state_init(kda_ref_state *s, const kda_ref_weights *w)
{
	int64_t P = (int64_t)w->heads * w->dim;
	s->S = calloc((size_t)w->heads * w->dim * w->dim, sizeof(double));
	s->hist = calloc((size_t)3 * P * (w->width - 1) + 1, sizeof(double));
}

void kda_ref_state_free(kda_ref_state *s)
{
	free(s->S);
	free(s->hist);
}

void kda_ref_delta(double *S, int K, int V, int64_t n, const float *q,
		   const float *k, const float *g, const float *v,
		   const float *beta, double *o)
{
	double *u = malloc((size_t)V * sizeof(double));
	for (int64_t t = 0; t < n; t++) {
		const float *qt = q + t * K, *kt = k + t * K, *gt = g + t * K;
		for (int i = 0; i < K; i++)
			for (int j = 0; j < V; j++)
				S[i * V + j] *= exp((double)gt[i]);
		for (int j = 0; j < V; j++) {
			double ks = 0.0;
			for (int i = 0; i < K; i++)
				ks += (double)kt[i] * S[i * V + j];
			u[j] = beta[t] * ((double)v[t * V + j] - ks);
		}
		for (int i = 0; i < K; i++)
			for (int j = 0; j < V; j++)
				S[i * V + j] += (double)kt[i] * u[j];
		for (int j = 0; j < V; j++) {
			double os = 0.0;
			for (int i = 0; i < K; i++)
				os += (double)qt[i] * S[i * V + j];
			o[t * V + j] = os;
		}
	}
	free(u);
}

void kda_ref_forward(const kda_ref_weights *w, kda_ref_state *s, const float *x,
		     int64_t n, double *y)
{
	const int H = w->hidden, nH = w->heads, D = w->dim, W = w->width;
	const int P = nH * D;
	double *xd = malloc((size_t)H * sizeof(double));
	double *raw[3], *f = malloc((size_t)P * sizeof(double));
	double *g = malloc((size_t)P * sizeof(double)), *b = malloc((size_t)nH * sizeof(double));
	double *o = malloc((size_t)P * sizeof(double));
	double *low = malloc((size_t)(w->rank + 1) * sizeof(double));
	for (int c = 0; c < 3; c++)
		raw[c] = malloc((size_t)P * sizeof(double));
	const float *Wqkv[3] = { w->wq, w->wk, w->wv };

	for (int64_t t = 0; t < n; t++) {
		for (int i = 0; i < H; i++)
			xd[i] = x[t * H + i];
		for (int c = 0; c < 3; c++) {
			matvec(Wqkv[c], P, H, xd, raw[c]);
			/* conv over [hist..., x_t], then shift x_t into hist */
			for (int ch = 0; ch < P; ch++) {
				double *hist = s->hist + ((int64_t)c * P + ch) * (W - 1);
				const float *wc = w->conv[c] + (int64_t)ch * W;
				double acc = wc[W - 1] * raw[c][ch];
				for (int j = 0; j < W - 1; j++)
					acc += wc[j] * hist[j];
				for (int j = 0; j + 1 < W - 1; j++)
					hist[j] = hist[j + 1];
				if (W > 1)
					hist[W - 2] = raw[c][ch];
				raw[c][ch] = silu(acc);
			}
		}
		if (w->rank) {
			matvec(w->wfa, w->rank, H, xd, low);
			matvec(w->wfb, P, w->rank, low, f);
			matvec(w->wga, w->rank, H, xd, low);
			matvec(w->wgb, P, w->rank, low, g);
		} else {
			matvec(w->wf, P, H, xd, f);
			matvec(w->wg, P, H, xd, g);
		}
		matvec(w->wb, nH, H, xd, b);

		for (int h = 0; h < nH; h++) {
			double *q = raw[0] + h * D, *k = raw[1] + h * D, *v = raw[2] + h * D;
			double qn = 0, kn = 0;
			for (int i = 0; i < D; i++) {
				qn += q[i] * q[i];
				kn += k[i] * k[i];
			}
			qn = 1.0 / sqrt(qn + 1e-6) / sqrt((double)D);
			kn = 1.0 / sqrt(kn + 1e-6);
			double beta = sigmoid(b[h]), a = exp((double)w->A_log[h]);
			double *S = s->S + (int64_t)h * D * D;
			for (int i = 0; i < D; i++) {
				double graw = f[h * D + i] + w->dt_bias[h * D + i];
				double gi = w->safe_gate ? w->lower_bound * sigmoid(a * graw)
							 : -a * softplus(graw);
				for (int j = 0; j < D; j++)
					S[i * D + j] *= exp(gi);
			}
			for (int j = 0; j < D; j++) {
				double ks = 0.0;
				for (int i = 0; i < D; i++)
					ks += k[i] * kn * S[i * D + j];
				double u = beta * (v[j] - ks);
				for (int i = 0; i < D; i++)
					S[i * D + j] += k[i] * kn * u;
			}
			double ss = 0.0;
			for (int j = 0; j < D; j++) {
				double os = 0.0;
				for (int i = 0; i < D; i++)
					os += q[i] * qn * S[i * D + j];
				o[h * D + j] = os;
				ss += os * os;
			}
			double r = 1.0 / sqrt(ss / D + w->eps);
			for (int j = 0; j < D; j++)
				o[h * D + j] *= r * w->o_norm[j] * sigmoid(g[h * D + j]);
		}
		matvec(w->wo, H, P, o, y + t * H);
	}
	for (int c = 0; c < 3; c++)
		free(raw[c]);
	free(xd);
	free(f);
	free(g);
	free(b);
	free(o);
	free(low);
}
