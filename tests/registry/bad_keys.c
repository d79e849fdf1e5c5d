/*
 * bad_keys.c - a router whose INI key declaration the core must refuse,
 * naming the plugin and the key; built once per fault:
 *
 *   KEYS_CORE   declares [runtime] threads, a core key
 *   KEYS_TWIN   declares [twin] depth, which the two builds of it (twin-a
 *               and twin-b) both declare
 *   KEYS_ENUM   declares an enum key without choices
 *
 * It is never run: the runtime refuses the INI before any layer opens.
 */
#include "tf/router.h"

static const tf_plugin_key keys[] = {
#if defined(KEYS_CORE)
	{ .section = "runtime", .name = "threads", .type = TF_KEY_INT, .min = 0, .max = 8 },
#elif defined(KEYS_TWIN)
	{ .section = "twin", .name = "depth", .type = TF_KEY_INT, .min = 0, .max = 8 },
#else
	{ .section = "bad", .name = "flavour", .type = TF_KEY_ENUM },
#endif
	{ .section = NULL },
};

static int bad_probe(const tf_host *h, const char **reason)
{
	return 1;
}

static int bad_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	return TF_ERR_UNSUPPORTED;
}

static void bad_fini(void *inst) {}

static int bad_route(void *inst, const float *x, int64_t n, int32_t *idx, float *w)
{
	return TF_ERR_UNSUPPORTED;
}

static const tf_plugin_router bad = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_router, TF_KIND_ROUTER, KEYS_NAME, "0",
				"a router with a bad key declaration", bad_probe),
	.layer_init = bad_init,
	.layer_fini = bad_fini,
	.route = bad_route,
	.keys = keys,
};

TF_EXPORT const tf_plugin_router *tf_plugin_router_v1(unsigned index)
{
	return index == 0 ? &bad : NULL;
}
