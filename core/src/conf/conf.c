/* conf.c - the INI model description; see conf.h and docs/ini.md. */
#include "conf/conf.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"
#include "tf/error.h"
#include "tf/plugin.h"
#include "tf/text.h"

/* An INI description is a page of text; refuse anything far bigger. */
#define CONF_MAX_BYTES (1u << 20)

enum conf_type {
	T_STR,          /* any text */
	T_PATH,         /* one path, relative to the INI folder */
	T_PATHS,        /* ':'-separated paths */
	T_NAME,         /* a plugin or device name */
	T_NAMES,        /* ','-separated names */
	T_INT,
	T_FLOAT,
	T_SIZE,         /* bytes, K/M/G/T suffix */
	T_BOOL,
	T_ENUM,         /* one of `choices`, '|'-separated */
};

struct conf_key {
	const char *section;
	const char *key;        /* '#' matches a decimal layer index */
	enum conf_type type;
	double min, max;        /* T_INT, T_FLOAT */
	const char *choices;    /* T_ENUM */
	/* A plugin's key (tf_conf_declare): its declaration and owner. */
	const tf_plugin_key *decl;
	const char *owner;
};

/* Every key anyone reads.  Keep docs/ini.md in step: a test checks that it
 * mentions each of these. */
#define KEY(s, k, t) { .section = s, .key = k, .type = t }
#define RANGE(s, k, t, lo, hi) { .section = s, .key = k, .type = t, .min = lo, .max = hi }
#define CHOICE(s, k, c) { .section = s, .key = k, .type = T_ENUM, .choices = c }

static const struct conf_key conf_schema[] = {
	KEY("model", "path", T_PATH),
	KEY("model", "layer.#.attention", T_NAME),
	KEY("model", "layer.#.ffn", T_NAME),

	RANGE("runtime", "context", T_INT, 1, 1 << 30),
	RANGE("runtime", "threads", T_INT, 0, 4096),
	KEY("runtime", "memory_limit", T_SIZE),
	RANGE("runtime", "prefill_chunk", T_INT, 1, 1 << 20),
	RANGE("runtime", "sequences", T_INT, 1, 4096),
	CHOICE("runtime", "kv_cache", "bf16|f32"),
	KEY("runtime", "cuda_graph", T_BOOL),
	CHOICE("runtime", "unified_memory", "auto|on|off"),
	CHOICE("runtime", "log_level", "error|warn|info|debug"),

	KEY("plugins", "path", T_PATHS),
	KEY("plugins", "backend", T_NAME),
	KEY("plugins", "quant", T_NAME),
	KEY("plugins", "exclude", T_NAMES),
	KEY("plugins", "attention.*", T_NAME),
	KEY("plugins", "ffn.*", T_NAME),
	KEY("plugins", "layer.#.attention", T_NAME),
	KEY("plugins", "layer.#.ffn", T_NAME),
	KEY("plugins", "router", T_NAME),
	KEY("plugins", "layer.#.router", T_NAME),
	KEY("plugins", "drafter", T_NAME),

	RANGE("sampling", "temperature", T_FLOAT, 0, 100),
	RANGE("sampling", "top_k", T_INT, 0, 1 << 24),
	RANGE("sampling", "top_p", T_FLOAT, 0, 1),
	RANGE("sampling", "min_p", T_FLOAT, 0, 1),
	RANGE("sampling", "repeat_penalty", T_FLOAT, 0, 100),
	RANGE("sampling", "presence_penalty", T_FLOAT, -100, 100),
	RANGE("sampling", "frequency_penalty", T_FLOAT, -100, 100),
	RANGE("sampling", "repeat_last_n", T_INT, 0, 1 << 30),
	RANGE("sampling", "seed", T_INT, -1, 9007199254740991.0),
	RANGE("sampling", "max_tokens", T_INT, 1, 1 << 30),

	CHOICE("chat", "template", "auto|jinja|ling3|raw"),
	KEY("chat", "system", T_STR),
	KEY("chat", "think", T_BOOL),

	CHOICE("draft", "accept", "exact|standard"),
	/* The mtp drafter declares the rest of [mtp] (plugins/mtp). */
	KEY("mtp", "enabled", T_BOOL),
	CHOICE("mtp", "accept", "exact|standard"),      /* moved to [draft]: refused */

	KEY("server", "host", T_STR),
	RANGE("server", "port", T_INT, 1, 65535),
	KEY("server", "api_key", T_STR),
	RANGE("server", "slots", T_INT, 1, 4096),
	RANGE("server", "queue", T_INT, 0, 1 << 20),
	KEY("server", "max_body", T_SIZE),
	RANGE("server", "max_tokens", T_INT, 1, 1 << 30),
	RANGE("server", "max_messages", T_INT, 1, 1 << 20),
	RANGE("server", "max_prompt", T_INT, 1, 1 << 30),
	RANGE("server", "grace", T_FLOAT, 0, 3600),
	RANGE("server", "prefix_cache", T_INT, 0, 4096),
	RANGE("server", "max_n", T_INT, 1, 4096),
	KEY("server", "cors", T_STR),

	RANGE("tp", "size", T_INT, 1, 64),
	RANGE("tp", "rank", T_INT, 0, 63),
	KEY("tp", "peers", T_STR),
	KEY("tp", "transport", T_NAME),
	KEY("tp", "rdma_device", T_NAME),
	CHOICE("tp", "moe", "split|experts"),
	RANGE("tp", "timeout", T_FLOAT, 0.01, 3600),
};

