/*
 * tf/conf.h - the INI model description, read.
 *
 * Every key the runtime reads is documented in docs/ini.md; a plugin
 * declares its own.  Loading validates the file, so an unknown section or
 * key, a bad value, a syntax error or a line too long fails with
 * "file:line: [section] key: why".  Overrides ("section.key=value", from
 * `tfrun --set`) pass the same checks and replace the file's value.
 *
 * A face reads the keys that are its own ([sampling], [chat], [server])
 * from the description an engine opened (tf_engine_conf in tf/engine.h), or
 * opens one itself to read them before, or without, an engine:
 *
 *     tf_conf *c;
 *     if (tf_conf_open("conf/ling-nano.ini", NULL, 0, &c) != TF_OK)
 *         die(tf_diag_msg());
 *     int64_t port;
 *     tf_conf_get_int(c, "server", "port", 8080, &port);
 *     tf_conf_free(c);
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

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_conf tf_conf;

/*
 * Read an INI (NULL: none, every key unset) with the overrides over it.  A
 * key the core does not know is kept unchecked, for a plugin may declare
 * it: tf_engine_open checks it once the plugins are loaded.
 */
int tf_conf_open(const char *ini_path, const char *const *overrides, int n_overrides,
		 tf_conf **out);
/* The same, then scan the plugin path as tf_engine_open does, so that a key
 * no plugin declares either is refused here; the plugins stay loaded until
 * tf_conf_free. */
int tf_conf_open_checked(const char *ini_path, const char *const *overrides,
			 int n_overrides, tf_conf **out);
/* Read and validate an INI file that may name core keys only; relative
 * paths resolve against its folder. */
int tf_conf_load(const char *path, tf_conf **out);
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

/* The keys that are set, in the order first set. */
size_t tf_conf_count(const tf_conf *c);
void tf_conf_at(const tf_conf *c, size_t i, const char **section,
		const char **key, const char **value);

/* Record a failure about [section] key, naming where its value came from
 * ("model.ini:12: [plugins] layer.40.ffn: ..."); returns status. */
int tf_conf_fail(const tf_conf *c, int status, const char *section,
		 const char *key, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#ifdef __cplusplus
}
#endif
#endif /* TF_CONF_H */
