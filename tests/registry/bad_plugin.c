/*
 * bad_plugin.c - one broken plugin per BAD_* definition, each a failure the
 * registry must refuse with a reason naming it:
 *   BAD_NOT_PLUGIN  a shared object exporting no entry function
 *   BAD_ABI_MAJOR   a descriptor whose header says another ABI major
 *   BAD_ABI_SYMBOL  only the entry function of another ABI major
 *   BAD_SMALL       a descriptor too small to hold its required slots
 *   BAD_NO_SLOT     a required slot left NULL
 *   BAD_PROBE_FAIL  a probe that declines, with a reason from tf_strerror
 *                   (which a plugin must be able to call: it loads RTLD_NOW)
 *   BAD_WRONG_KIND  a quant descriptor from the ffn entry
 */
#include <stddef.h>

#include "tf/ffn.h"

#ifdef BAD_NOT_PLUGIN
TF_EXPORT int bad_plugin_hello(void);
TF_EXPORT int bad_plugin_hello(void) { return 42; }
#else

static int bad_probe(const tf_host *h, const char **reason)
{
#ifdef BAD_PROBE_FAIL
	*reason = tf_strerror(TF_ERR_UNSUPPORTED);
	return 0;
#else
	return 1;
#endif
}

static int bad_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	return TF_ERR_UNSUPPORTED;
}

static void bad_fini(void *inst) {}

#ifndef BAD_NO_SLOT
static int bad_forward(void *inst, const float *x, int64_t n, float *y)
{
	return TF_ERR_UNSUPPORTED;
}
#endif

static const tf_plugin_ffn bad = {
	.hdr = {
#ifdef BAD_ABI_MAJOR
		.abi_major = TF_ABI_MAJOR + 1,
#else
		.abi_major = TF_ABI_MAJOR,
#endif
		.abi_minor = 0,
#ifdef BAD_SMALL
		.struct_size = offsetof(tf_plugin_ffn, layer_init),
#else
		.struct_size = sizeof(tf_plugin_ffn),
#endif
#ifdef BAD_WRONG_KIND
		.kind = TF_KIND_QUANT,
#else
		.kind = TF_KIND_FFN,
#endif
		.name = "bad", .version = "0", .description = "broken on purpose",
		.probe = bad_probe,
	},
	.layer_type = "dense",
	.layer_init = bad_init,
	.layer_fini = bad_fini,
#ifndef BAD_NO_SLOT
	.forward = bad_forward,
#endif
};

#ifdef BAD_ABI_SYMBOL
TF_EXPORT const tf_plugin_ffn *tf_plugin_ffn_v2(unsigned index);
TF_EXPORT const tf_plugin_ffn *tf_plugin_ffn_v2(unsigned index)
#else
TF_EXPORT const tf_plugin_ffn *tf_plugin_ffn_v1(unsigned index)
#endif
{
	return index == 0 ? &bad : NULL;
}
#endif
