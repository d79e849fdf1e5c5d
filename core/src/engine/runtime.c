/* runtime.c - opening a model and the tf_host plugins see; see runtime.h. */
#include "engine/runtime.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "tf/backend.h"
#include "tf/diag.h"
#include "tf/quant.h"
#include "tf/router.h"

#define PATH_MAX_LEN 4096
#define MAX_QUANT_COUNTS 16

/* Linears one quant plugin opened. */
struct lin_count {
	const tf_plugin_quant *q;
	int64_t n;
};

struct tf_runtime {
	tf_conf *conf;
	tf_model_config model;
	bool have_model;                /* model holds a loaded config.json */
	tf_weights *weights;
	tf_registry *reg;
	tf_host host;
	tf_log_level log_level;

	const tf_backend *backend;
	void *backend_ctx;              /* non-NULL once init succeeded */
	const tf_plugin_quant *quant_pin;

	const tf_plugin_attention **attn;       /* per layer */
	const tf_plugin_ffn **ffn;
	const tf_plugin_router **router;        /* per layer, once opened */
	const tf_plugin_drafter *drafter;
	bool mtp;                       /* the drafter runs the MTP layer (TF_DRAFTER_MTP) */
	const tf_plugin_transport *transport;
	int64_t context, prefill_chunk, sequences;
	int kv_cache_elem;              /* bytes: 2 bf16, 4 f32 */
	tf_memplan plan;
	struct lin_count lins[MAX_QUANT_COUNTS];        /* in order of first use */
	int n_lins;
	tf_moe_stats moe;               /* routing since open or the last reset */
	uint8_t *moe_seen;              /* [moe_seen_n] experts seen in one pass */
	int moe_seen_n;
};

/* ---- the host services ---- */

static void host_log(const tf_host *h, tf_log_level lvl, const char *who,
		     const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const tf_runtime *rt = h->ctx;
	if (lvl > rt->log_level)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[%s] %s: ", who, (unsigned)lvl < 4 ? names[lvl] : "?");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int host_error(const tf_host *h, int status, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tf_diag_set(status, "%s", msg);
}

static int host_error_note(const tf_host *h, int status, const char *fmt, ...)
{
	char note[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	return tf_diag_note(status, "%s", note);
}

static const char *host_conf_get(const tf_host *h, const char *section,
				 const char *key)
{
	const tf_runtime *rt = h->ctx;
	return tf_conf_get(rt->conf, section, key);
}

/* The typed reads of tf_host: conf.h's getters, which fail naming the key. */
#define HOST_CONF_GETTER(name, ctype, getter)                                    \
	static int name(const tf_host *h, const char *section, const char *key,  \
			ctype def, ctype *out)                                   \
	{                                                                        \
		const tf_runtime *rt = h->ctx;                                   \
		return getter(rt->conf, section, key, def, out);                 \
	}

HOST_CONF_GETTER(host_conf_int, int64_t, tf_conf_get_int)
HOST_CONF_GETTER(host_conf_size, uint64_t, tf_conf_get_size)
HOST_CONF_GETTER(host_conf_bool, bool, tf_conf_get_bool)
HOST_CONF_GETTER(host_conf_enum, int, tf_conf_get_enum)
HOST_CONF_GETTER(host_conf_float, double, tf_conf_get_float)

static int host_weight_get(const tf_host *h, const char *name, tf_tensor *out)
{
	const tf_runtime *rt = h->ctx;
	return rt->weights ? tf_weights_get(rt->weights, name, out) : TF_ERR_NOT_FOUND;
}

static void host_weight_release(const tf_host *h, const char *name)
{
	const tf_runtime *rt = h->ctx;
	if (rt->weights)
		tf_weights_release(rt->weights, name);
}

static void count_lin(tf_runtime *rt, const tf_plugin_quant *q)
{
	int i = 0;
	while (i < rt->n_lins && rt->lins[i].q != q)
		i++;
	if (i == MAX_QUANT_COUNTS)
		return;
	rt->lins[i].q = q;
	rt->lins[i].n++;
	if (i == rt->n_lins)
		rt->n_lins++;
}

/* The pinned quant plugin when it recognises the prefix's tensors, else
 * the usable one whose match() scores them highest (the earliest on ties,
 * as the registry orders them).  A pin chooses between implementations of
 * a format; the others still open what it does not recognise, such as the
 * plain linears an EXL3 checkpoint leaves unquantized. */
static const tf_plugin_quant *lin_choose(const tf_host *h, const char *prefix)
{
	tf_runtime *rt = h->ctx;
	if (rt->quant_pin && rt->quant_pin->match(h, prefix) > 0)
		return rt->quant_pin;
	const tf_plugin_quant *best = NULL;
	int best_score = 0;
	for (size_t i = 0; i < tf_registry_count(rt->reg); i++) {
		const tf_candidate *c = tf_registry_at(rt->reg, i);
		if (c->kind != TF_KIND_QUANT || c->status || !c->probed)
			continue;
		const tf_plugin_quant *q = (const tf_plugin_quant *)c->desc;
		int s = q->match(h, prefix);
		if (s > best_score) {
			best = q;
			best_score = s;
		}
	}
	if (!best)
		tf_diag_set(TF_ERR_NOT_FOUND, "%s: no quant plugin recognises its tensors", prefix);
	return best;
}

static int host_lin_open(const tf_host *h, const char *prefix, int64_t in,
			 int64_t out, struct tf_lin *lin)
{
	const tf_plugin_quant *q = lin_choose(h, prefix);
	if (!q)
		return TF_ERR_NOT_FOUND;
	lin->ops = q;
	lin->impl = NULL;
	int rc = q->open(h, prefix, in, out, &lin->impl, &lin->info);
	if (rc == TF_OK)
		count_lin(h->ctx, q);
	return rc;
}

/* A part of the layer (tensor parallelism), through the same choice. */
static int host_lin_open_part(const tf_host *h, const char *prefix, int64_t in,
			      int64_t out, const tf_lin_part *part, struct tf_lin *lin)
{
	const tf_plugin_quant *q = lin_choose(h, prefix);
	if (!q)
		return TF_ERR_NOT_FOUND;
	int64_t whole = part->axis == TF_LIN_PART_OUT ? out : in;
	if ((part->axis != TF_LIN_PART_OUT && part->axis != TF_LIN_PART_IN) ||
	    part->lo < 0 || part->hi <= part->lo || part->hi > whole)
		return tf_diag_set(TF_ERR_INVALID, "%s: part [%lld, %lld) of %lld features",
				   prefix, (long long)part->lo, (long long)part->hi,
				   (long long)whole);
	if (q->hdr.struct_size < offsetof(tf_plugin_quant, open_part) + sizeof(q->open_part) ||
	    !q->open_part)
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "%s: quant plugin '%s' cannot open a part of a linear ([tp] size %d)",
				   prefix, q->hdr.name, h->tp_size);
	lin->ops = q;
	lin->impl = NULL;
	int rc = q->open_part(h, prefix, in, out, part, &lin->impl, &lin->info);
	if (rc == TF_OK)
		count_lin(h->ctx, q);
	return rc;
}

