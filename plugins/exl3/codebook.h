/*
 * codebook.h - EXL3's procedural codebooks: a 16-bit trellis state to the
 * fp16 weight it stands for (spec exl3.md §4.4).
 *
 * There is no table in the file: each codebook is a hash of the state.
 * These scalar functions are the bit-exact reference (they reproduce the
 * CUDA __hadd/__hfma results); the fused kernels compute the same values
 * in float32 without the final rounding to fp16.
 */
#ifndef TF_EXL3_CODEBOOK_H
#define TF_EXL3_CODEBOOK_H

#include <stdint.h>

typedef enum tf_exl3_cb {
	TF_EXL3_CB_3INST = 0,   /* no marker tensor (the original codebook) */
	TF_EXL3_CB_MCG = 1,     /* `<key>.mcg` present */
	TF_EXL3_CB_MUL1 = 2,    /* `<key>.mul1` present (exllamav3's default) */
	TF_EXL3_CB_COUNT
} tf_exl3_cb;

/* Multipliers and constants, locked since exllamav3 v0.0.9. */
#define TF_EXL3_3INST_MUL 89226354u
#define TF_EXL3_3INST_ADD 64248484u
#define TF_EXL3_MCG_MUL   0xCBAC1FEDu
#define TF_EXL3_MUL1_MUL  0x83DCD12Du
#define TF_EXL3_LOP_MASK  0x8FFF8FFFu   /* keeps sign and low exponent bits */
#define TF_EXL3_LOP_XOR   0x3B603B60u   /* forces |half| into [0.125, 2) */
/* MUL1: w = bytesum * K_INV + K_BIAS, both exact in fp16 (0x1EEE, 0xC931
 * applied to 1024 + bytesum). */
#define TF_EXL3_MUL1_K_INV  0.00676727294921875f
#define TF_EXL3_MUL1_K_BIAS (-3.453125f)
/* The marker tensors' values (ignored on load: only presence matters). */
#define TF_EXL3_MCG_MARKER  ((int32_t)-877912083)
#define TF_EXL3_MUL1_MARKER ((int32_t)-2082680531)
/* RMS of the 3INST codebook; the quantizer scales rows to match it. */
#define TF_EXL3_CODEBOOK_SCALE 1.24371088f

/* MUL1's byte sum of state · 0x83DCD12D, 0..1020: w = bs·K_INV + K_BIAS
 * before the fp16 rounding. */
uint32_t tf_exl3_mul1_bytesum(uint16_t state);

/* The weight of `state` as fp16 bits, bit-exact with exllamav3. */
uint16_t tf_exl3_cb_half(uint16_t state, tf_exl3_cb cb);

/* The same, widened to float. */
float tf_exl3_cb_f32(uint16_t state, tf_exl3_cb cb);

/* "3inst", "mcg" or "mul1". */
const char *tf_exl3_cb_name(tf_exl3_cb cb);

#endif /* TF_EXL3_CODEBOOK_H */
