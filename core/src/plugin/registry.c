/* registry.c - plugin discovery, ABI checks, probing, selection; see
 * registry.h and docs/plugins.md. */
#define _GNU_SOURCE
#include "plugin/registry.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/path.h"
#include "tf/attention.h"
#include "tf/backend.h"
#include "tf/diag.h"
#include "tf/drafter.h"
#include "tf/ffn.h"
#include "tf/quant.h"
#include "tf/router.h"
#include "tf/transport.h"

/* A plugin's entry function returns descriptors up to its first NULL; a
 * plugin still answering past this many is broken. */
#define MAX_DESCRIPTORS 64

struct slot {
	const char *name;
	size_t offset;
};

#define SLOT(type, member) { #member, offsetof(type, member) }

/* The slots a descriptor must fill, per kind, as the tf/ headers mark
 * them.  Anything else may be NULL or beyond struct_size (appended in a
 * later minor version): a backend's ops, for one, are checked by the
 * plugins and the pipeline that call them. */
static const struct slot backend_slots[] = {
	SLOT(tf_backend, init), SLOT(tf_backend, quiesce), SLOT(tf_backend, fini),
	SLOT(tf_backend, alloc), SLOT(tf_backend, free), SLOT(tf_backend, upload),
	SLOT(tf_backend, download), SLOT(tf_backend, sync), { NULL, 0 }
};
static const struct slot quant_slots[] = {
	SLOT(tf_plugin_quant, match), SLOT(tf_plugin_quant, open),
	SLOT(tf_plugin_quant, close), SLOT(tf_plugin_quant, forward), { NULL, 0 }
};
static const struct slot attention_slots[] = {
	SLOT(tf_plugin_attention, layer_type), SLOT(tf_plugin_attention, layer_init),
	SLOT(tf_plugin_attention, layer_fini), { NULL, 0 }
};
/* An attention descriptor also fills one of two sets: the ABI 1.5 state
 * slots, all of them, or else the pre-1.5 per-instance sequence slots. */
static const struct slot attention_state_slots[] = {
	SLOT(tf_plugin_attention, state_new), SLOT(tf_plugin_attention, state_free),
	SLOT(tf_plugin_attention, state_reset), SLOT(tf_plugin_attention, state_len),
	SLOT(tf_plugin_attention, state_copy), SLOT(tf_plugin_attention, state_snapshot_size),
	SLOT(tf_plugin_attention, state_snapshot), SLOT(tf_plugin_attention, state_rollback),
	SLOT(tf_plugin_attention, forward_batch), { NULL, 0 }
};
static const struct slot attention_old_slots[] = {
	SLOT(tf_plugin_attention, forward), SLOT(tf_plugin_attention, reset),
	SLOT(tf_plugin_attention, seq_len), { NULL, 0 }
};
static const struct slot ffn_slots[] = {
	SLOT(tf_plugin_ffn, layer_type), SLOT(tf_plugin_ffn, layer_init),
	SLOT(tf_plugin_ffn, layer_fini), SLOT(tf_plugin_ffn, forward), { NULL, 0 }
};
static const struct slot drafter_slots[] = {
	SLOT(tf_plugin_drafter, init), SLOT(tf_plugin_drafter, fini),
	SLOT(tf_plugin_drafter, max_depth), SLOT(tf_plugin_drafter, propose), { NULL, 0 }
};
static const struct slot transport_slots[] = {
	SLOT(tf_plugin_transport, init), SLOT(tf_plugin_transport, fini),
	SLOT(tf_plugin_transport, connect), SLOT(tf_plugin_transport, all_reduce),
	SLOT(tf_plugin_transport, all_gather), SLOT(tf_plugin_transport, broadcast),
	SLOT(tf_plugin_transport, barrier), { NULL, 0 }
};
static const struct slot router_slots[] = {
	SLOT(tf_plugin_router, layer_init), SLOT(tf_plugin_router, layer_fini),
	SLOT(tf_plugin_router, route), { NULL, 0 }
};