#define N_SCHEMA (sizeof(conf_schema) / sizeof(conf_schema[0]))

struct conf_entry {
	char *section, *key, *value;
	int line;               /* 0: set by an override */
	bool pending;           /* no key known yet: tf_conf_check_pending */
};

struct tf_conf {
	char *name;             /* the file, for errors */
	char *dir;              /* relative paths resolve here; NULL: cwd */
	struct conf_entry *e;
	size_t n, cap;
	bool open;              /* unknown keys wait for plugins' declarations */
	struct conf_key *decl;  /* the keys plugins declared */
	size_t n_decl, cap_decl;
	void *held;             /* tf_conf_hold: freed last */
	void (*drop)(void *);
};

/* ---- the schema ---- */

/* A layer type's name: what '*' stands for in a key. */
static bool type_char(char c)
{
	return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '_' || c == '-';
}

/* "layer.#.ffn" matches "layer.12.ffn": '#' stands for 1-6 digits; '*' (last
 * in a pattern) for a layer type, 1-31 of [a-z0-9_-], so "ffn.*" matches
 * "ffn.moe" and the type a plugin adds. */
static bool key_matches(const char *pattern, const char *key)
{
	for (; *pattern; pattern++) {
		if (*pattern == '*') {
			size_t n = 0;
			while (type_char(key[n]))
				n++;
			return n >= 1 && n <= 31 && key[n] == 0;
		}
		if (*pattern != '#') {
			if (*key++ != *pattern)
				return false;
			continue;
		}
		int n = 0;
		while (isdigit((unsigned char)*key) && n < 7) {
			key++;
			n++;
		}
		if (n == 0 || n > 6)
			return false;
	}
	return *key == 0;
}

static const struct conf_key *schema_find(const char *section, const char *key)
{
	for (size_t i = 0; i < N_SCHEMA; i++)
		if (!strcmp(conf_schema[i].section, section) &&
		    key_matches(conf_schema[i].key, key))
			return &conf_schema[i];
	return NULL;
}

/* The core's key, else one a plugin declared in c (c may be NULL). */
static const struct conf_key *key_find(const tf_conf *c, const char *section,
				       const char *key)
{
	const struct conf_key *k = schema_find(section, key);
	for (size_t i = 0; !k && c && i < c->n_decl; i++)
		if (!strcmp(c->decl[i].section, section) && !strcmp(c->decl[i].key, key))
			k = &c->decl[i];
	return k;
}

