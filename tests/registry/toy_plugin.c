/* toy_plugin.c - an ffn plugin with a compile-time name, score and layer
 * type, for the registry's selection tests; with TOY_MINOR, it claims that
 * older ABI minor, as a plugin built then would.  It is never run. */
#include "tf/ffn.h"

static int toy_probe(const tf_host *h, const char **reason)
{
	return TOY_SCORE;
}

static int toy_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	return TF_ERR_UNSUPPORTED;
}

static void toy_fini(void *inst) {}

static int toy_forward(void *inst, const float *x, int64_t n, float *y)
{
	return TF_ERR_UNSUPPORTED;
}

#ifdef TOY_MINOR
static tf_plugin_ffn toy = {
#else
static const tf_plugin_ffn toy = {
#endif
	.hdr = TF_PLUGIN_HEADER(tf_plugin_ffn, TF_KIND_FFN, TOY_NAME, "0",
				"registry test toy", toy_probe),
	.layer_type = TOY_LAYER,
	.layer_init = toy_init,
	.layer_fini = toy_fini,
	.forward = toy_forward,
};

TF_EXPORT const tf_plugin_ffn *tf_plugin_ffn_v1(unsigned index)
{
#ifdef TOY_MINOR
	toy.hdr.abi_minor = TOY_MINOR;
#endif
	return index == 0 ? &toy : NULL;
}
