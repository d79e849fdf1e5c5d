/* codebook.c - the scalar, bit-exact codebooks (see codebook.h). */
#include "codebook.h"

#include "tf/dtype.h"

/* 3INST and MCG: two fp16 halves of a hashed word, added with one RNE
 * rounding.  Both halves lie in [0.125, 2) so their float sum is exact and
 * a single conversion reproduces __hadd. */
static uint16_t cb_lop_half(uint32_t x)
{
	x = (x & TF_EXL3_LOP_MASK) ^ TF_EXL3_LOP_XOR;
	return tf_f32_to_f16(tf_f16_to_f32((uint16_t)(x & 0xFFFF)) +
			     tf_f16_to_f32((uint16_t)(x >> 16)));
}

uint32_t tf_exl3_mul1_bytesum(uint16_t state)
{
	uint32_t x = state * TF_EXL3_MUL1_MUL;
	return (x & 0xFF) + ((x >> 8) & 0xFF) + ((x >> 16) & 0xFF) + (x >> 24);
}

uint16_t tf_exl3_cb_half(uint16_t state, tf_exl3_cb cb)
{
	uint32_t s = state;

	switch (cb) {
	case TF_EXL3_CB_MCG:
		return cb_lop_half(s * TF_EXL3_MCG_MUL);
	case TF_EXL3_CB_MUL1:
		/* (1024 + bs) * k_inv + (-10.3828125) in fp32 is exact (at
		 * most 22 significant bits): one rounding, like __hfma. */
		return tf_f32_to_f16((float)(1024 + tf_exl3_mul1_bytesum(state)) *
				     TF_EXL3_MUL1_K_INV - 10.3828125f);
	default:
		return cb_lop_half(s * TF_EXL3_3INST_MUL + TF_EXL3_3INST_ADD);
	}
}

float tf_exl3_cb_f32(uint16_t state, tf_exl3_cb cb)
{
	return tf_f16_to_f32(tf_exl3_cb_half(state, cb));
}

const char *tf_exl3_cb_name(tf_exl3_cb cb)
{
	static const char *const name[TF_EXL3_CB_COUNT] = {
		[TF_EXL3_CB_3INST] = "3inst", [TF_EXL3_CB_MCG] = "mcg",
		[TF_EXL3_CB_MUL1] = "mul1",
	};
	return (unsigned)cb < TF_EXL3_CB_COUNT ? name[cb] : "?";
}
