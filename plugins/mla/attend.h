/*
 * attend.h - MLA attention over the latent cache, in both forms.
 *
 * The cache holds one row of lat = r + dr floats per token: the normed
 * latent c (r) and the roped shared key k_pe (dr).  Per head h the key is
 * [c W_UK_h^T ; k_pe] and the value c W_UV_h^T, with W_UK_h, W_UV_h the
 * head's rows of kv_b_proj ([heads, dn + dv, r]).
 *
 * Naive form (prefill): expand keys and values of a block of cache rows
 * through kv_b_proj and attend per head with an online softmax, block by
 * block, so memory stays bounded by the block.
 *
 * Absorbed form (decode): fold W_UK_h into the query (q_lat = W_UK_h^T
 * q_nope), attend over the raw cache rows, which every head shares, and
 * apply W_UV_h to the attended latent.  Rows are split over workers, each
 * keeping a running max, sum and accumulator per head, merged at the end.
 *
 * Both produce o_h = softmax(scores) V_h for queries at cache rows
 * len .. len + n - 1, each seeing rows 0 .. its own.
 */
#ifndef TF_MLA_ATTEND_H
#define TF_MLA_ATTEND_H

#include <stddef.h>
#include <stdint.h>

#include "tf/quant.h"

typedef struct mla_dims {
	int heads, dn, dr, dv, r;
	float scale;            /* softmax scale */
} mla_dims;

/* Running softmax of one (query, head): max and sum of exp(s - max); its
 * accumulator of values is kept beside it. */
typedef struct mla_run {
	float m, l;
} mla_run;

/* --- naive form --- */

/* Cache rows expanded at a time, and queries scored together against them. */
#define MLA_KV_BLOCK 256
#define MLA_QTILE 64

/* Scratch floats mla_naive_block needs. */
size_t mla_naive_work(const mla_dims *d);

/* One head, queries q [n, heads * (dn + dr)] against cache rows [t0,
 * t0 + tb), tb <= MLA_KV_BLOCK, whose expanded keys/values are kv [tb,
 * heads * (dn + dv)].  run [n, heads] and acc [n, heads * dv] carry the
 * online softmax; work: mla_naive_work() floats. */
void mla_naive_block(const mla_dims *d, int h, const float *q, int64_t n,
		     int64_t len, const float *kv, const float *cache, int64_t t0,
		     int64_t tb, mla_run *run, float *acc, float *work);

/* --- absorbed form --- */

/*
 * kv_b_proj as the absorbed form multiplies by it, one head's W_UK_h or
 * W_UV_h at a time: through the linear's slice products where its plugin
 * has them (they read the stored bf16 or EXL3 weights, 2-5x fewer bytes
 * per token than a float32 copy), else from the dequantized matrix.
 */
typedef struct mla_kvb {
	const float *w;                 /* [heads, dn + dv, r], or NULL */
	const tf_lin *lin;              /* used when w is NULL */
} mla_kvb;

/* qlat [heads, r + dr] = scale * [W_UK_h^T q_nope_h ; q_pe_h] for one query;
 * heads [h0, h1).  Fails only as the slice product does. */
int mla_absorb_query(const mla_dims *d, const mla_kvb *kvb, const float *q,
		     int h0, int h1, float *qlat);

/* Cache rows scored and accumulated per tile (absorbed form). */
#define MLA_TILE 32

/* Every head over cache rows [t0, t1): run [heads], acc [heads, r];
 * p: heads * MLA_TILE floats of scratch. */
void mla_absorbed_rows(const mla_dims *d, const float *qlat, const float *cache,
		       int64_t t0, int64_t t1, mla_run *run, float *acc, float *p);

/* Merge np partial (run, acc) sets (part p at run + p*heads, acc +
 * p*heads*r), then o_h = W_UV_h o_lat for heads [h0, h1).  lat: r floats. */
int mla_absorbed_out(const mla_dims *d, const mla_kvb *kvb, const mla_run *run,
		     const float *acc, int np, int h0, int h1, float *o, float *lat);

#endif /* TF_MLA_ATTEND_H */