static bool section_known(const tf_conf *c, const char *section)
{
	for (size_t i = 0; i < N_SCHEMA; i++)
		if (!strcmp(conf_schema[i].section, section))
			return true;
	for (size_t i = 0; c && i < c->n_decl; i++)
		if (!strcmp(c->decl[i].section, section))
			return true;
	return false;
}

const char *tf_conf_schema_at(size_t i, const char **section)
{
	if (i >= N_SCHEMA)
		return NULL;
	*section = conf_schema[i].section;
	return conf_schema[i].key;
}

/* ---- value parsers: each records "[section] key: why" on failure ---- */

static int bad_value(const struct conf_key *k, const char *value, const char *why)
{
	return tf_diag_set(TF_ERR_INVALID, "[%s] %s: '%s' %s", k->section,
			   k->key, value, why);
}

static int parse_int(const struct conf_key *k, const char *v, int64_t *out)
{
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (end == v || *end || errno == ERANGE || isspace((unsigned char)*v))
		return bad_value(k, v, "is not an integer");
	if ((double)x < k->min || (double)x > k->max)
		return tf_diag_set(TF_ERR_INVALID, "[%s] %s: %lld is outside %.0f..%.0f",
				   k->section, k->key, x, k->min, k->max);
	*out = x;
	return TF_OK;
}

static int parse_float(const struct conf_key *k, const char *v, double *out)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v || *end || !isfinite(x) || isspace((unsigned char)*v))
		return bad_value(k, v, "is not a number");
	if (x < k->min || x > k->max)
		return tf_diag_set(TF_ERR_INVALID, "[%s] %s: %g is outside %g..%g",
				   k->section, k->key, x, k->min, k->max);
	*out = x;
	return TF_OK;
}

static int parse_size(const struct conf_key *k, const char *v, uint64_t *out)
{
	static const char units[] = "KMGT";
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)*v))
		return bad_value(k, v, "is not a size (bytes, or with K, M, G, T)");
	unsigned long long x = strtoull(v, &end, 10);
	const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
	if (errno == ERANGE || (*end && (!u || end[1])))
		return bad_value(k, v, "is not a size (bytes, or with K, M, G, T)");
	int shift = u ? 10 * (int)(u - units + 1) : 0;
	if (shift && x > (UINT64_MAX >> shift))
		return bad_value(k, v, "is too large");
	*out = (uint64_t)x << shift;
	return TF_OK;
}

static int parse_bool(const struct conf_key *k, const char *v, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return TF_OK;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return TF_OK;
		}
	}
	return bad_value(k, v, "is not true or false");
}

static bool is_name(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.+-", s[i]))
			return false;
	return true;
}

static bool in_choices(const char *choices, const char *v)
{
	size_t n = strlen(v);
	for (const char *c = choices; c;) {
		const char *bar = strchr(c, '|');
		size_t len = bar ? (size_t)(bar - c) : strlen(c);
		if (len == n && !strncmp(c, v, n))
			return true;
		c = bar ? bar + 1 : NULL;
	}
	return false;
}

/* The index of v among the '|'-separated choices of k. */
static int parse_enum(const struct conf_key *k, const char *v, int *out)
{
	size_t n = strlen(v);
	int i = 0;
	for (const char *c = k->choices; c; i++) {
		const char *bar = strchr(c, '|');
		size_t len = bar ? (size_t)(bar - c) : strlen(c);
		if (len == n && !strncmp(c, v, n)) {
			*out = i;
			return TF_OK;
		}
		c = bar ? bar + 1 : NULL;
	}
	return bad_value(k, v, "is not one of its choices");
}

/* Every item of a `sep`-separated list is non-empty (after trimming
 * blanks) and, for names, a name. */
