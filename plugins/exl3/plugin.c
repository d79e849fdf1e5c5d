/*
 * plugin.c - exl3.so's entry: its quant descriptors, best first.
 *
 *   0 "exl3"     - EXL3 trellis-coded weights (exllamav3 format)
 *   1 "exl3-int" - the same, MUL1 products with 15-bit integer activations
 *   2 "exl3-q8"  - the same with 8-bit activations
 *   3 "plain"    - unquantized F16/BF16/F32 weights
 */
#include "lin.h"

static const tf_plugin_quant *const lin_ops[] = {
	&tf_exl3_lin_ops,
	&tf_exl3_int_lin_ops,
	&tf_exl3_q8_lin_ops,
	&tf_plain_lin_ops,
};

TF_EXPORT const tf_plugin_quant *tf_plugin_quant_v1(unsigned index)
{
	return index < sizeof(lin_ops) / sizeof(lin_ops[0]) ? lin_ops[index] : NULL;
}
