/* delta.c - see delta.h. */
#include "delta.h"

#include <math.h>
#include <string.h>

#include "../common/vec.h"

/* Smallest decay within a sub-block whose inverse the chunked form lets
 * through: e^-80, so the inverse (~5.5e34) stays below FLT_MAX even
 * multiplied by unit vectors. */
#define KDA_DECAY_MIN 1.8e-35f

static inline const float *row(const float *p, int64_t i, int64_t ld) { return p + i * ld; }

void kda_delta_ref(float *S, int K, int V, int64_t n, const kda_head_io *io)
{
	for (int64_t t = 0; t < n; t++) {
		const float *q = row(io->q, t, io->ld), *k = row(io->k, t, io->ld);
		const float *g = row(io->g, t, io->ld), *v = row(io->v, t, io->ld);
		float beta = io->beta[t * io->ldb];
		float *o = io->o + t * io->ld;

		for (int i = 0; i < K; i++) {
			float a = expf(g[i]);
			for (int j = 0; j < V; j++)
				S[i * V + j] *= a;
		}
		/* Column j of S is all that u_j, its write and o_j touch. */
		for (int j = 0; j < V; j++) {
			float ks = 0.0f, qs = 0.0f;
			for (int i = 0; i < K; i++)
				ks += k[i] * S[i * V + j];
			float u = beta * (v[j] - ks);
			for (int i = 0; i < K; i++) {
				S[i * V + j] += k[i] * u;
				qs += q[i] * S[i * V + j];
			}
			o[j] = qs;
		}
	}
}

void kda_delta_recurrent(float *S, int K, int V, int64_t n, const kda_head_io *io,
			 float *u)
{
	for (int64_t t = 0; t < n; t++) {
		const float *q = row(io->q, t, io->ld), *k = row(io->k, t, io->ld);
		const float *g = row(io->g, t, io->ld), *v = row(io->v, t, io->ld);
		float beta = io->beta[t * io->ldb];
		float *o = io->o + t * io->ld;

		/* Pass 1: decay the rows and accumulate S^T k from them. */
		float *a = u + V;
		tf_vec_exp(a, g, K);
		memset(u, 0, (size_t)V * sizeof(float));
		for (int i = 0; i < K; i++) {
			tf_vec_scale(S + (size_t)i * V, a[i], V);
			tf_vec_axpy(u, k[i], S + (size_t)i * V, V);
		}
		for (int j = 0; j < V; j++)
			u[j] = beta * (v[j] - u[j]);
		/* Pass 2: write k u^T and read S^T q from the written rows. */
		memset(o, 0, (size_t)V * sizeof(float));
		for (int i = 0; i < K; i++) {
			tf_vec_axpy(S + (size_t)i * V, k[i], u, V);
			tf_vec_axpy(o, q[i], S + (size_t)i * V, V);
		}
	}
}

size_t kda_delta_chunk_work(int K, int V)
{
	return (size_t)KDA_CHUNK * (3 * (size_t)K + 2 * KDA_CHUNK + (size_t)V) +
	       3 * (size_t)KDA_SUBCHUNK * K + (size_t)K +
	       (size_t)(K > KDA_CHUNK ? K : KDA_CHUNK);
}

/* Scratch of one chunk, carved from the caller's work buffer. */
struct chunk_ws {
	float *a;       /* [C, K] per-token decay exp(g_t) */
	float *E;       /* [C, K] decay from the chunk start, prod_{s<=i} a_s */
	float *Akk;     /* [C, C] k_i . k_j decayed from j to i, j < i */
	float *Aqk;     /* [C, C] q_i . k_j decayed from j to i, j <= i */
	float *Vn;      /* [C, V] the per-token deltas u_t */
	float *X;       /* [C, K] decayed keys or queries; [K, C] write weights */
	float *qb, *kb; /* [B, K] the sub-block's q, k decayed to its start */
	float *kr;      /* [B, K] decay within the sub-block, then keys scaled by it */
	float *p;       /* [K] a running product of decays */
	float *cf;      /* [max(K, C)] coefficients of one row combination */
};

