/* bytes.c - growable byte strings (tf/text.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"
#include "tf/text.h"

int tf_bytes_reserve(tf_bytes *b, size_t extra)
{
	size_t cap;
	char *p;

	if (b->len + extra <= b->cap)
		return TF_OK;
	if (extra > SIZE_MAX / 2 - b->len)
		return TF_ERR_NOMEM;
	cap = b->cap ? b->cap : 64;
	while (cap < b->len + extra)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return TF_ERR_NOMEM;
	b->p = p;
	b->cap = cap;
	return TF_OK;
}

int tf_bytes_append(tf_bytes *b, const void *p, size_t n)
{
	int rc = tf_bytes_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return TF_OK;
}

void tf_bytes_free(tf_bytes *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}
