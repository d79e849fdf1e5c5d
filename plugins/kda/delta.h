/*
 * delta.h - the gated delta rule of KDA for one head, in fp32.
 *
 * Per head the state S is K x V (rows are key channels, row-major).  For each
 * token t, with per-channel log-decay g_t <= 0, write strength beta_t, an
 * L2-normed key k_t and a scaled, L2-normed query q_t:
 *
 *     S   <- Diag(exp(g_t)) S                  decay each key row
 *     u_t <- beta_t (v_t - S^T k_t)            delta against the decayed state
 *     S   <- S + k_t u_t^T                     write
 *     o_t <- S^T q_t                           read the updated state
 *
 * Three implementations of the same map (tokens in, outputs and final state
 * out): the plain step above, a fused step for decode (two passes over S
 * instead of four), and the chunked WY form for prefill, which turns the
 * token loop into small matrix products per chunk of KDA_CHUNK tokens.
 *
 * Token rows are `ld` floats apart in q, k, g, v and o (the head's slice of a
 * [n, heads * dim] activation); beta is `ldb` floats apart.
 */
#ifndef TF_KDA_DELTA_H
#define TF_KDA_DELTA_H

#include <stddef.h>
#include <stdint.h>

/* Chunk length of the WY form and the sub-block inside which the decay is
 * factorised (see delta.c). */
#define KDA_CHUNK 64
#define KDA_SUBCHUNK 16

typedef struct kda_head_io {
	const float *q, *k, *g, *v, *beta;
	float *o;
	int64_t ld, ldb;
} kda_head_io;

/* The plain recurrence, token by token, exactly as above. */
void kda_delta_ref(float *S, int K, int V, int64_t n, const kda_head_io *io);

/* The same recurrence with the four steps fused into two passes over S.
 * tmp: V + K floats. */
void kda_delta_recurrent(float *S, int K, int V, int64_t n, const kda_head_io *io,
			 float *tmp);

/* The chunked WY form.  work: kda_delta_chunk_work(K, V) floats. */
size_t kda_delta_chunk_work(int K, int V);
void kda_delta_chunked(float *S, int K, int V, int64_t n, const kda_head_io *io,
		       float *work);

#endif /* TF_KDA_DELTA_H */
