/*
 * fuzz_safetensors.c - the safetensors header parser on hostile bytes.
 *
 * The input is a whole file image.  Beyond not crashing, whatever the parser
 * accepts must keep its promises: every tensor readable in full, its byte
 * size equal to numel x dtype size, and findable by its name.
 */
#include <stdint.h>
#include <stdlib.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tf_st_file *f;
	if (tf_st_open_buffer(data, size, "fuzz.safetensors", &f))
		return 0;
	volatile uint8_t sink = 0;
	for (size_t i = 0; i < tf_st_count(f); i++) {
		const tf_tensor *t = tf_st_at(f, i);
		const uint8_t *p = t->data;
		if ((uint64_t)tf_tensor_numel(t) * tf_dtype_size(t->dtype) != t->nbytes ||
		    p < data || p + t->nbytes > data + size || tf_st_find(f, t->name) != t)
			abort();
		if (t->nbytes)
			sink ^= p[0] ^ p[t->nbytes - 1];
	}
	(void)sink;
	tf_st_close(f);
	return 0;
}
