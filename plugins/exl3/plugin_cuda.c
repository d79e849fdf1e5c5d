/* plugin_cuda.c - exl3-cuda.so's entry: the EXL3 and plain linears on
 * CUDA devices. */
#include "lin.h"

TF_EXPORT const tf_plugin_quant *tf_plugin_quant_v1(unsigned index)
{
	static const tf_plugin_quant *const ops[] = { &tf_exl3_cuda_lin_ops,
						      &tf_plain_cuda_lin_ops };
	return index < sizeof(ops) / sizeof(ops[0]) ? ops[index] : NULL;
}
