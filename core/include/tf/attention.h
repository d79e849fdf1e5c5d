/*
 * tf/attention.h - the attention kind: a layer's token mixer and its state.
 *
 * An attention plugin serves one layer type ("kda" or "mla").  One instance
 * per layer holds that layer's weights and the state of the sequence being
 * decoded (KDA: recurrent and conv state; MLA: the latent cache).
 *
 * forward() consumes n consecutive tokens that continue the sequence: x is
 * the input-normed hidden [n, hidden_size], pos their absolute positions,
 * y the block output [n, hidden_size] (before the residual add).  x and y
 * live in backend memory (tf/backend.h alloc), pos in host memory.
 *
 * Snapshot/rollback let the speculative drafter discard rejected tokens:
 * KDA state is not append-only.  The caller owns snapshot buffers of
 * snapshot_size() bytes, in host memory.
 */
#ifndef TF_ATTENTION_H
#define TF_ATTENTION_H

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_plugin_attention {
	tf_plugin_header hdr;
	const char *layer_type;         /* "kda" or "mla" */

	/* Bytes of per-sequence state one layer needs for max_ctx tokens
	 * (memory plan; called before any instance exists). */
	int64_t (*state_bytes)(const tf_host *h, int layer, int64_t max_ctx);

	/* `prefix` is "model.layers.<layer>.attention". */
	int (*layer_init)(const tf_host *h, int layer, const char *prefix,
			  int64_t max_ctx, void **inst);
	void (*layer_fini)(void *inst);

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
} tf_plugin_attention;

const tf_plugin_attention *tf_plugin_attention_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_ATTENTION_H */
