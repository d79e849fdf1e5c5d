/*
 * hadamard.h - the blockwise 128-point Hadamard transform EXL3 applies on
 * both sides of the decoded weights (spec exl3.md §3).
 *
 * Had128(v): for each aligned block of 128 values, v ← H128·v / √128 with
 * H128[i][j] = (-1)^popcount(i & j) (natural-order Sylvester).  The
 * transform is symmetric and its own inverse.
 */
#ifndef TF_EXL3_HADAMARD_H
#define TF_EXL3_HADAMARD_H

#include <stdint.h>

#define TF_HAD_BLOCK 128
#define TF_HAD_SCALE 0.088388347648f    /* 1/√128, as exllamav3 */

/* In place over n values (n a multiple of 128), on the build's vector
 * unit: the plain loop's sums in its order, so tf_had128_ref's bits. */
void tf_had128(float *v, int64_t n);

/* The plain stage-by-stage loop: strides 1, 2, 4, ..., 64, then the scale. */
void tf_had128_ref(float *v, int64_t n);

#endif /* TF_EXL3_HADAMARD_H */
