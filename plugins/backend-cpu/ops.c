/*
 * ops.c - the backend op slots: split each op into rows or spans, spread
 * them over the thread pool, and run the instance's kernels on each.
 *
 * Small ops stay on the calling thread: the pool only wakes workers when a
 * job has more than one grain of work.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"

/* Elements one chunk should hold before handing it to another thread is
 * worth a wake-up (a few microseconds of work). */
#define TF_CPU_GRAIN 16384
/* Pairs whose cos/sin one RoPE step keeps on the stack. */
#define TF_CPU_ROPE_BLOCK 64
/* Elements widened per step when converting F16 <-> BF16 via F32. */
#define TF_CPU_CONVERT_BLOCK 256

static int64_t rows_grain(int64_t per_row)
{
	return per_row >= TF_CPU_GRAIN ? 1 : TF_CPU_GRAIN / (per_row > 0 ? per_row : 1);
}

struct rows_job {
	const tf_cpu_kernels *k;
	float *y;
	const float *x, *w;
	int64_t n;
	float eps;
	int32_t *idx;
};

static void rmsnorm_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct rows_job *j = arg;
	for (int64_t r = begin; r < end; r++)
		j->k->rmsnorm(j->y + r * j->n, j->x + r * j->n, j->w, j->n, j->eps);
}

void tf_cpu_rmsnorm(void *ctx, float *y, const float *x, const float *w,
		    int64_t rows, int64_t dim, float eps)
{
	tf_cpu *c = ctx;
	struct rows_job j = { .k = c->k, .y = y, .x = x, .w = w, .n = dim, .eps = eps };
	if (dim > 0)
		tf_pool_run(c->pool, rows, rows_grain(dim), rmsnorm_rows, &j);
}

static void softmax_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct rows_job *j = arg;
	for (int64_t r = begin; r < end; r++)
		j->k->softmax(j->y + r * j->n, j->n);
}

void tf_cpu_softmax(void *ctx, float *x, int64_t rows, int64_t n)
{
	tf_cpu *c = ctx;
	struct rows_job j = { .k = c->k, .y = x, .n = n };
	if (n > 0)
		tf_pool_run(c->pool, rows, rows_grain(n), softmax_rows, &j);
}

static void argmax_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct rows_job *j = arg;
	for (int64_t r = begin; r < end; r++)
		j->idx[r] = (int32_t)j->k->argmax(j->x + r * j->n, j->n);
}

void tf_cpu_argmax(void *ctx, int32_t *out, const float *x, int64_t rows,
		   int64_t n)
{
	tf_cpu *c = ctx;
	struct rows_job j = { .k = c->k, .x = x, .n = n, .idx = out };
	if (n > 0)
		tf_pool_run(c->pool, rows, rows_grain(n), argmax_rows, &j);
}

struct span_job {
	const tf_cpu_kernels *k;
	float *y;
	const float *a, *b;
	float limit;
};

static void add_span(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct span_job *j = arg;
	j->k->add(j->y + begin, j->a + begin, j->b + begin, end - begin);
}

void tf_cpu_add(void *ctx, float *y, const float *a, const float *b, int64_t n)
{
	tf_cpu *c = ctx;
	struct span_job j = { .k = c->k, .y = y, .a = a, .b = b };
	tf_pool_run(c->pool, n, TF_CPU_GRAIN, add_span, &j);
}

static void swiglu_span(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct span_job *j = arg;
	j->k->swiglu(j->y + begin, j->a + begin, j->b + begin, end - begin, j->limit);
}

void tf_cpu_swiglu(void *ctx, float *y, const float *gate, const float *up,
		   int64_t n, float limit)
{
	tf_cpu *c = ctx;
	struct span_job j = { .k = c->k, .y = y, .a = gate, .b = up, .limit = limit };
	tf_pool_run(c->pool, n, TF_CPU_GRAIN, swiglu_span, &j);
}

