/*
 * cuda_fp16.h (SIMT harness) - __half and the fp16 intrinsics our kernels
 * use.  Conversions round to nearest even.  __hadd and __hfma compute in
 * double and round once to fp16: exact for __hadd (a double holds every
 * sum of two fp16 values) and for __hfma's product; its sum can in rare
 * cases lose a bit the GPU's fused operation keeps.
 */
#ifndef TF_SIMT_CUDA_FP16_H
#define TF_SIMT_CUDA_FP16_H

#include "simt.h"

struct __half {
	unsigned short bits;
};

namespace tf_simt {
unsigned short f64_to_f16(double f);
float f16_to_f32(unsigned short h);
} /* namespace tf_simt */

static inline __half __ushort_as_half(unsigned short u) { return __half{ u }; }
static inline unsigned short __half_as_ushort(__half h) { return h.bits; }
static inline float __half2float(__half h) { return ::tf_simt::f16_to_f32(h.bits); }
static inline __half __float2half_rn(float f) { return __half{ ::tf_simt::f64_to_f16(f) }; }

static inline __half __hadd(__half a, __half b)
{
	return __half{ ::tf_simt::f64_to_f16((double)__half2float(a) + __half2float(b)) };
}

static inline __half __hfma(__half a, __half b, __half c)
{
	return __half{ ::tf_simt::f64_to_f16((double)__half2float(a) * __half2float(b) +
					     __half2float(c)) };
}

#endif /* TF_SIMT_CUDA_FP16_H */