static int check_list(const struct conf_key *k, const char *v, char sep, bool names)
{
	for (const char *p = v;;) {
		const char *q = strchr(p, sep);
		size_t len = q ? (size_t)(q - p) : strlen(p);
		while (len && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		while (len && isspace((unsigned char)p[len - 1]))
			len--;
		if (len == 0)
			return bad_value(k, v, "has an empty item");
		if (names && !is_name(p, len))
			return bad_value(k, v, "has an item that is not a name "
					 "(letters, digits, '_.+-')");
		if (!q)
			return TF_OK;
		p = q + 1;
	}
}

static int check_value(const struct conf_key *k, const char *v)
{
	union { int64_t i; double f; uint64_t u; bool b; } x;
	switch (k->type) {
	case T_STR:
		return TF_OK;
	case T_PATH:
		return *v ? TF_OK : bad_value(k, v, "is empty");
	case T_PATHS:
		return check_list(k, v, ':', false);
	case T_NAME:
		return is_name(v, strlen(v)) ? TF_OK :
		       bad_value(k, v, "is not a name (letters, digits, '_.+-')");
	case T_NAMES:
		return check_list(k, v, ',', true);
	case T_INT:
		return parse_int(k, v, &x.i);
	case T_FLOAT:
		return parse_float(k, v, &x.f);
	case T_SIZE:
		return parse_size(k, v, &x.u);
	case T_BOOL:
		return parse_bool(k, v, &x.b);
	case T_ENUM:
		if (in_choices(k->choices, v))
			return TF_OK;
		return tf_diag_set(TF_ERR_INVALID, "[%s] %s: '%s' is not one of %s",
				   k->section, k->key, v, k->choices);
	}
	return tf_diag_set(TF_ERR_INTERNAL, "[%s] %s: bad schema type", k->section, k->key);
}

/* Check a value against its key.  A key nobody declares is an error,
 * unless `pending` is given (c is open): then *pending says it waits. */
static int conf_check(const tf_conf *c, const char *section, const char *key,
		      const char *value, bool *pending)
{
	const struct conf_key *k = key_find(c, section, key);
	if (pending)
		*pending = !k;
	if (k)
		return check_value(k, value);
	if (pending)
		return TF_OK;
	if (!section_known(c, section))
		return tf_diag_set(TF_ERR_INVALID, "unknown section [%s]", section);
	return tf_diag_set(TF_ERR_INVALID, "[%s] %s: unknown key", section, key);
}

/* ---- storage ---- */

static struct conf_entry *entry_find(const tf_conf *c, const char *section,
				     const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->e[i].section, section) && !strcmp(c->e[i].key, key))
			return &c->e[i];
	return NULL;
}

/* Store or replace; the value has been validated. */
static int entry_put(tf_conf *c, const char *section, const char *key,
		     const char *value, int line, bool pending)
{
	struct conf_entry *e = entry_find(c, section, key);
	char *v = strdup(value);
	if (!v)
		goto nomem;
	if (e) {
		free(e->value);
		e->value = v;
		e->line = line;
		e->pending = pending;
		return TF_OK;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 32;
		struct conf_entry *ne = realloc(c->e, cap * sizeof(*ne));
		if (!ne)
			goto nomem;
		c->e = ne;
		c->cap = cap;
	}
	e = &c->e[c->n];
	e->section = strdup(section);
	e->key = strdup(key);
	if (!e->section || !e->key) {
		free(e->section);
		free(e->key);
		goto nomem;
	}
	e->value = v;
	e->line = line;
	e->pending = pending;
	c->n++;
	return TF_OK;
nomem:
	free(v);
	return tf_diag_set(TF_ERR_NOMEM, "[%s] %s: out of memory", section, key);
}

