/*
 * tf/drafter.h - the drafter kind: speculative token proposals.
 *
 * ABI 1.0 fixes the lifecycle only; the proposal slots will be appended by
 * the MTP work under the usual append-only rule.  No drafter plugin exists
 * yet: [mtp] enabled fails until one is on the plugin path.
 */
#ifndef TF_DRAFTER_H
#define TF_DRAFTER_H

#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_plugin_drafter {
	tf_plugin_header hdr;
	int (*init)(const tf_host *h, void **inst);
	void (*fini)(void *inst);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;
} tf_plugin_drafter;

const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_DRAFTER_H */
