/*
 * tf/transport.h - the transport kind: collectives between TP ranks.
 *
 * ABI 1.0 fixes the lifecycle only; the all-reduce slots will be appended
 * by the tensor-parallel work under the append-only rule.  No transport
 * plugin exists yet: [tp] size > 1 fails until one is on the plugin path.
 */
#ifndef TF_TRANSPORT_H
#define TF_TRANSPORT_H

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_plugin_transport {
	tf_plugin_header hdr;
	int (*init)(const tf_host *h, void **inst);
	void (*fini)(void *inst);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;
} tf_plugin_transport;

const tf_plugin_transport *tf_plugin_transport_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_TRANSPORT_H */
