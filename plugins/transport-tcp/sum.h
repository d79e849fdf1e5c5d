/*
 * sum.h - the rank-order sum every all-reduce ends with.
 *
 * out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ..., accumulated
 * in fp32 and (bf16) rounded once, so every rank that holds the same parts
 * computes the same bits.  out may be one of the parts.
 */
#ifndef TF_TCP_SUM_H
#define TF_TCP_SUM_H

#include <stddef.h>
#include <stdint.h>

void tf_sum_f32(float *out, const float *const *parts, int n, size_t count);
void tf_sum_bf16(uint16_t *out, const uint16_t *const *parts, int n, size_t count);

#endif /* TF_TCP_SUM_H */