static void host_lin_close(const tf_host *h, struct tf_lin *lin)
{
	if (lin->ops && lin->impl)
		lin->ops->close(lin->impl);
	lin->impl = NULL;
}

/* The router [plugins] layer.<layer>.router or router pins, else the
 * best-scoring usable one. */
static int host_router_open(const tf_host *h, int layer, const char *prefix,
			    struct tf_router *r)
{
	tf_runtime *rt = h->ctx;
	const tf_candidate *c;
	int rc = tf_registry_choose(rt->reg, rt->conf, TF_KIND_ROUTER, NULL, layer, &c);
	if (rc)
		return rc;
	const tf_plugin_router *ops = (const tf_plugin_router *)c->desc;
	*r = (tf_router){ .ops = ops, .layer = layer, .n_experts = rt->model.num_experts,
			  .top_k = rt->model.num_experts_per_tok };
	if ((rc = ops->layer_init(h, layer, prefix, &r->impl))) {
		r->impl = NULL;
		return tf_diag_prefix(rc, "router %s", ops->hdr.name);
	}
	if (rt->router && layer >= 0 && layer < rt->model.n_layers_total)
		rt->router[layer] = ops;
	return TF_OK;
}

int tf_runtime_check_router_pins(const tf_runtime *rt, int n_layers)
{
	for (size_t i = 0; i < tf_conf_count(rt->conf); i++) {
		const char *section, *key, *value;
		tf_conf_at(rt->conf, i, &section, &key, &value);
		int n, end = 0;
		if (strcmp(section, "plugins") || sscanf(key, "layer.%d.router%n", &n, &end) != 1 ||
		    key[end] || n >= n_layers || rt->router[n])
			continue;
		return tf_conf_fail(rt->conf, TF_ERR_INVALID, section, key,
				    "layer %d (%s) opened no router: only MoE layers take a "
				    "router pin", n, rt->model.ffn_type[n]);
	}
	return TF_OK;
}

/* The union of experts one MoE pass reads: batching grows it. */
static void moe_count(tf_runtime *rt, const int32_t *idx, int64_t nk, int n_experts)
{
	if (n_experts > rt->moe_seen_n) {
		uint8_t *s = realloc(rt->moe_seen, (size_t)n_experts);
		if (!s)
			return;         /* a statistic, not worth failing a step over */
		rt->moe_seen = s;
		rt->moe_seen_n = n_experts;
	}
	memset(rt->moe_seen, 0, (size_t)n_experts);
	uint64_t distinct = 0;
	for (int64_t i = 0; i < nk; i++) {
		distinct += !rt->moe_seen[idx[i]];
		rt->moe_seen[idx[i]] = 1;
	}
	rt->moe.passes++;
	rt->moe.slots += (uint64_t)nk;
	rt->moe.experts += distinct;
}

