/* value.c - see tf/value.h and value.h. */
#include "chat/value.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"
#include "tf/error.h"
#include "unicode/unicode.h"

enum { SUB_NAMESPACE = 1 };   /* a DICT's sub; a LIST's is its tf_val_seq */

struct tf_val {
	tf_val_kind kind;
	unsigned refs;
	int sub;  /* a LIST's tf_val_seq, a DICT's SUB_*, a FUNC's tag */
	union {
		bool b;
		int64_t i;
		double d;
		struct { char *p; size_t len; } s;  /* STR; UNDEFINED's message */
		const void *fn;
		struct { tf_val **items; size_t n, cap; } l;
		/* Keys and values side by side; past a few entries an open
		 * hash of slot numbers + 1 (0 = empty) finds a key. */
		struct { tf_val **keys, **vals; size_t n, cap; uint32_t *index; size_t icap; } m;
	};
};

#define DICT_INDEX_MIN 8

static tf_val *val_new(tf_val_kind kind)
{
	tf_val *v = calloc(1, sizeof(*v));
	if (v) {
		v->kind = kind;
		v->refs = 1;
	}
	return v;
}

tf_val *tf_val_none(void) { return val_new(TF_VAL_NONE); }

tf_val *tf_val_bool(bool b)
{
	tf_val *v = val_new(TF_VAL_BOOL);
	if (v)
		v->b = b;
	return v;
}

tf_val *tf_val_int(int64_t i)
{
	tf_val *v = val_new(TF_VAL_INT);
	if (v)
		v->i = i;
	return v;
}

tf_val *tf_val_float(double d)
{
	tf_val *v = val_new(TF_VAL_FLOAT);
	if (v)
		v->d = d;
	return v;
}

tf_val *tf_val_str(const char *s, size_t len)
{
	tf_val *v = val_new(TF_VAL_STR);
	if (!v)
		return NULL;
	v->s.p = malloc(len + 1);
	if (!v->s.p) {
		free(v);
		return NULL;
	}
	if (len)
		memcpy(v->s.p, s, len);
	v->s.p[len] = 0;
	v->s.len = len;
	return v;
}

tf_val *tf_val_cstr(const char *s) { return tf_val_str(s, strlen(s)); }
tf_val *tf_val_list(void) { return val_new(TF_VAL_LIST); }
tf_val *tf_val_dict(void) { return val_new(TF_VAL_DICT); }

static tf_val *val_sub(tf_val *v, int sub)
{
	if (v)
		v->sub = sub;
	return v;
}

tf_val *tf_val_seq_new(tf_val_seq seq) { return val_sub(val_new(TF_VAL_LIST), (int)seq); }

tf_val_seq tf_val_seq_of(const tf_val *v)
{
	return v && v->kind == TF_VAL_LIST ? (tf_val_seq)v->sub : TF_SEQ_LIST;
}

const char *tf_val_seq_name(tf_val_seq seq)
{
	static const char *const names[] = { "list", "tuple", "generator", "range",
					     "dict_items", "dict_keys", "dict_values" };
	return names[seq];
}

tf_val *tf_val_namespace(void) { return val_sub(val_new(TF_VAL_DICT), SUB_NAMESPACE); }

bool tf_val_is_namespace(const tf_val *v)
{
	return v && v->kind == TF_VAL_DICT && v->sub == SUB_NAMESPACE;
}

tf_val *tf_val_undefined(const char *why)
{
	tf_val *v = tf_val_cstr(why);
	if (v)
		v->kind = TF_VAL_UNDEFINED;
	return v;
}

const char *tf_val_undefined_why(const tf_val *v)
{
	return v && v->kind == TF_VAL_UNDEFINED ? v->s.p : NULL;
}

tf_val *tf_val_func(int tag, const void *p)
{
	tf_val *v = val_sub(val_new(TF_VAL_FUNC), tag);
	if (v)
		v->fn = p;
	return v;
}

int tf_val_func_tag(const tf_val *v) { return v && v->kind == TF_VAL_FUNC ? v->sub : -1; }
const void *tf_val_func_ptr(const tf_val *v) { return v && v->kind == TF_VAL_FUNC ? v->fn : NULL; }

/* Atomic counts: threads may share a value (a parsed template's constants,
 * a request) as long as none changes it. */
tf_val *tf_val_ref(tf_val *v)
{
	if (v)
		__atomic_add_fetch(&v->refs, 1, __ATOMIC_RELAXED);
	return v;
}