/*
 * Every decay between two tokens of a chunk, exp(G_i - G_j) with G the
 * cumulative log-decay, is formed as a running product of the per-token
 * exp(g_s): one exponential per token and channel, as in the recurrent
 * form, and no difference of large cumulative sums.
 *
 * Akk and Aqk need sum_d x_i[d] k_j[d] exp(G_i[d] - G_j[d]).  Splitting the
 * decay at the start r of i's 16-token sub-block, exp(G_i - G_r) exp(G_r -
 * G_j), turns the sums into dot products.  For j before the sub-block both
 * factors are <= 1.  Inside it the second factor is the inverse of a decay
 * within the sub-block: the safe gate bounds that by e^(16 * 5) = e^80 < FLT_MAX,
 * the Kimi gate does not, so a sub-block decaying further takes the exact
 * pairwise products instead.
 */
static void chunk_scores(const struct chunk_ws *w, int K, int L, const kda_head_io *io)
{
	const int C = KDA_CHUNK, B = KDA_SUBCHUNK;

	for (int b0 = 0; b0 < L; b0 += B) {
		int b1 = b0 + B < L ? b0 + B : L;

		/* kr row i - b0 = exp(G_i - G_r); q, k decayed to the block start */
		for (int i = b0; i < b1; i++) {
			const float *q = row(io->q, i, io->ld), *k = row(io->k, i, io->ld);
			const float *ai = w->a + (size_t)i * K;
			float *e = w->kr + (size_t)(i - b0) * K;
			float *qb = w->qb + (size_t)(i - b0) * K, *kb = w->kb + (size_t)(i - b0) * K;
			for (int d = 0; d < K; d++) {
				e[d] = i == b0 ? 1.0f : e[d - K] * ai[d];
				qb[d] = q[d] * e[d];
				kb[d] = k[d] * e[d];
			}
		}

		/* earlier tokens, walking back from the block start:
		 * p = exp(G_r - G_j) = prod_{j<s<=r} a_s */
		for (int d = 0; d < K; d++)
			w->p[d] = 1.0f;
		for (int j = b0 - 1; j >= 0; j--) {
			const float *k = row(io->k, j, io->ld), *an = w->a + (size_t)(j + 1) * K;
			for (int d = 0; d < K; d++) {
				w->p[d] *= an[d];
				w->cf[d] = k[d] * w->p[d];
			}
			for (int i = b0; i < b1; i++) {
				w->Akk[i * C + j] = tf_vec_dot(w->kb + (size_t)(i - b0) * K, w->cf, K);
				w->Aqk[i * C + j] = tf_vec_dot(w->qb + (size_t)(i - b0) * K, w->cf, K);
			}
		}

		const float *elast = w->kr + (size_t)(b1 - 1 - b0) * K;
		float least = 1.0f;
		for (int d = 0; d < K; d++)
			least = fminf(least, elast[d]);
		if (least >= KDA_DECAY_MIN) {
			for (int j = b0; j < b1; j++) {
				const float *k = row(io->k, j, io->ld);
				float *kr = w->kr + (size_t)(j - b0) * K;
				for (int d = 0; d < K; d++)
					kr[d] = k[d] / kr[d];
			}
			for (int i = b0; i < b1; i++)
				for (int j = b0; j <= i; j++) {
					const float *kr = w->kr + (size_t)(j - b0) * K;
					w->Akk[i * C + j] = tf_vec_dot(w->kb + (size_t)(i - b0) * K, kr, K);
					w->Aqk[i * C + j] = tf_vec_dot(w->qb + (size_t)(i - b0) * K, kr, K);
				}
			continue;
		}
		/* pairwise: p = exp(G_i - G_j) = prod_{j<s<=i} a_s, walking j back */
		for (int i = b0; i < b1; i++) {
			const float *q = row(io->q, i, io->ld), *ki = row(io->k, i, io->ld);
			for (int d = 0; d < K; d++)
				w->p[d] = 1.0f;
			for (int j = i; j >= b0; j--) {
				const float *kj = row(io->k, j, io->ld), *aj = w->a + (size_t)j * K;
				float sk = 0.0f, sq = 0.0f;
				for (int d = 0; d < K; d++) {
					float e = kj[d] * w->p[d];
					sk += ki[d] * e;
					sq += q[d] * e;
					w->p[d] *= aj[d];
				}
				w->Akk[i * C + j] = sk;
				w->Aqk[i * C + j] = sq;
			}
		}
	}
}

