/*
 * tf/ffn.h - the FFN kind: a layer's channel mixer.
 *
 * An ffn plugin serves one layer type: "moe" (router, routed experts and
 * the shared expert) or "dense" (the leading SwiGLU MLP layers).  FFN
 * layers keep no per-sequence state.
 */
#ifndef TF_FFN_H
#define TF_FFN_H

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_plugin_ffn {
	tf_plugin_header hdr;
	const char *layer_type;         /* "moe" or "dense" */

	/* `prefix` is "model.layers.<layer>.mlp". */
	int (*layer_init)(const tf_host *h, int layer, const char *prefix,
			  void **inst);
	void (*layer_fini)(void *inst);
	/* x: post-attention-normed hidden [n, hidden_size]; y: [n, hidden_size]
	 * block output before the residual add; both in backend memory. */
	int (*forward)(void *inst, const float *x, int64_t n, float *y);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;
} tf_plugin_ffn;

const tf_plugin_ffn *tf_plugin_ffn_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_FFN_H */