struct rope_job {
	const tf_cpu_kernels *k;
	float *x;
	int64_t n_heads, row_stride, head_stride, pairs;
	const int32_t *pos;
	const float *inv_freq;
	float attn_factor;
	int interleaved;
};

/* cos/sin are computed once per row and block of pairs and shared by every
 * head; the angle is a float32 product, as Hugging Face computes it. */
static void rope_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct rope_job *j = arg;
	float cos[TF_CPU_ROPE_BLOCK], sin[TF_CPU_ROPE_BLOCK];

	for (int64_t r = begin; r < end; r++) {
		float *row = j->x + r * j->row_stride;
		float p = (float)j->pos[r];
		for (int64_t j0 = 0; j0 < j->pairs; j0 += TF_CPU_ROPE_BLOCK) {
			int64_t nb = j->pairs - j0 < TF_CPU_ROPE_BLOCK ?
				     j->pairs - j0 : TF_CPU_ROPE_BLOCK;
			for (int64_t i = 0; i < nb; i++) {
				float angle = p * j->inv_freq[j0 + i];
				cos[i] = cosf(angle) * j->attn_factor;
				sin[i] = sinf(angle) * j->attn_factor;
			}
			for (int64_t h = 0; h < j->n_heads; h++) {
				float *head = row + h * j->head_stride;
				if (j->interleaved)
					j->k->rope_gptj(head + 2 * j0, cos, sin, nb);
				else
					j->k->rope_neox(head + j0, head + j->pairs + j0,
							cos, sin, nb);
			}
		}
	}
}

void tf_cpu_rope(void *ctx, float *x, int64_t rows, int64_t n_heads,
		 int64_t row_stride, int64_t head_stride, int64_t rot_dim,
		 const int32_t *pos, const float *inv_freq, float attn_factor,
		 int interleaved)
{
	tf_cpu *c = ctx;
	struct rope_job j = {
		.k = c->k, .x = x, .n_heads = n_heads, .row_stride = row_stride,
		.head_stride = head_stride, .pairs = rot_dim / 2, .pos = pos,
		.inv_freq = inv_freq, .attn_factor = attn_factor,
		.interleaved = interleaved,
	};
	if (n_heads > 0 && j.pairs > 0)
		tf_pool_run(c->pool, rows, rows_grain(n_heads * rot_dim), rope_rows, &j);
}

/* Convert n contiguous elements between F32, F16 and BF16 on this thread;
 * the caller has checked the types. */
static void convert_span(const tf_cpu_kernels *k, void *dst, tf_dtype dt,
			 const void *src, tf_dtype st, int64_t n)
{
	if (st == dt) {
		memmove(dst, src, (size_t)n * tf_dtype_size(st));
	} else if (st == TF_DTYPE_F32) {
		if (dt == TF_DTYPE_F16)
			k->f32_to_f16(dst, src, n);
		else
			k->f32_to_bf16(dst, src, n);
	} else if (dt == TF_DTYPE_F32) {
		if (st == TF_DTYPE_F16)
			k->f16_to_f32(dst, src, n);
		else
			k->bf16_to_f32(dst, src, n);
	} else {
		/* F16 <-> BF16: through F32, which holds both exactly. */
		float buf[TF_CPU_CONVERT_BLOCK];
		for (int64_t i = 0; i < n; i += TF_CPU_CONVERT_BLOCK) {
			int64_t m = n - i < TF_CPU_CONVERT_BLOCK ? n - i : TF_CPU_CONVERT_BLOCK;
			convert_span(k, buf, TF_DTYPE_F32, (const uint16_t *)src + i, st, m);
			convert_span(k, (uint16_t *)dst + i, dt, buf, TF_DTYPE_F32, m);
		}
	}
}

static int is_float_type(tf_dtype t)
{
	return t == TF_DTYPE_F32 || t == TF_DTYPE_F16 || t == TF_DTYPE_BF16;
}

