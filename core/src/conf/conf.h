/*
 * conf.h - the INI model description inside the core: the schema, and the
 * keys plugins declare.  Reading it is tf/conf.h.
 *
 * Every key the runtime reads is declared in the schema in conf.c; a
 * plugin declares its own (tf_plugin_key).  Loading validates the whole
 * file against it.
 */
#ifndef TF_CONF_INT_H
#define TF_CONF_INT_H

#include "tf/conf.h"
#include "tf/plugin.h"

/* An empty description (every key unset); relative paths resolve against
 * `dir` (NULL: the working directory).  Open, as tf_conf_load_open. */
int tf_conf_init(const char *dir, tf_conf **out);
/* tf_conf_load, except that a key neither the core nor a plugin declared
 * so far is kept pending instead of refused, here and in tf_conf_set: the
 * runtime loads the plugins, declares their keys (tf_conf_declare), then
 * calls tf_conf_check_pending. */
int tf_conf_load_open(const char *path, tf_conf **out);

/* Declare a plugin's key (tf/plugin.h), owned by the plugin `owner` (a
 * string that outlives c).  Fails naming the plugin and the key when the
 * key collides with a core key or another plugin's, or is malformed, or
 * its default does not pass its own type.  Declaring the same
 * tf_plugin_key twice (two descriptors sharing a list) is a no-op. */
int tf_conf_declare(tf_conf *c, const char *owner, const tf_plugin_key *key);

/* Validate every pending key against the declarations: one nobody
 * declared fails as unknown, naming its line (or --set). */
int tf_conf_check_pending(tf_conf *c);

/* tf_conf_free(c) frees p with drop after c's own keys: the plugins its
 * declared keys point into (tf_conf_open_checked). */
void tf_conf_hold(tf_conf *c, void *p, void (*drop)(void *));

/* The schema: the i-th declared key ("layer.#.ffn": # stands for a layer
 * index), or NULL past the end. */
const char *tf_conf_schema_at(size_t i, const char **section);

#endif /* TF_CONF_INT_H */
