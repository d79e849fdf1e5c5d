/* ffn_so.c - see ffn_so.h. */
#include "ffn_so.h"

#include <criterion/criterion.h>
#include <dlfcn.h>

const tf_plugin_ffn *ffn_plugin(unsigned index)
{
	return ffn_plugin_at(TF_PLUGIN_DIR "/moe.so", index);
}

const tf_plugin_ffn *ffn_plugin_at(const char *path, unsigned index)
{
	void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(so, "%s", dlerror());
	const tf_plugin_ffn *(*entry)(unsigned) =
		(const tf_plugin_ffn *(*)(unsigned))dlsym(so, "tf_plugin_ffn_v1");
	cr_assert_not_null(entry);
	return entry(index);
}
