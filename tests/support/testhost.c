/* testhost.c - see testhost.h. */
#include "testhost.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TH_MAX_QUANT 8
#define TH_MAX_ROUTER 8

struct th_tensor {
	char *name;
	void *data;
	tf_tensor t;
	int released;                   /* weight_release calls */
	void *kept;                     /* the bytes, once released */
};

struct th_conf {
	char *section, *key, *value;
};

struct tf_testhost {
	tf_host host;
	tf_model_config cfg;
	struct th_tensor *tensors;
	size_t n_tensors, cap_tensors;
	struct th_conf *conf;
	size_t n_conf, cap_conf;
	void *backend_so;
	void *quant_so, *quant_extra_so;
	const tf_plugin_quant *quant[TH_MAX_QUANT];
	int n_quant;
	void *router_so;
	const tf_plugin_router *router[TH_MAX_ROUTER];
	int n_router;
	char err[2048];
};

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "testhost: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	abort();
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		die("%s", "out of memory");
	return d;
}

static void th_log(const tf_host *h, tf_log_level lvl, const char *who,
		   const char *fmt, ...)
{
	if (lvl > TF_LOG_WARN && !getenv("TF_TEST_VERBOSE"))
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[%s] ", who);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int th_error(const tf_host *h, int status, const char *fmt, ...)
{
	tf_testhost *th = h->ctx;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(th->err, sizeof(th->err), fmt, ap);
	va_end(ap);
	return status;
}

static const char *th_conf_get(const tf_host *h, const char *section,
			       const char *key)
{
	tf_testhost *th = h->ctx;
	for (size_t i = th->n_conf; i-- > 0;)
		if (!strcmp(th->conf[i].section, section) &&
		    !strcmp(th->conf[i].key, key))
			return th->conf[i].value;
	return NULL;
}

/* The typed reads of tf_host over the strings tf_testhost_set_conf stored:
 * the whole value must parse, or the read fails naming the key.  There is
 * no schema here (no ranges; enums below): the runtime's reads are tested
 * in tests/core. */
static int th_conf_int(const tf_host *h, const char *section, const char *key,
		       int64_t def, int64_t *out)
{
	const char *v = th_conf_get(h, section, key);
	char *end;
	*out = def;
	if (!v)
		return TF_OK;
	errno = 0;
	*out = strtoll(v, &end, 10);
	if (errno || end == v || *end)
		return th_error(h, TF_ERR_INVALID, "[%s] %s: '%s' is not an integer",
				section, key, v);
	return TF_OK;
}

static int th_conf_size(const tf_host *h, const char *section, const char *key,
			uint64_t def, uint64_t *out)
{
	int64_t v;
	int rc = th_conf_int(h, section, key, (int64_t)def, &v);
	if (!rc && v < 0)
		rc = th_error(h, TF_ERR_INVALID, "[%s] %s: %lld is not a size", section, key,
			      (long long)v);
	*out = (uint64_t)v;
	return rc;
}

static int th_conf_bool(const tf_host *h, const char *section, const char *key,
			bool def, bool *out)
{
	const char *v = th_conf_get(h, section, key);
	*out = v ? !strcmp(v, "true") : def;
	if (v && !*out && strcmp(v, "false"))
		return th_error(h, TF_ERR_INVALID, "[%s] %s: '%s' is not true or false",
				section, key, v);
	return TF_OK;
}

/* The choices of the core's enum keys that plugins read (docs/ini.md);
 * conf_enum refuses any other key, as the runtime refuses a read of a key
 * as a type its schema does not give it. */
static const struct th_enum {
	const char *section, *key, *choices;
} th_enums[] = {
	{ "runtime", "kv_cache", "bf16|f32" },
	{ "runtime", "unified_memory", "auto|on|off" },
	{ "tp", "moe", "split|experts" },
};

static int th_conf_enum(const tf_host *h, const char *section, const char *key, int def,
			int *out)
{
	const char *v = th_conf_get(h, section, key);
	*out = def;
	for (size_t i = 0; i < sizeof(th_enums) / sizeof(th_enums[0]); i++) {
		const struct th_enum *e = &th_enums[i];
		if (strcmp(e->section, section) || strcmp(e->key, key))
			continue;
		if (!v)
			return TF_OK;
		size_t len = strlen(v);
		int idx = 0;
		for (const char *c = e->choices; *c; idx++) {
			size_t cl = strcspn(c, "|");
			if (cl == len && !strncmp(c, v, len)) {
				*out = idx;
				return TF_OK;
			}
			c += cl + (c[cl] == '|');
		}
		return th_error(h, TF_ERR_INVALID, "[%s] %s: '%s' is not one of %s", section,
				key, v, e->choices);
	}
	return th_error(h, TF_ERR_INVALID, "[%s] %s is not an enum key", section, key);
}

/* A new reader of a released tensor gets its bytes back, as the
 * runtime's reloaded pages would give them. */
static int th_weight_get(const tf_host *h, const char *name, tf_tensor *out)
{
	tf_testhost *th = h->ctx;
	for (size_t i = 0; i < th->n_tensors; i++)
		if (!strcmp(th->tensors[i].name, name)) {
			struct th_tensor *e = &th->tensors[i];
			if (e->kept)
				memcpy(e->data, e->kept, e->t.nbytes);
			*out = e->t;
			return TF_OK;
		}
	return TF_ERR_NOT_FOUND;
}

/* Stricter than the runtime, which reloads released pages: the bytes
 * become 0xFF (NaN as any float) until the next weight_get, so a plugin
 * that reads a tensor through its old view after releasing it fails its
 * own tests. */
static void th_weight_release(const tf_host *h, const char *name)
{
	tf_testhost *th = h->ctx;
	for (size_t i = 0; i < th->n_tensors; i++)
		if (!strcmp(th->tensors[i].name, name)) {
			struct th_tensor *e = &th->tensors[i];
			if (!e->kept) {         /* tensors never change: keep them once */
				if (!(e->kept = malloc(e->t.nbytes ? e->t.nbytes : 1)))
					die("%s", "out of memory");
				memcpy(e->kept, e->data, e->t.nbytes);
			}
			memset(e->data, 0xFF, e->t.nbytes);
			e->released++;
		}
}

int tf_testhost_released(tf_testhost *th, const char *name)
{
	for (size_t i = 0; i < th->n_tensors; i++)
		if (!strcmp(th->tensors[i].name, name))
			return th->tensors[i].released;
	return 0;
}

/* As the runtime chooses: [plugins] quant when set and it recognises the
 * prefix, else the quant plugin whose match() scores it highest, or NULL
 * (an error recorded). */
static const tf_plugin_quant *th_lin_choose(const tf_host *h, const char *prefix)
{
	tf_testhost *th = h->ctx;
	const char *pin = th_conf_get(h, "plugins", "quant");
	const tf_plugin_quant *best = NULL;
	int best_score = 0;
	const char *why;
	for (int i = 0; i < th->n_quant; i++) {
		if (!th->quant[i]->hdr.probe(h, &why))
			continue;
		int s = th->quant[i]->match(h, prefix);
		if (s > 0 && pin && !strcmp(th->quant[i]->hdr.name, pin))
			return th->quant[i];
		if (s > best_score) {
			best_score = s;
			best = th->quant[i];
		}
	}
	if (!best)
		th_error(h, TF_ERR_NOT_FOUND, "%s: no quant plugin recognises its tensors", prefix);
	return best;
}

static int th_lin_open(const tf_host *h, const char *prefix, int64_t in,
		       int64_t out, tf_lin *lin)
{
	const tf_plugin_quant *q = th_lin_choose(h, prefix);
	if (!q)
		return TF_ERR_NOT_FOUND;
	lin->ops = q;
	return q->open(h, prefix, in, out, &lin->impl, &lin->info);
}

static int th_lin_open_part(const tf_host *h, const char *prefix, int64_t in, int64_t out,
			    const tf_lin_part *part, tf_lin *lin)
{
	const tf_plugin_quant *q = th_lin_choose(h, prefix);
	if (!q)
		return TF_ERR_NOT_FOUND;
	if (!q->open_part)
		return th_error(h, TF_ERR_UNSUPPORTED, "%s: quant plugin '%s' cannot open parts",
				prefix, q->hdr.name);
	lin->ops = q;
	return q->open_part(h, prefix, in, out, part, &lin->impl, &lin->info);
}

static void th_lin_close(const tf_host *h, tf_lin *lin)
{
	if (lin->ops && lin->impl)
		lin->ops->close(lin->impl);
	lin->impl = NULL;
}

/* [plugins] router when set, else router.so's first (fastest) router. */
static int th_router_open(const tf_host *h, int layer, const char *prefix, tf_router *r)
{
	tf_testhost *th = h->ctx;
	const char *pin = th_conf_get(h, "plugins", "router");
	const tf_plugin_router *ops = NULL;
	for (int i = 0; i < th->n_router && !ops; i++)
		if (!pin || !strcmp(th->router[i]->hdr.name, pin))
			ops = th->router[i];
	if (!ops)
		return th_error(h, TF_ERR_NOT_FOUND, "no router plugin named '%s'",
				pin ? pin : "(any)");
	*r = (tf_router){ .ops = ops, .layer = layer, .n_experts = th->cfg.num_experts,
			  .top_k = th->cfg.num_experts_per_tok };
	int rc = ops->layer_init(h, layer, prefix, &r->impl);
	if (rc)
		r->impl = NULL;
	return rc;
}

static int th_router_route(const tf_host *h, const tf_router *r, const float *x,
			   int64_t n, int32_t *idx, float *w)
{
	int64_t t;
	int j;
	int rc = r->ops->route(r->impl, x, n, idx, w);
	if (!rc && tf_router_check(r, idx, w, n, &t, &j))
		rc = th_error(h, TF_ERR_INTERNAL, "router %s: token %lld slot %d is unsound",
			      r->ops->hdr.name, (long long)t, j);
	return rc;
}

static void th_router_close(const tf_host *h, tf_router *r)
{
	if (r->ops && r->impl)
		r->ops->layer_fini(r->impl);
	r->impl = NULL;
}

/* file: a path, or a name in the build's plugin folder. */
static void *load_so(const char *file, int required)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", TF_PLUGIN_DIR, file);
	void *so = dlopen(strchr(file, '/') ? file : path, RTLD_NOW | RTLD_LOCAL);
	if (!so && required)
		die("%s", dlerror());
	return so;
}

