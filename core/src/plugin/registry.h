/*
 * registry.h - finding, checking, probing and choosing plugins.
 *
 * The registry dlopen()s every .so on the plugin path and asks each for
 * its descriptors through the versioned entry symbols of tf/plugin.h.
 * Every descriptor becomes a candidate.  A candidate is usable when its
 * descriptor passed the ABI checks (major version, struct size, kind,
 * required slots) and its probe() returned a positive score; otherwise it
 * stays in the list with the reason it was rejected, which is what
 * `tfrun --plugins` prints.
 *
 * The search path, in order (the first plugin of a kind and name wins, so
 * a developer's folder shadows the build's):
 *   [plugins] path in the INI, ':'-separated, relative to the INI's folder;
 *   $TF_PLUGIN_PATH, ':'-separated;
 *   the build's own plugin folder (TF_BUILD_PLUGIN_DIR).
 * A path entry may name a folder (each *.so in it) or one .so; a file met
 * again (the same canonical path) is loaded once.
 *
 * A .so stays loaded until tf_registry_free(), which the owner calls only
 * after every instance of its plugins has been finalised.
 */
#ifndef TF_REGISTRY_H
#define TF_REGISTRY_H

#include <stdbool.h>
#include <stdio.h>

#include "conf/conf.h"
#include "tf/plugin.h"

typedef struct tf_candidate {
	tf_plugin_kind kind;            /* 0 for a .so that failed to load */
	const char *file;               /* the .so it came from */
	unsigned index;                 /* its index in the entry function */
	char name[64];                  /* descriptor name, or "<file>#<index>" */
	/* The descriptor (the kind's whole struct), NULL when it failed the
	 * checks that make it safe to read. */
	const tf_plugin_header *desc;
	int status;                     /* TF_OK when usable */
	char why[320];                  /* why rejected, "" when usable */
	int score;                      /* probe score, > 0 when usable */
	bool probed;
} tf_candidate;

typedef struct tf_registry tf_registry;

/* An empty registry; tf_registry_free unloads every .so it loaded. */
int tf_registry_init(tf_registry **out);
void tf_registry_free(tf_registry *r);

/* Load one .so: its failure (not found, not a shared object, not a
 * TensorFold plugin, ABI mismatch) is returned.  Descriptors that fail
 * their checks are kept as rejected candidates. */
int tf_registry_load(tf_registry *r, const char *file);

/* Add a folder (every *.so in it; a .so that fails becomes a rejected
 * candidate) or a single .so (as tf_registry_load).  `origin` names where
 * the entry came from for errors ("TF_PLUGIN_PATH"). */
int tf_registry_add(tf_registry *r, const char *path, const char *origin);

/* Add the whole search path above: the INI's [plugins] path (may be NULL
 * conf), $TF_PLUGIN_PATH and the build folder; then apply the INI's
 * [plugins] exclude. */
int tf_registry_scan(tf_registry *r, const tf_conf *conf);

/* Reject every candidate whose name is in `names` (','-separated). */
void tf_registry_exclude(tf_registry *r, const char *names);

/* Probe every candidate of `kind` not probed yet. */
void tf_registry_probe(tf_registry *r, tf_plugin_kind kind, const tf_host *h);

/* The usable candidate of `kind` with the highest score (the earliest on
 * ties), among those serving `layer_type` (attention and ffn; NULL
 * otherwise), or the one named `pin` when pin is not NULL.  Fails with
 * TF_ERR_NOT_FOUND when there is none, or with the pinned candidate's own
 * rejection. */
int tf_registry_select(const tf_registry *r, tf_plugin_kind kind,
		       const char *layer_type, const char *pin,
		       const tf_candidate **out);

/* tf_registry_select with the pin the INI sets for it: [plugins]
 * layer.<layer>.<kind> when layer >= 0 and set (attention, ffn, router);
 * else <kind>.<layer_type> for attention and ffn, <kind> for the others
 * but the transport, which [tp] transport pins.  A failure names the INI
 * key that pinned it. */
int tf_registry_choose(const tf_registry *r, const tf_conf *conf,
		       tf_plugin_kind kind, const char *layer_type, int layer,
		       const tf_candidate **out);

/* Every candidate, usable or rejected, for listing. */
size_t tf_registry_count(const tf_registry *r);
const tf_candidate *tf_registry_at(const tf_registry *r, size_t i);

/* "backend", "quant", ... ("-" for anything else). */
const char *tf_registry_kind_name(tf_plugin_kind kind);

/* The INI keys a candidate declares (its `keys` slot), or NULL. */
const tf_plugin_key *tf_registry_keys(const tf_candidate *c);

/* The keys every sound candidate declares join conf's schema (a conf
 * from tf_conf_load_open); then a key nobody declares is refused.  conf
 * points into the plugins: free it before r. */
int tf_registry_declare_keys(const tf_registry *r, tf_conf *conf);

/* `tfrun --plugins --keys`: every key the usable and probed-out candidates
 * declare, as the Markdown table docs/ini.md's plugin keys section holds;
 * json: an array of {kind, plugin, section, key, type, default (null when
 * none), help}, with range [min, max] for an integer, choices for an enum. */
int tf_registry_print_keys(const tf_registry *r, FILE *f, bool json);

/* The listing of `tfrun --plugins`: one line per candidate, or JSON. */
int tf_registry_print(const tf_registry *r, FILE *f, bool json);

#endif /* TF_REGISTRY_H */