/* Per kind: its name, required slots and where its `keys` slot sits. */
static const struct kind_info {
	const char *name;
	const struct slot *slots;
	size_t keys;
} kinds[TF_KIND_COUNT] = {
	[TF_KIND_BACKEND]   = { "backend",   backend_slots,   offsetof(tf_backend, keys) },
	[TF_KIND_QUANT]     = { "quant",     quant_slots,     offsetof(tf_plugin_quant, keys) },
	[TF_KIND_ATTENTION] = { "attention", attention_slots,
				offsetof(tf_plugin_attention, keys) },
	[TF_KIND_FFN]       = { "ffn",       ffn_slots,       offsetof(tf_plugin_ffn, keys) },
	[TF_KIND_DRAFTER]   = { "drafter",   drafter_slots,   offsetof(tf_plugin_drafter, keys) },
	[TF_KIND_TRANSPORT] = { "transport", transport_slots,
				offsetof(tf_plugin_transport, keys) },
	[TF_KIND_ROUTER]    = { "router",    router_slots,    offsetof(tf_plugin_router, keys) },
};

typedef const tf_plugin_header *(*entry_fn)(unsigned index);

struct tf_registry {
	void **so;                      /* dlopen handles */
	char **files;                   /* owned strings candidates point at */
	size_t n_so;
	tf_candidate *c;
	size_t n, cap;
};

const char *tf_registry_kind_name(tf_plugin_kind kind)
{
	return kind > 0 && kind < TF_KIND_COUNT ? kinds[kind].name : "-";
}

int tf_registry_init(tf_registry **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "plugin registry: out of memory");
}

void tf_registry_free(tf_registry *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_so; i++) {
		if (r->so[i])
			dlclose(r->so[i]);
		free(r->files[i]);
	}
	free(r->c);
	free(r->so);
	free(r->files);
	free(r);
}

size_t tf_registry_count(const tf_registry *r) { return r->n; }

const tf_candidate *tf_registry_at(const tf_registry *r, size_t i)
{
	return i < r->n ? &r->c[i] : NULL;
}

/* ---- candidates ---- */

static tf_candidate *cand_add(tf_registry *r, tf_plugin_kind kind,
			      const char *file, unsigned index)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;
		tf_candidate *c = realloc(r->c, cap * sizeof(*c));
		if (!c)
			return NULL;
		r->c = c;
		r->cap = cap;
	}
	tf_candidate *c = &r->c[r->n++];
	*c = (tf_candidate){ .kind = kind, .file = file, .index = index };
	const char *base = strrchr(file, '/');
	snprintf(c->name, sizeof(c->name), "%s#%u", base ? base + 1 : file, index);
	return c;
}