/* Every quant descriptor of so, after those already loaded. */
static void load_quant(tf_testhost *th, void *so)
{
	const tf_plugin_quant *(*q_entry)(unsigned) =
		so ? (const tf_plugin_quant *(*)(unsigned))dlsym(so, "tf_plugin_quant_v1") : NULL;
	for (unsigned i = 0; q_entry && th->n_quant < TH_MAX_QUANT && q_entry(i); i++)
		th->quant[th->n_quant++] = q_entry(i);
}

tf_testhost *tf_testhost_new(const tf_model_config *cfg, int threads)
{
	return tf_testhost_new_with(cfg, threads, getenv("TF_TEST_BACKEND"),
				    getenv("TF_TEST_QUANT"));
}

tf_testhost *tf_testhost_new_with(const tf_model_config *cfg, int threads,
				  const char *backend_so, const char *quant_so)
{
	tf_testhost *th = calloc(1, sizeof(*th));
	if (!th)
		die("%s", "out of memory");
	if (cfg)
		th->cfg = *cfg;
	th->cfg.struct_size = sizeof(th->cfg);
	th->host = (tf_host){
		.struct_size = sizeof(tf_host),
		.ctx = th,
		.log = th_log,
		.error = th_error,
		.conf_get = th_conf_get,
		.conf_int = th_conf_int,
		.conf_size = th_conf_size,
		.conf_bool = th_conf_bool,
		.conf_enum = th_conf_enum,
		.weight_get = th_weight_get,
		.weight_release = th_weight_release,
		.model = &th->cfg,
		.lin_open = th_lin_open,
		.lin_close = th_lin_close,
		.lin_open_part = th_lin_open_part,
		.router_open = th_router_open,
		.router_route = th_router_route,
		.router_close = th_router_close,
		.tp_rank = 0,
		.tp_size = 1,
	};
	if (threads > 0) {
		char buf[16];
		snprintf(buf, sizeof(buf), "%d", threads);
		tf_testhost_set_conf(th, "runtime", "threads", buf);
	}

	if (!backend_so)
		backend_so = "backend-cpu.so";
	th->backend_so = load_so(backend_so, 1);
	const tf_backend *(*be_entry)(unsigned) =
		(const tf_backend *(*)(unsigned))dlsym(th->backend_so, "tf_plugin_backend_v1");
	if (!be_entry || !be_entry(0))
		die("%s has no tf_plugin_backend_v1", backend_so);
	th->host.backend = be_entry(0);
	if (th->host.backend->init(&th->host, &th->host.backend_ctx) != TF_OK)
		die("backend init failed: %s", th->err);

	th->quant_so = load_so("exl3.so", 0);
	load_quant(th, th->quant_so);
	if (quant_so)
		load_quant(th, th->quant_extra_so = load_so(quant_so, 1));

	th->router_so = load_so("router.so", 0);
	if (th->router_so) {
		const tf_plugin_router *(*r_entry)(unsigned) =
			(const tf_plugin_router *(*)(unsigned))dlsym(th->router_so,
								     "tf_plugin_router_v1");
		for (unsigned i = 0; r_entry && i < TH_MAX_ROUTER && r_entry(i); i++)
			th->router[th->n_router++] = r_entry(i);
	}
	return th;
}