static int host_router_route(const tf_host *h, const struct tf_router *r,
			     const float *x, int64_t n, int32_t *idx, float *w)
{
	int64_t t;
	int j;
	int rc = r->ops->route(r->impl, x, n, idx, w);
	if (rc)
		return tf_diag_prefix(rc, "router %s", r->ops->hdr.name);
	if (tf_router_check(r, idx, w, n, &t, &j)) {
		int64_t at = t * r->top_k + j;
		return tf_diag_set(TF_ERR_INTERNAL, "router %s gave token %lld expert %d "
				   "with weight %g in slot %d: expert ids must be distinct "
				   "in 0..%d and weights finite", r->ops->hdr.name,
				   (long long)t, idx[at], (double)w[at], j, r->n_experts - 1);
	}
	moe_count(h->ctx, idx, n * r->top_k, r->n_experts);
	return TF_OK;
}

static void host_router_close(const tf_host *h, struct tf_router *r)
{
	if (r->ops && r->impl)
		r->ops->layer_fini(r->impl);
	r->impl = NULL;
}

/* ---- opening, step by step ---- */

static int rt_load_conf(tf_runtime *rt, const char *ini,
			const char *const *overrides, int n)
{
	int rc = tf_conf_open(ini, overrides, n, &rt->conf);
	if (rc)
		return rc;

	static const char *const levels[] = { "error", "warn", "info", "debug" };
	const char *lv = tf_conf_get(rt->conf, "runtime", "log_level");
	rt->log_level = TF_LOG_WARN;
	for (int i = 0; lv && i < 4; i++)
		if (!strcmp(lv, levels[i]))
			rt->log_level = (tf_log_level)i;

	int64_t size, rank;
	int kv_f32;
	if ((rc = tf_conf_get_int(rt->conf, "runtime", "context", TF_DEFAULT_CONTEXT,
				  &rt->context)) ||
	    (rc = tf_conf_get_int(rt->conf, "runtime", "prefill_chunk",
				  TF_DEFAULT_PREFILL_CHUNK, &rt->prefill_chunk)) ||
	    (rc = tf_conf_get_int(rt->conf, "runtime", "sequences", 1, &rt->sequences)) ||
	    (rc = tf_conf_get_enum(rt->conf, "runtime", "kv_cache", 0, &kv_f32)) ||
	    (rc = tf_conf_get_int(rt->conf, "tp", "size", 1, &size)) ||
	    (rc = tf_conf_get_int(rt->conf, "tp", "rank", 0, &rank)))
		return rc;
	if (rank >= size)
		return tf_conf_fail(rt->conf, TF_ERR_INVALID, "tp", "rank",
				    "%lld is not below [tp] size %lld", (long long)rank,
				    (long long)size);
	rt->kv_cache_elem = kv_f32 ? 4 : 2;
	rt->host.tp_rank = (int)rank;
	rt->host.tp_size = (int)size;
	return TF_OK;
}

/* config.json from [model] path; with `weights`, the tensors too. */
static int rt_load_model(tf_runtime *rt, const char *ini, bool weights)
{
	char dir[PATH_MAX_LEN], file[PATH_MAX_LEN + 16];
	const char *path;
	int rc = tf_conf_get_path(rt->conf, "model", "path", dir, sizeof(dir), &path);
	if (rc)
		return rc;
	if (!path)
		return tf_diag_set(TF_ERR_INVALID, "%s: [model] path is not set", ini);
	snprintf(file, sizeof(file), "%s/config.json", path);
	if ((rc = tf_config_load(file, &rt->model)))
		return rc;
	rt->have_model = true;

	const tf_model_config *m = &rt->model;
	if (m->max_position_embeddings > 0 && rt->context > m->max_position_embeddings)
		return tf_conf_fail(rt->conf, TF_ERR_RANGE, "runtime", "context",
				    "%lld exceeds max_position_embeddings %d of %s",
				    (long long)rt->context, m->max_position_embeddings, file);
	if (weights && (rc = tf_weights_open(path, &rt->weights)))
		return rc;
	return TF_OK;
}

static int rt_plan_check(tf_runtime *rt)
{
	uint64_t limit;
	int rc = tf_conf_get_size(rt->conf, "runtime", "memory_limit", 0, &limit);
	return rc ? rc : tf_memplan_check(&rt->plan, limit);
}

/* Refuse a model that cannot fit before mapping pages in and starting
 * threads: every sequence full at once. */
static int rt_plan(tf_runtime *rt)
{
	int experts;
	int rc = tf_conf_get_enum(rt->conf, "tp", "moe", 0, &experts);
	if (rc)
		return rc;
	const tf_memplan_opts opts = {
		.context = rt->context, .tp_size = rt->host.tp_size,
		.moe_experts = experts == 1, .chunk = rt->prefill_chunk,
		.cache_elem = rt->kv_cache_elem, .sequences = (int)rt->sequences,
		.mtp = rt->mtp && rt->model.num_nextn_predict_layers > 0,
	};
	rc = tf_memplan_compute_opts(&rt->model, rt->weights, &opts, &rt->plan);
	return rc ? rc : rt_plan_check(rt);
}

/* Before the plugins are chosen, whether the drafter will run the MTP
 * layer: [plugins] drafter = mtp, or [mtp] enabled with no drafter named.
 * A drafter of another name that runs it plans again once chosen. */