/* Mark rejected, keeping the first reason; returns status. */
static int cand_reject(tf_candidate *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int cand_reject(tf_candidate *c, int status, const char *fmt, ...)
{
	if (c->status)
		return status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	c->status = status;
	c->score = 0;
	return status;
}

/* The layer type an attention or ffn descriptor serves, when its struct
 * reaches that far; NULL otherwise. */
static const char *cand_layer_type(const tf_candidate *c)
{
	const tf_plugin_header *d = c->desc;
	if (!d)
		return NULL;
	if (c->kind == TF_KIND_ATTENTION &&
	    d->struct_size >= offsetof(tf_plugin_attention, layer_type) + sizeof(char *))
		return ((const tf_plugin_attention *)d)->layer_type;
	if (c->kind == TF_KIND_FFN &&
	    d->struct_size >= offsetof(tf_plugin_ffn, layer_type) + sizeof(char *))
		return ((const tf_plugin_ffn *)d)->layer_type;
	return NULL;
}

/* Read a pointer-sized slot at `offset` without type punning on it. */
static bool slot_filled(const tf_plugin_header *d, size_t offset)
{
	void *p;
	memcpy(&p, (const char *)d + offset, sizeof(p));
	return p != NULL;
}

/* Whether any of `slots` is within struct_size and non-NULL. */
static bool any_filled(const tf_plugin_header *d, const struct slot *slots)
{
	for (const struct slot *s = slots; s->name; s++)
		if (d->struct_size >= s->offset + sizeof(void *) && slot_filled(d, s->offset))
			return true;
	return false;
}

/* Every one of `slots` present; else c is rejected naming the first
 * missing one, `note` appended. */
static bool slots_filled(tf_candidate *c, const tf_plugin_header *d, const struct slot *slots,
			 const char *note)
{
	const struct kind_info *k = &kinds[c->kind];
	for (const struct slot *s = slots; s->name; s++) {
		if (d->struct_size < s->offset + sizeof(void *)) {
			cand_reject(c, TF_ERR_ABI, "descriptor is %u bytes: too small "
				    "for required slot '%s' (ABI %d.0 %s descriptors "
				    "hold at least %zu)%s", d->struct_size, s->name,
				    TF_ABI_MAJOR, k->name, s->offset + sizeof(void *), note);
			return false;
		}
		if (!slot_filled(d, s->offset)) {
			cand_reject(c, TF_ERR_ABI, "missing required slot '%s'%s", s->name, note);
			return false;
		}
	}
	return true;
}

const tf_plugin_key *tf_registry_keys(const tf_candidate *c)
{
	const tf_plugin_key *k = NULL;
	size_t off = c->kind > 0 && c->kind < TF_KIND_COUNT ? kinds[c->kind].keys : 0;
	if (c->desc && off && c->desc->struct_size >= off + sizeof(k))
		memcpy(&k, (const char *)c->desc + off, sizeof(k));
	return k;
}

/* The ABI checks of registry.h.  A descriptor failing the header checks
 * is never read further (desc stays NULL: its layout is not ours to
 * read); one failing a slot check keeps its name for the listing. */
static void cand_check(tf_registry *r, tf_candidate *c, const tf_plugin_header *d,
		       const char *entry)
{
	const struct kind_info *k = &kinds[c->kind];
	if (d->abi_major != TF_ABI_MAJOR) {
		cand_reject(c, TF_ERR_ABI, "built for plugin ABI %u.%u; this "
			    "runtime has ABI %d.%d", d->abi_major, d->abi_minor,
			    TF_ABI_MAJOR, TF_ABI_MINOR);
		return;
	}
	if (d->struct_size < sizeof(*d)) {
		cand_reject(c, TF_ERR_ABI, "descriptor is %u bytes, smaller than "
			    "its %zu-byte header", d->struct_size, sizeof(*d));
		return;
	}
	if (d->kind != c->kind) {
		cand_reject(c, TF_ERR_ABI, "%s returned a descriptor of kind %d",
			    entry, (int)d->kind);
		return;
	}
	if (!d->name || !*d->name || strlen(d->name) >= sizeof(c->name)) {
		cand_reject(c, TF_ERR_ABI, "descriptor name is missing or longer "
			    "than %zu bytes", sizeof(c->name) - 1);
		return;
	}
	c->desc = d;
	snprintf(c->name, sizeof(c->name), "%s", d->name);
	if (!d->probe) {
		cand_reject(c, TF_ERR_ABI, "missing required slot 'probe'");
		return;
	}
	if (!slots_filled(c, d, k->slots, ""))
		return;
	/* Attention: any 1.5 state slot asks for all of them; none, for the
	 * pre-1.5 ones. */
	if (c->kind == TF_KIND_ATTENTION) {
		bool v15 = any_filled(d, attention_state_slots);
		if (!slots_filled(c, d, v15 ? attention_state_slots : attention_old_slots,
				  v15 ? " (the ABI 1.5 state slots go all together)" : ""))
			return;
	}
	/* The first sound plugin of a kind and name on the path wins. */
	for (const tf_candidate *o = r->c; o < c; o++) {
		if (!o->status && o->kind == c->kind && !strcmp(o->name, c->name)) {
			cand_reject(c, TF_ERR_INVALID, "shadowed by %s", o->file);
			return;
		}
	}
}

/* ---- loading ---- */

/* When a .so has no entry for our major, say which major it was built for. */
static int other_major(void *so, const char **kind, int *major)
{
	for (int k = 1; k < TF_KIND_COUNT; k++)
		for (int m = 0; m <= TF_ABI_MAJOR + 8; m++) {
			char sym[64];
			if (m == TF_ABI_MAJOR)
				continue;
			snprintf(sym, sizeof(sym), "tf_plugin_%s_v%d", kinds[k].name, m);
			if (dlsym(so, sym)) {
				*kind = kinds[k].name;
				*major = m;
				return 1;
			}
		}
	return 0;
}

/* Keep a handle (NULL for a file that failed to load) and its canonical
 * path, which the registry takes over. */
static int so_keep(tf_registry *r, void *so, char *real)
{
	void **nso = realloc(r->so, (r->n_so + 1) * sizeof(*nso));
	if (nso)
		r->so = nso;
	char **nf = realloc(r->files, (r->n_so + 1) * sizeof(*nf));
	if (nf)
		r->files = nf;
	if (!nso || !nf) {
		int rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", real);
		free(real);
		return rc;
	}
	r->so[r->n_so] = so;
	r->files[r->n_so++] = real;
	return TF_OK;
}

/* The canonical path of `file`, NULL (with the diag set) when it is
 * missing or was met before: a folder on the path twice is loaded once. */
static char *so_new_path(const tf_registry *r, const char *file, int *status)
{
	char *real = realpath(file, NULL);
	*status = TF_OK;
	if (!real) {
		*status = tf_diag_set(errno == ENOMEM ? TF_ERR_NOMEM : TF_ERR_NOT_FOUND,
				      "%s: %s", file, strerror(errno));
		return NULL;
	}
	for (size_t i = 0; i < r->n_so; i++)
		if (!strcmp(r->files[i], real)) {
			free(real);
			return NULL;
		}
	return real;
}

int tf_registry_load(tf_registry *r, const char *file)
{
	struct stat st;
	if (stat(file, &st) != 0)
		return tf_diag_set(TF_ERR_NOT_FOUND, "%s: %s", file, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return tf_diag_set(TF_ERR_INVALID, "%s: not a regular file", file);
	int rc;
	char *real = so_new_path(r, file, &rc);
	if (!real)
		return rc;
	void *so = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!so) {
		free(real);
		return tf_diag_set(TF_ERR_FORMAT, "%s: not a loadable shared object: %s",
				   file, dlerror());
	}

	int found = 0;
	for (int k = 1; k < TF_KIND_COUNT; k++) {
		char sym[64];
		snprintf(sym, sizeof(sym), "tf_plugin_%s_v%d", kinds[k].name, TF_ABI_MAJOR);
		void *addr = dlsym(so, sym);
		entry_fn entry;
		if (!addr)
			continue;
		memcpy(&entry, &addr, sizeof(entry));
		if (!found++) {
			if ((rc = so_keep(r, so, real))) {
				dlclose(so);
				return rc;
			}
			file = real;
		}
		for (unsigned i = 0;; i++) {
			const tf_plugin_header *d = entry(i);
			if (!d && i > 0)
				break;
			tf_candidate *c = cand_add(r, (tf_plugin_kind)k, file, i);
			if (!c)
				return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", file);
			if (!d)
				cand_reject(c, TF_ERR_ABI, "%s(0) returned no descriptor", sym);
			else if (i == MAX_DESCRIPTORS)
				cand_reject(c, TF_ERR_ABI, "%s returns more than %d "
					    "descriptors", sym, MAX_DESCRIPTORS);
			else
				cand_check(r, c, d, sym);
			if (!d || i == MAX_DESCRIPTORS)
				break;
		}
	}
	if (found)
		return TF_OK;

	const char *kind;
	int major;
	int abi = other_major(so, &kind, &major);
	dlclose(so);
	free(real);
	if (abi)
		return tf_diag_set(TF_ERR_ABI, "%s: built for plugin ABI %d "
				   "(exports tf_plugin_%s_v%d); this runtime has "
				   "ABI %d", file, major, kind, major, TF_ABI_MAJOR);
	return tf_diag_set(TF_ERR_NOT_FOUND, "%s: not a TensorFold plugin (it "
			   "exports no tf_plugin_<kind>_v%d entry)", file, TF_ABI_MAJOR);
}

static bool has_so_suffix(const char *name)
{
	size_t n = strlen(name);
	return n > 3 && !strcmp(name + n - 3, ".so");
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A .so in a scanned folder that fails to load still shows in the list. */
static int add_failed_file(tf_registry *r, const char *file, int status)
{
	char why[sizeof(((tf_candidate *)0)->why)];
	int rc;
	snprintf(why, sizeof(why), "%s", tf_diag_msg());
	char *real = so_new_path(r, file, &rc);
	if (!real)
		return rc;
	if ((rc = so_keep(r, NULL, real)))
		return rc;
	tf_candidate *c = cand_add(r, 0, real, 0);
	if (!c)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", real);
	cand_reject(c, status, "%s", why);
	return TF_OK;
}

static int add_dir(tf_registry *r, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return tf_diag_set(TF_ERR_IO, "%s: %s", dir, strerror(errno));
	char **names = NULL;
	size_t n = 0;
	int rc = TF_OK;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!has_so_suffix(e->d_name))
			continue;
		char **nn = realloc(names, (n + 1) * sizeof(*nn));
		if (nn)
			names = nn;
		char *s = nn ? tf_path_join(dir, e->d_name) : NULL;
		if (!s) {
			rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", dir);
			goto out;
		}
		names[n++] = s;
	}
	/* A stable order, so that ties and shadowing are reproducible. */
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n && !rc; i++) {
		int st = tf_registry_load(r, names[i]);
		if (st && st != TF_ERR_NOMEM)
			rc = add_failed_file(r, names[i], st);
		else
			rc = st;
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

int tf_registry_add(tf_registry *r, const char *path, const char *origin)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return tf_diag_set(TF_ERR_NOT_FOUND, "%s: plugin path %s: %s", origin,
				   path, strerror(errno));
	int rc = S_ISDIR(st.st_mode) ? add_dir(r, path) : tf_registry_load(r, path);
	return rc ? tf_diag_prefix(rc, "%s", origin) : TF_OK;
}