/* One chunk of L <= KDA_CHUNK tokens (delta.h; the WY form of the spec). */
static void delta_chunk(float *S, int K, int V, int L, const kda_head_io *io,
			const struct chunk_ws *w)
{
	const int C = KDA_CHUNK;

	for (int i = 0; i < L; i++) {
		const float *g = row(io->g, i, io->ld);
		float *a = w->a + (size_t)i * K, *E = w->E + (size_t)i * K;
		tf_vec_exp(a, g, K);
		for (int d = 0; d < K; d++)
			E[d] = i ? E[d - K] * a[d] : a[d];
	}
	chunk_scores(w, K, L, io);

	/* The deltas solve (I + Diag(beta) Akk) Vn = Diag(beta) (v - (e^G k) S):
	 * one product against S, then forward substitution down the unit
	 * lower-triangular system. */
	for (int i = 0; i < L; i++) {
		const float *k = row(io->k, i, io->ld), *E = w->E + (size_t)i * K;
		for (int d = 0; d < K; d++)
			w->X[(size_t)i * K + d] = E[d] * k[d];
	}
	memset(w->Vn, 0, (size_t)L * V * sizeof(float));
	tf_vec_gemm_acc(w->Vn, V, w->X, K, S, V, L, K, V);
	for (int i = 0; i < L; i++) {
		const float *v = row(io->v, i, io->ld);
		float beta = io->beta[i * io->ldb];
		float *vn = w->Vn + (size_t)i * V;
		for (int j = 0; j < V; j++)
			vn[j] = beta * (v[j] - vn[j]);
		for (int m = 0; m < i; m++)
			w->cf[m] = -beta * w->Akk[i * C + m];
		tf_vec_axpy_rows(vn, w->cf, w->Vn, V, i, V);
	}

	/* Outputs read the state as it was at the chunk start plus the chunk's
	 * own deltas. */
	for (int i = 0; i < L; i++) {
		const float *q = row(io->q, i, io->ld), *E = w->E + (size_t)i * K;
		for (int d = 0; d < K; d++)
			w->X[(size_t)i * K + d] = E[d] * q[d];
		memset(io->o + i * io->ld, 0, (size_t)V * sizeof(float));
	}
	tf_vec_gemm_acc(io->o, io->ld, w->X, K, S, V, L, K, V);
	for (int i = 0; i < L; i++)
		tf_vec_axpy_rows(io->o + i * io->ld, w->Aqk + i * C, w->Vn, V, i + 1, V);

	/* S <- Diag(E_last) S + sum_m (exp(G_last - G_m) k_m) Vn_m^T, the decay
	 * to the chunk end walking back from it. */
	const float *El = w->E + (size_t)(L - 1) * K;
	for (int d = 0; d < K; d++) {
		tf_vec_scale(S + (size_t)d * V, El[d], V);
		w->p[d] = 1.0f;
	}
	for (int m = L - 1; m >= 0; m--) {
		const float *k = row(io->k, m, io->ld), *am = w->a + (size_t)m * K;
		for (int d = 0; d < K; d++) {
			w->X[(size_t)d * C + m] = k[d] * w->p[d];
			w->p[d] *= am[d];
		}
	}
	tf_vec_gemm_acc(S, V, w->X, C, w->Vn, V, K, L, V);
}

void kda_delta_chunked(float *S, int K, int V, int64_t n, const kda_head_io *io,
		       float *work)
{
	const size_t C = KDA_CHUNK, B = KDA_SUBCHUNK;
	struct chunk_ws w;
	w.a = work;
	w.E = w.a + C * K;
	w.Akk = w.E + C * K;
	w.Aqk = w.Akk + C * C;
	w.Vn = w.Aqk + C * C;
	w.X = w.Vn + C * V;
	w.qb = w.X + C * K;
	w.kb = w.qb + B * K;
	w.kr = w.kb + B * K;
	w.p = w.kr + B * K;
	w.cf = w.p + K;

	for (int64_t c0 = 0; c0 < n; c0 += KDA_CHUNK) {
		kda_head_io c = *io;
		c.q += c0 * io->ld;
		c.k += c0 * io->ld;
		c.g += c0 * io->ld;
		c.v += c0 * io->ld;
		c.o += c0 * io->ld;
		c.beta += c0 * io->ldb;
		int L = n - c0 < KDA_CHUNK ? (int)(n - c0) : KDA_CHUNK;
		delta_chunk(S, K, V, L, &c, &w);
	}
}