void tf_val_unref(tf_val *v)
{
	if (!v || __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL))
		return;
	switch (v->kind) {
	case TF_VAL_STR:
	case TF_VAL_UNDEFINED:
		free(v->s.p);
		break;
	case TF_VAL_LIST:
		for (size_t i = 0; i < v->l.n; i++)
			tf_val_unref(v->l.items[i]);
		free(v->l.items);
		break;
	case TF_VAL_DICT:
		for (size_t i = 0; i < v->m.n; i++) {
			tf_val_unref(v->m.keys[i]);
			tf_val_unref(v->m.vals[i]);
		}
		free(v->m.keys);
		free(v->m.vals);
		free(v->m.index);
		break;
	default:
		break;
	}
	free(v);
}

tf_val_kind tf_val_kind_of(const tf_val *v) { return v ? v->kind : TF_VAL_NONE; }
bool tf_val_as_bool(const tf_val *v) { return v && v->kind == TF_VAL_BOOL && v->b; }
int64_t tf_val_as_int(const tf_val *v) { return v && v->kind == TF_VAL_INT ? v->i : 0; }

double tf_val_as_float(const tf_val *v)
{
	if (v && v->kind == TF_VAL_FLOAT)
		return v->d;
	return v && v->kind == TF_VAL_INT ? (double)v->i : 0;
}

const char *tf_val_as_str(const tf_val *v, size_t *len)
{
	if (!v || v->kind != TF_VAL_STR)
		return NULL;
	if (len)
		*len = v->s.len;
	return v->s.p;
}

size_t tf_val_len(const tf_val *v)
{
	if (v && v->kind == TF_VAL_LIST)
		return v->l.n;
	return v && v->kind == TF_VAL_DICT ? v->m.n : 0;
}

tf_val *tf_val_at(const tf_val *v, size_t i)
{
	if (v && v->kind == TF_VAL_LIST)
		return i < v->l.n ? v->l.items[i] : NULL;
	if (v && v->kind == TF_VAL_DICT)
		return i < v->m.n ? v->m.vals[i] : NULL;
	return NULL;
}

tf_val *tf_val_key_at(const tf_val *v, size_t i)
{
	return v && v->kind == TF_VAL_DICT && i < v->m.n ? v->m.keys[i] : NULL;
}

/* Grows an array of pointers to hold n + 1. */
static int grow(tf_val ***a, size_t n, size_t *cap)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 4;
	tf_val **p = realloc(*a, nc * sizeof(*p));
	if (!p)
		return TF_ERR_NOMEM;
	*a = p;
	*cap = nc;
	return 0;
}

int tf_val_list_push(tf_val *list, tf_val *item)
{
	if (!item || !list || list->kind != TF_VAL_LIST) {
		tf_val_unref(item);
		return item ? TF_ERR_INVALID : TF_ERR_NOMEM;
	}
	if (grow(&list->l.items, list->l.n, &list->l.cap) < 0) {
		tf_val_unref(item);
		return TF_ERR_NOMEM;
	}
	list->l.items[list->l.n++] = item;
	return 0;
}

