/*
 * attend.h - MLA attention over the latent cache, in both forms.
 *
 * The cache holds one row of lat = r + dr elements per token: the normed
 * latent c (r) and the roped shared key k_pe (dr).  Its rows live in pages
 * of MLA_PAGE_ROWS rows (row t in page t / MLA_PAGE_ROWS), as float or as
 * bf16 ([runtime] kv_cache): a bf16 cache rounds each element once when
 * the row is written and reads it back as float, so everything else runs
 * in float either way.  Per head h the key is [c W_UK_h^T ; k_pe] and the
 * value c W_UV_h^T, with W_UK_h, W_UV_h the head's rows of kv_b_proj
 * ([heads, dn + dv, r]).
 *
 * Naive form (prefill): expand keys and values of a block of cache rows
 * (one page) through kv_b_proj and attend per head with an online
 * softmax, block by block, so memory stays bounded by the block.
 *
 * Absorbed form (decode): fold W_UK_h into the query (q_lat = W_UK_h^T
 * q_nope), attend over the raw cache rows, which every head shares, and
 * apply W_UV_h to the attended latent.  Cache rows are split in parts
 * (mla_part_rows), each keeping a running max, sum and accumulator per
 * head, merged at the end; the queries of a few rows of one sequence (a
 * speculative verify) read each part's rows once for all of them.
 *
 * Both produce o_h = softmax(scores) V_h for queries at cache rows
 * len .. len + n - 1, each seeing rows 0 .. its own.
 */
#ifndef TF_MLA_ATTEND_H
#define TF_MLA_ATTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/quant.h"

typedef struct mla_dims {
	int heads, dn, dr, dv, r;
	float scale;            /* softmax scale */
} mla_dims;

/* Rows per cache page: the naive form's block is one page, and the
 * absorbed form's tiles stop at a page's end. */
#define MLA_PAGE_ROWS 256

/* A sequence's cache as the kernels read it. */
typedef struct mla_cache {
	void *const *page;      /* pages of MLA_PAGE_ROWS rows of lat elements */
	bool bf16;              /* elements are bf16 (uint16_t), else float */
} mla_cache;

/* Round and store n float rows src [n, lat] as cache rows t .. t + n - 1
 * (their pages allocated). */
void mla_cache_write(const mla_dims *d, const mla_cache *c, int64_t t, int64_t n,
		     const float *src);

/* Rows [t, t + n) of one page as floats, row stride lat: a float page in
 * place, a bf16 page converted into buf (n * lat floats). */
const float *mla_cache_rows(const mla_dims *d, const mla_cache *c, int64_t t, int64_t n,
			    float *buf);

/* Running softmax of one (query, head): max and sum of exp(s - max); its
 * accumulator of values is kept beside it. */
typedef struct mla_run {
	float m, l;
} mla_run;

/* --- naive form --- */

/* Cache rows expanded at a time (one page), and queries scored together
 * against them. */
#define MLA_KV_BLOCK MLA_PAGE_ROWS
#define MLA_QTILE 64

/* Scratch floats mla_naive_block needs. */
size_t mla_naive_work(const mla_dims *d);

/* Cache rows [t0, t0 + tb) of one page, split as floats into their
 * latents c [tb, r] (kv_b_proj's input) and shared keys kpe [tb, dr]. */
void mla_naive_split(const mla_dims *d, const mla_cache *c, int64_t t0, int64_t tb,
		     float *cb, float *kpe);

/* One head, queries q [n, heads * (dn + dr)] against cache rows [t0,
 * t0 + tb), tb <= MLA_KV_BLOCK, whose expanded keys/values are kv [tb,
 * heads * (dn + dv)] and shared keys kpe [tb, dr].  run [n, heads] and
 * acc [n, heads * dv] carry the online softmax; work: mla_naive_work()
 * floats. */
void mla_naive_block(const mla_dims *d, int h, const float *q, int64_t n,
		     int64_t len, const float *kv, const float *kpe, int64_t t0,
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

/*
 * A query's cache rows are split in parts of mla_part_rows(rows) rows,
 * rows the number it sees: a length fixed by the query alone (not by the
 * workers, nor by the queries scanned beside it), so its bits are its own.
 * The length is MLA_PART_MIN times a power of two, small enough for the
 * parts to spread over workers and large enough that there are at most
 * MLA_PARTS of them; MLA_PART_MIN rows are worth a worker on the smallest
 * models (fewer cost more in handing out and merging than they save).
 */
#define MLA_PARTS 16
#define MLA_PART_MIN (2 * MLA_TILE)
int64_t mla_part_rows(int64_t rows);

/* Scratch floats mla_absorbed_rows needs: a tile's scores and its rows. */
size_t mla_absorbed_work(const mla_dims *d);

/*
 * Every head of nq queries over cache rows [t0, t1), query i seeing rows
 * [0, seen + i): its qlat at qlat + i·heads·lat, its run [heads] at run +
 * i·stride, its acc [heads, r] at acc + i·stride·r; a query seeing no row
 * past t0 is left alone.  Each tile of cache rows is read once for all
 * the queries, and each query's sums are those it gets scanned alone.
 * work: mla_absorbed_work() floats.
 */
void mla_absorbed_rows(const mla_dims *d, const float *qlat, int nq, int64_t seen,
		       const mla_cache *c, int64_t t0, int64_t t1, mla_run *run, float *acc,
		       int64_t stride, float *work);

/* Merge np partial (run, acc) sets (part p at run + p*heads, acc +
 * p*heads*r), then o_h = W_UV_h o_lat for heads [h0, h1).  lat: r floats. */
int mla_absorbed_out(const mla_dims *d, const mla_kvb *kvb, const mla_run *run,
		     const float *acc, int np, int h0, int h1, float *o, float *lat);

#endif /* TF_MLA_ATTEND_H */
