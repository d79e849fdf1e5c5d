/*
 * bad_router.c - a router that answers wrongly, for the host's checks of
 * tf/router.h's contract; built once per fault:
 *
 *   BAD_RANGE  expert id num_experts (one past the last) for every slot
 *   BAD_NAN    the right ids (0, 1, ...), every weight NaN
 */
#include <math.h>

#include "tf/router.h"

static int bad_probe(const tf_host *h, const char **reason)
{
	return 1;
}

/* The instance is the host; the answer depends on the model alone. */
static int bad_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	*inst = (void *)h;
	return TF_OK;
}

static void bad_fini(void *inst) {}

static int bad_route(void *inst, const float *x, int64_t n, int32_t *idx, float *w)
{
	const tf_host *h = inst;
	int k = h->model->num_experts_per_tok;

	for (int64_t i = 0; i < n * k; i++) {
#ifdef BAD_RANGE
		idx[i] = h->model->num_experts;
		w[i] = 1.0f;
#else
		idx[i] = (int32_t)(i % k);
		w[i] = NAN;
#endif
	}
	return TF_OK;
}

static const tf_plugin_router bad = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_router, TF_KIND_ROUTER, BAD_NAME, "0",
				"a router that breaks its contract", bad_probe),
	.layer_init = bad_init,
	.layer_fini = bad_fini,
	.route = bad_route,
};

TF_EXPORT const tf_plugin_router *tf_plugin_router_v1(unsigned index)
{
	return index == 0 ? &bad : NULL;
}