/* Each entry of a ':'-separated list. */
static int add_list(tf_registry *r, const tf_conf *conf, const char *list,
		    const char *origin)
{
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", origin);
	int rc = TF_OK;
	for (char *p = strtok_r(copy, ":", &save); p && !rc;
	     p = strtok_r(NULL, ":", &save)) {
		char path[4096];
		if (conf)
			rc = tf_conf_resolve(conf, p, path, sizeof(path));
		else
			snprintf(path, sizeof(path), "%s", p);
		if (!rc)
			rc = tf_registry_add(r, path, origin);
	}
	free(copy);
	return rc;
}

int tf_registry_scan(tf_registry *r, const tf_conf *conf)
{
	const char *ini = conf ? tf_conf_get(conf, "plugins", "path") : NULL;
	const char *env = getenv("TF_PLUGIN_PATH");
	int rc;
	if (ini && (rc = add_list(r, conf, ini, "[plugins] path")))
		return rc;
	if (env && *env && (rc = add_list(r, NULL, env, "TF_PLUGIN_PATH")))
		return rc;
	/* The build folder is a default, not a promise: an installed tfrun
	 * may run where it no longer exists. */
	struct stat st;
	if (stat(TF_BUILD_PLUGIN_DIR, &st) == 0 &&
	    (rc = tf_registry_add(r, TF_BUILD_PLUGIN_DIR, "build plugin folder")))
		return rc;
	const char *ex = conf ? tf_conf_get(conf, "plugins", "exclude") : NULL;
	if (ex)
		tf_registry_exclude(r, ex);
	return TF_OK;
}

