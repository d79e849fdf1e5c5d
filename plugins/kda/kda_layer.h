/*
 * kda_layer.h - what the KDA attention plugins share, whatever runs the
 * layer: kda.so computes on the host (kda.c), kda-cuda.so on a CUDA
 * device (plugins/kda-cuda/kda_cuda_attn.c).
 *
 * Both read the same config.json keys and tensors (kda_weights_open),
 * run the same input projections through the quant plugins
 * (kda_project), and hold each sequence's state behind the same header,
 * so one check of a batch serves both (kda_check_batch).
 *
 * Tensor parallel ([tp] size > 1): a rank holds the heads
 * [head0, head0 + heads) of num_attention_heads, their rows of every input
 * projection, conv, gate and bias, and o_proj's matching input columns, so
 * its output is a partial sum the runtime all-reduces; state_bytes and
 * the state are this rank's heads'.
 */
#ifndef TF_KDA_LAYER_H
#define TF_KDA_LAYER_H

#include <stdbool.h>

#include "tf/attention.h"
#include "tf/quant.h"

enum { KDA_Q, KDA_K, KDA_V, KDA_NCONV };

/* A gate projection H -> P: full rank (Ling's f_proj, g_proj) or Kimi's
 * low-rank pair through head_dim (f_a_proj then f_b_proj). */
struct kda_gate_proj {
	tf_lin full, a, b;
	bool low_rank;
};

/* One KDA layer's shape, linears and small tensors (float32, host
 * memory). */
struct kda_weights {
	const tf_host *h;
	int layer;
	int hidden, heads, dim, width;  /* dim = K = V; width = conv taps; heads: this rank's */
	int head0, heads_all;           /* this rank's first head, of all of them */
	int64_t P;                      /* heads * dim */
	bool safe_gate;
	float lower_bound, eps;

	tf_lin proj[KDA_NCONV];         /* q, k, v */
	struct kda_gate_proj f_proj, g_proj;
	tf_lin b_proj, o_proj;
	float *conv_w[KDA_NCONV];       /* [P, width] */
	float *a_exp;                   /* exp(A_log) [heads] */
	float *dt_bias;                 /* [P] */
	float *o_norm;                  /* [dim] */
};

/* Where the projections of n rows go: q, k, v, f, gate [n, P], beta
 * [n, heads], low [n, dim] (the low-rank gates' middle). */
struct kda_proj_out {
	float *x[KDA_NCONV], *f, *beta, *gate, *low;
};

/* A sequence's state begins with this. */
struct kda_state_hdr {
	const void *layer;              /* the instance that made it */
	int64_t max_ctx, len;
};

/* Check config.json and context, open the linears and read the small
 * tensors of the layer under prefix.  On failure w is closed. */
int kda_weights_open(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
		     struct kda_weights *w);
/* A zeroed instance of `bytes`, a struct that begins with its struct
 * kda_weights, with the layer opened into that (kda_weights_open). */
int kda_instance_new(const tf_host *h, int layer, const char *prefix, int64_t max_ctx,
		     size_t bytes, void **inst);
/* Free the small tensors (a device layer, once it uploaded them). */
void kda_weights_free_host(struct kda_weights *w);
/* Close the linears and free the small tensors. */
void kda_weights_close(struct kda_weights *w);

/* The input projections of n rows of x (backend memory) into o. */
int kda_project(const struct kda_weights *w, const float *x, int64_t n,
		const struct kda_proj_out *o);

/* Floats of one sequence's state: S [heads, dim, dim], then conv
 * [3, P, width - 1]. */
size_t kda_state_floats(const struct kda_weights *w);
/* The tf_plugin_attention slots both plugins share: state_bytes,
 * state_len, and state_snapshot_size (whose instance begins with its
 * struct kda_weights). */
int64_t kda_state_bytes(const tf_host *h, int layer, int64_t max_ctx);
int64_t kda_state_len(void *inst, const void *state);
size_t kda_state_snapshot_size(void *inst, const void *state);

/* A snapshot: this header, then the whole state (KDA state is not
 * append-only). */
size_t kda_snap_size(const struct kda_weights *w);
void kda_snap_header(const struct kda_state_hdr *st, void *buf);
/* The length a snapshot of st's layer holds; else TF_ERR_INVALID. */
int kda_snap_len(const struct kda_weights *w, const struct kda_state_hdr *st,
		 const void *buf, int64_t *len);
/* Where the state's floats sit in a snapshot buffer. */
void *kda_snap_data(void *buf);

/* A context of max_ctx tokens is positive; else TF_ERR_INVALID. */
int kda_check_ctx(const struct kda_weights *w, int64_t max_ctx);
/* state_copy from src to dst may go ahead: both of `layer`, src's tokens
 * within dst's context. */
int kda_check_copy(const struct kda_weights *w, const void *layer,
		   const struct kda_state_hdr *dst, const struct kda_state_hdr *src);

/* Segments well-formed (tf_attn_batch), each state of `layer`, distinct
 * and with room for its rows; checked before any state is touched. */
int kda_check_batch(const struct kda_weights *w, const void *layer, const tf_attn_batch *b);

#endif /* TF_KDA_LAYER_H */
