/*
 * mla_layer.h - what the gated MLA attention plugins share, whatever runs
 * the layer: mla.so computes on the host (mla.c), mla-cuda.so on a CUDA
 * device (plugins/mla-cuda/mla_cuda_attn.c).
 *
 * Both read the same config.json keys and tensors (mla_weights_open),
 * keep each sequence's latent cache in pages of MLA_PAGE_ROWS rows behind
 * the same header, and so share the checks of a batch, the state's size
 * and its snapshots: the cache is append-only, so a snapshot is its
 * length and a rollback sets the length back (no copy of the cache).
 *
 * Tensor parallel ([tp] size > 1): a rank holds the heads
 * [head0, head0 + heads) of num_attention_heads: their rows of q (or
 * q_b_proj), kv_b_proj and g_proj, and dense's matching input columns, so
 * its output is a partial sum the runtime all-reduces.  The latent path
 * (q_a_proj, kv_a_proj_with_mqa, their norms) and so the latent cache are
 * the same on every rank.
 */
#ifndef TF_MLA_LAYER_H
#define TF_MLA_LAYER_H

#include <stdbool.h>

#include "tf/attention.h"
#include "tf/quant.h"

#include "attend.h"
#include "rope.h"

/* One MLA layer's shape, linears and norm weights (float32, host memory). */
struct mla_weights {
	const tf_host *h;
	int layer;
	int hidden, rq, gate_w;         /* gate_w: heads (head-wise) or heads * dv */
	int head0, heads_all;           /* d.heads are this rank's, from head0 */
	int64_t lat;                    /* r + dr */
	mla_dims d;                     /* d.scale with YaRN's multiplier */
	mla_rope rope;
	bool interleave;
	float eps;
	bool bf16;                      /* the cache's element type, from kv_cache */
	size_t page_bytes;              /* one cache page */

	tf_lin q_proj, q_a_proj, q_b_proj, kv_a_proj, kv_b_proj, g_proj, dense;
	float *q_a_norm;                /* [rq] */
	float *kv_a_norm;               /* [r] */
};

/* A sequence's state begins with this. */
struct mla_state_hdr {
	int64_t max_ctx, len;
};

/* Check config.json and context, shard the heads, open the linears and
 * read the norms of the layer under prefix.  On failure w is closed. */
int mla_weights_open(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
		     struct mla_weights *w);
/* Close the linears and free the norms and frequencies. */
void mla_weights_close(struct mla_weights *w);

/* Pages that hold `rows` tokens. */
int64_t mla_pages(int64_t rows);

/* A context of max_ctx tokens is positive; else TF_ERR_INVALID. */
int mla_check_ctx(const struct mla_weights *w, int64_t max_ctx);
/* Segments tile the rows in order, each with a state that has room for
 * them; checked before any state changes. */
int mla_check_batch(const struct mla_weights *w, const tf_attn_batch *b);
/* state_copy of src's tokens fits dst's context. */
int mla_check_copy(const struct mla_weights *w, const struct mla_state_hdr *dst,
		   const struct mla_state_hdr *src);

/*
 * Which form for a segment of n rows: per query, the absorbed form reads
 * each cache row twice over (scores against [c ; k_pe], then the c
 * accumulation: ~2 lat per row and head), the naive form expands each row
 * once per forward through kv_b (r (dn + dv) per row and head).  Absorbed
 * wins while n 2 lat < r (dn + dv), i.e. for decode and verify runs,
 * naive for prefill.
 */
bool mla_use_absorbed(const struct mla_weights *w, int64_t n);

/* The tf_plugin_attention slots both plugins share (their instance
 * begins with its struct mla_weights, their states with a struct
 * mla_state_hdr): state_bytes (every page of a full context and its page
 * table), state_len, state_snapshot_size, state_snapshot (the length)
 * and state_rollback (only backwards: rows past the current length may
 * have been overwritten since the snapshot). */
int64_t mla_state_bytes(const tf_host *h, int layer, int64_t max_ctx);
int64_t mla_state_len(void *inst, const void *state);
size_t mla_state_snapshot_size(void *inst, const void *state);
int mla_state_snapshot(void *inst, const void *state, void *buf);
int mla_state_rollback(void *inst, void *state, const void *buf);

#endif /* TF_MLA_LAYER_H */