void tf_registry_exclude(tf_registry *r, const char *names)
{
	for (size_t i = 0; i < r->n; i++) {
		size_t len = strlen(r->c[i].name);
		for (const char *p = names; *p;) {
			p += strspn(p, " \t,");
			size_t n = strcspn(p, ",");
			size_t m = n;
			while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
				m--;
			if (m && m == len && !strncmp(p, r->c[i].name, len))
				cand_reject(&r->c[i], TF_ERR_INVALID,
					    "excluded by [plugins] exclude");
			p += n;
		}
	}
}

void tf_registry_probe(tf_registry *r, tf_plugin_kind kind, const tf_host *h)
{
	for (size_t i = 0; i < r->n; i++) {
		tf_candidate *c = &r->c[i];
		if (c->kind != kind || c->probed || c->status)
			continue;
		const char *reason = NULL;
		c->probed = true;
		c->score = c->desc->probe(h, &reason);
		if (c->score <= 0)
			cand_reject(c, TF_ERR_UNSUPPORTED, "%s",
				    reason && *reason ? reason :
				    "probe declined without a reason");
	}
}

int tf_registry_select(const tf_registry *r, tf_plugin_kind kind,
		       const char *layer_type, const char *pin,
		       const tf_candidate **out)
{
	const tf_candidate *best = NULL, *named = NULL;
	for (size_t i = 0; i < r->n; i++) {
		const tf_candidate *c = &r->c[i];
		const char *lt = cand_layer_type(c);
		if (c->kind != kind)
			continue;
		if (pin) {
			/* the first usable one of the name, else the first */
			if (!strcmp(c->name, pin) && (!named || (named->status && !c->status)))
				named = c;
			continue;
		}
		if (c->status || !c->probed)
			continue;
		if (layer_type && (!lt || strcmp(lt, layer_type)))
			continue;
		if (!best || c->score > best->score)
			best = c;
	}
	const char *kn = tf_registry_kind_name(kind);
	if (pin) {
		if (!named)
			return tf_diag_set(TF_ERR_NOT_FOUND, "no %s plugin named '%s' "
					   "on the plugin path", kn, pin);
		if (named->status)
			return tf_diag_set(named->status, "%s plugin '%s' (%s) cannot "
					   "be used: %s", kn, pin, named->file, named->why);
		if (!named->probed)
			return tf_diag_set(TF_ERR_INTERNAL, "%s plugin '%s' selected "
					   "before it was probed", kn, pin);
		const char *lt = cand_layer_type(named);
		if (layer_type && strcmp(lt, layer_type))
			return tf_diag_set(TF_ERR_INVALID, "%s plugin '%s' serves %s "
					   "layers, not %s", kn, pin, lt, layer_type);
		*out = named;
		return TF_OK;
	}
	if (!best)
		return tf_diag_set(TF_ERR_NOT_FOUND, "no usable %s plugin%s%s on the "
				   "plugin path (see tfrun --plugins)", kn,
				   layer_type ? " for layer type " : "",
				   layer_type ? layer_type : "");
	*out = best;
	return TF_OK;
}

