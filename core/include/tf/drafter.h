/*
 * tf/drafter.h - the drafter kind: speculative token proposals.
 *
 * The MTP layer itself is a model layer: the core runs it through the
 * attention and ffn plugins chosen for layer num_hidden_layers, and drafts
 * with it when [mtp] enabled (tf_seq_speculate, tf_seq_step, tf/engine.h),
 * and the core's own policy picks the depth ([mtp] adaptive, p_min).  A
 * drafter plugin is chosen when [plugins] drafter names one; ABI 1.0 fixes
 * its lifecycle only, and no slot lets it draft or set the depth yet.
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