static uint32_t hash_bytes(const char *s, size_t n)
{
	uint32_t h = 2166136261u;  /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static bool key_is(const tf_val *k, const char *s, size_t n)
{
	return k->s.len == n && memcmp(k->s.p, s, n) == 0;
}

/* The slot of key, or -1. */
static ptrdiff_t dict_find(const tf_val *d, const char *key, size_t klen)
{
	if (!d->m.index) {
		for (size_t i = 0; i < d->m.n; i++)
			if (key_is(d->m.keys[i], key, klen))
				return (ptrdiff_t)i;
		return -1;
	}
	size_t mask = d->m.icap - 1;
	for (size_t j = hash_bytes(key, klen) & mask;; j = (j + 1) & mask) {
		uint32_t e = d->m.index[j];
		if (!e)
			return -1;
		if (key_is(d->m.keys[e - 1], key, klen))
			return (ptrdiff_t)e - 1;
	}
}

static void index_put(tf_val *d, size_t slot)
{
	const tf_val *k = d->m.keys[slot];
	size_t mask = d->m.icap - 1, j = hash_bytes(k->s.p, k->s.len) & mask;
	while (d->m.index[j])
		j = (j + 1) & mask;
	d->m.index[j] = (uint32_t)slot + 1;
}

/* Keeps the index at most half full once the dict is big enough to need it. */
static int index_fit(tf_val *d)
{
	if (d->m.n < DICT_INDEX_MIN || 2 * (d->m.n + 1) <= d->m.icap)
		return 0;
	if (d->m.n >= UINT32_MAX / 4)
		return TF_ERR_RANGE;
	size_t cap = 16;
	while (cap < 4 * (d->m.n + 1))
		cap *= 2;
	uint32_t *idx = calloc(cap, sizeof(*idx));
	if (!idx)
		return TF_ERR_NOMEM;
	free(d->m.index);
	d->m.index = idx;
	d->m.icap = cap;
	for (size_t i = 0; i < d->m.n; i++)
		index_put(d, i);
	return 0;
}

int tf_val_dict_set(tf_val *dict, const char *key, size_t klen, tf_val *v)
{
	int rc = TF_ERR_NOMEM;
	tf_val *k = NULL;

	if (!v)
		return TF_ERR_NOMEM;
	if (!dict || dict->kind != TF_VAL_DICT) {
		rc = TF_ERR_INVALID;
		goto fail;
	}
	ptrdiff_t at = dict_find(dict, key, klen);
	if (at >= 0) {
		tf_val_unref(dict->m.vals[at]);
		dict->m.vals[at] = v;
		return 0;
	}
	size_t kcap = dict->m.cap;
	if (!(k = tf_val_str(key, klen)) || grow(&dict->m.keys, dict->m.n, &kcap) < 0 ||
	    grow(&dict->m.vals, dict->m.n, &dict->m.cap) < 0 || (rc = index_fit(dict)) < 0)
		goto fail;
	dict->m.keys[dict->m.n] = k;
	dict->m.vals[dict->m.n] = v;
	if (dict->m.index)
		index_put(dict, dict->m.n);
	dict->m.n++;
	return 0;
fail:
	tf_val_unref(k);
	tf_val_unref(v);
	return rc < 0 ? rc : TF_ERR_NOMEM;
}

tf_val *tf_val_dict_getn(const tf_val *dict, const char *key, size_t klen)
{
	if (!dict || dict->kind != TF_VAL_DICT)
		return NULL;
	ptrdiff_t at = dict_find(dict, key, klen);
	return at >= 0 ? dict->m.vals[at] : NULL;
}

/* The containers a walk has seen: an open hash of pointers, at most half full. */
struct seen {
	const tf_val **slot;
	size_t cap, n;
};

static size_t seen_hash(const tf_val *v, size_t mask)
{
	return (size_t)(((uintptr_t)v >> 4) * 0x9E3779B97F4A7C15ull) & mask;
}

static void seen_put(const tf_val **slot, size_t cap, const tf_val *v)
{
	size_t j = seen_hash(v, cap - 1);
	while (slot[j])
		j = (j + 1) & (cap - 1);
	slot[j] = v;
}

/* 1 when v is new (and now recorded), 0 when seen before, < 0 out of memory. */
static int seen_add(struct seen *s, const tf_val *v)
{
	for (size_t j = seen_hash(v, s->cap - 1); s->cap && s->slot[j]; j = (j + 1) & (s->cap - 1))
		if (s->slot[j] == v)
			return 0;
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		const tf_val **slot = calloc(cap, sizeof(*slot));
		if (!slot)
			return TF_ERR_NOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i])
				seen_put(slot, cap, s->slot[i]);
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	seen_put(s->slot, s->cap, v);
	s->n++;
	return 1;
}

/* Pushes a container's items (a DICT's values) onto a stack of pointers. */
static int push_items(const tf_val ***stack, size_t *n, size_t *cap, const tf_val *c)
{
	size_t len = c->kind == TF_VAL_LIST ? c->l.n : c->m.n;
	tf_val *const *items = c->kind == TF_VAL_LIST ? c->l.items : c->m.vals;
	if (*n + len > *cap) {
		size_t nc = *cap ? *cap : 64;
		while (nc < *n + len)
			nc *= 2;
		const tf_val **p = realloc(*stack, nc * sizeof(*p));
		if (!p)
			return TF_ERR_NOMEM;
		*stack = p;
		*cap = nc;
	}
	for (size_t i = 0; i < len; i++)
		(*stack)[(*n)++] = items[i];
	return 0;
}

/* Depth first, each container walked once: values share items freely (a
 * list holding one list twice, nested 40 deep, is 2^40 paths). */
int tf_val_reaches(const tf_val *v, const tf_val *target)
{
	struct seen seen = { 0 };
	const tf_val **stack = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	for (const tf_val *at = v; at; at = n ? stack[--n] : NULL) {
		if (at == target) {
			rc = 1;
			break;
		}
		if (at->kind != TF_VAL_LIST && at->kind != TF_VAL_DICT)
			continue;
		if ((rc = seen_add(&seen, at)) == 1)
			rc = push_items(&stack, &n, &cap, at);
		if (rc < 0)
			break;
	}
	free(stack);
	free(seen.slot);
	return rc;
}

tf_val *tf_val_dict_get(const tf_val *dict, const char *key)
{
	return tf_val_dict_getn(dict, key, strlen(key));
}

