/*
 * matmul_dotprod.c - the integer-activation MUL1 product with ARMv8.2's
 * udot (matmul_int.h), built with +dotprod and called only when the CPU
 * has it (HWCAP_ASIMDDP, tf_exl3_ipath_supported).
 *
 * The generic NEON kernel (matmul.c) widens each product's four bytes
 * with two pairwise adds; udot against a vector of ones sums them in one
 * instruction, then one multiply-accumulate by the activation (exact in
 * int32, see matmul_int.h).
 */
#include <arm_neon.h>

#include "vec.h"

static inline tf_vi dotprod_bsdot(tf_vi acc, tf_vi p, uint32_t x2)
{
	uint32x4_t bs = vdotq_u32(vdupq_n_u32(0), vreinterpretq_u8_u32(p), vdupq_n_u8(1));
	return vreinterpretq_u32_s32(vmlaq_n_s32(vreinterpretq_s32_u32(acc),
						 vreinterpretq_s32_u32(bs), (int16_t)(x2 & 0xFFFF)));
}

#define INT_BSDOT dotprod_bsdot
#define INT_KERN tf_exl3_int_dotprod
#include "matmul_int_vec.h"