int tf_registry_choose(const tf_registry *r, const tf_conf *conf,
		       tf_plugin_kind kind, const char *layer_type, int layer,
		       const tf_candidate **out)
{
	const char *kn = tf_registry_kind_name(kind);
	/* The transport's pin sits with the rest of [tp]: one key for it. */
	const char *sec = kind == TF_KIND_TRANSPORT ? "tp" : "plugins";
	char key[64] = "";
	const char *pin = NULL;
	if (layer >= 0) {
		snprintf(key, sizeof(key), "layer.%d.%s", layer, kn);
		pin = tf_conf_get(conf, sec, key);
	}
	if (!pin) {
		if (layer_type)
			snprintf(key, sizeof(key), "%s.%s", kn, layer_type);
		else
			snprintf(key, sizeof(key), "%s", kn);
		pin = tf_conf_get(conf, sec, key);
	}
	int rc = tf_registry_select(r, kind, layer_type, pin, out);
	if (rc && pin)
		return tf_conf_fail(conf, rc, sec, key, "%s", tf_diag_msg());
	if (rc && layer >= 0)
		return tf_diag_prefix(rc, "layer %d", layer);
	return rc;
}

/* ---- listing ---- */

/* Print root to f and delete it. */
static int print_cjson(cJSON *root, FILE *f)
{
	char *s = cJSON_Print(root);
	cJSON_Delete(root);
	if (!s)
		return tf_diag_set(TF_ERR_NOMEM, "plugin list: out of memory");
	fprintf(f, "%s\n", s);
	cJSON_free(s);
	return TF_OK;
}

