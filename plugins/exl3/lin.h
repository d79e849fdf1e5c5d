/*
 * lin.h - what the linear descriptors of exl3.so and exl3-cuda.so share.
 *
 * exl3.so carries four quant implementations: "exl3" (trellis-coded
 * weights, exl3_lin.c), "exl3-int" and "exl3-q8" (the same, 15-bit and
 * 8-bit integer activations for MUL1 products) and "plain"
 * (fp16/bf16/fp32 `.weight`, plain_lin.c);
 * exl3-cuda.so the EXL3 one and "plain-cuda" for CUDA devices
 * (exl3_cuda_lin.c, plain_cuda_lin.c).  All
 * fetch tensors, widen small vectors to float and split work over the
 * backend's threads the same way; those helpers live here.
 */
#ifndef TF_EXL3_LIN_H
#define TF_EXL3_LIN_H

#include "tf/backend.h"
#include "tf/quant.h"

extern const tf_plugin_quant tf_exl3_lin_ops;
extern const tf_plugin_quant tf_exl3_int_lin_ops;
extern const tf_plugin_quant tf_exl3_q8_lin_ops;
extern const tf_plugin_quant tf_plain_lin_ops;
extern const tf_plugin_quant tf_exl3_cuda_lin_ops;       /* exl3-cuda.so */
extern const tf_plugin_quant tf_plain_cuda_lin_ops;      /* exl3-cuda.so */

/* The quantizer the exl3 descriptors share (tf_quantize_fn, tf/quant.h):
 * bits 1..8 (0: 4), variant "mul1" (default), "mcg" or "3inst". */
int tf_exl3_quantize_slot(const tf_host *h, const char *prefix, const float *w, int64_t out,
			  int64_t in, const float *bias, const tf_quantize_opts *o,
			  const tf_tensor_sink *sink, double *rel_mse);

/* The drawer the exl3 descriptors share (tf_quant_draw_fn, tf/quant.h):
 * the same tensors as the quantizer, with random codes. */
int tf_exl3_draw_slot(const tf_host *h, const char *prefix, int64_t out, int64_t in,
		      double rms, const tf_quantize_opts *o, const tf_draw_sink *sink);

/* Highest match() score of each descriptor: a `.trellis` beats a `.weight`
 * stored under the same prefix, and each backend's default trellis path
 * ("exl3-int" on the CPU, exl3-cuda on a device) the CPU's others, which
 * open trellises where the INI pins them (docs/ini.md, `[plugins] quant`). */
#define TF_LIN_SCORE_EXL3  110          /* tf_exl3_match: the default paths */
#define TF_LIN_SCORE_EXL3_FLOAT 100     /* "exl3", the float path */
#define TF_LIN_SCORE_EXL3_Q8 80         /* "exl3-q8" */
#define TF_LIN_SCORE_PLAIN 10

/* Worker threads parallel_for() may use (1 without a host thread pool). */
int tf_lin_threads(const tf_host *h);

/* Run fn over [0, n) on the backend's threads, in chunks of whole
 * `grain`s each worth handing to a worker (tf_tu_grain's ~64K flops, at
 * `flops` an item), or inline on this thread when the job is one chunk or
 * the backend has no host thread pool. */
void tf_lin_parallel(const tf_host *h, int64_t n, int64_t grain, int64_t flops,
		     tf_range_fn fn, void *arg);

/* Look up "<prefix>.<suffix>".  Returns TF_OK, TF_ERR_NOT_FOUND (silently)
 * or another status with the detail recorded. */
int tf_lin_tensor(const tf_host *h, const char *prefix, const char *suffix,
		  tf_tensor *t);

/* Tell the host "<prefix>.<suffix>" has been copied and will not be read
 * again, so it may drop the tensor's pages (host ABI 1.2; older hosts keep
 * them). */
void tf_lin_release(const tf_host *h, const char *prefix, const char *suffix);

/* Whether "<prefix>.<suffix>" exists. */
int tf_lin_has(const tf_host *h, const char *prefix, const char *suffix);

/* Widen the first n elements of a 1-D F32/F16/BF16 vector of at least n
 * elements into a new float array.  Fails naming the tensor. */
int tf_lin_vector(const tf_host *h, const tf_tensor *t, int64_t n, float **out);

/* Validate that a tensor's nbytes matches its shape and dtype and that it
 * has data, so no kernel reads past a truncated tensor. */
int tf_lin_check_bytes(const tf_host *h, const tf_tensor *t);

/* The plain linear's tensors under prefix, as "plain" and "plain-cuda"
 * read them: `.weight` [out, in] as F16, BF16 or F32 (*w, a view of the
 * whole checkpoint tensor) and the optional `.bias` [out] widened into
 * *bias (free(); NULL when absent).  With a part (NULL: the whole layer),
 * *bias holds the part's outputs, or is NULL for an input part not
 * starting at column 0 (the bias is added once), and *info describes the
 * part.  Fails naming the tensor. */
int tf_lin_plain_load(const tf_host *h, const char *prefix, int64_t in, int64_t out,
		      const tf_lin_part *part, tf_tensor *w, float **bias, tf_lin_info *info);
/* Their match(): any `.weight` under prefix, below an EXL3 trellis. */
int tf_lin_plain_match(const tf_host *h, const char *prefix);

#endif /* TF_EXL3_LIN_H */
