/*
 * moe_cuda_exl3.c - EXL3 MLPs uploaded for tf_moe_cuda_exl3_mlp
 * (moe_cuda_exl3.h).
 *
 * Layout of the one allocation: the descriptors (gate [n], up [n],
 * down [n]), then each linear's trellis, suh and svh, each 256-byte
 * aligned.  Every linear is loaded once (its suh and svh widened to
 * float on the host) and kept until the upload is done: for Ling-3.1
 * Flash's 512 experts that is 1536 linears' vectors, about 30 MiB of host
 * memory a layer for the length of layer_init.
 *
 * Tensor parallel, a rank holds its share as moe.so's CPU linears open it
 * (exl3_lin.c's open_part): only its experts (the others' descriptors
 * zero, trellis NULL), or each linear's part, cut by tf_exl3_parts_cut as
 * the upload reaches it.  A part of gate or up is a compact copy of its
 * tile columns, freed once uploaded (one at a time, not the layer's).
 *
 * Where the backend maps host memory (unified memory: tf_cuda_weight.h)
 * each trellis that is a view of the checkpoint (a whole linear, or a
 * part of its output rows) is read there, not copied, and left out of
 * the allocation; a compact part is still copied.
 */
#include "moe_cuda_exl3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exl3_load.h"
#include "lin.h"
#include "tf/backend.h"
#include "tf_cuda_weight.h"

enum { MCQ_GATE, MCQ_UP, MCQ_DOWN, MCQ_PROJ };

static const char *const mcq_leaf[MCQ_PROJ] = { "gate_proj", "up_proj", "down_proj" };

static size_t mcq_round(size_t b)
{
	return (b + 255) / 256 * 256;
}

/* The name of linear `proj` of MLP e. */
static int mcq_name(const tf_host *h, char *buf, size_t len, const char *prefix, bool indexed,
		    int e, int proj)
{
	int n = indexed ? snprintf(buf, len, "%s.%d.%s", prefix, e, mcq_leaf[proj])
			: snprintf(buf, len, "%s.%s", prefix, mcq_leaf[proj]);
	if (n < 0 || (size_t)n >= len)
		return h->error(h, TF_ERR_RANGE, "%s: tensor name too long", prefix);
	return TF_OK;
}

bool tf_moe_cuda_exl3_match(const tf_host *h, const char *prefix, bool indexed)
{
	char name[512];
	return !mcq_name(h, name, sizeof(name), prefix, indexed, 0, MCQ_GATE) &&
	       tf_exl3_match(h, name) > 0;
}

/* Whether the trellis of a linear cut to `part` stays a view of the
 * checkpoint (whole, or output rows), which a mapping backend reads in
 * place. */
static bool mcq_view(const tf_lin_part *part)
{
	return !part || part->axis == TF_LIN_PART_OUT;
}

/* The device bytes of p's part (its features [lo, hi) of the whole
 * on the side `part` cuts; part NULL: the whole); the trellis counts
 * unless `mapped`. */
static size_t mcq_bytes(const tf_exl3_parts *p, const tf_lin_part *part, bool mapped)
{
	int64_t k = p->k, n = p->n;
	if (part && part->axis == TF_LIN_PART_IN)
		k = part->hi - part->lo;
	else if (part)
		n = part->hi - part->lo;
	return (mapped ? 0 : mcq_round((size_t)(k / 16 * n / 16) * 32 * (size_t)p->K)) +
	       mcq_round((size_t)(k + n) * sizeof(float));
}

/* Linear `name` of in x out features into p, checked against the set's
 * padding; adds the device bytes of its `part` to *bytes (its trellis
 * mapped when `map` and a view). */