/* ---- JSON in ---- */

#define JSON_MAX_DEPTH 512

struct parser {
	const char *s;
	size_t len, pos;
	int depth;
};

static int parse_error(const struct parser *p, const char *what)
{
	size_t line = 1, col = 1;
	for (size_t i = 0; i < p->pos && i < p->len; i++) {
		if (p->s[i] == '\n') {
			line++;
			col = 1;
		} else if (((uint8_t)p->s[i] & 0xC0) != 0x80) {
			col++;
		}
	}
	return tf_diag_set(TF_ERR_FORMAT, "line %zu column %zu: %s", line, col, what);
}

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static bool take(struct parser *p, const char *word)
{
	size_t n = strlen(word);
	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
		return false;
	p->pos += n;
	return true;
}

static int parse_value(struct parser *p, tf_val **out);

static int hex4(struct parser *p, uint32_t *u)
{
	*u = 0;
	if (p->len - p->pos < 4)
		return parse_error(p, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = p->s[p->pos + i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return parse_error(p, "bad \\u escape");
		*u = *u * 16 + (uint32_t)d;
	}
	p->pos += 4;
	return 0;
}

static int escape(struct parser *p, tf_bytes *b)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	char c = p->s[p->pos++];
	const char *e = c ? strchr(from, c) : NULL;
	if (e)
		return tf_bytes_append(b, &to[e - from], 1);
	if (c != 'u')
		return p->pos--, parse_error(p, "bad escape");
	uint32_t u, lo;
	int rc = hex4(p, &u);
	if (rc < 0)
		return rc;
	if (u >= 0xD800 && u < 0xDC00 && take(p, "\\u")) {
		if ((rc = hex4(p, &lo)) < 0)
			return rc;
		if (lo < 0xDC00 || lo >= 0xE000)
			return parse_error(p, "lone surrogate in \\u escape");
		u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
	} else if (u >= 0xD800 && u < 0xE000) {
		return parse_error(p, "lone surrogate in \\u escape");
	}
	char utf8[4];
	return tf_bytes_append(b, utf8, (size_t)tf_utf8_put(u, utf8));
}

