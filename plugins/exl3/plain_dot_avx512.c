/*
 * plain_dot_avx512.c - plain_dot.h's dot products sixteen floats a
 * register, built with -mavx512f and TF_VEC_AVX512 (vec.h's float subset
 * for AVX-512) and taken only where the CPU has AVX-512 F (plain_lin.c).
 */
#include "plain_dot.h"

PLAIN_DOT_FOR(, tf_plain_dot_avx512_f32, TF_DTYPE_F32)
PLAIN_DOT_FOR(, tf_plain_dot_avx512_f16, TF_DTYPE_F16)
PLAIN_DOT_FOR(, tf_plain_dot_avx512_bf16, TF_DTYPE_BF16)
