/*
 * access.h - what in-tree faces still take from an engine beyond
 * tf/engine.h: the runtime under it, for the INI (sampling and chat
 * keys) and the checkpoint folder.  It goes when the tokenizer, chat
 * template and sampler have public headers.
 */
#ifndef TF_ENGINE_ACCESS_H
#define TF_ENGINE_ACCESS_H

#include "runtime.h"
#include "tf/engine.h"

tf_runtime *tf_engine_runtime(const tf_engine *e);

#endif /* TF_ENGINE_ACCESS_H */
