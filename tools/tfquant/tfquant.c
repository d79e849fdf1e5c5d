/*
 * tfquant - convert a bf16/fp16/fp32 Hugging Face checkpoint to EXL3.
 *
 *     tfquant [--bits class=K,...] [--conf recipe.ini] [--codebook mul1|mcg|3inst]
 *             [--threads N] [--seed N] <source dir> <output dir>
 *
 * Every budgeted linear (recipe.h) is quantized with the identity-Hessian
 * recipe (plugins/exl3/quantize.h) and stored under exllamav3's names:
 * <prefix>.trellis/.suh/.svh[/.bias][/.mul1|.mcg]; everything else is
 * copied (fp32 narrowed to fp16).  The output folder gets model.safetensors
 * (shards past 8 GiB), config.json with quantization_config, and every
 * other file of the source folder (tokenizer etc.).  One line per
 * quantized tensor reports its bits and relative error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "diag.h"
#include "outdir.h"
#include "quantize.h"
#include "recipe.h"
#include "st_writer.h"
#include "weights.h"

#define SHARD_BYTES (8ull << 30)

typedef struct tfq_opts {
	tfq_recipe recipe;
	tf_exl3_cb cb;
	int threads;
	uint64_t seed;
	const char *src, *dst;
} tfq_opts;

/* Everything the writer points at until the save. */
typedef struct tfq_store {
	void **bufs;
	size_t n, cap;
	uint64_t bytes;         /* tensor data recorded so far */
} tfq_store;

static void *store_keep(tfq_store *s, void *p)
{
	if (!p)
		return NULL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		void **b = realloc(s->bufs, cap * sizeof(*b));
		if (!b) {
			free(p);
			return NULL;
		}
		s->bufs = b;
		s->cap = cap;
	}
	return s->bufs[s->n++] = p;
}

static void store_free(tfq_store *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->bufs[i]);
	free(s->bufs);
}

static uint64_t name_seed(const char *name, uint64_t seed)
{
	uint64_t h = 1469598103934665603ull ^ seed;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h;
}

/* The tensor as float, or NULL (out of memory). */
static float *widen(const tf_tensor *t)
{
	int64_t n = tf_tensor_numel(t);
	float *f = malloc((size_t)(n ? n : 1) * sizeof(float));
	for (int64_t i = 0; f && i < n; i++)
		f[i] = t->dtype == TF_DTYPE_F32 ? ((const float *)t->data)[i]
		     : t->dtype == TF_DTYPE_BF16 ? tf_bf16_to_f32(((const uint16_t *)t->data)[i])
		     : tf_f16_to_f32(((const uint16_t *)t->data)[i]);
	return f;
}

/* "<prefix>.weight" -> prefix. */
static void weight_prefix(const char *name, char *prefix, size_t size)
{
	size_t n = strlen(name) - strlen(".weight");
	snprintf(prefix, size, "%.*s", (int)n, name);
}

static int add_named(tf_st_writer *w, tfq_store *st, const char *prefix, const char *suffix,
		     tf_dtype dt, int ndim, const int64_t *shape, const void *data)
{
	int64_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= shape[i];
	st->bytes += (uint64_t)n * tf_dtype_size(dt);
	char name[512];
	snprintf(name, sizeof(name), "%s.%s", prefix, suffix);
	return tf_st_writer_add(w, name, dt, ndim, shape, data);
}

/* Overall progress: weights quantized of all to quantize, wall time. */
typedef struct tfq_progress {
	double total, done, t0;
} tfq_progress;

static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Count n more weights done; "[ 42%, 1m05s left]" into buf. */
static const char *progress_step(tfq_progress *p, double n, char *buf, size_t size)
{
	p->done += n;
	double frac = p->total > 0 ? p->done / p->total : 1;
	double left = frac > 0 ? (wall_s() - p->t0) * (1 - frac) / frac : 0;
	snprintf(buf, size, "[%3d%%, %dm%02ds left]", (int)(100 * frac), (int)left / 60,
		 (int)left % 60);
	return buf;
}