int tf_conf_init(const char *dir, tf_conf **out)
{
	tf_conf *c = calloc(1, sizeof(*c));
	if (!c)
		return tf_diag_set(TF_ERR_NOMEM, "INI: out of memory");
	c->name = strdup("<none>");
	c->dir = dir ? strdup(dir) : NULL;
	c->open = true;
	if (!c->name || (dir && !c->dir)) {
		tf_conf_free(c);
		return tf_diag_set(TF_ERR_NOMEM, "INI: out of memory");
	}
	*out = c;
	return TF_OK;
}

void tf_conf_free(tf_conf *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->e[i].section);
		free(c->e[i].key);
		free(c->e[i].value);
	}
	free(c->e);
	free(c->decl);
	free(c->name);
	free(c->dir);
	if (c->drop)
		c->drop(c->held);
	free(c);
}

void tf_conf_hold(tf_conf *c, void *p, void (*drop)(void *))
{
	c->held = p;
	c->drop = drop;
}

/* ---- keys plugins declare ---- */

static const enum conf_type key_types[] = {
	[TF_KEY_INT] = T_INT, [TF_KEY_SIZE] = T_SIZE, [TF_KEY_BOOL] = T_BOOL,
	[TF_KEY_ENUM] = T_ENUM, [TF_KEY_STRING] = T_STR, [TF_KEY_FLOAT] = T_FLOAT,
};

/* A section or key name a plugin may declare: [a-z0-9_.-], 1..63. */
static bool decl_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) &&
		    !strchr("_.-", s[i]))
			return false;
	return n >= 1 && n <= 63;
}

int tf_conf_declare(tf_conf *c, const char *owner, const tf_plugin_key *pk)
{
	if (!decl_name(pk->section) || !decl_name(pk->name))
		return tf_diag_set(TF_ERR_INVALID, "plugin %s declares a key [%s] %s: section "
				   "and key must be 1-63 of [a-z0-9_.-]", owner,
				   pk->section ? pk->section : "(null)", pk->name ? pk->name : "(null)");
	const struct conf_key *k = key_find(c, pk->section, pk->name);
	if (k && k->decl == pk)
		return TF_OK;   /* the same declaration, from another descriptor */
	if (k && !k->owner)
		return tf_diag_set(TF_ERR_INVALID, "plugin %s declares [%s] %s, which is a "
				   "core key (docs/ini.md)", owner, pk->section, pk->name);
	if (k)
		return tf_diag_set(TF_ERR_INVALID, "plugins %s and %s both declare [%s] %s",
				   k->owner, owner, pk->section, pk->name);
	if (pk->type < TF_KEY_INT || pk->type > TF_KEY_FLOAT ||
	    (pk->type == TF_KEY_ENUM && (!pk->choices || !*pk->choices)) ||
	    ((pk->type == TF_KEY_INT || pk->type == TF_KEY_FLOAT) && pk->min > pk->max))
		return tf_diag_set(TF_ERR_INVALID, "plugin %s: [%s] %s: bad declaration (type %d, "
				   "an enum needs choices, a number min <= max)", owner,
				   pk->section, pk->name, (int)pk->type);
	if (c->n_decl == c->cap_decl) {
		size_t cap = c->cap_decl ? 2 * c->cap_decl : 16;
		struct conf_key *d = realloc(c->decl, cap * sizeof(*d));
		if (!d)
			return tf_diag_set(TF_ERR_NOMEM, "plugin %s: out of memory", owner);
		c->decl = d;
		c->cap_decl = cap;
	}
	struct conf_key *d = &c->decl[c->n_decl];
	*d = (struct conf_key){ .section = pk->section, .key = pk->name,
				.type = key_types[pk->type], .min = (double)pk->min,
				.max = (double)pk->max, .choices = pk->choices, .decl = pk,
				.owner = owner };
	int rc = pk->def ? check_value(d, pk->def) : TF_OK;
	if (rc)
		return tf_diag_prefix(rc, "plugin %s: its default", owner);
	c->n_decl++;
	return TF_OK;
}