static int print_json(const tf_registry *r, FILE *f)
{
	cJSON *root = cJSON_CreateArray();
	if (!root)
		return tf_diag_set(TF_ERR_NOMEM, "plugin list: out of memory");
	for (size_t i = 0; i < r->n; i++) {
		const tf_candidate *c = &r->c[i];
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(root, o))
			goto nomem;
		const char *lt = cand_layer_type(c);
		if (!cJSON_AddStringToObject(o, "kind", tf_registry_kind_name(c->kind)) ||
		    !cJSON_AddStringToObject(o, "name", c->name) ||
		    !cJSON_AddStringToObject(o, "file", c->file) ||
		    !cJSON_AddNumberToObject(o, "index", c->index) ||
		    !cJSON_AddNumberToObject(o, "score", c->score) ||
		    !cJSON_AddBoolToObject(o, "usable", !c->status && c->probed) ||
		    (lt && !cJSON_AddStringToObject(o, "layer_type", lt)) ||
		    (c->desc && c->desc->version &&
		     !cJSON_AddStringToObject(o, "version", c->desc->version)) ||
		    (c->desc && c->desc->description &&
		     !cJSON_AddStringToObject(o, "description", c->desc->description)) ||
		    (c->status && !cJSON_AddStringToObject(o, "rejected", c->why)))
			goto nomem;
	}
	return print_cjson(root, f);
nomem:
	cJSON_Delete(root);
	return tf_diag_set(TF_ERR_NOMEM, "plugin list: out of memory");
}

/* A key's type as docs/ini.md writes it. */
static void print_key_type(FILE *f, const tf_plugin_key *k)
{
	switch (k->type) {
	case TF_KEY_INT:
		fprintf(f, "integer %lld..%lld", (long long)k->min, (long long)k->max);
		break;
	case TF_KEY_FLOAT:
		fprintf(f, "number %lld..%lld", (long long)k->min, (long long)k->max);
		break;
	case TF_KEY_SIZE:
		fputs("size", f);
		break;
	case TF_KEY_BOOL:
		fputs("bool", f);
		break;
	case TF_KEY_ENUM:
		/* "a|b" as `a`, `b`: a '|' would end the table cell */
		for (const char *c = k->choices ? k->choices : ""; *c;) {
			size_t n = strcspn(c, "|");
			fprintf(f, "%s`%.*s`", c == k->choices ? "" : ", ", (int)n, c);
			c += n + (c[n] == '|');
		}
		break;
	default:
		fputs("text", f);
	}
}

int tf_registry_declare_keys(const tf_registry *r, tf_conf *conf)
{
	for (size_t i = 0; i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		const tf_plugin_key *k = c->status ? NULL : tf_registry_keys(c);
		for (; k && k->section; k++) {
			int rc = tf_conf_declare(conf, c->name, k);
			if (rc)
				return tf_diag_prefix(rc, "%s", c->file);
		}
	}
	return tf_conf_check_pending(conf);
}

static void drop_registry(void *r)
{
	tf_registry_free(r);
}

int tf_conf_open_checked(const char *ini_path, const char *const *overrides,
			 int n_overrides, tf_conf **out)
{
	tf_registry *r = NULL;
	int rc = tf_conf_open(ini_path, overrides, n_overrides, out);
	if (!rc)
		rc = tf_registry_init(&r);
	if (!rc)
		tf_conf_hold(*out, r, drop_registry);
	else
		tf_registry_free(r);
	if (!rc)
		rc = tf_registry_scan(r, *out);
	if (!rc)
		rc = tf_registry_declare_keys(r, *out);
	if (rc) {
		tf_conf_free(*out);
		*out = NULL;
	}
	return rc;
}

/* The sound plugins' keys, whether or not their probe accepted this
 * machine. */
static const tf_plugin_key *print_keys_of(const tf_candidate *c)
{
	return !c->status || c->probed ? tf_registry_keys(c) : NULL;
}

/* One key as {kind, plugin, section, key, type, default, help} plus range
 * [min, max] for an integer, choices for an enum. */
