/* attn_bufs.c - see attn_bufs.h. */
#include "attn_bufs.h"

#include <stdio.h>
#include <stdlib.h>

#include "support/testhost.h"

void attn_fixture_random(float *x, size_t n, float scale, bool bf16, uint64_t *seed)
{
	tf_test_fill_uniform(x, n, scale, seed);
	if (bf16)
		for (size_t i = 0; i < n; i++)
			x[i] = tf_bf16_to_f32(tf_f32_to_bf16(x[i]));
}

float *attn_bufs_random(attn_bufs *b, size_t n, float scale, bool bf16, uint64_t *seed)
{
	float *p = b->n < ATTN_BUFS_MAX ? malloc(n * sizeof(float)) : NULL;
	if (!p) {
		fprintf(stderr, "attn_bufs: %s\n", b->n < ATTN_BUFS_MAX ? "out of memory" :
			"raise ATTN_BUFS_MAX");
		abort();
	}
	attn_fixture_random(p, n, scale, bf16, seed);
	b->p[b->n++] = p;
	return p;
}

void attn_bufs_free(attn_bufs *b)
{
	for (int i = 0; i < b->n; i++)
		free(b->p[i]);
	b->n = 0;
}