int tf_conf_check_pending(tf_conf *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct conf_entry *e = &c->e[i];
		const struct conf_key *k = e->pending ? key_find(c, e->section, e->key) : NULL;
		if (!e->pending)
			continue;
		if (!k)
			return tf_conf_fail(c, TF_ERR_INVALID, e->section, e->key, "unknown key (no "
					    "core key, and no plugin on the plugin path declares it)");
		int rc = check_value(k, e->value);
		if (rc)
			return e->line ? tf_diag_prefix(rc, "%s:%d", c->name, e->line) :
					 tf_diag_prefix(rc, "--set");
		e->pending = false;
	}
	return TF_OK;
}

/* ---- parsing through libinih ----
 *
 * libinih reads through our line reader, which counts lines (the handler
 * gets no line number in Debian's build), refuses lines longer than
 * libinih's buffer (it would split them and parse the tail as a line of
 * its own), and stops the parse at the first failure.
 */

struct conf_parse {
	tf_conf *c;
	const char *cur, *end;
	int line;
	bool indented;          /* the current line starts with a blank */
	int status;             /* first failure, TF_OK so far */
};

static int parse_fail(struct conf_parse *p, int status)
{
	p->status = tf_diag_prefix(status, "%s:%d", p->c->name, p->line);
	return 0;
}

static char *conf_read_line(char *str, int num, void *stream)
{
	struct conf_parse *p = stream;
	if (p->status || p->cur >= p->end)
		return NULL;
	const char *nl = memchr(p->cur, '\n', (size_t)(p->end - p->cur));
	size_t len = nl ? (size_t)(nl - p->cur) + 1 : (size_t)(p->end - p->cur);
	size_t text = len - (nl != NULL);
	p->line++;
	/* libinih needs room for the text, "\r\n" and a terminator. */
	if (text + 3 > (size_t)num) {
		parse_fail(p, tf_diag_set(TF_ERR_FORMAT, "line is %zu bytes long; "
					  "the INI reader takes at most %d",
					  text, num - 3));
		return NULL;
	}
	if (memchr(p->cur, 0, len)) {
		parse_fail(p, tf_diag_set(TF_ERR_FORMAT, "line holds a NUL byte"));
		return NULL;
	}
	memcpy(str, p->cur, len);
	str[len] = 0;
	p->cur += len;
	p->indented = *str == ' ' || *str == '\t';

	/* libinih does not report section headers: check them here. */
	const char *s = str;
	if (p->line == 1 && !strncmp(s, "\xEF\xBB\xBF", 3))
		s += 3;
	s += strspn(s, " \t");
	const char *close = *s == '[' ? strchr(s, ']') : NULL;
	if (close) {
		char name[64];
		size_t n = (size_t)(close - s - 1);
		snprintf(name, sizeof(name), "%.*s", (int)(n < 63 ? n : 63), s + 1);
		/* an open description waits for plugins to declare sections */
		if (!p->c->open && !section_known(p->c, name)) {
			parse_fail(p, tf_diag_set(TF_ERR_INVALID, "unknown section [%s]",
						  name));
			return NULL;
		}
	}
	return str;
}

