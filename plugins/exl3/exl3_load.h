/*
 * exl3_load.h - the tensors of one EXL3 linear, found and validated.
 *
 * Shared by the CPU ("exl3") and CUDA ("exl3-cuda") descriptors so both
 * refuse the same malformed inputs with the same messages (spec exl3.md
 * §2): the trellis' dtype, rank and 16·K last dimension with K in 1..8,
 * features that are multiples of 128, suh/svh/bias lengths that agree with
 * it, at most one codebook marker, and no legacy su/sv or global scale.
 */
#ifndef TF_EXL3_LOAD_H
#define TF_EXL3_LOAD_H

#include "matmul.h"
#include "tf/quant.h"

typedef struct tf_exl3_parts {
	const uint16_t *trellis;        /* file order, still in the weights */
	size_t trellis_bytes;
	int64_t k, n;                   /* padded features, multiples of 128 */
	int K;                          /* bits per weight, 1..8 */
	tf_exl3_cb cb;
	float *suh, *svh, *bias;        /* [k], [n], [n] or NULL; owned */
} tf_exl3_parts;

/* match(): a `.trellis` under the prefix. */
int tf_exl3_match(const tf_host *h, const char *prefix);

/* Load "<prefix>.*" for a linear of in x out logical features. */
int tf_exl3_parts_load(const tf_host *h, const char *prefix, int64_t in, int64_t out,
		       tf_exl3_parts *p);
void tf_exl3_parts_free(tf_exl3_parts *p);

/*
 * Keep only `part` of a loaded layer (tensor parallelism): its rows of
 * tiles (an input range, a view into the weights) or its columns of tiles
 * (an output range, copied compact into *owned, which the caller frees
 * once the trellis is packed), and the matching suh, svh and bias (an
 * input part other than the first drops the bias: the ranks' sum adds it
 * once).  A cut off the 128-feature Hadamard blocks (which hold whole
 * 16 x 16 tiles) fails naming the tensor.
 */
int tf_exl3_parts_cut(const tf_host *h, const char *prefix, const tf_lin_part *part,
		      tf_exl3_parts *p, uint16_t **owned);

/* The tf_lin_info of a loaded layer. */
tf_lin_info tf_exl3_parts_info(const tf_exl3_parts *p, int64_t in, int64_t out);

#endif /* TF_EXL3_LOAD_H */
