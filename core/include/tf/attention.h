/*
 * tf/attention.h - the attention kind: a layer's token mixer and its state.
 *
 * An attention plugin serves one layer type ("kda", "mla", or one the core
 * never heard of).  One instance per layer holds that layer's weights.
 *
 * Since ABI 1.5 the state of each sequence (KDA: recurrent and conv state;
 * MLA: the latent cache) is an object apart from the weights: the plugin
 * makes it (state_new), the core owns it and passes it back in.  One
 * forward_batch() runs rows of several sequences at once: x is the
 * input-normed hidden [n, hidden_size] of every row, y the block output
 * [n, hidden_size] (before the residual add), both in backend memory.
 * The rows come grouped by sequence (tf_attn_batch), so the projections
 * run as one matmul over all rows and the token mixing runs per sequence
 * on its own state.  Rows of a sequence continue it: their positions are
 * its length, length + 1, ...
 *
 * Snapshot/rollback let the speculative drafter discard rejected tokens
 * (KDA state is not append-only); the caller owns snapshot buffers of
 * state_snapshot_size() bytes, in host memory.  state_copy() forks a
 * sequence: a chat turn or request that shares a prompt prefix starts
 * from a copy instead of running the prefix again.
 *
 * A plugin built before ABI 1.5 keeps its state inside the instance
 * (forward, reset, snapshot, rollback below): the core runs it for one
 * sequence at a time.
 */
#ifndef TF_ATTENTION_H
#define TF_ATTENTION_H

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rows [row0, row0 + n) of a batch that belong to one sequence. */
typedef struct tf_attn_seg {
	void *state;                    /* the sequence's state (state_new) */
	int64_t row0, n;
} tf_attn_seg;

/*
 * One forward's rows: n_seg segments, one per sequence, in row order and
 * covering rows 0 .. n-1 without gaps; pos[i] is row i's absolute
 * position (host memory).  No sequence appears twice.
 */
typedef struct tf_attn_batch {
	int64_t n;
	const int32_t *pos;
	int n_seg;
	const tf_attn_seg *seg;
} tf_attn_batch;

typedef struct tf_plugin_attention {
	tf_plugin_header hdr;
	const char *layer_type;         /* "kda" or "mla" */

	/* Bytes of per-sequence state one layer needs for max_ctx tokens
	 * (memory plan; called before any instance exists).  A state that
	 * grows in pages counts its largest size. */
	int64_t (*state_bytes)(const tf_host *h, int layer, int64_t max_ctx);

	/* `prefix` is "model.layers.<layer>.attention". */
	int (*layer_init)(const tf_host *h, int layer, const char *prefix,
			  int64_t max_ctx, void **inst);
	void (*layer_fini)(void *inst);

	/* Before ABI 1.5, the one sequence the instance holds: n tokens
	 * continuing it at positions pos.  A 1.5 plugin may leave these NULL
	 * when it fills the state slots below. */
	int (*forward)(void *inst, const float *x, int64_t n, const int32_t *pos,
		       float *y);
	/* Forget the sequence: the next forward starts at position 0. */
	void (*reset)(void *inst);
	/* Tokens consumed so far. */
	int64_t (*seq_len)(void *inst);
	size_t (*snapshot_size)(void *inst);
	int (*snapshot)(void *inst, void *buf);
	int (*rollback)(void *inst, const void *buf);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;

	/*
	 * Since ABI 1.5, optional, all or none: weights apart from state.
	 *
	 * state_new() makes an empty state (length 0) for up to max_ctx
	 * tokens; memory may be taken as it fills (a failure then is
	 * forward_batch's TF_ERR_NOMEM).  state_reset() empties it,
	 * state_len() says how many tokens it holds.  state_copy() makes dst
	 * (a state of this instance) hold what src holds, dropping dst's
	 * contents.  state_rollback() returns a state to a snapshot taken of
	 * it; a plugin may refuse to roll forward.
	 */
	int (*state_new)(void *inst, int64_t max_ctx, void **state);
	void (*state_free)(void *inst, void *state);
	void (*state_reset)(void *inst, void *state);
	int64_t (*state_len)(void *inst, const void *state);
	int (*state_copy)(void *inst, void *dst, const void *src);
	size_t (*state_snapshot_size)(void *inst, const void *state);
	int (*state_snapshot)(void *inst, const void *state, void *buf);
	int (*state_rollback)(void *inst, void *state, const void *buf);
	/* Each segment's rows continue its state; fails with TF_ERR_RANGE
	 * naming the layer when a segment would pass its state's max_ctx, and
	 * then leaves every state as it was. */
	int (*forward_batch)(void *inst, const float *x, const tf_attn_batch *b, float *y);

	/* Since ABI 1.8, optional: leave in each segment's state what
	 * forward_batch would, bit for bit, without computing the output:
	 * for rows whose attention output nobody reads (the MTP layer
	 * catching up, kept drafts replayed).  The host calls forward_batch
	 * instead where it is NULL. */
	int (*state_append)(void *inst, const float *x, const tf_attn_batch *b);
} tf_plugin_attention;

const tf_plugin_attention *tf_plugin_attention_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_ATTENTION_H */