static cJSON *key_json(const tf_candidate *c, const tf_plugin_key *k)
{
	static const char *const types[] = {
		[TF_KEY_INT] = "integer", [TF_KEY_SIZE] = "size", [TF_KEY_BOOL] = "bool",
		[TF_KEY_ENUM] = "enum", [TF_KEY_STRING] = "text", [TF_KEY_FLOAT] = "number",
	};
	cJSON *o = cJSON_CreateObject();
	bool ok = o &&
		  cJSON_AddStringToObject(o, "kind", tf_registry_kind_name(c->kind)) &&
		  cJSON_AddStringToObject(o, "plugin", c->name) &&
		  cJSON_AddStringToObject(o, "section", k->section) &&
		  cJSON_AddStringToObject(o, "key", k->name ? k->name : "") &&
		  cJSON_AddStringToObject(o, "type", k->type >= TF_KEY_INT &&
					  k->type <= TF_KEY_FLOAT ? types[k->type] : "text") &&
		  (k->def ? cJSON_AddStringToObject(o, "default", k->def) :
			    cJSON_AddNullToObject(o, "default")) &&
		  cJSON_AddStringToObject(o, "help", k->help ? k->help : "");
	if (ok && (k->type == TF_KEY_INT || k->type == TF_KEY_FLOAT)) {
		cJSON *range = cJSON_AddArrayToObject(o, "range");
		ok = range && cJSON_AddItemToArray(range, cJSON_CreateNumber((double)k->min)) &&
		     cJSON_AddItemToArray(range, cJSON_CreateNumber((double)k->max));
	}
	if (ok && k->type == TF_KEY_ENUM) {
		cJSON *choices = cJSON_AddArrayToObject(o, "choices");
		ok = choices != NULL;
		for (const char *ch = k->choices ? k->choices : ""; ok && *ch;) {
			char one[128];
			size_t n = strcspn(ch, "|");
			snprintf(one, sizeof(one), "%.*s", (int)n, ch);
			ok = cJSON_AddItemToArray(choices, cJSON_CreateString(one));
			ch += n + (ch[n] == '|');
		}
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int print_keys_json(const tf_registry *r, FILE *f)
{
	cJSON *root = cJSON_CreateArray();
	if (!root)
		return tf_diag_set(TF_ERR_NOMEM, "plugin keys: out of memory");
	for (size_t i = 0; i < r->n; i++) {
		const tf_candidate *c = &r->c[i];
		for (const tf_plugin_key *k = print_keys_of(c); k && k->section; k++) {
			cJSON *o = key_json(c, k);
			if (!o || !cJSON_AddItemToArray(root, o)) {
				cJSON_Delete(o);
				cJSON_Delete(root);
				return tf_diag_set(TF_ERR_NOMEM, "plugin keys: out of memory");
			}
		}
	}
	return print_cjson(root, f);
}

int tf_registry_print_keys(const tf_registry *r, FILE *f, bool json)
{
	if (json)
		return print_keys_json(r, f);
	fprintf(f, "| key | type | default | plugin | meaning |\n|---|---|---|---|---|\n");
	for (size_t i = 0; i < r->n; i++) {
		const tf_candidate *c = &r->c[i];
		for (const tf_plugin_key *k = print_keys_of(c); k && k->section; k++) {
			fprintf(f, "| `[%s] %s` | ", k->section, k->name ? k->name : "");
			print_key_type(f, k);
			fprintf(f, " | %s%s%s | %s %s | %s |\n", k->def ? "`" : "",
				k->def ? k->def : "-", k->def ? "`" : "",
				tf_registry_kind_name(c->kind), c->name, k->help ? k->help : "");
		}
	}
	return TF_OK;
}

int tf_registry_print(const tf_registry *r, FILE *f, bool json)
{
	if (json)
		return print_json(r, f);
	fprintf(f, "%-10s %-16s %-6s %-5s %s\n", "KIND", "NAME", "LAYER", "SCORE",
		"FILE / STATUS");
	for (size_t i = 0; i < r->n; i++) {
		const tf_candidate *c = &r->c[i];
		const char *lt = cand_layer_type(c);
		fprintf(f, "%-10s %-16s %-6s %-5d %s\n", tf_registry_kind_name(c->kind),
			c->name, lt ? lt : "-", c->score, c->file);
		if (c->status)
			fprintf(f, "%40s rejected: %s\n", "", c->why);
		else if (!c->probed)
			fprintf(f, "%40s not probed\n", "");
		else
			fprintf(f, "%40s ok: %s %s\n", "",
				c->desc->version ? c->desc->version : "",
				c->desc->description ? c->desc->description : "");
	}
	return TF_OK;
}