static int rt_guess_mtp(tf_runtime *rt)
{
	const char *name = tf_conf_get(rt->conf, "plugins", "drafter");
	bool on;
	int rc = tf_conf_get_bool(rt->conf, "mtp", "enabled", false, &on);
	rt->mtp = name ? !strcmp(name, "mtp") : on;
	return rc;
}

/* The plan knows KDA and MLA state from config.json; a layer of a type a
 * plugin adds is counted by the plugin chosen for it, then checked again. */
static int rt_plan_plugin_state(tf_runtime *rt)
{
	const tf_model_config *m = &rt->model;
	for (int i = 0; i < m->n_layers_total; i++) {
		const tf_plugin_attention *a = rt->attn[i];
		if (m->layer_attn[i] || !a->state_bytes)
			continue;
		int64_t b = a->state_bytes(&rt->host, i, rt->context);
		if (b < 0)
			return tf_diag_set(TF_ERR_INTERNAL, "layer %d: %s state_bytes returned %lld",
					   i, a->hdr.name, (long long)b);
		tf_memplan_add_state(&rt->plan, (uint64_t)b);
	}
	return rt_plan_check(rt);
}

/* Every layer.<N> key must name a layer the model has; [model]
 * layer.<N>.attention and .ffn rename that layer's type. */
static int rt_layer_keys(tf_runtime *rt)
{
	for (size_t i = 0; i < tf_conf_count(rt->conf); i++) {
		const char *section, *key, *value;
		tf_conf_at(rt->conf, i, &section, &key, &value);
		long n;
		int end = 0;
		if ((strcmp(section, "plugins") && strcmp(section, "model")) ||
		    sscanf(key, "layer.%ld.%n", &n, &end) != 1)
			continue;
		if (n >= rt->model.n_layers_total)
			return tf_conf_fail(rt->conf, TF_ERR_RANGE, section, key,
					    "the model has layers 0..%d",
					    rt->model.n_layers_total - 1);
		bool ffn = !strcmp(key + end, "ffn");
		if (!strcmp(section, "model") && (ffn || !strcmp(key + end, "attention")))
			tf_config_set_layer_type(&rt->model, (int)n, ffn, value);
	}
	return TF_OK;
}

static void rt_init_host(tf_runtime *rt)
{
	rt->model.struct_size = sizeof(rt->model);
	rt->host.struct_size = sizeof(rt->host);
	rt->host.ctx = rt;
	rt->host.log = host_log;
	rt->host.error = host_error;
	rt->host.error_note = host_error_note;
	rt->host.conf_get = host_conf_get;
	rt->host.conf_int = host_conf_int;
	rt->host.conf_size = host_conf_size;
	rt->host.conf_bool = host_conf_bool;
	rt->host.conf_enum = host_conf_enum;
	rt->host.conf_float = host_conf_float;
	rt->host.weight_get = host_weight_get;
	rt->host.weight_release = host_weight_release;
	rt->host.model = &rt->model;
	rt->host.lin_open = host_lin_open;
	rt->host.lin_close = host_lin_close;
	rt->host.lin_open_part = host_lin_open_part;
	rt->host.router_open = host_router_open;
	rt->host.router_route = host_router_route;
	rt->host.router_close = host_router_close;
}

static int rt_start_backend(tf_runtime *rt)
{
	const tf_candidate *c;
	tf_registry_probe(rt->reg, TF_KIND_BACKEND, &rt->host);
	int rc = tf_registry_choose(rt->reg, rt->conf, TF_KIND_BACKEND, NULL, -1, &c);
	if (rc)
		return rc;
	const tf_backend *be = (const tf_backend *)c->desc;
	void *ctx = NULL;
	if ((rc = be->init(&rt->host, &ctx)))
		return tf_diag_prefix(rc, "backend %s (%s)", c->name, c->file);
	rt->backend = be;
	rt->backend_ctx = ctx;
	rt->host.backend = be;
	rt->host.backend_ctx = ctx;
	return TF_OK;
}

static void rt_probe_rest(tf_runtime *rt)
{
	for (int k = TF_KIND_QUANT; k < TF_KIND_COUNT; k++)
		tf_registry_probe(rt->reg, (tf_plugin_kind)k, &rt->host);
}

/*
 * The drafter: [plugins] drafter names it (none: no drafting), or [mtp]
 * enabled = true asks for `mtp`.  One that runs the MTP layer needs a
 * checkpoint with one; the plan counts the layer when it runs.
 */
