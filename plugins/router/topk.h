/*
 * topk.h - the indices of the k largest of n floats, largest first, the
 * lower index winning ties: the one choice the router plugins make
 * differently.  For finite input (and -inf) both give the same answer; with
 * NaN both still give k distinct indices in range.  `scratch` holds n
 * floats.
 */
#ifndef TF_ROUTER_TOPK_H
#define TF_ROUTER_TOPK_H

#include <stdint.h>

typedef void (*tf_topk_fn)(const float *v, int n, int k, float *scratch, int32_t *out);

/* The reference: k passes, each taking the largest value not yet taken. */
void tf_topk_ref(const float *v, int n, int k, float *scratch, int32_t *out);

/* One pass, inserting into a sorted list of the best k so far. */
void tf_topk_fast(const float *v, int n, int k, float *scratch, int32_t *out);

#endif /* TF_ROUTER_TOPK_H */
