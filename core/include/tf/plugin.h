/*
 * tf/plugin.h - the plugin ABI: descriptor header, kinds, host services.
 *
 * A plugin is a shared object exporting one entry function per kind it
 * implements, named for the kind and the ABI major:
 *
 *     const struct tf_plugin_quant *tf_plugin_quant_v1(unsigned index);
 *
 * The host calls it with index 0, 1, 2 ... until it returns NULL, so one .so
 * may carry several implementations of a kind (a fast kernel beside its
 * reference, say).  Every descriptor starts with struct tf_plugin_header.
 *
 * Compatibility rules:
 *  - The host refuses a descriptor whose abi_major differs from its own.
 *  - Slots are only ever appended.  The host reads only the slots that
 *    header.struct_size covers and treats a missing or NULL slot as "not
 *    implemented"; a slot a kind marks required must be present.
 *  - A plugin links against nothing from the core: everything it needs from
 *    the host comes through struct tf_host.
 *
 * Lifecycle of an instance: probe -> init -> work -> quiesce -> fini.  The
 * host never dlclose()s a .so while one of its instances may still run.
 */
#ifndef TF_PLUGIN_H
#define TF_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/error.h"
#include "tf/model.h"
#include "tf/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_ABI_MAJOR 1
#define TF_ABI_MINOR 12

/* Plugins are built with hidden visibility; mark the entry functions. */
#define TF_EXPORT __attribute__((visibility("default")))

typedef enum tf_plugin_kind {
	TF_KIND_BACKEND = 1,
	TF_KIND_QUANT,
	TF_KIND_ATTENTION,
	TF_KIND_FFN,
	TF_KIND_DRAFTER,
	TF_KIND_TRANSPORT,
	TF_KIND_ROUTER,                 /* since ABI 1.4 */
	TF_KIND_COUNT
} tf_plugin_kind;

struct tf_host;

/*
 * The fixed header of every descriptor.
 *
 * probe() returns a score: 0 means "cannot run here" and sets *reason to a
 * static or host-lifetime string saying why; otherwise higher is preferred.
 * The registry picks the highest score unless the INI pins or excludes names.
 */
typedef struct tf_plugin_header {
	uint16_t abi_major;             /* TF_ABI_MAJOR at build time */
	uint16_t abi_minor;             /* TF_ABI_MINOR at build time */
	uint32_t struct_size;           /* sizeof the whole descriptor */
	tf_plugin_kind kind;
	const char *name;               /* unique per kind: "exl3", "kda", ... */
	const char *version;            /* the plugin's own version string */
	const char *description;        /* one line for `tfrun --plugins` */
	int (*probe)(const struct tf_host *host, const char **reason);
} tf_plugin_header;

/* Fill a header in a designated initialiser. */
#define TF_PLUGIN_HEADER(type, kind_, name_, version_, desc_, probe_) \
	{ .abi_major = TF_ABI_MAJOR, .abi_minor = TF_ABI_MINOR,         \
	  .struct_size = sizeof(type), .kind = (kind_), .name = (name_),  \
	  .version = (version_), .description = (desc_), .probe = (probe_) }

/*
 * An INI key a plugin reads (since ABI 1.4).  A descriptor lists its keys
 * in its `keys` slot, ended by an entry whose section is NULL.  The core
 * refuses a key that collides with one of its own or another plugin's,
 * checks the INI's value against the declared type and range, documents
 * the key (`tfrun --plugins --keys`) and serves it through the typed reads
 * of tf_host, which return `def` when the INI leaves it unset.  A key no
 * one declares stays an error in the INI.
 */
typedef enum tf_key_type {
	TF_KEY_INT = 1,                 /* decimal, within [min, max] */
	TF_KEY_SIZE,                    /* bytes, optional K/M/G/T suffix */
	TF_KEY_BOOL,                    /* true/false, yes/no, on/off, 1/0 */
	TF_KEY_ENUM,                    /* one of `choices` */
	TF_KEY_STRING,                  /* any text (read with conf_get) */
	TF_KEY_FLOAT,                   /* since ABI 1.12: a number within [min, max] */
} tf_key_type;

typedef struct tf_plugin_key {
	const char *section;            /* "[toy]" is "toy"; NULL ends a list */
	const char *name;
	tf_key_type type;
	int64_t min, max;               /* TF_KEY_INT, TF_KEY_FLOAT */
	const char *choices;            /* TF_KEY_ENUM: "mean|sum" */
	const char *def;                /* the default as an INI value; NULL: none */
	const char *help;               /* one line: what it does */
} tf_plugin_key;

typedef enum tf_log_level {
	TF_LOG_ERROR = 0, TF_LOG_WARN, TF_LOG_INFO, TF_LOG_DEBUG
} tf_log_level;

struct tf_backend;
struct tf_lin;
struct tf_lin_part;
struct tf_router;

/*
 * Services the host gives every plugin.  Pointers stay valid until the
 * plugin's fini.  Appended-only, like descriptors.
 */