static int rt_choose_drafter(tf_runtime *rt)
{
	const char *name = tf_conf_get(rt->conf, "plugins", "drafter");
	const char *key = name ? "drafter" : "enabled";
	const tf_candidate *c;
	bool on, planned = rt->mtp;
	int rc = tf_conf_get_bool(rt->conf, "mtp", "enabled", false, &on);
	if (rc)
		return rc;
	if (on && name && strcmp(name, "mtp"))
		return tf_conf_fail(rt->conf, TF_ERR_INVALID, "mtp", "enabled",
				    "true asks for the mtp drafter, but [plugins] drafter "
				    "is '%s'", name);
	rt->mtp = false;
	if (name ? !strcmp(name, "none") : !on)
		return planned ? rt_plan(rt) : TF_OK;
	if (name)
		rc = tf_registry_choose(rt->reg, rt->conf, TF_KIND_DRAFTER, NULL, -1, &c);
	else if ((rc = tf_registry_select(rt->reg, TF_KIND_DRAFTER, NULL, "mtp", &c)))
		return tf_conf_fail(rt->conf, rc, "mtp", "enabled", "%s", tf_diag_msg());
	if (rc)
		return rc;
	rt->drafter = (const tf_plugin_drafter *)c->desc;
	rt->mtp = (rt->drafter->flags & TF_DRAFTER_MTP) != 0;
	if (rt->mtp && rt->model.num_nextn_predict_layers <= 0)
		return tf_conf_fail(rt->conf, TF_ERR_INVALID, name ? "plugins" : "mtp", key,
				    "drafter %s runs the MTP layer, and the checkpoint has "
				    "no MTP layer (num_nextn_predict_layers is 0)", c->name);
	return rt->mtp != planned ? rt_plan(rt) : TF_OK;
}

/* The attention and ffn plugin of every layer, the quant pin, and the
 * drafter and transport when they will be used. */
static int rt_choose_plugins(tf_runtime *rt)
{
	const tf_model_config *m = &rt->model;
	const tf_candidate *c;
	int rc;

	if (tf_conf_get(rt->conf, "plugins", "quant")) {
		rc = tf_registry_choose(rt->reg, rt->conf, TF_KIND_QUANT, NULL, -1, &c);
		if (rc)
			return rc;
		rt->quant_pin = (const tf_plugin_quant *)c->desc;
	}

	rt->attn = calloc((size_t)m->n_layers_total, sizeof(*rt->attn));
	rt->ffn = calloc((size_t)m->n_layers_total, sizeof(*rt->ffn));
	rt->router = calloc((size_t)m->n_layers_total, sizeof(*rt->router));
	if (!rt->attn || !rt->ffn || !rt->router)
		return tf_diag_set(TF_ERR_NOMEM, "plugins of %d layers: out of memory",
				   m->n_layers_total);
	for (int i = 0; i < m->n_layers_total; i++) {
		const char *at = m->attn_type[i], *ft = m->ffn_type[i];
		if ((rc = tf_registry_choose(rt->reg, rt->conf, TF_KIND_ATTENTION, at,
					     i, &c)))
			return rc;
		rt->attn[i] = (const tf_plugin_attention *)c->desc;
		if ((rc = tf_registry_choose(rt->reg, rt->conf, TF_KIND_FFN, ft, i, &c)))
			return rc;
		rt->ffn[i] = (const tf_plugin_ffn *)c->desc;
	}

	if ((rc = rt_choose_drafter(rt)))
		return rc;
	if (rt->host.tp_size > 1) {
		if ((rc = tf_registry_choose(rt->reg, rt->conf, TF_KIND_TRANSPORT, NULL,
					     -1, &c)))
			return tf_diag_prefix(rc, "[tp] size %d", rt->host.tp_size);
		rt->transport = (const tf_plugin_transport *)c->desc;
	}
	return TF_OK;
}

static int rt_new(tf_runtime **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return tf_diag_set(TF_ERR_NOMEM, "runtime: out of memory");
	rt_init_host(*out);
	return tf_registry_init(&(*out)->reg);
}

int tf_runtime_open_plan(const char *ini_path, const char *const *overrides,
			 int n_overrides, tf_runtime **out)
{
	tf_runtime *rt;
	int rc = rt_new(&rt);
	if (!rc)
		rc = rt_load_conf(rt, ini_path, overrides, n_overrides);
	if (!rc)
		rc = rt_load_model(rt, ini_path, true);
	if (!rc)
		rc = rt_layer_keys(rt);
	if (!rc)
		rc = rt_guess_mtp(rt);
	if (!rc)
		rc = rt_plan(rt);
	if (!rc)
		rc = tf_registry_scan(rt->reg, rt->conf);
	if (!rc)
		rc = tf_registry_declare_keys(rt->reg, rt->conf);
	if (rc) {
		tf_runtime_close(rt);
		return rc;
	}
	*out = rt;
	return TF_OK;
}

int tf_runtime_start(tf_runtime *rt)
{
	if (tf_runtime_header_only(rt))
		return tf_conf_fail(rt->conf, TF_ERR_INVALID, "model", "path",
				    "'%s' is a header-only checkpoint (tfsynth --header-only): "
				    "its tensors hold no data, so it can be planned (tfrun "
				    "--check) but not run", tf_conf_get(rt->conf, "model", "path"));
	int rc = rt_start_backend(rt);
	if (!rc) {
		rt_probe_rest(rt);
		rc = rt_choose_plugins(rt);
	}
	if (!rc)
		rc = rt_plan_plugin_state(rt);
	return rc;
}

int tf_runtime_open(const char *ini_path, const char *const *overrides,
		    int n_overrides, tf_runtime **out)
{
	tf_runtime *rt;
	int rc = tf_runtime_open_plan(ini_path, overrides, n_overrides, &rt);
	if (rc)
		return rc;
	if ((rc = tf_runtime_start(rt))) {
		tf_runtime_close(rt);
		return rc;
	}
	*out = rt;
	return TF_OK;
}