void tf_testhost_free(tf_testhost *th)
{
	if (!th)
		return;
	if (th->host.backend) {
		th->host.backend->quiesce(th->host.backend_ctx);
		th->host.backend->fini(th->host.backend_ctx);
	}
	for (size_t i = 0; i < th->n_tensors; i++) {
		free(th->tensors[i].name);
		free(th->tensors[i].data);
		free(th->tensors[i].kept);
	}
	for (size_t i = 0; i < th->n_conf; i++) {
		free(th->conf[i].section);
		free(th->conf[i].key);
		free(th->conf[i].value);
	}
	free(th->tensors);
	free(th->conf);
	/* Plugins stay mapped: a worker thread may outlive fini by a moment. */
	free(th);
}

const tf_host *tf_testhost_host(tf_testhost *th) { return &th->host; }

const char *tf_testhost_last_error(tf_testhost *th) { return th->err; }

void tf_testhost_add_tensor(tf_testhost *th, const char *name, tf_dtype dtype,
			    int ndim, const int64_t *shape, const void *data)
{
	if (th->n_tensors == th->cap_tensors) {
		th->cap_tensors = th->cap_tensors ? 2 * th->cap_tensors : 64;
		th->tensors = realloc(th->tensors, th->cap_tensors * sizeof(*th->tensors));
		if (!th->tensors)
			die("%s", "out of memory");
	}
	struct th_tensor *e = &th->tensors[th->n_tensors++];
	*e = (struct th_tensor){ .name = xstrdup(name) };
	e->t = (tf_tensor){ .name = e->name, .file = "<testhost>", .dtype = dtype,
			    .ndim = ndim };
	int64_t numel = 1;
	for (int i = 0; i < ndim; i++) {
		e->t.shape[i] = shape[i];
		numel *= shape[i];
	}
	e->t.nbytes = (size_t)numel * tf_dtype_size(dtype);
	e->data = malloc(e->t.nbytes ? e->t.nbytes : 1);
	if (!e->data)
		die("%s", "out of memory");
	memcpy(e->data, data, e->t.nbytes);
	e->t.data = e->data;
}

