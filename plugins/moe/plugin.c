/*
 * plugin.c - the ffn descriptors of moe.so: index 0 "moe" (router, routed
 * experts, shared expert), index 1 "dense" (the leading dense MLP layers).
 */
#include <stddef.h>

#include "layers.h"
#include "tf/backend.h"

/*
 * Routing, gathering and scatter-adding rows happen on the CPU, reading
 * activations directly, so the backend must keep them in host memory;
 * parallel_for is the backend's sign of that (tf/backend.h).
 */
static int ffn_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, lin_close) || !h->backend) {
		*reason = "host too old: needs lin_open and a backend";
		return 0;
	}
	if (!h->backend->parallel_for) {
		*reason = "needs a host-memory backend (activations read on the CPU)";
		return 0;
	}
	return 10;
}

static const tf_plugin_ffn moe_ffn = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_ffn, TF_KIND_FFN, "moe", "0.1",
			       "MoE: fp32 group-limited router, batched SwiGLU experts, shared expert",
			       ffn_probe),
	.layer_type = "moe",
	.layer_init = tf_moe_layer_init,
	.layer_fini = tf_moe_layer_fini,
	.forward = tf_moe_layer_forward,
};

static const tf_plugin_ffn dense_ffn = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_ffn, TF_KIND_FFN, "dense", "0.1",
			       "dense SwiGLU MLP of the leading layers",
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
