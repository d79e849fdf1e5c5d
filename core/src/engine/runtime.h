/*
 * runtime.h - a model ready to run: INI, config.json, weights, plugins.
 *
 * tf_runtime_open() does everything that can fail before the first token:
 *
 *   INI (+ overrides) -> [model] path -> config.json -> weights
 *     -> memory plan, refused above [runtime] memory_limit (0: the RAM)
 *     -> plugin path scan -> probe and start the backend -> probe the rest
 *     -> choose the attention and ffn plugin of every layer, the drafter
 *        ([plugins] drafter, or mtp for [mtp] enabled) and the transport
 *        (when [tp] size > 1)
 *
 * and builds the tf_host every plugin instance is given.  The host's
 * lin_open() opens a linear layer through [plugins] quant when that
 * recognises its tensors, else through the quant plugin whose match()
 * scores them highest.
 *
 * The runtime owns no layer instances: whoever calls layer_init() on the
 * chosen plugins finalises them before tf_runtime_close().
 */
#ifndef TF_RUNTIME_H
#define TF_RUNTIME_H

#include <stdbool.h>
#include <stdio.h>

#include "conf/conf.h"
#include "model/memplan.h"
#include "plugin/registry.h"
#include "tf/attention.h"
#include "tf/drafter.h"
#include "tf/engine.h"
#include "tf/ffn.h"
#include "tf/transport.h"
#include "model/weights.h"

/* Used when the INI leaves them unset; docs/ini.md states the same. */
#define TF_DEFAULT_CONTEXT 4096
#define TF_DEFAULT_PREFILL_CHUNK 512

typedef struct tf_runtime tf_runtime;

/* overrides: "section.key=value" strings applied over the INI.  On failure
 * nothing stays open and the diag names the file, key or plugin.  The same
 * as tf_runtime_open_plan, then tf_runtime_start. */
int tf_runtime_open(const char *ini_path, const char *const *overrides,
		    int n_overrides, tf_runtime **out);

/* The first half: INI, config.json, the safetensors headers, the memory
 * plan (refused above the limit), the plugin scan and every INI key
 * checked; no plugin probed, no device or transport.  Enough for tfrun
 * --check to plan a header-only checkpoint. */
int tf_runtime_open_plan(const char *ini_path, const char *const *overrides,
			 int n_overrides, tf_runtime **out);

/* The second half: the plugins, the backend, every layer's choice.  Refuses
 * a header-only checkpoint naming [model] path.  On failure rt stays open
 * for the caller to close. */
int tf_runtime_start(tf_runtime *rt);

/* Whether the checkpoint was written header-only (tfsynth --header-only):
 * its tensors' bytes are holes. */
bool tf_runtime_header_only(const tf_runtime *rt);
void tf_runtime_close(tf_runtime *rt);

/* Only what `tfrun --plugins` needs: the INI when given (ini_path may be
 * NULL), its config.json, the plugin scan and every probe.  A backend that
 * fails to start is logged, not fatal, so the listing still appears. */
int tf_runtime_open_plugins(const char *ini_path, const char *const *overrides,
			    int n_overrides, tf_runtime **out);

/* Only what a tensor-parallel communicator needs (tf/tp.h): the INI when
 * given, the plugin scan and the transports' probes; no model, no backend,
 * so a host checks its link before the checkpoint is there. */
int tf_runtime_open_transports(const char *ini_path, const char *const *overrides,
			       int n_overrides, tf_runtime **out);

const tf_conf *tf_runtime_conf(const tf_runtime *rt);
const tf_model_config *tf_runtime_model(const tf_runtime *rt);
const tf_weights *tf_runtime_weights(const tf_runtime *rt);   /* NULL: plugins only */
const tf_registry *tf_runtime_registry(const tf_runtime *rt);
const tf_host *tf_runtime_host(const tf_runtime *rt);

/* [runtime] context, prefill_chunk and sequences with their defaults
 * applied. */
int64_t tf_runtime_context(const tf_runtime *rt);
int64_t tf_runtime_prefill_chunk(const tf_runtime *rt);
int tf_runtime_sequences(const tf_runtime *rt);

/* The memory plan tf_runtime_open checked. */
const tf_memplan *tf_runtime_plan(const tf_runtime *rt);

/* The plugins chosen for layer `layer` (0 .. n_layers_total-1). */
const tf_plugin_attention *tf_runtime_attention(const tf_runtime *rt, int layer);
const tf_plugin_ffn *tf_runtime_ffn(const tf_runtime *rt, int layer);
/* The drafter (tf/drafter.h), or NULL: no drafting. */
const tf_plugin_drafter *tf_runtime_drafter(const tf_runtime *rt);
/* Whether the drafter runs the checkpoint's MTP layer (the pipeline opens
 * it). */
bool tf_runtime_mtp(const tf_runtime *rt);
const tf_plugin_transport *tf_runtime_transport(const tf_runtime *rt);

/* Once layers 0 .. n_layers-1 are open: a [plugins] layer.<N>.router pin
 * on one of them that opened no router (a dense layer) would do nothing,
 * so it is refused, naming the key. */
int tf_runtime_check_router_pins(const tf_runtime *rt, int n_layers);

/* MoE routing through the host's router_route since open or the last
 * reset (tf/engine.h tf_moe_stats). */
tf_moe_stats tf_runtime_moe_stats(const tf_runtime *rt);
void tf_runtime_moe_stats_reset(tf_runtime *rt);

/* Linears the quant plugin `quant` has opened so far (through lin_open). */
int64_t tf_runtime_lins(const tf_runtime *rt, const char *quant);

/* What was chosen, for `tfrun --check`: model, backend, quant policy, the
 * linears each quant plugin opened (a pin that opened none is called
 * out) and the plugins of each run of layers. */
void tf_runtime_print(const tf_runtime *rt, FILE *f);
/* The same and the memory plan as one JSON object; `ini` names the file. */
int tf_runtime_print_json(const tf_runtime *rt, const char *ini, FILE *f);

#endif /* TF_RUNTIME_H */
