/*
 * cpu.h - the CPU backend's instance and the op slots ops.c implements.
 *
 * One tf_cpu per backend init: the host it reports to, the kernel table it
 * runs (the build's fast one, or the reference for the "cpu-ref"
 * descriptor) and its thread pool.
 */
#ifndef TF_CPU_H
#define TF_CPU_H

#include "kernels.h"
#include "pool.h"
#include "tf/backend.h"

typedef struct tf_cpu {
	const tf_host *host;
	const tf_cpu_kernels *k;
	tf_pool *pool;
} tf_cpu;

void tf_cpu_rmsnorm(void *ctx, float *y, const float *x, const float *w,
		    int64_t rows, int64_t dim, float eps);
void tf_cpu_add(void *ctx, float *y, const float *a, const float *b, int64_t n);
void tf_cpu_swiglu(void *ctx, float *y, const float *gate, const float *up,
		   int64_t n, float limit);
void tf_cpu_rope(void *ctx, float *x, int64_t rows, int64_t n_heads,
		 int64_t row_stride, int64_t head_stride, int64_t rot_dim,
		 const int32_t *pos, const float *inv_freq, float attn_factor,
		 int interleaved);
void tf_cpu_softmax(void *ctx, float *x, int64_t rows, int64_t n);
void tf_cpu_embed(void *ctx, float *y, const void *table, tf_dtype dtype,
		  int64_t dim, const int32_t *ids, int64_t n);
int tf_cpu_convert(void *ctx, void *dst, tf_dtype dst_type, const void *src,
		   tf_dtype src_type, int64_t n);
void tf_cpu_argmax(void *ctx, int32_t *out, const float *x, int64_t rows,
		   int64_t n);

#endif /* TF_CPU_H */