bool tf_runtime_header_only(const tf_runtime *rt)
{
	return rt->weights && tf_weights_header_only(rt->weights);
}

int tf_runtime_open_plugins(const char *ini_path, const char *const *overrides,
			    int n_overrides, tf_runtime **out)
{
	tf_runtime *rt;
	int rc = rt_new(&rt);
	if (!rc)
		rc = rt_load_conf(rt, ini_path, overrides, n_overrides);
	if (!rc && ini_path)
		rc = rt_load_model(rt, ini_path, false);
	if (!rc)
		rc = tf_registry_scan(rt->reg, rt->conf);
	if (!rc)
		rc = tf_registry_declare_keys(rt->reg, rt->conf);
	if (rc) {
		tf_runtime_close(rt);
		return rc;
	}
	if (rt_start_backend(rt))
		host_log(&rt->host, TF_LOG_WARN, "tfrun", "no backend started: %s; "
			 "the other plugins are probed without one", tf_diag_msg());
	rt_probe_rest(rt);
	*out = rt;
	return TF_OK;
}

int tf_runtime_open_transports(const char *ini_path, const char *const *overrides,
			       int n_overrides, tf_runtime **out)
{
	tf_runtime *rt;
	int rc = rt_new(&rt);
	if (!rc)
		rc = rt_load_conf(rt, ini_path, overrides, n_overrides);
	if (!rc)
		rc = tf_registry_scan(rt->reg, rt->conf);
	if (!rc)
		rc = tf_registry_declare_keys(rt->reg, rt->conf);
	if (rc) {
		tf_runtime_close(rt);
		return rc;
	}
	tf_registry_probe(rt->reg, TF_KIND_TRANSPORT, &rt->host);
	*out = rt;
	return TF_OK;
}

void tf_runtime_close(tf_runtime *rt)
{
	if (!rt)
		return;
	if (rt->backend_ctx) {
		rt->backend->quiesce(rt->backend_ctx);
		rt->backend->fini(rt->backend_ctx);
	}
	/* Only now, with no instance left running, may the .so files go. */
	tf_registry_free(rt->reg);
	tf_weights_close(rt->weights);
	if (rt->have_model)
		tf_config_free(&rt->model);
	tf_conf_free(rt->conf);
	free(rt->attn);
	free(rt->ffn);
	free(rt->router);
	free(rt->moe_seen);
	free(rt);
}

tf_moe_stats tf_runtime_moe_stats(const tf_runtime *rt) { return rt->moe; }
void tf_runtime_moe_stats_reset(tf_runtime *rt) { memset(&rt->moe, 0, sizeof(rt->moe)); }

/* ---- accessors ---- */

const tf_conf *tf_runtime_conf(const tf_runtime *rt) { return rt->conf; }
const tf_model_config *tf_runtime_model(const tf_runtime *rt) { return &rt->model; }
const tf_weights *tf_runtime_weights(const tf_runtime *rt) { return rt->weights; }
const tf_registry *tf_runtime_registry(const tf_runtime *rt) { return rt->reg; }
const tf_host *tf_runtime_host(const tf_runtime *rt) { return &rt->host; }
int64_t tf_runtime_context(const tf_runtime *rt) { return rt->context; }
int64_t tf_runtime_prefill_chunk(const tf_runtime *rt) { return rt->prefill_chunk; }
int tf_runtime_sequences(const tf_runtime *rt) { return (int)rt->sequences; }
const tf_memplan *tf_runtime_plan(const tf_runtime *rt) { return &rt->plan; }
const tf_plugin_drafter *tf_runtime_drafter(const tf_runtime *rt) { return rt->drafter; }
bool tf_runtime_mtp(const tf_runtime *rt) { return rt->mtp; }
const tf_plugin_transport *tf_runtime_transport(const tf_runtime *rt) { return rt->transport; }

int64_t tf_runtime_lins(const tf_runtime *rt, const char *quant)
{
	for (int i = 0; i < rt->n_lins; i++)
		if (!strcmp(rt->lins[i].q->hdr.name, quant))
			return rt->lins[i].n;
	return 0;
}

const tf_plugin_attention *tf_runtime_attention(const tf_runtime *rt, int layer)
{
	return rt->attn && layer >= 0 && layer < rt->model.n_layers_total ?
	       rt->attn[layer] : NULL;
}

const tf_plugin_ffn *tf_runtime_ffn(const tf_runtime *rt, int layer)
{
	return rt->ffn && layer >= 0 && layer < rt->model.n_layers_total ?
	       rt->ffn[layer] : NULL;
}

/* The end (exclusive) of the run of layers from i sharing types and
 * plugins, the MTP layer apart. */
static int layer_run_end(const tf_runtime *rt, int i)
{
	const tf_model_config *m = &rt->model;
	int j = i + 1;
	while (j < m->n_layers_total && rt->attn[j] == rt->attn[i] && rt->ffn[j] == rt->ffn[i] &&
	       rt->router[j] == rt->router[i] &&
	       !strcmp(m->attn_type[j], m->attn_type[i]) && !strcmp(m->ffn_type[j], m->ffn_type[i]) &&
	       (j < m->num_hidden_layers) == (i < m->num_hidden_layers))
		j++;
	return j;
}