static int parse_string(struct parser *p, tf_val **out)
{
	tf_bytes b = { 0 };
	int rc = 0;

	p->pos++;  /* the opening quote */
	for (;;) {
		if (p->pos >= p->len) {
			rc = parse_error(p, "unterminated string");
			break;
		}
		uint8_t c = (uint8_t)p->s[p->pos];
		if (c == '"') {
			p->pos++;
			break;
		}
		if (c < 0x20) {
			rc = parse_error(p, "control character in string");
			break;
		}
		if (c == '\\') {
			p->pos++;
			if (p->pos >= p->len) {
				rc = parse_error(p, "unterminated string");
				break;
			}
			if ((rc = escape(p, &b)) < 0)
				break;
			continue;
		}
		uint32_t cp;
		int n = tf_utf8_next((const uint8_t *)p->s + p->pos, p->len - p->pos, &cp);
		if (n <= 0) {
			rc = parse_error(p, "invalid UTF-8 in string");
			break;
		}
		if ((rc = tf_bytes_append(&b, p->s + p->pos, (size_t)n)) < 0)
			break;
		p->pos += (size_t)n;
	}
	if (rc == 0 && !(*out = tf_val_str(b.p ? b.p : "", b.len)))
		rc = TF_ERR_NOMEM;
	tf_bytes_free(&b);
	return rc;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_number(struct parser *p, tf_val **out)
{
	size_t start = p->pos;
	bool is_float = false;

	if (p->s[p->pos] == '-')
		p->pos++;
	if (take(p, "Infinity")) {
		*out = tf_val_float(p->s[start] == '-' ? -INFINITY : INFINITY);
		return *out ? 0 : TF_ERR_NOMEM;
	}
	if (p->pos >= p->len || !is_digit(p->s[p->pos]))
		return parse_error(p, "bad number");
	if (p->s[p->pos] == '0')
		p->pos++;
	else
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '.') {
		is_float = true;
		if (++p->pos >= p->len || !is_digit(p->s[p->pos]))
			return parse_error(p, "bad number");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		is_float = true;
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return parse_error(p, "bad number");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	size_t n = p->pos - start;
	char buf[64], *text = n < sizeof(buf) ? buf : malloc(n + 1);
	if (!text)
		return TF_ERR_NOMEM;
	memcpy(text, p->s + start, n);
	text[n] = 0;
	int rc = 0;
	errno = 0;
	if (is_float) {
		*out = tf_val_float(strtod(text, NULL));
	} else {
		long long i = strtoll(text, NULL, 10);
		if (errno == ERANGE) {
			p->pos = start;
			parse_error(p, "integer beyond 64 bits");
			rc = TF_ERR_RANGE;
		} else {
			*out = tf_val_int(i);
		}
	}
	if (text != buf)
		free(text);
	return rc < 0 ? rc : *out ? 0 : TF_ERR_NOMEM;
}

static int parse_items(struct parser *p, tf_val *c, bool is_dict)
{
	char close = is_dict ? '}' : ']';
	int rc;

	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return 0;
	}
	for (;;) {
		tf_val *key = NULL, *v = NULL;
		skip_ws(p);
		if (is_dict) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return parse_error(p, "expected a string key");
			if ((rc = parse_string(p, &key)) < 0)
				return rc;
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':') {
				tf_val_unref(key);
				return parse_error(p, "expected ':'");
			}
			p->pos++;
		}
		if ((rc = parse_value(p, &v)) < 0) {
			tf_val_unref(key);
			return rc;
		}
		rc = is_dict ? tf_val_dict_set(c, key->s.p, key->s.len, v) : tf_val_list_push(c, v);
		tf_val_unref(key);
		if (rc < 0)
			return rc;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		return parse_error(p, is_dict ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int parse_value(struct parser *p, tf_val **out)
{
	int rc;

	*out = NULL;
	skip_ws(p);
	if (p->pos >= p->len)
		return parse_error(p, "unexpected end of text");
	char c = p->s[p->pos];
	if (c == '{' || c == '[') {
		if (++p->depth > JSON_MAX_DEPTH)
			return parse_error(p, "nested too deep");
		tf_val *v = c == '{' ? tf_val_dict() : tf_val_list();
		if (!v)
			return TF_ERR_NOMEM;
		if ((rc = parse_items(p, v, c == '{')) < 0) {
			tf_val_unref(v);
			return rc;
		}
		p->depth--;
		*out = v;
		return 0;
	}
	if (c == '"')
		return parse_string(p, out);
	if (c == '-' || is_digit(c))
		return parse_number(p, out);
	if (take(p, "true"))
		*out = tf_val_bool(true);
	else if (take(p, "false"))
		*out = tf_val_bool(false);
	else if (take(p, "null"))
		*out = tf_val_none();
	else if (take(p, "NaN"))
		*out = tf_val_float(NAN);
	else if (take(p, "Infinity"))
		*out = tf_val_float(INFINITY);
	else
		return parse_error(p, "unexpected character");
	return *out ? 0 : TF_ERR_NOMEM;
}

int tf_val_parse_json(const char *text, size_t len, tf_val **out)
{
	struct parser p = { .s = text, .len = len };
	tf_val *v;
	int rc = parse_value(&p, &v);

	*out = NULL;
	if (rc < 0)
		return rc;
	skip_ws(&p);
	if (p.pos != p.len) {
		tf_val_unref(v);
		return parse_error(&p, "extra data after the value");
	}
	*out = v;
	return 0;
}

/* ---- JSON out ---- */

static int put(tf_bytes *out, const char *s) { return tf_bytes_append(out, s, strlen(s)); }

int tf_val_dump_float(double d, tf_bytes *out)
{
	if (isnan(d))
		return put(out, "nan");
	if (isinf(d))
		return put(out, d < 0 ? "-inf" : "inf");

	/* The fewest significant digits that read back as d, as repr() picks. */
	char e[40];
	for (int prec = 0; prec < 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec, d);
		if (strtod(e, NULL) == d)
			break;
	}
	char digits[24] = { 0 }, res[48], *r = res;
	size_t nd = 0;
	const char *q = e;
	if (*q == '-') {
		*r++ = '-';
		q++;
	}
	for (; *q != 'e'; q++)
		if (*q != '.')
			digits[nd++] = *q;
	int decpt = atoi(q + 1) + 1;   /* digits[0] sits before the point at decpt 1 */

	if (decpt <= -4 || decpt > 16) {
		*r++ = digits[0];
		if (nd > 1) {
			*r++ = '.';
			memcpy(r, digits + 1, nd - 1);
			r += nd - 1;
		}
		snprintf(r, sizeof(res) - (size_t)(r - res), "e%c%02d", decpt - 1 < 0 ? '-' : '+',
			 abs(decpt - 1));
		return put(out, res);
	}
	if (decpt <= 0) {
		r += sprintf(r, "0.%.*s", -decpt, "0000");
		memcpy(r, digits, nd);
		r += nd;
	} else if ((size_t)decpt >= nd) {
		memcpy(r, digits, nd);
		r += nd;
		for (size_t i = nd; i < (size_t)decpt; i++)
			*r++ = '0';
		r += sprintf(r, ".0");
	} else {
		memcpy(r, digits, (size_t)decpt);
		r += decpt;
		*r++ = '.';
		memcpy(r, digits + decpt, nd - (size_t)decpt);
		r += nd - (size_t)decpt;
	}
	*r = 0;
	return put(out, res);
}