void tf_testhost_add_f32(tf_testhost *th, const char *name, tf_dtype dtype,
			 int ndim, const int64_t *shape, const float *data)
{
	int64_t numel = 1;
	for (int i = 0; i < ndim; i++)
		numel *= shape[i];
	if (dtype == TF_DTYPE_F32) {
		tf_testhost_add_tensor(th, name, dtype, ndim, shape, data);
		return;
	}
	uint16_t *h = malloc((size_t)(numel ? numel : 1) * 2);
	if (!h)
		die("%s", "out of memory");
	for (int64_t i = 0; i < numel; i++)
		h[i] = dtype == TF_DTYPE_BF16 ? tf_f32_to_bf16(data[i])
					      : tf_f32_to_f16(data[i]);
	tf_testhost_add_tensor(th, name, dtype, ndim, shape, h);
	free(h);
}

void tf_testhost_add_layer(tf_testhost *th, const char *prefix, const tf_test_tensor *t,
			   size_t n, const char *skip)
{
	for (size_t i = 0; i < n; i++) {
		char name[256];
		if (!t[i].data || (skip && !strcmp(skip, t[i].leaf)))
			continue;
		snprintf(name, sizeof(name), "%s.%s", prefix, t[i].leaf);
		tf_testhost_add_f32(th, name, t[i].dtype, t[i].ndim, t[i].shape, t[i].data);
	}
}