/* Whether the backend's device reads weights in host memory (its map
 * slot, ABI 1.11: unified memory): a map of 0 bytes asks. */
static bool runtime_maps(const tf_runtime *rt)
{
	const void *dev;
	return rt->backend_ctx && tf_backend_has_map(rt->backend) &&
	       rt->backend->map(rt->backend_ctx, NULL, 0, &dev) == TF_OK;
}

void tf_runtime_print(const tf_runtime *rt, FILE *f)
{
	const tf_model_config *m = &rt->model;
	fprintf(f, "model:     %s, %d layers + %d MTP, hidden %d, vocab %d, "
		"%d experts (%d per token)\n", m->model_type, m->num_hidden_layers,
		m->num_nextn_predict_layers, m->hidden_size, m->vocab_size,
		m->num_experts, m->num_experts_per_tok);
	fprintf(f, "context:   %lld tokens, prefill chunk %lld\n",
		(long long)rt->context, (long long)rt->prefill_chunk);
	fprintf(f, "backend:   %s%s\n", rt->backend ? rt->backend->hdr.name : "-",
		runtime_maps(rt) ? " (unified memory: weights read in place)" : "");
	fprintf(f, "quant:     %s%s\n", rt->quant_pin ? rt->quant_pin->hdr.name : "",
		rt->quant_pin ? " where it matches, else the best match() per linear" :
		"the best match() per linear");
	if (rt->n_lins) {
		fprintf(f, "linears:  ");
		for (int i = 0; i < rt->n_lins; i++)
			fprintf(f, "%s %s %lld", i ? "," : "", rt->lins[i].q->hdr.name,
				(long long)rt->lins[i].n);
		fputc('\n', f);
	}
	if (rt->n_lins && rt->quant_pin && !tf_runtime_lins(rt, rt->quant_pin->hdr.name))
		fprintf(f, "warning:   [plugins] quant = %s recognised no linear of this "
			"checkpoint\n", rt->quant_pin->hdr.name);
	/* One line per run of layers sharing types and plugins. */
	for (int i = 0, j; rt->attn && i < m->n_layers_total; i = j) {
		j = layer_run_end(rt, i);
		const char *at = m->attn_type[i], *ft = m->ffn_type[i];
		fprintf(f, "layers %3d-%-3d %s (%s) + %s (%s%s%s)%s\n", i, j - 1,
			at, rt->attn[i]->hdr.name, ft, rt->ffn[i]->hdr.name,
			rt->router[i] ? ", router " : "",
			rt->router[i] ? rt->router[i]->hdr.name : "",
			i >= m->num_hidden_layers ? "  [MTP]" : "");
	}
	if (rt->drafter)
		fprintf(f, "drafter:   %s\n", rt->drafter->hdr.name);
	if (rt->transport)
		fprintf(f, "transport: %s (rank %d of %d)\n", rt->transport->hdr.name,
			rt->host.tp_rank, rt->host.tp_size);
}

static int json_layers(const tf_runtime *rt, cJSON *root)
{
	const tf_model_config *m = &rt->model;
	cJSON *runs = cJSON_AddArrayToObject(root, "layers");
	if (!runs)
		return TF_ERR_NOMEM;
	for (int i = 0, j; rt->attn && i < m->n_layers_total; i = j) {
		j = layer_run_end(rt, i);
		const char *at = m->attn_type[i], *ft = m->ffn_type[i];
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(runs, o) ||
		    !cJSON_AddNumberToObject(o, "first", i) ||
		    !cJSON_AddNumberToObject(o, "last", j - 1) ||
		    !cJSON_AddStringToObject(o, "attention", at) ||
		    !cJSON_AddStringToObject(o, "attention_plugin", rt->attn[i]->hdr.name) ||
		    !cJSON_AddStringToObject(o, "ffn", ft) ||
		    !cJSON_AddStringToObject(o, "ffn_plugin", rt->ffn[i]->hdr.name) ||
		    (rt->router[i] &&
		     !cJSON_AddStringToObject(o, "router_plugin", rt->router[i]->hdr.name)) ||
		    !cJSON_AddBoolToObject(o, "mtp", i >= m->num_hidden_layers))
			return TF_ERR_NOMEM;
	}
	return TF_OK;
}

/* memory.ranks: what each [tp] rank holds, as the budget check adds it. */
static int json_ranks(const tf_memplan *p, cJSON *mem)
{
	cJSON *ranks = cJSON_AddArrayToObject(mem, "ranks");
	if (!ranks)
		return TF_ERR_NOMEM;
	for (int r = 0; r < p->opts.tp_size; r++) {
		const tf_memplan_rank *k = &p->ranks[r];
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(ranks, o) ||
		    !cJSON_AddNumberToObject(o, "weights_bytes", (double)k->weights_total) ||
		    !cJSON_AddNumberToObject(o, "kda_state_bytes", (double)k->kda_state) ||
		    !cJSON_AddNumberToObject(o, "kda_conv_bytes", (double)k->kda_conv) ||
		    !cJSON_AddNumberToObject(o, "total_bytes", (double)k->total))
			return TF_ERR_NOMEM;
	}
	return TF_OK;
}