static int dump_string(const char *s, size_t n, tf_bytes *out)
{
	int rc = put(out, "\"");
	size_t run = 0;  /* bytes waiting to be copied as they are */

	for (size_t i = 0; i < n && rc == 0; i++) {
		uint8_t c = (uint8_t)s[i];
		char esc[8] = "";
		if (c == '"' || c == '\\')
			snprintf(esc, sizeof(esc), "\\%c", c);
		else if (c < 0x20) {
			const char *shortform = strchr("\b\f\n\r\t", c);
			if (c && shortform)
				snprintf(esc, sizeof(esc), "\\%c", "bfnrt"[shortform - "\b\f\n\r\t"]);
			else
				snprintf(esc, sizeof(esc), "\\u%04x", c);
		}
		if (!esc[0]) {
			run++;
			continue;
		}
		if ((rc = tf_bytes_append(out, s + i - run, run)) == 0)
			rc = put(out, esc);
		run = 0;
	}
	if (rc == 0)
		rc = tf_bytes_append(out, s + n - run, run);
	return rc < 0 ? rc : put(out, "\"");
}

static int dump_newline(const tf_json_style *st, int level, tf_bytes *out)
{
	if (st->indent < 0)
		return 0;
	int rc = put(out, "\n");
	for (int i = 0; i < level * st->indent && rc == 0; i++)
		rc = put(out, " ");
	return rc;
}

/* The order to write a DICT's entries in: sorted by key when asked. */
static int key_order(const tf_val *v, bool sort, size_t **order)
{
	size_t n = v->m.n;
	*order = malloc((n ? n : 1) * sizeof(**order));
	if (!*order)
		return TF_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		/* Insertion sort: dicts in templates are small. */
		for (; sort && j > 0; j--) {
			const tf_val *a = v->m.keys[(*order)[j - 1]], *b = v->m.keys[i];
			size_t m = a->s.len < b->s.len ? a->s.len : b->s.len;
			int c = memcmp(a->s.p, b->s.p, m);
			if (c < 0 || (c == 0 && a->s.len <= b->s.len))
				break;
			(*order)[j] = (*order)[j - 1];
		}
		(*order)[j] = i;
	}
	return 0;
}

/* Between a container's items: has the dump passed its bound? */
static int dump_over(const tf_bytes *out, size_t max_len)
{
	if (out->len > max_len)
		return tf_diag_set(TF_ERR_RANGE, "printed value beyond %zu bytes", max_len);
	return 0;
}

static bool is_scalar(const tf_val *v)
{
	tf_val_kind k = tf_val_kind_of(v);
	return k == TF_VAL_NONE || k == TF_VAL_BOOL || k == TF_VAL_INT;
}

/* None, a bool or an int spelled with words (null/true/false or Python's). */
static int dump_scalar(const tf_val *v, const char *const words[3], tf_bytes *out)
{
	char num[32];
	if (!v)
		return put(out, words[0]);
	if (v->kind == TF_VAL_INT) {
		snprintf(num, sizeof(num), "%" PRId64, v->i);
		return put(out, num);
	}
	return put(out, v->kind == TF_VAL_NONE ? words[0] : v->b ? words[1] : words[2]);
}