typedef struct tf_host {
	uint32_t struct_size;
	void *ctx;                      /* the host's own state: pass it back */

	/* Logging; `who` is the plugin name. */
	void (*log)(const struct tf_host *h, tf_log_level lvl, const char *who,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

	/* Record the detail of a failure (naming file, key or tensor) and
	 * return `status`, so plugins write `return h->error(h, TF_ERR_FORMAT,
	 * "%s: shape ...", name);`. */
	int (*error)(const struct tf_host *h, int status, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));

	/* INI access: the value of [section] key as written, or NULL when
	 * unset.  Keys a plugin reads must be declared in docs/ini.md; the
	 * typed reads (conf_int ... below) spare a plugin parsing them. */
	const char *(*conf_get)(const struct tf_host *h, const char *section,
				const char *key);

	/* Weights: look up a tensor by full checkpoint name.  Returns
	 * TF_ERR_NOT_FOUND (without recording an error) when absent. */
	int (*weight_get)(const struct tf_host *h, const char *name,
			  tf_tensor *out);

	/* The checkpoint's config.json, parsed, with the derived schedule. */
	const tf_model_config *model;

	/* The selected backend and its instance (memory, threads, ops). */
	const struct tf_backend *backend;
	void *backend_ctx;

	/* Open the linear layer stored under `prefix` (e.g.
	 * "model.layers.3.attention.q_proj") as `in` x `out` logical features,
	 * through whichever quant plugin recognises its tensors (tf/quant.h).
	 * Release with lin_close. */
	int (*lin_open)(const struct tf_host *h, const char *prefix,
			int64_t in, int64_t out,
			struct tf_lin *lin);
	void (*lin_close)(const struct tf_host *h, struct tf_lin *lin);

	/* Tensor-parallel position of this process. */
	int tp_rank, tp_size;

	/* Since ABI 1.2, optional.  The plugin has copied the named tensor
	 * (a repacked or converted layout) and will not read it again: the
	 * host may drop its pages from memory.  The view stays valid (pages
	 * read again are reloaded), so a late read is slow, never wrong. */
	void (*weight_release)(const struct tf_host *h, const char *name);

	/* Since ABI 1.3, optional.  Append " (<note>)" to the failure recorded
	 * last and return `status`: a caller adds what it knows to a callee's
	 * message, such as the config.json keys behind a linear's shape. */
	int (*error_note)(const struct tf_host *h, int status, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));

	/* Since ABI 1.4, optional.  Open the router of MoE layer `layer`,
	 * stored under `prefix` ("model.layers.<layer>.mlp"), through the
	 * router plugin the INI pins for the layer or the best-scoring one
	 * (tf/router.h).  Release with router_close. */
	int (*router_open)(const struct tf_host *h, int layer, const char *prefix,
			   struct tf_router *r);
	/* Route n tokens through r (tf_plugin_router.route) and check the
	 * answer: a faulty one fails naming the router plugin. */
	int (*router_route)(const struct tf_host *h, const struct tf_router *r,
			    const float *x, int64_t n, int32_t *idx, float *w);
	void (*router_close)(const struct tf_host *h, struct tf_router *r);

	/* Since ABI 1.4, optional.  Typed INI reads, beside conf_get's text:
	 * the value of [section] key as docs/ini.md types it, already checked
	 * against its type and range when the INI was loaded, or `def` when
	 * unset.  Reading a key as a type the INI schema does not give it
	 * fails, naming the key.  conf_enum gives the value's index among the
	 * key's choices ("error|warn|info|debug": "info" is 2).  A plugin's
	 * declared key (tf_plugin_key) reads the same way; its declared
	 * default, when it has one, comes before `def`. */
	int (*conf_int)(const struct tf_host *h, const char *section, const char *key,
			int64_t def, int64_t *out);
	int (*conf_size)(const struct tf_host *h, const char *section, const char *key,
			 uint64_t def, uint64_t *out);
	int (*conf_bool)(const struct tf_host *h, const char *section, const char *key,
			 bool def, bool *out);
	int (*conf_enum)(const struct tf_host *h, const char *section, const char *key,
			 int def, int *out);

	/* Since ABI 1.7, optional.  Tensor parallelism ([tp] size > 1): open
	 * this rank's part of the linear under `prefix` (tf_lin_part in
	 * tf/quant.h: a range of its output or of its input features), as
	 * lin_open opens the whole.  Fails naming the tensor when the quant
	 * plugin that recognises it cannot open parts, or not at that cut.
	 * Layer plugins shard with it: tp_rank's heads or intermediate
	 * features, the runtime summing the ranks' block outputs. */
	int (*lin_open_part)(const struct tf_host *h, const char *prefix, int64_t in,
			     int64_t out, const struct tf_lin_part *part, struct tf_lin *lin);

	/* Since ABI 1.12, optional.  A number key, read as conf_int reads. */
	int (*conf_float)(const struct tf_host *h, const char *section, const char *key,
			  double def, double *out);
} tf_host;

/* Read a host slot only when the host is new enough to have it. */
#define TF_HAS_SLOT(ptr, type, member) \
	((ptr)->struct_size >= offsetof(type, member) + sizeof((ptr)->member))

#ifdef __cplusplus
}
#endif
#endif /* TF_PLUGIN_H */
