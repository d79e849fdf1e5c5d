/*
 * mlp.h - one SwiGLU MLP: a routed expert, the shared expert or a dense
 * layer's MLP (ling-arch.md §1.7, §1.8).
 *
 *     y = down(act(gate(x), up(x)))
 *     act(g, u) = silu(g) * u                                  limit 0
 *               = min(silu(g), limit) * clamp(u, -limit, limit)  limit > 0
 *
 * The three projections are opened through host->lin_open, so they are
 * EXL3 or plain fp16/bf16 alike.
 */
#ifndef TF_MOE_MLP_H
#define TF_MOE_MLP_H

#include <stdbool.h>

#include "tf/quant.h"

typedef struct tf_mlp {
	tf_lin gate, up, down;
	int64_t hidden, inter;          /* inter is 0 while closed */
	float limit;
} tf_mlp;

/* Open `<prefix>.{gate,up,down}_proj` as hidden -> inter -> hidden;
 * inter_key names the config.json key(s) inter comes from.  With `split`
 * and [tp] size > 1 only this rank's share of the intermediate features
 * opens (gate's and up's rows, down's columns): its output is a partial
 * sum.  On failure nothing stays open and host->error names the
 * projection and the keys. */
int tf_mlp_init(tf_mlp *m, const tf_host *h, const char *prefix,
		int64_t hidden, int64_t inter, const char *inter_key, float limit, bool split);
void tf_mlp_free(tf_mlp *m, const tf_host *h);

/* Floats of backend scratch tf_mlp_forward needs for `rows` rows. */
int64_t tf_mlp_scratch(const tf_mlp *m, int64_t rows);

/* y[rows, hidden] = mlp(x[rows, hidden]); all three in backend memory. */
int tf_mlp_forward(const tf_mlp *m, const tf_host *h, const float *x,
		   int64_t rows, float *y, float *scratch);

#endif /* TF_MOE_MLP_H */
