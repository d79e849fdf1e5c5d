/*
 * tfquant - convert a bf16/fp16/fp32 Hugging Face checkpoint to a quantized
 * format: EXL3 by default, or that of any quant plugin with a quantizer.
 *
 *     tfquant [--format NAME] [--bits class=K,...] [--conf recipe.ini]
 *             [--codebook VARIANT] [--threads N] [--seed N] <source dir> <output dir>
 *
 * Every budgeted linear (recipe.h) goes through the quantizer of the quant
 * plugin named by --format (tf/quant.h's quantize slot), found on the
 * plugin path like tfrun finds it: for exl3, the identity-Hessian recipe
 * stored under exllamav3's names <prefix>.trellis/.suh/.svh[/.bias]
 * [/.mul1|.mcg]; for example-int8, <prefix>.qweight/.scale[/.bias].
 * Everything else is copied (fp32 narrowed to fp16).  The output folder gets model.safetensors
 * (shards past 8 GiB), config.json with quantization_config, and every
 * other file of the source folder (tokenizer etc.).  One line per
 * quantized tensor reports its bits and relative error.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fail.h"
#include "outdir.h"
#include "recipe.h"
#include "checkpoint_writer.h"
#include "tf/checkpoint.h"

#define SHARD_BYTES (8ull << 30)

typedef struct tfq_opts {
	tfq_recipe recipe;
	const char *format;             /* the quant plugin that quantizes */
	const char *variant;            /* its variant (--codebook); NULL: default */
	int threads;
	uint64_t seed;
	const char *src, *dst;
	tf_quantize_fn quantize;        /* the plugin's quantizer (tf_quantizer_fn) */
	tf_host host;                   /* what it is given: errors */
} tfq_opts;

