/*
 * plugin.c - the ffn descriptors of moe.so: index 0 "moe" (routed experts
 * through a router plugin, shared expert), index 1 "dense" (the leading
 * dense MLP layers).
 */
#include <stddef.h>

#include "../common/tensor_util.h"
#include "layers.h"

/* Gathering and scatter-adding rows read activations on the CPU. */
static int ffn_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, lin_close)) {
		*reason = "host too old: needs lin_open";
		return 0;
	}
	return tf_tu_probe_host_backend(h, reason);
}

/* The router is a plugin of its own, reached through the host. */
static int moe_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, router_close)) {
		*reason = "host too old: needs router_open (ABI 1.4)";
		return 0;
	}
	return ffn_probe(h, reason);
}

static const tf_plugin_ffn moe_ffn = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_ffn, TF_KIND_FFN, "moe", "0.1.0",
			       "MoE: per-expert batched SwiGLU, shared expert, router through the host (CPU)",
			       moe_probe),
	.layer_type = "moe",
	.layer_init = tf_moe_layer_init,
	.layer_fini = tf_moe_layer_fini,
	.forward = tf_moe_layer_forward,
};

static const tf_plugin_ffn dense_ffn = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_ffn, TF_KIND_FFN, "dense", "0.1.0",
			       "dense SwiGLU MLP of the leading layers (CPU)",
			       ffn_probe),
	.layer_type = "dense",
	.layer_init = tf_dense_layer_init,
	.layer_fini = tf_dense_layer_fini,
	.forward = tf_dense_layer_forward,
};

TF_EXPORT const tf_plugin_ffn *tf_plugin_ffn_v1(unsigned index)
{
	static const tf_plugin_ffn *const all[] = { &moe_ffn, &dense_ffn };

	return index < sizeof(all) / sizeof(all[0]) ? all[index] : NULL;
}