static int conf_handler(void *user, const char *section, const char *key,
			const char *value)
{
	struct conf_parse *p = user;
	if (p->indented)
		/* libinih would glue it onto the previous key's value. */
		return parse_fail(p, tf_diag_set(TF_ERR_FORMAT, "indented line: keys "
						 "start in the first column"));
	if (!*section)
		return parse_fail(p, tf_diag_set(TF_ERR_FORMAT, "'%s' comes before "
						 "any [section]", key));
	bool pending;
	int rc = conf_check(p->c, section, key, value, p->c->open ? &pending : NULL);
	if (rc)
		return parse_fail(p, rc);
	const struct conf_entry *e = entry_find(p->c, section, key);
	if (e)
		return parse_fail(p, tf_diag_set(TF_ERR_INVALID, "[%s] %s: set "
						 "twice (first on line %d)",
						 section, key, e->line));
	rc = entry_put(p->c, section, key, value, p->line, p->c->open && pending);
	return rc ? parse_fail(p, rc) : 1;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static int conf_parse(const char *text, size_t len, const char *name, bool open,
		      tf_conf **out)
{
	tf_conf *c = NULL;
	char *dir = dir_of(name);
	int rc = dir ? tf_conf_init(dir, &c) : tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", name);
	free(dir);
	if (rc)
		return rc;
	c->open = open;
	free(c->name);
	c->name = strdup(name);
	if (!c->name) {
		rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", name);
		goto fail;
	}

	struct conf_parse p = { .c = c, .cur = text, .end = text + len };
	int line = ini_parse_stream(conf_read_line, &p, conf_handler, &p);
	if (line > 0 && (!p.status || line < p.line)) {
		/* A line libinih could not parse; our handler never saw it. */
		rc = tf_diag_set(TF_ERR_FORMAT, "%s:%d: expected 'key = value' or "
				 "'[section]'", name, line);
		goto fail;
	}
	if (line < 0) {
		rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", name);
		goto fail;
	}
	if (p.status) {
		rc = p.status;
		goto fail;
	}
	*out = c;
	return TF_OK;
fail:
	tf_conf_free(c);
	return rc;
}

int tf_conf_parse(const char *text, size_t len, const char *name, tf_conf **out)
{
	return conf_parse(text, len, name, false, out);
}

static int conf_load(const char *path, bool open, tf_conf **out)
{
	char *text;
	size_t len;
	int rc = tf_text_read(path, CONF_MAX_BYTES, &text, &len);
	if (rc)
		return rc;
	rc = conf_parse(text, len, path, open, out);
	free(text);
	return rc;
}

int tf_conf_load(const char *path, tf_conf **out)
{
	return conf_load(path, false, out);
}

int tf_conf_load_open(const char *path, tf_conf **out)
{
	return conf_load(path, true, out);
}

int tf_conf_open(const char *ini_path, const char *const *overrides, int n_overrides,
		 tf_conf **out)
{
	*out = NULL;
	int rc = ini_path ? tf_conf_load_open(ini_path, out) : tf_conf_init(NULL, out);
	for (int i = 0; !rc && i < n_overrides; i++)
		rc = tf_conf_set(*out, overrides[i]);
	if (rc && *out) {
		tf_conf_free(*out);
		*out = NULL;
	}
	return rc;
}

/* "section.key=value" split in place of the caller's buffers. */
static int split_assignment(const char *a, char section[64], char key[128],
			    const char **value)
{
	const char *dot = strchr(a, '.'), *eq = strchr(a, '=');
	if (!dot || !eq || dot > eq || dot == a || eq == dot + 1)
		return tf_diag_set(TF_ERR_INVALID, "'%s': expected section.key=value", a);
	size_t ns = (size_t)(dot - a), nk = (size_t)(eq - dot - 1);
	if (ns >= 64 || nk >= 128)
		return tf_diag_set(TF_ERR_INVALID, "'%s': name too long", a);
	memcpy(section, a, ns);
	section[ns] = 0;
	memcpy(key, dot + 1, nk);
	key[nk] = 0;
	*value = eq + 1;
	return TF_OK;
}

int tf_conf_check_set(const char *assignment)
{
	char section[64], key[128];
	const char *value = NULL;       /* set on success; quiets -O3's flow analysis */
	bool pending;
	int rc = split_assignment(assignment, section, key, &value);
	return rc ? rc : conf_check(NULL, section, key, value, &pending);
}

int tf_conf_set(tf_conf *c, const char *assignment)
{
	char section[64], key[128];
	const char *value = NULL;       /* set on success; quiets -O3's flow analysis */
	bool pending = false;
	int rc = split_assignment(assignment, section, key, &value);
	if (!rc)
		rc = conf_check(c, section, key, value, c->open ? &pending : NULL);
	if (rc)
		return tf_diag_prefix(rc, "--set");
	return entry_put(c, section, key, value, 0, pending);
}

/* ---- reading ---- */

const char *tf_conf_get(const tf_conf *c, const char *section, const char *key)
{
	const struct conf_entry *e = entry_find(c, section, key);
	return e ? e->value : NULL;
}

int tf_conf_fail(const tf_conf *c, int status, const char *section,
		 const char *key, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const struct conf_entry *e = entry_find(c, section, key);
	if (e && e->line)
		return tf_diag_set(status, "%s:%d: [%s] %s: %s", c->name, e->line,
				   section, key, msg);
	return tf_diag_set(status, "%s[%s] %s: %s", e ? "--set " : "", section,
			   key, msg);
}

/* The stored value of a key read as `type`, or NULL when unset. */
static int typed_value(const tf_conf *c, const char *section, const char *key,
		       enum conf_type type, const struct conf_key **k,
		       const char **v)
{
	*k = key_find(c, section, key);
	if (!*k || (*k)->type != type)
		return tf_diag_set(TF_ERR_INTERNAL, "[%s] %s: read as a type the "
				   "schema does not give it", section, key);
	*v = tf_conf_get(c, section, key);
	if (!*v && (*k)->decl)
		*v = (*k)->decl->def;
	return TF_OK;
}

/* A stored value failing its own parser means the entry bypassed
 * validation; name where it came from. */
static int reparse_fail(const tf_conf *c, int rc, const char *section, const char *key)
{
	return tf_conf_fail(c, rc, section, key, "%s", tf_diag_msg());
}

/* One typed getter per parser: the default when unset, else the value
 * through the parser that validated it. */
#define CONF_GETTER(name, ctype, type, parse)                                  \
	int name(const tf_conf *c, const char *section, const char *key,      \
		 ctype def, ctype *out)                                        \
	{                                                                      \
		const struct conf_key *k;                                      \
		const char *v = NULL;                                          \
		int rc = typed_value(c, section, key, type, &k, &v);           \
		if (rc)                                                        \
			return rc;                                             \
		*out = def;                                                    \
		if (v && (rc = parse(k, v, out)))                              \
			return reparse_fail(c, rc, section, key);              \
		return TF_OK;                                                  \
	}

CONF_GETTER(tf_conf_get_int, int64_t, T_INT, parse_int)
CONF_GETTER(tf_conf_get_float, double, T_FLOAT, parse_float)
CONF_GETTER(tf_conf_get_bool, bool, T_BOOL, parse_bool)
CONF_GETTER(tf_conf_get_size, uint64_t, T_SIZE, parse_size)
CONF_GETTER(tf_conf_get_enum, int, T_ENUM, parse_enum)

int tf_conf_resolve(const tf_conf *c, const char *path, char *buf, size_t size)
{
	int n = (*path == '/' || !c->dir) ? snprintf(buf, size, "%s", path)
					  : snprintf(buf, size, "%s/%s", c->dir, path);
	if (n < 0 || (size_t)n >= size)
		return tf_diag_set(TF_ERR_RANGE, "path too long: %s", path);
	return TF_OK;
}

int tf_conf_get_path(const tf_conf *c, const char *section, const char *key,
		     char *buf, size_t size, const char **out)
{
	const struct conf_key *k;
	const char *v = NULL;
	int rc = typed_value(c, section, key, T_PATH, &k, &v);
	*out = NULL;
	if (rc || !v)
		return rc;
	if ((rc = tf_conf_resolve(c, v, buf, size)))
		return reparse_fail(c, rc, section, key);
	*out = buf;
	return TF_OK;
}

size_t tf_conf_count(const tf_conf *c) { return c->n; }

void tf_conf_at(const tf_conf *c, size_t i, const char **section,
		const char **key, const char **value)
{
	*section = c->e[i].section;
	*key = c->e[i].key;
	*value = c->e[i].value;
}