struct convert_job {
	const tf_cpu_kernels *k;
	char *dst;
	const char *src;
	tf_dtype dt, st;
	int64_t dim;                    /* embed: elements per row */
	const int32_t *ids;             /* embed: the rows to gather */
};

static void convert_range(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct convert_job *j = arg;
	convert_span(j->k, j->dst + begin * (int64_t)tf_dtype_size(j->dt), j->dt,
		     j->src + begin * (int64_t)tf_dtype_size(j->st), j->st, end - begin);
}

int tf_cpu_convert(void *ctx, void *dst, tf_dtype dst_type, const void *src,
		   tf_dtype src_type, int64_t n)
{
	tf_cpu *c = ctx;
	const tf_host *h = c->host;

	if (!is_float_type(dst_type) || !is_float_type(src_type))
		return h->error(h, TF_ERR_UNSUPPORTED,
				"backend-cpu: convert %s -> %s: only F32, F16 and BF16",
				tf_dtype_name(src_type), tf_dtype_name(dst_type));
	if (n < 0)
		return h->error(h, TF_ERR_INVALID,
				"backend-cpu: convert %s -> %s: negative count %lld",
				tf_dtype_name(src_type), tf_dtype_name(dst_type),
				(long long)n);
	if (src_type == dst_type) {
		memmove(dst, src, (size_t)n * tf_dtype_size(src_type));
		return TF_OK;
	}
	/* Chunks run in parallel, so a partly overlapping pair would read
	 * what another chunk already wrote. */
	const char *d = dst, *s = src;
	if (d < s + (size_t)n * tf_dtype_size(src_type) &&
	    s < d + (size_t)n * tf_dtype_size(dst_type))
		return h->error(h, TF_ERR_INVALID,
				"backend-cpu: convert %s -> %s: source and destination overlap",
				tf_dtype_name(src_type), tf_dtype_name(dst_type));

	struct convert_job j = { .k = c->k, .dst = dst, .src = src,
				 .dt = dst_type, .st = src_type };
	tf_pool_run(c->pool, n, TF_CPU_GRAIN, convert_range, &j);
	return TF_OK;
}

static void embed_rows(void *arg, int64_t begin, int64_t end, int worker)
{
	const struct convert_job *j = arg;
	size_t row_bytes = (size_t)j->dim * tf_dtype_size(j->st);
	for (int64_t i = begin; i < end; i++)
		convert_span(j->k, (float *)j->dst + i * j->dim, TF_DTYPE_F32,
			     j->src + (size_t)j->ids[i] * row_bytes, j->st, j->dim);
}

/* The table has at least config.json's vocab_size rows (it may be padded
 * beyond), so ids are checked against that when the host has a model.
 * Errors have no status to return, so they are logged and the output is
 * poisoned with NaN. */
void tf_cpu_embed(void *ctx, float *y, const void *table, tf_dtype dtype,
		  int64_t dim, const int32_t *ids, int64_t n)
{
	tf_cpu *c = ctx;
	const tf_host *h = c->host;
	int64_t vocab = h->model ? h->model->vocab_size : 0;
	const char *bad = NULL;

	if (dim <= 0 || n <= 0)
		return;
	if (!is_float_type(dtype))
		bad = "table dtype is not F32, F16 or BF16";
	for (int64_t i = 0; i < n && !bad; i++)
		if (ids[i] < 0 || (vocab > 0 && ids[i] >= vocab))
			bad = "token id outside the vocabulary";
	if (bad) {
		h->log(h, TF_LOG_ERROR, "backend-cpu", "embed (%s table, vocab_size %lld): %s",
		       tf_dtype_name(dtype), (long long)vocab, bad);
		for (int64_t i = 0; i < n * dim; i++)
			y[i] = NAN;
		return;
	}
	struct convert_job j = { .k = c->k, .dst = (char *)y, .src = table,
				 .st = dtype, .dim = dim, .ids = ids };
	tf_pool_run(c->pool, n, rows_grain(dim), embed_rows, &j);
}
