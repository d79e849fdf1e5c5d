/*
 * tf_cuda_plugin.h - a CUDA plugin's name and probe score.
 *
 * Built on the SIMT harness as a `cuda-sim` module (tests/simt, which
 * defines TF_SIMT_PLUGIN), a plugin's name gains "-sim", so both builds
 * may sit on one plugin path, and its score drops to 1: the harness runs
 * only where the INI pins it ([plugins] backend = cuda-sim).
 * tf_cuda_plugin_probe keeps each build's plugins on its own backend;
 * tf_cuda_plugin_layer_check is a layer plugin's refusal at layer_init.
 */
#ifndef TF_CUDA_PLUGIN_H
#define TF_CUDA_PLUGIN_H

#include <string.h>

#include "tf/backend.h"

#ifdef TF_SIMT_PLUGIN
#define TF_CUDA_PLUGIN_NAME(name) name "-sim"
#define TF_CUDA_PLUGIN_SCORE(score) 1
#else
#define TF_CUDA_PLUGIN_NAME(name) name
#define TF_CUDA_PLUGIN_SCORE(score) (score)
#endif

/*
 * Probe: a CUDA plugin runs on the backend-cuda of its own build only
 * ("cuda", or "cuda-sim" on the harness), whose memory and stream are
 * those of the CUDA runtime it links; else 0, with the reason.
 */
static inline int tf_cuda_plugin_probe(const tf_host *h, const char **reason)
{
	if (!h || !h->backend || strcmp(h->backend->hdr.name, TF_CUDA_PLUGIN_NAME("cuda")) ||
	    !tf_backend_stream(h->backend, h->backend_ctx)) {
		*reason = "needs backend " TF_CUDA_PLUGIN_NAME("cuda")
			  " (device memory and a stream); the CPU plugins serve backend-cpu";
		return 0;
	}
	return 1;
}

/*
 * A device layer plugin's refusal at layer_init, before it opens
 * anything: a backend its probe declines.  `name` is the plugin's.
 * Tensor parallelism ([tp] size > 1) is no refusal: the layers shard as
 * the CPU plugins do, through the device linears' open_part, and the
 * engine all-reduces their device outputs.
 */
static inline int tf_cuda_plugin_layer_check(const tf_host *h, int layer, const char *name)
{
	const char *why;
	if (!tf_cuda_plugin_probe(h, &why))
		return h->error(h, TF_ERR_UNSUPPORTED, "layer %d (%s): backend %s: %s", layer, name,
				h->backend ? h->backend->hdr.name : "(none)", why);
	return TF_OK;
}

#endif /* TF_CUDA_PLUGIN_H */