static int dump_json(const tf_val *v, const tf_json_style *st, int level, tf_bytes *out)
{
	static const char *const words[3] = { "null", "true", "false" };
	size_t *order = NULL;
	int rc = 0;

	if (is_scalar(v))
		return dump_scalar(v, words, out);
	switch (v->kind) {
	case TF_VAL_FLOAT:
		if (isnan(v->d))
			return put(out, "NaN");
		if (isinf(v->d))
			return put(out, v->d < 0 ? "-Infinity" : "Infinity");
		return tf_val_dump_float(v->d, out);
	case TF_VAL_STR:
		return dump_string(v->s.p, v->s.len, out);
	case TF_VAL_LIST:
		if (v->sub != TF_SEQ_LIST && v->sub != TF_SEQ_TUPLE)
			return tf_diag_set(TF_ERR_INVALID, "Object of type %s is not JSON serializable",
					   tf_val_seq_name((tf_val_seq)v->sub));
		if (!v->l.n)
			return put(out, "[]");
		rc = put(out, "[");
		for (size_t i = 0; i < v->l.n && rc == 0; i++)
			if ((rc = dump_over(out, st->max_len)) == 0 &&
			    (rc = i ? put(out, st->item_sep) : 0) == 0 &&
			    (rc = dump_newline(st, level + 1, out)) == 0)
				rc = dump_json(v->l.items[i], st, level + 1, out);
		if (rc == 0)
			rc = dump_newline(st, level, out);
		return rc < 0 ? rc : put(out, "]");
	case TF_VAL_DICT:
		if (v->sub == SUB_NAMESPACE)
			return tf_diag_set(TF_ERR_INVALID, "Object of type Namespace is not JSON serializable");
		if (!v->m.n)
			return put(out, "{}");
		if ((rc = key_order(v, st->sort_keys, &order)) < 0 || (rc = put(out, "{")) < 0)
			break;
		for (size_t i = 0; i < v->m.n && rc == 0; i++) {
			size_t k = order[i];
			if ((rc = dump_over(out, st->max_len)) < 0 ||
			    (rc = i ? put(out, st->item_sep) : 0) < 0 ||
			    (rc = dump_newline(st, level + 1, out)) < 0 ||
			    (rc = dump_string(v->m.keys[k]->s.p, v->m.keys[k]->s.len, out)) < 0 ||
			    (rc = put(out, st->key_sep)) < 0)
				break;
			rc = dump_json(v->m.vals[k], st, level + 1, out);
		}
		if (rc == 0 && (rc = dump_newline(st, level, out)) == 0)
			rc = put(out, "}");
		break;
	default:   /* UNDEFINED or FUNC */
		return tf_diag_set(TF_ERR_INVALID, "Object of type %s is not JSON serializable",
				   v->kind == TF_VAL_FUNC ? "function" : "Undefined");
	}
	free(order);
	return rc;
}

int tf_val_dump_json_style(const tf_val *v, const tf_json_style *st, tf_bytes *out)
{
	return dump_json(v, st, 0, out);
}

int tf_val_dump_json(const tf_val *v, tf_bytes *out)
{
	static const tf_json_style plain = { -1, ", ", ": ", false, SIZE_MAX };
	return dump_json(v, &plain, 0, out);
}

/* ---- Python spellings ---- */

/* Code points Python's repr() writes as escapes (str.isprintable false):
 * controls, separators other than ' ', format characters, private use. */
