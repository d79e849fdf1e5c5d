/*
 * conf.h - the INI model description: parse, validate, override, read.
 *
 * Every key the runtime reads is declared in the schema in conf.c and
 * documented in docs/ini.md; a plugin declares its own (tf_plugin_key).  Loading validates the whole file
 * against it, so an unknown section or key, a bad value, a syntax error or
 * a line too long for libinih fails at load time with "file:line: [section]
 * key: why".  Overrides ("section.key=value", from `tfrun --set`) pass the
 * same checks and replace the file's value.
 *
 * Values are kept as the strings written; the typed getters convert them
 * with the parser that validated them, so a getter fails only on a key the
 * schema types differently (a bug) and returns the default when unset.
 */
#ifndef TF_CONF_H
#define TF_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/plugin.h"

typedef struct tf_conf tf_conf;

/* An empty description (every key unset); relative paths resolve against
 * `dir` (NULL: the working directory).  Open, as tf_conf_load_open. */
int tf_conf_init(const char *dir, tf_conf **out);
/* Read and validate an INI file; relative paths resolve against its folder. */
int tf_conf_load(const char *path, tf_conf **out);
/* The same, except that a key neither the core nor a plugin declared so
 * far is kept pending instead of refused, here and in tf_conf_set: the
 * runtime loads the plugins, declares their keys (tf_conf_declare), then
 * calls tf_conf_check_pending. */
int tf_conf_load_open(const char *path, tf_conf **out);
/* The same from memory; `name` stands for the file in errors. */
int tf_conf_parse(const char *text, size_t len, const char *name, tf_conf **out);
void tf_conf_free(tf_conf *c);

/* Apply "section.key=value" (the key may itself hold dots:
 * "plugins.layer.7.attention=kda"); validated like a file line. */
int tf_conf_set(tf_conf *c, const char *assignment);

/* Check an assignment as tf_conf_set would, without storing it; the error
 * names "[section] key" and the caller says where it came from.  A key the
 * core does not know passes: a plugin may declare it. */
int tf_conf_check_set(const char *assignment);

/* Declare a plugin's key (tf/plugin.h), owned by the plugin `owner` (a
 * string that outlives c).  Fails naming the plugin and the key when the
 * key collides with a core key or another plugin's, or is malformed, or
 * its default does not pass its own type.  Declaring the same
 * tf_plugin_key twice (two descriptors sharing a list) is a no-op. */
int tf_conf_declare(tf_conf *c, const char *owner, const tf_plugin_key *key);

/* Validate every pending key against the declarations: one nobody
 * declared fails as unknown, naming its line (or --set). */
int tf_conf_check_pending(tf_conf *c);

/* The value as written, or NULL when unset. */
const char *tf_conf_get(const tf_conf *c, const char *section, const char *key);

/* Typed reads: `def` when unset. */
int tf_conf_get_int(const tf_conf *c, const char *section, const char *key,
		    int64_t def, int64_t *out);
int tf_conf_get_float(const tf_conf *c, const char *section, const char *key,
		      double def, double *out);
int tf_conf_get_bool(const tf_conf *c, const char *section, const char *key,
		     bool def, bool *out);
/* Bytes, with an optional K, M, G or T suffix (powers of 1024). */
int tf_conf_get_size(const tf_conf *c, const char *section, const char *key,
		     uint64_t def, uint64_t *out);
/* The index of the value among the key's '|'-separated choices. */
int tf_conf_get_enum(const tf_conf *c, const char *section, const char *key,
		     int def, int *out);
/* A path resolved against the INI file's folder into buf; *out is NULL
 * when unset, else buf. */
int tf_conf_get_path(const tf_conf *c, const char *section, const char *key,
		     char *buf, size_t size, const char **out);
/* Resolve `path` (from the value of [section] key) against the INI folder. */
int tf_conf_resolve(const tf_conf *c, const char *path, char *buf, size_t size);

/* Record a failure about [section] key, naming where its value came from
 * ("model.ini:12: [plugins] layer.40.ffn: ..."); returns status. */
int tf_conf_fail(const tf_conf *c, int status, const char *section,
		 const char *key, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* The keys that are set, in the order first set. */
size_t tf_conf_count(const tf_conf *c);
void tf_conf_at(const tf_conf *c, size_t i, const char **section,
		const char **key, const char **value);

/* The schema: the i-th declared key ("layer.#.ffn": # stands for a layer
 * index), or NULL past the end. */
const char *tf_conf_schema_at(size_t i, const char **section);

#endif /* TF_CONF_H */