static int mcq_part(const tf_host *h, const char *who, const char *name, int64_t in,
		    int64_t out, const tf_lin_part *part, bool map, tf_exl3_parts *p, size_t *bytes)
{
	const int64_t k = TF_MOE_CUDA_EXL3_PAD(in), n = TF_MOE_CUDA_EXL3_PAD(out);
	int rc;

	if (!tf_exl3_match(h, name))
		return h->error(h, TF_ERR_UNSUPPORTED,
				"%s.trellis: missing; %s takes a set of MLPs (the experts, the shared expert) all EXL3 or all F32/F16/BF16",
				name, who);
	if ((rc = tf_exl3_parts_load(h, name, in, out, p)))
		return rc;
	if (p->k != k || p->n != n)
		return h->error(h, TF_ERR_UNSUPPORTED,
				"%s.trellis: %lld x %lld features; %s takes a %lld x %lld linear padded to %lld x %lld",
				name, (long long)p->k, (long long)p->n, who, (long long)in,
				(long long)out, (long long)k, (long long)n);
	if (p->bias)
		return h->error(h, TF_ERR_UNSUPPORTED, "%s.bias: %s's EXL3 MLPs take no bias",
				name, who);
	*bytes += mcq_bytes(p, part, map && mcq_view(part));
	return TF_OK;
}

/* What one rank loads of a set: the features [lo, lo + w->inter) of
 * `all` (parts when that is not all of them), and with rank_of only the
 * experts placed on this rank. */
struct mcq_set {
	const tf_host *h;
	const char *prefix;
	bool indexed;
	const tf_moe_cuda_exl3_w *w;
	tf_lin_part rows, cols;         /* gate's and up's part, down's */
	bool cut;
	const int32_t *rank_of;
	tf_cuda_weight *maps;           /* per linear; NULL: every trellis copied */
};

/* Linear i's part (proj i / n), NULL when it is loaded whole. */
static const tf_lin_part *mcq_cut(const struct mcq_set *s, int i)
{
	return !s->cut ? NULL : i / s->w->n_experts == MCQ_DOWN ? &s->cols : &s->rows;
}

/* Whether expert e is this rank's. */
static bool mcq_here(const struct mcq_set *s, int e)
{
	return !s->rank_of || s->rank_of[e] == s->h->tp_rank;
}

/* Each linear held here, cut to its part, after the descriptors, which d
 * (host) gets (a mapped trellis: in s->maps); the others' descriptors
 * zero. */
static int mcq_upload(const struct mcq_set *s, char *dev, tf_exl3_parts *p, tf_moe_cuda_exl3 *d)
{
	const tf_host *h = s->h;
	const tf_backend *be = h->backend;
	const int n = s->w->n_experts, count = MCQ_PROJ * n;
	char *at = dev + mcq_round((size_t)count * sizeof(*d));
	char name[512];
	int rc = TF_OK;

	for (int i = 0; i < count && !rc; i++) {
		const tf_lin_part *part = mcq_cut(s, i);
		uint16_t *owned = NULL;
		d[i] = (tf_moe_cuda_exl3){ 0 };
		if (!mcq_here(s, i % n))
			continue;
		if ((rc = mcq_name(h, name, sizeof(name), s->prefix, s->indexed, i % n, i / n)) ||
		    (part && (rc = tf_exl3_parts_cut(h, name, part, &p[i], &owned))))
			break;
		d[i] = (tf_moe_cuda_exl3){ .trellis = (const uint16_t *)at, .K = p[i].K,
					   .cb = (int)p[i].cb };
		if (s->maps && mcq_view(part)) {
			rc = tf_cuda_weight_get(h, name, p[i].trellis, p[i].trellis_bytes, true,
						&s->maps[i]);
			d[i].trellis = s->maps[i].dev;
		} else {
			rc = be->upload(h->backend_ctx, at, p[i].trellis, p[i].trellis_bytes);
			at += mcq_round(p[i].trellis_bytes);
		}
		d[i].suh = (const float *)at;
		d[i].svh = d[i].suh + p[i].k;
		if (!rc)
			rc = be->upload(h->backend_ctx, at, p[i].suh, (size_t)p[i].k * sizeof(float));
		if (!rc)
			rc = be->upload(h->backend_ctx, (void *)d[i].svh, p[i].svh,
					(size_t)p[i].n * sizeof(float));
		at += mcq_round((size_t)(p[i].k + p[i].n) * sizeof(float));
		/* The upload may read the copy until the stream gets there. */
		if (owned && !rc)
			rc = be->sync(h->backend_ctx);
		free(owned);
	}
	if (!rc)
		rc = be->upload(h->backend_ctx, dev, d, (size_t)count * sizeof(*d));
	/* The uploads may read the host's buffers until the stream gets there. */
	if (!rc)
		rc = be->sync(h->backend_ctx);
	return rc;
}