static bool py_unprintable(uint32_t c)
{
	return c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
	       (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
	       (c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB) || c >= 0xF0000;
}

static int repr_string(const char *s, size_t n, tf_bytes *out)
{
	char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
	int rc = tf_bytes_append(out, &q, 1);

	for (size_t i = 0; i < n && rc == 0;) {
		uint32_t c;
		int len = tf_utf8_next((const uint8_t *)s + i, n - i, &c);
		char esc[16] = "";
		if (len <= 0) {  /* not UTF-8: Python would not hold it; spell the byte */
			c = (uint8_t)s[i];
			len = 1;
			snprintf(esc, sizeof(esc), "\\x%02x", c);
		} else if (c == (uint32_t)q || c == '\\') {
			snprintf(esc, sizeof(esc), "\\%c", (char)c);
		} else if (c == '\n' || c == '\r' || c == '\t') {
			snprintf(esc, sizeof(esc), "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
		} else if (py_unprintable(c)) {
			const char *f = c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x";
			snprintf(esc, sizeof(esc), f, c);
		}
		rc = esc[0] ? put(out, esc) : tf_bytes_append(out, s + i, (size_t)len);
		i += (size_t)len;
	}
	return rc < 0 ? rc : tf_bytes_append(out, &q, 1);
}

int tf_val_dump_py(const tf_val *v, bool repr, size_t max_len, tf_bytes *out)
{
	static const char *const words[3] = { "None", "True", "False" };
	int rc = 0;

	if (is_scalar(v))
		return dump_scalar(v, words, out);
	switch (v->kind) {
	case TF_VAL_FLOAT:
		return tf_val_dump_float(v->d, out);
	case TF_VAL_STR:
		if (repr)
			return repr_string(v->s.p, v->s.len, out);
		return tf_bytes_append(out, v->s.p, v->s.len);
	case TF_VAL_UNDEFINED:
		return repr ? put(out, "Undefined") : 0;
	case TF_VAL_LIST: {
		tf_val_seq seq = (tf_val_seq)v->sub;
		bool tuple = seq == TF_SEQ_TUPLE, view = seq >= TF_SEQ_DICT_ITEMS;
		if (seq == TF_SEQ_GENERATOR || seq == TF_SEQ_RANGE)
			return tf_diag_set(TF_ERR_UNSUPPORTED, "cannot print a %s", tf_val_seq_name(seq));
		if (view && ((rc = put(out, tf_val_seq_name(seq))) < 0 || (rc = put(out, "(")) < 0))
			return rc;
		rc = put(out, tuple ? "(" : "[");
		for (size_t i = 0; i < v->l.n && rc == 0; i++)
			if ((rc = dump_over(out, max_len)) == 0 && (rc = i ? put(out, ", ") : 0) == 0)
				rc = tf_val_dump_py(v->l.items[i], true, max_len, out);
		if (rc == 0 && tuple && v->l.n == 1)
			rc = put(out, ",");
		if (rc == 0)
			rc = put(out, tuple ? ")" : "]");
		return rc < 0 || !view ? rc : put(out, ")");
	}
	case TF_VAL_DICT:
		if (v->sub == SUB_NAMESPACE)
			break;
		rc = put(out, "{");
		for (size_t i = 0; i < v->m.n && rc == 0; i++) {
			if ((rc = dump_over(out, max_len)) < 0 || (rc = i ? put(out, ", ") : 0) < 0 ||
			    (rc = repr_string(v->m.keys[i]->s.p, v->m.keys[i]->s.len, out)) < 0 ||
			    (rc = put(out, ": ")) < 0)
				break;
			rc = tf_val_dump_py(v->m.vals[i], true, max_len, out);
		}
		return rc < 0 ? rc : put(out, "}");
	default:   /* a FUNC */
		break;
	}
	return tf_diag_set(TF_ERR_UNSUPPORTED, "cannot print a %s",
			   v->kind == TF_VAL_FUNC ? "function" : "namespace");
}

bool tf_val_truthy(const tf_val *v)
{
	switch (tf_val_kind_of(v)) {
	case TF_VAL_BOOL:
		return v->b;
	case TF_VAL_INT:
		return v->i != 0;
	case TF_VAL_FLOAT:
		return v->d != 0;
	case TF_VAL_STR:
		return v->s.len != 0;
	case TF_VAL_LIST:
		return v->sub == TF_SEQ_GENERATOR || v->l.n != 0;
	case TF_VAL_DICT:
		return v->sub == SUB_NAMESPACE || v->m.n != 0;
	case TF_VAL_FUNC:
		return true;
	default:
		return false;
	}
}

static bool is_number(const tf_val *v)
{
	return v && (v->kind == TF_VAL_BOOL || v->kind == TF_VAL_INT || v->kind == TF_VAL_FLOAT);
}

/* A bool's or an int's value as an int. */
static int64_t int_of(const tf_val *v) { return v->kind == TF_VAL_BOOL ? v->b : v->i; }

bool tf_val_equal(const tf_val *a, const tf_val *b)
{
	if (a == b)
		return true;
	if (is_number(a) && is_number(b)) {
		if (a->kind != TF_VAL_FLOAT && b->kind != TF_VAL_FLOAT)
			return int_of(a) == int_of(b);
		double x = a->kind == TF_VAL_FLOAT ? a->d : (double)int_of(a);
		double y = b->kind == TF_VAL_FLOAT ? b->d : (double)int_of(b);
		return x == y;
	}
	if (!a || !b || a->kind != b->kind || a->sub != b->sub)
		return false;
	switch (a->kind) {
	case TF_VAL_NONE:
	case TF_VAL_UNDEFINED:
		return true;
	case TF_VAL_STR:
		return a->s.len == b->s.len && memcmp(a->s.p, b->s.p, a->s.len) == 0;
	case TF_VAL_LIST:
		if (a->l.n != b->l.n || a->sub == TF_SEQ_GENERATOR || a->sub == TF_SEQ_DICT_VALUES)
			return false;
		for (size_t i = 0; i < a->l.n; i++) {
			bool found = tf_val_equal(a->l.items[i], b->l.items[i]);
			/* keys and items views compare as sets (their items are unique) */
			for (size_t j = 0; !found && a->sub >= TF_SEQ_DICT_ITEMS && j < b->l.n; j++)
				found = tf_val_equal(a->l.items[i], b->l.items[j]);
			if (!found)
				return false;
		}
		return true;
	case TF_VAL_DICT:
		if (a->m.n != b->m.n || a->sub == SUB_NAMESPACE)
			return false;
		for (size_t i = 0; i < a->m.n; i++) {
			const tf_val *k = a->m.keys[i], *bv = tf_val_dict_getn(b, k->s.p, k->s.len);
			if (!bv || !tf_val_equal(a->m.vals[i], bv))
				return false;
		}
		return true;
	case TF_VAL_FUNC:
		return a->fn == b->fn;
	default:
		return false;
	}
}
