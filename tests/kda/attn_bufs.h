/*
 * attn_bufs.h - random weight arrays for an attention layer under test,
 * as its float64 reference sees them.  Free of Criterion, so the
 * conformance suite builds the unit tests' layers too; a failure aborts.
 */
#ifndef TF_TEST_ATTN_BUFS_H
#define TF_TEST_ATTN_BUFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Uniform values in [-scale, scale], rounded through bf16 when asked (what
 * a reference must see of a weight stored as bf16). */
void attn_fixture_random(float *x, size_t n, float scale, bool bf16, uint64_t *seed);

/* The weight arrays of one test case, freed together. */
#define ATTN_BUFS_MAX 24
typedef struct attn_bufs {
	float *p[ATTN_BUFS_MAX];
	int n;
} attn_bufs;

/* A new array of n attn_fixture_random values, owned by b. */
float *attn_bufs_random(attn_bufs *b, size_t n, float scale, bool bf16, uint64_t *seed);
void attn_bufs_free(attn_bufs *b);

#endif /* TF_TEST_ATTN_BUFS_H */
