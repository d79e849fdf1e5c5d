/*
 * ffn_so.h - moe.so's ffn descriptors, loaded as the runtime loads them:
 * index 0 is the "moe" layer, 1 the "dense" one.  Fails the test when the
 * plugin or its entry point is missing.
 */
#ifndef TF_TEST_FFN_SO_H
#define TF_TEST_FFN_SO_H

#include "tf/ffn.h"

const tf_plugin_ffn *ffn_plugin(unsigned index);
/* The same from the module at `path` (a cuda-sim module, off the plugin
 * dir); NULL past its last descriptor. */
const tf_plugin_ffn *ffn_plugin_at(const char *path, unsigned index);

#endif /* TF_TEST_FFN_SO_H */