static int quantize_one(const tfq_opts *o, const tf_tensor *t, int K, tf_st_writer *w,
			tfq_store *st, const tf_weights *src, tfq_progress *pg,
			double *bits_sum, double *numel_sum)
{
	char pbuf[48];
	char prefix[480];
	tf_exl3_qtensor q;
	tf_exl3_qopts qo = { .K = K, .cb = o->cb, .seed = name_seed(t->name, o->seed),
			     .threads = o->threads };
	float *f = widen(t);
	int rc;

	if (!f)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", t->name);
	double t0 = (double)clock() / CLOCKS_PER_SEC;
	rc = tf_exl3_quantize(f, t->shape[0], t->shape[1], &qo, &q);
	free(f);
	if (rc)
		return tf_diag_set(rc, "%s: quantization failed", t->name);
	store_keep(st, q.trellis);
	store_keep(st, q.suh);
	store_keep(st, q.svh);

	weight_prefix(t->name, prefix, sizeof(prefix));
	int64_t ts[3] = { q.k / 16, q.n / 16, 16 * q.K };
	rc = add_named(w, st, prefix, "trellis", TF_DTYPE_I16, 3, ts, q.trellis);
	if (!rc)
		rc = add_named(w, st, prefix, "suh", TF_DTYPE_F16, 1, &q.k, q.suh);
	if (!rc)
		rc = add_named(w, st, prefix, "svh", TF_DTYPE_F16, 1, &q.n, q.svh);
	if (!rc && q.cb != TF_EXL3_CB_3INST) {
		static const int32_t mcg = TF_EXL3_MCG_MARKER, mul1 = TF_EXL3_MUL1_MARKER;
		rc = add_named(w, st, prefix, q.cb == TF_EXL3_CB_MCG ? "mcg" : "mul1", TF_DTYPE_I32,
			       0, NULL, q.cb == TF_EXL3_CB_MCG ? &mcg : &mul1);
	}

	/* A bias moves with its weight: fp16, padded to n. */
	char bname[512];
	tf_tensor b;
	snprintf(bname, sizeof(bname), "%s.bias", prefix);
	if (!rc && tf_weights_get(src, bname, &b) == TF_OK) {
		uint16_t *bh = store_keep(st, calloc((size_t)q.n, 2));
		float *bf = widen(&b);
		if (!bh || !bf || b.ndim != 1 || b.shape[0] != t->shape[0])
			rc = tf_diag_set(bh && bf ? TF_ERR_FORMAT : TF_ERR_NOMEM,
					 "%s: expected a vector of %lld", bname, (long long)t->shape[0]);
		for (int64_t i = 0; !rc && i < b.shape[0]; i++)
			bh[i] = tf_f32_to_f16(bf[i]);
		free(bf);
		if (!rc)
			rc = add_named(w, st, prefix, "bias", TF_DTYPE_F16, 1, &q.n, bh);
	}
	if (rc)
		return rc;
	double numel = (double)(t->shape[0] * t->shape[1]);
	printf("%s %-56s K=%d %-5s [%lld, %lld] rel mse %.5f (%.1f s cpu)\n",
	       progress_step(pg, numel, pbuf, sizeof(pbuf)), t->name, K, tf_exl3_cb_name(q.cb),
	       (long long)t->shape[0], (long long)t->shape[1], q.rel_mse,
	       (double)clock() / CLOCKS_PER_SEC - t0);
	fflush(stdout);
	if (strcmp(t->name, "lm_head.weight")) {        /* "bits" leaves the head out */
		*bits_sum += (double)K * numel;
		*numel_sum += numel;
	}
	return TF_OK;
}

/* An unquantized tensor: as stored, fp32 narrowed to fp16. */
static int copy_one(const tf_tensor *t, tf_st_writer *w, tfq_store *st)
{
	st->bytes += t->nbytes;
	if (t->dtype != TF_DTYPE_F32)
		return tf_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
	int64_t n = tf_tensor_numel(t);
	uint16_t *h = store_keep(st, malloc((size_t)(n ? n : 1) * 2));
	if (!h)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", t->name);
	for (int64_t i = 0; i < n; i++)
		h[i] = tf_f32_to_f16(((const float *)t->data)[i]);
	return tf_st_writer_add(w, t->name, TF_DTYPE_F16, t->ndim, t->shape, h);
}

