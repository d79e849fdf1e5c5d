/*
 * fuzz_config.c - the config.json reader on hostile bytes.
 *
 * Whatever it accepts must be a usable model description: a schedule of
 * n_layers_total = num_hidden_layers + num_nextn_predict_layers valid
 * entries with MLA + MoE MTP layers, non-negative clamps, and a memory plan
 * classification that stays inside it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "conf/config.h"
#include "model/memplan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tf_model_config c;
	if (tf_config_parse((const char *)data, size, "fuzz/config.json", &c))
		return 0;
	if (c.n_layers_total != c.num_hidden_layers + c.num_nextn_predict_layers)
		abort();
	for (int i = 0; i < c.n_layers_total; i++) {
		bool mtp = i >= c.num_hidden_layers;
		if ((c.layer_attn[i] != TF_ATTN_KDA && c.layer_attn[i] != TF_ATTN_MLA) ||
		    (c.layer_ffn[i] != TF_FFN_DENSE && c.layer_ffn[i] != TF_FFN_MOE) ||
		    (mtp && (c.layer_attn[i] != TF_ATTN_MLA || c.layer_ffn[i] != TF_FFN_MOE)) ||
		    !(c.expert_swiglu_limit[i] >= 0) || !(c.shared_swiglu_limit[i] >= 0))
			abort();
	}
	if ((unsigned)tf_wclass_of(&c, "model.layers.3.attention.q_proj.weight") >= TF_WCLASS_COUNT)
		abort();
	tf_config_free(&c);
	return 0;
}