void tf_testhost_set_conf(tf_testhost *th, const char *section, const char *key,
			  const char *value)
{
	if (th->n_conf == th->cap_conf) {
		th->cap_conf = th->cap_conf ? 2 * th->cap_conf : 16;
		th->conf = realloc(th->conf, th->cap_conf * sizeof(*th->conf));
		if (!th->conf)
			die("%s", "out of memory");
	}
	th->conf[th->n_conf++] = (struct th_conf){ xstrdup(section), xstrdup(key),
						   xstrdup(value) };
}

void tf_testhost_add_exl3_as(tf_testhost *th, const char *prefix, int64_t in, int64_t out,
			     int K, int cb, uint64_t *seed)
{
	/* plugins/exl3/codebook.h's markers: only their presence is read. */
	static const int32_t marker[3] = { 0, -877912083, -2082680531 };
	static const char *const marker_name[3] = { NULL, "mcg", "mul1" };
	const int64_t k = (in + 127) / 128 * 128, n = (out + 127) / 128 * 128;
	int64_t ts[3] = { k / 16, n / 16, 16 * K }, nt = ts[0] * ts[1] * ts[2];
	uint16_t *tr = malloc(sizeof(uint16_t) * nt);
	float *r = malloc(sizeof(float) * nt), *su = malloc(sizeof(float) * k);
	float *sv = malloc(sizeof(float) * n);
	char name[256];

	/* Any 16-bit pattern is a valid trellis state. */
	tf_test_fill_uniform(r, (size_t)nt, 1.0f, seed);
	for (int64_t i = 0; i < nt; i++)
		tr[i] = (uint16_t)((r[i] + 1.0f) * 32767.0f);
	/* Sign flips with magnitudes that keep the activations near 1. */
	tf_test_fill_uniform(su, (size_t)k, 1.0f, seed);
	for (int64_t i = 0; i < k; i++)
		su[i] = (su[i] < 0 ? -0.05f : 0.05f) * (1.0f + fabsf(su[i]));
	tf_test_fill_uniform(sv, (size_t)n, 1.0f, seed);
	snprintf(name, sizeof(name), "%s.trellis", prefix);
	tf_testhost_add_tensor(th, name, TF_DTYPE_I16, 3, ts, tr);
	snprintf(name, sizeof(name), "%s.suh", prefix);
	tf_testhost_add_f32(th, name, TF_DTYPE_F16, 1, (int64_t[]){ k }, su);
	snprintf(name, sizeof(name), "%s.svh", prefix);
	tf_testhost_add_f32(th, name, TF_DTYPE_F16, 1, (int64_t[]){ n }, sv);
	if (cb > 0 && cb < 3) {
		snprintf(name, sizeof(name), "%s.%s", prefix, marker_name[cb]);
		tf_testhost_add_tensor(th, name, TF_DTYPE_I32, 0, NULL, &marker[cb]);
	}
	free(tr);
	free(r);
	free(su);
	free(sv);
}

void tf_testhost_add_exl3(tf_testhost *th, const char *prefix, int64_t in, int64_t out,
			  uint64_t *seed)
{
	tf_testhost_add_exl3_as(th, prefix, in, out, 4, 0, seed);
}

void tf_test_fill_uniform(float *x, size_t n, float scale, uint64_t *seed)
{
	uint64_t s = *seed ? *seed : 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		x[i] = scale * (2.0f * (float)((s >> 40) * (1.0 / 16777216.0)) - 1.0f);
	}
	*seed = s;
}

double tf_test_rel_err(const float *a, const float *b, size_t n, double floor)
{
	double num = 0, den = floor;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		if (d > num || isnan(d))
			num = isnan(d) ? INFINITY : d;
		if (fabs((double)b[i]) > den)
			den = fabs((double)b[i]);
	}
	return num / den;
}