static int convert(const tfq_opts *o)
{
	tf_model_config cfg = { .struct_size = sizeof(cfg) };
	tf_weights *src = NULL;
	tf_st_writer *w = NULL;
	tfq_store st = { 0 };
	tfq_meta meta = { .cb = o->cb, .head_bits = o->recipe.bits[TF_WCLASS_HEAD],
			  .mtp_bits = o->recipe.bits[TF_WCLASS_MTP] };
	double bits_sum = 0, numel_sum = 0;
	tfq_progress pg = { .t0 = wall_s() };
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/config.json", o->src);
	rc = tf_config_load(path, &cfg);
	if (!rc)
		rc = tf_weights_open(o->src, &src);
	if (!rc)
		rc = tf_st_writer_init(&w);
	if (!rc && mkdir(o->dst, 0755) && errno != EEXIST)
		rc = tf_diag_set(TF_ERR_IO, "%s: cannot create: %s", o->dst, strerror(errno));
	for (size_t i = 0; !rc && i < tf_weights_count(src); i++) {
		const tf_tensor *t = tf_weights_at(src, i);
		if (tfq_recipe_bits(&o->recipe, &cfg, t))
			pg.total += (double)(t->shape[0] * t->shape[1]);
	}
	for (size_t i = 0; !rc && i < tf_weights_count(src); i++) {
		const tf_tensor *t = tf_weights_at(src, i);
		int K = tfq_recipe_bits(&o->recipe, &cfg, t);
		char prefix[480], bname[512];
		tf_tensor wt;

		/* A bias whose weight is quantized is written with it. */
		if (strlen(t->name) > 5 && !strcmp(t->name + strlen(t->name) - 5, ".bias")) {
			snprintf(prefix, sizeof(prefix), "%.*s", (int)strlen(t->name) - 5, t->name);
			snprintf(bname, sizeof(bname), "%s.weight", prefix);
			if (tf_weights_get(src, bname, &wt) == TF_OK &&
			    tfq_recipe_bits(&o->recipe, &cfg, &wt))
				continue;
		}
		rc = K ? quantize_one(o, t, K, w, &st, src, &pg, &bits_sum, &numel_sum)
		       : copy_one(t, w, &st);
	}
	meta.bits = numel_sum > 0 ? bits_sum / numel_sum : 0;
	if (!rc) {
		snprintf(path, sizeof(path), "%s/model.safetensors", o->dst);
		rc = st.bytes > SHARD_BYTES ? tf_st_writer_save_shards(w, o->dst, SHARD_BYTES)
					    : tf_st_writer_save(w, path);
	}
	if (!rc)
		rc = tfq_outdir_config(o->src, o->dst, &meta);
	if (!rc)
		rc = tfq_outdir_copy_files(o->src, o->dst);
	if (!rc)
		printf("wrote %s: %.2f bits per weight over the budgeted layers\n", o->dst, meta.bits);
	tf_st_writer_free(w);
	store_free(&st);
	tf_weights_close(src);
	tf_config_free(&cfg);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tfquant [--bits class=K,...] [--conf recipe.ini] "
		   "[--codebook mul1|mcg|3inst] [--threads N] [--seed N] <source dir> <output dir>\n"
		   "  classes: routed shared kda mla dense head mtp "
		   "(default routed=3,shared=5,kda=4,dense=4,mla=6,head=6,mtp=4)\n");
}

int main(int argc, char **argv)
{
	tfq_opts o = { .cb = TF_EXL3_CB_MUL1, .seed = 1 };
	int rc = TF_OK;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	o.threads = n > 0 ? (int)n : 1;
	tfq_recipe_default(&o.recipe);
	int i = 1;
	for (; i < argc && !rc && argv[i][0] == '-'; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!v) {
			rc = tf_diag_set(TF_ERR_INVALID, "%s: missing value", a);
			break;
		}
		i++;
		if (!strcmp(a, "--bits"))
			rc = tfq_recipe_parse(&o.recipe, v, "--bits");
		else if (!strcmp(a, "--conf"))
			rc = tfq_recipe_load_ini(&o.recipe, v);
		else if (!strcmp(a, "--threads"))
			rc = (o.threads = atoi(v)) >= 1 ? TF_OK
			   : tf_diag_set(TF_ERR_INVALID, "--threads %s: expected >= 1", v);
		else if (!strcmp(a, "--seed"))
			o.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--codebook")) {
			o.cb = !strcmp(v, "mul1") ? TF_EXL3_CB_MUL1 : !strcmp(v, "mcg") ? TF_EXL3_CB_MCG
			     : !strcmp(v, "3inst") ? TF_EXL3_CB_3INST : TF_EXL3_CB_COUNT;
			if (o.cb == TF_EXL3_CB_COUNT)
				rc = tf_diag_set(TF_ERR_INVALID, "--codebook %s: expected mul1, mcg or 3inst", v);
		} else
			rc = tf_diag_set(TF_ERR_INVALID, "%s: unknown option", a);
	}
	if (!rc && argc - i != 2) {
		usage(stderr);
		return 2;
	}
	if (!rc) {
		o.src = argv[i];
		o.dst = argv[i + 1];
		rc = convert(&o);
	}
	if (rc) {
		fprintf(stderr, "tfquant: %s\n", *tf_diag_msg() ? tf_diag_msg() : tf_strerror(rc));
		return 1;
	}
	return 0;
}