void tf_moe_cuda_exl3_free(const tf_host *h, tf_moe_cuda_exl3_mem *mem)
{
	for (int i = 0; mem->maps && i < mem->n_maps; i++)
		tf_cuda_weight_drop(h, &mem->maps[i]);
	free(mem->maps);
	if (mem->dev)
		h->backend->free(h->backend_ctx, mem->dev);
	*mem = (tf_moe_cuda_exl3_mem){ 0 };
}

int tf_moe_cuda_exl3_load(const tf_host *h, const char *who, const char *prefix, bool indexed,
			  int64_t lo, int64_t all, const int32_t *rank_of, tf_moe_cuda_exl3_w *w,
			  tf_moe_cuda_exl3_mem *mem)
{
	const int n = w->n_experts, count = MCQ_PROJ * n;
	const bool map = tf_cuda_weight_maps(h);
	*mem = (tf_moe_cuda_exl3_mem){
		.maps = map ? calloc((size_t)count, sizeof(tf_cuda_weight)) : NULL,
		.n_maps = map ? count : 0,
	};
	const struct mcq_set s = {
		.h = h, .prefix = prefix, .indexed = indexed, .w = w,
		.rows = { .axis = TF_LIN_PART_OUT, .lo = lo, .hi = lo + w->inter },
		.cols = { .axis = TF_LIN_PART_IN, .lo = lo, .hi = lo + w->inter },
		.cut = w->inter != all, .rank_of = rank_of, .maps = mem->maps,
	};
	tf_exl3_parts *p = calloc((size_t)count, sizeof(*p));
	tf_moe_cuda_exl3 *d = malloc((size_t)count * sizeof(*d));
	size_t bytes = mcq_round((size_t)count * sizeof(*d));
	char name[512];
	int rc = TF_OK;

	if (!p || !d || (map && !mem->maps)) {
		rc = h->error(h, TF_ERR_NOMEM, "%s: out of memory for %d EXL3 linears", prefix,
			      count);
		goto out;
	}
	for (int i = 0; i < count; i++) {
		const int proj = i / n, e = i % n;
		const int64_t in = proj == MCQ_DOWN ? all : w->hidden;
		const int64_t out = proj == MCQ_DOWN ? w->hidden : all;
		if (!mcq_here(&s, e))
			continue;
		if ((rc = mcq_name(h, name, sizeof(name), prefix, indexed, e, proj)) ||
		    (rc = mcq_part(h, who, name, in, out, mcq_cut(&s, i), map, &p[i], &bytes)))
			goto out;
	}
	if (!(mem->dev = h->backend->alloc(h->backend_ctx, bytes))) {
		rc = h->error(h, TF_ERR_NOMEM, "%s (%s): out of device memory for %zu bytes of EXL3 MLPs",
			      prefix, who, bytes);
		goto out;
	}
	if ((rc = mcq_upload(&s, mem->dev, p, d)))
		goto out;
	w->gate = (const tf_moe_cuda_exl3 *)mem->dev;
	w->up = w->gate + n;
	w->down = w->gate + 2 * n;
	/* The device copies are all the kernels read. */
	for (int i = 0; i < count; i++)
		if (mcq_here(&s, i % n) && !(s.maps && tf_cuda_weight_mapped(&s.maps[i])) &&
		    !mcq_name(h, name, sizeof(name), prefix, indexed, i % n, i / n))
			tf_lin_release(h, name, "trellis");
out:
	for (int i = 0; p && i < count; i++)
		tf_exl3_parts_free(&p[i]);
	free(p);
	free(d);
	if (rc)
		tf_moe_cuda_exl3_free(h, mem);
	return rc;
}
