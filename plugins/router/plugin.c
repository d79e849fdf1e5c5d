/*
 * plugin.c - the router descriptors of router.so: index 0 "ling" (one-pass
 * top-k), index 1 "ling-ref" (the plain reference).  Both route as gate.h
 * says and give the same bits; only the top-k differs (topk.h).
 */
#include <stdlib.h>

#include "../common/tensor_util.h"
#include "gate.h"
#include "tf/router.h"

/* Logits are read back and selected on the CPU. */
static int router_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, lin_close)) {
		*reason = "host too old: needs lin_open";
		return 0;
	}
	return tf_tu_probe_host_backend(h, reason);
}

static int fast_probe(const tf_host *h, const char **reason)
{
	return router_probe(h, reason) ? 10 : 0;
}

static int router_layer_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	tf_gate *g = malloc(sizeof(*g));
	int rc;

	if (!g)
		return h->error(h, TF_ERR_NOMEM, "%s: no memory for the router", prefix);
	rc = tf_gate_init(g, h, prefix);
	if (rc) {
		free(g);
		return rc;
	}
	*inst = g;
	return TF_OK;
}

static void router_layer_fini(void *inst)
{
	if (!inst)
		return;
	tf_gate_free(inst);
	free(inst);
}

static int fast_route(void *inst, const float *x, int64_t n, int32_t *idx, float *w)
{
	return tf_gate_route(inst, tf_topk_fast, x, n, idx, w);
}

static int ref_route(void *inst, const float *x, int64_t n, int32_t *idx, float *w)
{
	return tf_gate_route(inst, tf_topk_ref, x, n, idx, w);
}

/* The reference placement, said plainly: contiguous balanced blocks, so a
 * rank's experts are one range of the checkpoint's expert ids.  "ling"
 * has no place slot and gets the same from tf_router_place. */
static int ref_place(void *inst, int tp_size, int32_t *rank_of)
{
	const tf_gate *g = inst;
	tf_router_place_blocks(g->n_experts, tp_size, rank_of);
	return TF_OK;
}

static const tf_plugin_router fast_router = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_router, TF_KIND_ROUTER, "ling", "0.1.0",
				"Ling/DeepSeek-V3 group-limited router, one-pass top-k (CPU)",
				fast_probe),
	.layer_init = router_layer_init,
	.layer_fini = router_layer_fini,
	.route = fast_route,
};

static const tf_plugin_router ref_router = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_router, TF_KIND_ROUTER, "ling-ref", "0.1.0",
				"Ling/DeepSeek-V3 group-limited router, plain reference (CPU)",
				router_probe),
	.layer_init = router_layer_init,
	.layer_fini = router_layer_fini,
	.route = ref_route,
	.place = ref_place,
};

TF_EXPORT const tf_plugin_router *tf_plugin_router_v1(unsigned index)
{
	static const tf_plugin_router *const all[] = { &fast_router, &ref_router };

	return index < sizeof(all) / sizeof(all[0]) ? all[index] : NULL;
}