/* Everything the writer points at until the save. */
typedef struct tfq_store {
	void **bufs;
	size_t n, cap;
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

/* A tf_tensor_sink into the writer: each tensor is copied into the store,
 * which keeps it until the save. */
struct tfq_sink {
	tf_checkpoint_writer *w;
	tfq_store *st;
};

static int sink_add(void *ctx, const char *name, tf_dtype dt, int ndim, const int64_t *shape,
		    const void *data)
{
	struct tfq_sink *s = ctx;
	int64_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= shape[i];
	size_t bytes = (size_t)n * tf_dtype_size(dt);
	void *copy = store_keep(s->st, malloc(bytes ? bytes : 1));
	if (!copy)
		return tfq_fail(TF_ERR_NOMEM, "%s: out of memory", name);
	memcpy(copy, data, bytes);
	return tf_checkpoint_writer_add(s->w, name, dt, ndim, shape, copy);
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

static int quantize_one(const tfq_opts *o, const tf_tensor *t, int K, tf_checkpoint_writer *w,
			tfq_store *st, const tf_checkpoint *src, tfq_progress *pg,
			double *bits_sum, double *numel_sum)
{
	char pbuf[48];
	char prefix[480];
	tf_quantize_opts qo = { .bits = K, .seed = name_seed(t->name, o->seed),
				.threads = o->threads, .variant = o->variant };
	float *f = widen(t), *bf = NULL;
	double rel_mse = 0;
	int rc = f ? TF_OK : tfq_fail(TF_ERR_NOMEM, "%s: out of memory", t->name);

	/* A bias moves with its weight. */
	char bname[512];
	tf_tensor b;
	weight_prefix(t->name, prefix, sizeof(prefix));
	snprintf(bname, sizeof(bname), "%s.bias", prefix);
	if (!rc && tf_checkpoint_get(src, bname, &b) == TF_OK) {
		bf = widen(&b);
		if (!bf || b.ndim != 1 || b.shape[0] != t->shape[0])
			rc = tfq_fail(bf ? TF_ERR_FORMAT : TF_ERR_NOMEM,
					 "%s: expected a vector of %lld", bname, (long long)t->shape[0]);
	}
	double t0 = (double)clock() / CLOCKS_PER_SEC;
	struct tfq_sink ts = { .w = w, .st = st };
	if (!rc)
		rc = o->quantize(&o->host, prefix, f, t->shape[0], t->shape[1], bf, &qo,
				 &(tf_tensor_sink){ .ctx = &ts, .add = sink_add }, &rel_mse);
	free(f);
	free(bf);
	if (rc)
		return rc;
	double numel = (double)(t->shape[0] * t->shape[1]);
	printf("%s %-56s K=%d %-5s [%lld, %lld] rel mse %.5f (%.1f s cpu)\n",
	       progress_step(pg, numel, pbuf, sizeof(pbuf)), t->name, K,
	       o->variant ? o->variant : o->format,
	       (long long)t->shape[0], (long long)t->shape[1], rel_mse,
	       (double)clock() / CLOCKS_PER_SEC - t0);
	fflush(stdout);
	if (strcmp(t->name, "lm_head.weight")) {        /* "bits" leaves the head out */
		*bits_sum += (double)K * numel;
		*numel_sum += numel;
	}
	return TF_OK;
}

/* An unquantized tensor: as stored, fp32 narrowed to fp16. */
static int copy_one(const tf_tensor *t, tf_checkpoint_writer *w, tfq_store *st)
{
	if (t->dtype != TF_DTYPE_F32)
		return tf_checkpoint_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
	int64_t n = tf_tensor_numel(t);
	uint16_t *h = store_keep(st, malloc((size_t)(n ? n : 1) * 2));
	if (!h)
		return tfq_fail(TF_ERR_NOMEM, "%s: out of memory", t->name);
	for (int64_t i = 0; i < n; i++)
		h[i] = tf_f32_to_f16(((const float *)t->data)[i]);
	return tf_checkpoint_writer_add(w, t->name, TF_DTYPE_F16, t->ndim, t->shape, h);
}

static int convert(const tfq_opts *o)
{
	const tf_model_config *cfg = NULL;
	tf_checkpoint *src = NULL;
	tf_checkpoint_writer *w = NULL;
	tfq_store st = { 0 };
	tfq_meta meta = { .format = o->format, .variant = o->variant,
			  .head_bits = o->recipe.bits[TF_WCLASS_HEAD],
			  .mtp_bits = o->recipe.bits[TF_WCLASS_MTP] };
	double bits_sum = 0, numel_sum = 0;
	tfq_progress pg = { .t0 = wall_s() };
	int rc;

	rc = tf_checkpoint_open(o->src, &src);
	if (!rc) {
		cfg = tf_checkpoint_model(src);
		rc = tf_checkpoint_writer_init(&w);
	}
	if (!rc && mkdir(o->dst, 0755) && errno != EEXIST)
		rc = tfq_fail(TF_ERR_IO, "%s: cannot create: %s", o->dst, strerror(errno));
	for (size_t i = 0; !rc && i < tf_checkpoint_count(src); i++) {
		const tf_tensor *t = tf_checkpoint_at(src, i);
		if (tfq_recipe_bits(&o->recipe, cfg, t))
			pg.total += (double)(t->shape[0] * t->shape[1]);
	}
	for (size_t i = 0; !rc && i < tf_checkpoint_count(src); i++) {
		const tf_tensor *t = tf_checkpoint_at(src, i);
		int K = tfq_recipe_bits(&o->recipe, cfg, t);
		char prefix[480], bname[512];
		tf_tensor wt;

		/* A bias whose weight is quantized is written with it. */
		if (strlen(t->name) > 5 && !strcmp(t->name + strlen(t->name) - 5, ".bias")) {
			snprintf(prefix, sizeof(prefix), "%.*s", (int)strlen(t->name) - 5, t->name);
			snprintf(bname, sizeof(bname), "%s.weight", prefix);
			if (tf_checkpoint_get(src, bname, &wt) == TF_OK &&
			    tfq_recipe_bits(&o->recipe, cfg, &wt))
				continue;
		}
		rc = K ? quantize_one(o, t, K, w, &st, src, &pg, &bits_sum, &numel_sum)
		       : copy_one(t, w, &st);
	}
	meta.bits = numel_sum > 0 ? bits_sum / numel_sum : 0;
	if (!rc)
		rc = tf_checkpoint_writer_save(w, o->dst, SHARD_BYTES);
	if (!rc)
		rc = tfq_outdir_config(o->src, o->dst, &meta);
	if (!rc)
		rc = tfq_outdir_copy_files(o->src, o->dst);
	if (!rc)
		printf("wrote %s: %.2f bits per weight over the budgeted layers\n", o->dst, meta.bits);
	tf_checkpoint_writer_free(w);
	store_free(&st);
	tf_checkpoint_close(src);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tfquant [--format NAME] [--bits class=K,...] [--conf recipe.ini] "
		   "[--codebook VARIANT] [--threads N] [--seed N] <source dir> <output dir>\n"
		   "  format: a quant plugin with a quantizer on the plugin path (default exl3;\n"
		   "          example-int8 takes 8 bits only); --codebook: its variant\n"
		   "          (exl3: mul1, the default, mcg or 3inst)\n"
		   "  classes: routed shared kda mla dense head mtp "
		   "(default routed=3,shared=5,kda=4,dense=4,mla=6,head=6,mtp=4)\n");
}

/* The host a quantizer is given: it reports failures, nothing more. */
static void tfq_log(const tf_host *h, tf_log_level lvl, const char *who, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[%s] ", who);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int tfq_error(const tf_host *h, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tfq_fail(status, "%s", msg);
}

int main(int argc, char **argv)
{
	tfq_opts o = { .format = "exl3", .seed = 1,
		       .host = { .struct_size = sizeof(tf_host), .log = tfq_log,
				 .error = tfq_error } };
	tf_quantizer *q = NULL;
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
			rc = tfq_fail(TF_ERR_INVALID, "%s: missing value", a);
			break;
		}
		i++;
		if (!strcmp(a, "--bits"))
			rc = tfq_recipe_parse(&o.recipe, v, "--bits");
		else if (!strcmp(a, "--conf"))
			rc = tfq_recipe_load_ini(&o.recipe, v);
		else if (!strcmp(a, "--threads"))
			rc = (o.threads = atoi(v)) >= 1 ? TF_OK
			   : tfq_fail(TF_ERR_INVALID, "--threads %s: expected >= 1", v);
		else if (!strcmp(a, "--seed"))
			o.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--codebook"))
			o.variant = v;
		else if (!strcmp(a, "--format"))
			o.format = v;
		else
			rc = tfq_fail(TF_ERR_INVALID, "%s: unknown option", a);
	}
	if (!rc && argc - i != 2) {
		usage(stderr);
		return 2;
	}
	/* The quantizer of the quant plugin named --format on the plugin
	 * path (the build's folder and $TF_PLUGIN_PATH); q keeps it loaded. */
	if (!rc && (rc = tf_quantizer_open(o.format, &q)))
		tfq_fail(rc, "--format %s", tf_checkpoint_errmsg());
	if (!rc) {
		o.quantize = tf_quantizer_fn(q);
		o.src = argv[i];
		o.dst = argv[i + 1];
		rc = convert(&o);
	}
	tf_quantizer_close(q);
	if (rc) {
		fprintf(stderr, "tfquant: %s\n", *tfq_errmsg() ? tfq_errmsg() : tf_strerror(rc));
		return 1;
	}
	return 0;
}