static int json_lins_memory(const tf_runtime *rt, cJSON *root)
{
	const tf_memplan *p = &rt->plan;
	cJSON *lins = cJSON_AddObjectToObject(root, "linears");
	cJSON *mem = cJSON_AddObjectToObject(root, "memory");
	if (!lins || !mem)
		return TF_ERR_NOMEM;
	for (int i = 0; i < rt->n_lins; i++)
		if (!cJSON_AddNumberToObject(lins, rt->lins[i].q->hdr.name, (double)rt->lins[i].n))
			return TF_ERR_NOMEM;
	if (!cJSON_AddNumberToObject(mem, "weights_bytes", (double)p->rank_weights) ||
	    !cJSON_AddNumberToObject(mem, "state_bytes", (double)p->seq_state) ||
	    !cJSON_AddNumberToObject(mem, "sequences", p->opts.sequences) ||
	    !cJSON_AddStringToObject(mem, "kv_cache", p->opts.cache_elem == 2 ? "bf16" : "f32") ||
	    !cJSON_AddNumberToObject(mem, "mla_cache_bytes", (double)p->mla_cache) ||
	    !cJSON_AddNumberToObject(mem, "mla_cache_other_bytes", (double)p->mla_cache_other) ||
	    !cJSON_AddNumberToObject(mem, "other_state_bytes", (double)p->other_state) ||
	    !cJSON_AddNumberToObject(mem, "scratch_bytes", (double)p->scratch) ||
	    !cJSON_AddNumberToObject(mem, "total_bytes", (double)p->rank_total) ||
	    !cJSON_AddNumberToObject(mem, "active_bytes", (double)p->rank_active) ||
	    !cJSON_AddNumberToObject(mem, "checkpoint_bytes", (double)p->weights_total) ||
	    !cJSON_AddNumberToObject(mem, "checkpoint_active_bytes", (double)p->active))
		return TF_ERR_NOMEM;
	/* Bytes and elements by class, from which bench/engine/ideal.py tells
	 * the expert weights a step reads (or decodes) from the rest. */
	cJSON *cls = cJSON_AddObjectToObject(mem, "checkpoint_class_bytes");
	cJSON *prm = cJSON_AddObjectToObject(mem, "checkpoint_class_params");
	if (!cls || !prm ||
	    !cJSON_AddNumberToObject(mem, "checkpoint_active_params", (double)p->active_params))
		return TF_ERR_NOMEM;
	for (int k = 0; k < TF_WCLASS_COUNT; k++)
		if (!cJSON_AddNumberToObject(cls, tf_wclass_name((tf_wclass)k), (double)p->weights[k]) ||
		    !cJSON_AddNumberToObject(prm, tf_wclass_name((tf_wclass)k), (double)p->params[k]))
			return TF_ERR_NOMEM;
	return json_ranks(p, mem);
}

int tf_runtime_print_json(const tf_runtime *rt, const char *ini, FILE *f)
{
	const tf_model_config *m = &rt->model;
	const char *pin = rt->quant_pin ? rt->quant_pin->hdr.name : NULL;
	char *s = NULL;
	int rc = TF_ERR_NOMEM;
	cJSON *root = cJSON_CreateObject();
	if (!root ||
	    !cJSON_AddStringToObject(root, "ini", ini) ||
	    !cJSON_AddBoolToObject(root, "ok", 1) ||
	    !cJSON_AddBoolToObject(root, "header_only", tf_runtime_header_only(rt)) ||
	    !cJSON_AddStringToObject(root, "model_type", m->model_type) ||
	    !cJSON_AddNumberToObject(root, "num_hidden_layers", m->num_hidden_layers) ||
	    !cJSON_AddNumberToObject(root, "num_experts", m->num_experts) ||
	    !cJSON_AddNumberToObject(root, "num_experts_per_tok", m->num_experts_per_tok) ||
	    !cJSON_AddNumberToObject(root, "context", (double)rt->context) ||
	    !cJSON_AddNumberToObject(root, "prefill_chunk", (double)rt->prefill_chunk) ||
	    !cJSON_AddStringToObject(root, "backend", rt->backend ? rt->backend->hdr.name : "") ||
	    !cJSON_AddBoolToObject(root, "weights_in_place", runtime_maps(rt)) ||
	    !(pin ? cJSON_AddStringToObject(root, "quant", pin) :
		    cJSON_AddNullToObject(root, "quant")) ||
	    (pin && !cJSON_AddBoolToObject(root, "quant_matched", tf_runtime_lins(rt, pin) > 0)) ||
	    json_lins_memory(rt, root) || json_layers(rt, root) ||
	    (rt->drafter && !cJSON_AddStringToObject(root, "drafter", rt->drafter->hdr.name)) ||
	    (rt->transport && !cJSON_AddStringToObject(root, "transport", rt->transport->hdr.name)) ||
	    !(s = cJSON_Print(root)))
		goto out;
	fprintf(f, "%s\n", s);
	rc = TF_OK;
out:
	cJSON_free(s);
	cJSON_Delete(root);
	return rc ? tf_diag_set(rc, "--check --json: out of memory") : TF_OK;
}
