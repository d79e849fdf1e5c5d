/* plugin_cuda.c - exl3-cuda.so's entry: the EXL3 linear on CUDA devices. */
#include "lin.h"

TF_EXPORT const tf_plugin_quant *tf_plugin_quant_v1(unsigned index)
{
	return index == 0 ? &tf_exl3_cuda_lin_ops : NULL;
}
