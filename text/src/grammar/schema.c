/*
 * schema.c - JSON Schema to GBNF (tf_grammar_schema_gbnf; what is supported
 * is in tf/grammar.h).
 *
 * Each schema becomes a GBNF expression, one symbol (a rule name, a
 * literal or a group), built bottom up; objects, arrays, patterns and $ref
 * targets get rules of their own, equal rule bodies sharing one rule.  The
 * fixed rules (JSON values, strings, numbers, formats) are written once at
 * the end, those used only.  Refused keywords are collected with their
 * paths, so one error names them all.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "strmap.h"
#include "tf/diag.h"
#include "tf/utf8.h"
#include "unicode/unicode.h"

#define COUNT_MAX 10000         /* the largest repetition GBNF takes */
#define PREFIX_MAX 256          /* prefixItems: each one a group inside the last */
#define KEY_MAX 1024            /* the longest property name beside extra keys: a rule per byte */
#define INT_DIGITS_MAX 9999999999999999ll       /* 16 digits */

/* The fixed rules, in the order written, and the rules each needs. */
enum {
	R_VALUE, R_OBJECT, R_ARRAY, R_STRING, R_CHAR, R_HEX, R_NUMBER, R_INTEGER, R_BOOLEAN,
	R_NULL, R_WS, R_KEY_CHAR, R_DATE, R_TIME, R_DATE_TIME, R_UUID, R_COUNT
};
#define B(r) (1u << (r))

static const struct fixed {
	const char *name;
	unsigned needs;
	const char *rules;
} fixed[R_COUNT] = {
	[R_VALUE] = { "value", B(R_OBJECT) | B(R_ARRAY) | B(R_STRING) | B(R_NUMBER) | B(R_BOOLEAN) | B(R_NULL),
		"value ::= object | array | string | number | boolean | null\n" },
	[R_OBJECT] = { "object", B(R_WS) | B(R_STRING) | B(R_VALUE),
		"object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n" },
	[R_ARRAY] = { "array", B(R_WS) | B(R_VALUE),
		"array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n" },
	[R_STRING] = { "string", B(R_CHAR), "string ::= \"\\\"\" char* \"\\\"\"\n" },
	[R_CHAR] = { "char", B(R_HEX),
		"char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CeEfF] hex{3} | [dD] [0-7] hex{2} ) )\n" },
	[R_HEX] = { "hex", 0, "hex ::= [0-9a-fA-F]\n" },
	[R_NUMBER] = { "number", B(R_INTEGER),
		"number ::= integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n" },
	[R_INTEGER] = { "integer", 0, "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n" },
	[R_BOOLEAN] = { "boolean", 0, "boolean ::= \"true\" | \"false\"\n" },
	[R_NULL] = { "null", 0, "null ::= \"null\"\n" },
	[R_WS] = { "ws", 0, "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n" },
	[R_KEY_CHAR] = { "key-char", 0, "key-char ::= [^\"\\\\\\x00-\\x1F]\n" },
	[R_DATE] = { "date", 0,
		"date ::= year \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( day28 | \"29\" | \"30\" | \"31\" )"
		" | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( day28 | \"29\" | \"30\" ) | \"02-\" day28 ) | leap-year \"-02-29\"\n"
		"year ::= \"000\" [1-9] | \"00\" [1-9] [0-9] | \"0\" [1-9] [0-9]{2} | [1-9] [0-9]{3}\n"
		"leap-year ::= [0-9]{2} leap-yy | leap-yy \"00\"\n"
		"leap-yy ::= \"0\" [48] | [2468] [048] | [13579] [26]\n"
		"day28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n" },
	[R_TIME] = { "time", 0,
		"time ::= hour \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? ( \"Z\" | [+-] hour \":\" [0-5] [0-9] )\n"
		"hour ::= [01] [0-9] | \"2\" [0-3]\n" },
	[R_DATE_TIME] = { "date-time", B(R_DATE) | B(R_TIME), "date-time ::= date \"T\" time\n" },
	[R_UUID] = { "uuid", B(R_HEX),
		"uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n" },
};

/* JSON types as bits. */
enum { T_OBJECT = 1, T_ARRAY = 2, T_STRING = 4, T_INTEGER = 8, T_NUMBER = 16, T_BOOLEAN = 32,
       T_NULL = 64, T_ANY = 127 };
static const char *const type_names[] = { "object", "array", "string", "integer", "number",
					  "boolean", "null" };

/* Keywords that do not constrain a value: ignored. */
static const char *const annotations[] = {
	"title", "description", "default", "examples", "$schema", "$comment", "readOnly",
	"writeOnly", "deprecated", "$defs", "definitions",
};

/* The keywords supported, with the type they apply to (0: any). */
static const struct keyword {
	const char *name;
	unsigned type;
} keywords[] = {
	{ "type", 0 }, { "enum", 0 }, { "const", 0 }, { "$ref", 0 }, { "anyOf", 0 }, { "oneOf", 0 },
	{ "allOf", 0 }, { "properties", T_OBJECT }, { "required", T_OBJECT },
	{ "additionalProperties", T_OBJECT }, { "items", T_ARRAY }, { "prefixItems", T_ARRAY },
	{ "minItems", T_ARRAY }, { "maxItems", T_ARRAY }, { "minLength", T_STRING },
	{ "maxLength", T_STRING }, { "pattern", T_STRING }, { "format", T_STRING },
	{ "minimum", T_INTEGER }, { "maximum", T_INTEGER }, { "exclusiveMinimum", T_INTEGER },
	{ "exclusiveMaximum", T_INTEGER },
};
#define N_KEYWORDS (sizeof(keywords) / sizeof(keywords[0]))

typedef struct sg {
	const tf_val *root;
	tf_bytes rules;         /* every rule but root's */
	tf_bytes refused;       /* "; "-separated */
	unsigned fixed_used;
	int n_rules;            /* rules made, for their names */
	tf_strmap bodies;       /* a rule's body -> the offset of its name in names */
	tf_strmap refs;         /* a $ref -> the offset of its rule's name in names */
	tf_bytes names;         /* NUL-terminated names */
} sg;

static int gen(sg *g, const tf_val *s, tf_bytes *path, tf_bytes *x);

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "json_schema: out of memory");
}

static int put(tf_bytes *b, const char *s)
{
	return tf_bytes_append(b, s, strlen(s)) < 0 ? nomem() : TF_OK;
}

static int putf(tf_bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int putf(tf_bytes *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || tf_bytes_reserve(b, (size_t)n + 1) < 0)
		return nomem();
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return TF_OK;
}

static int put_bytes(tf_bytes *b, const tf_bytes *src)
{
	return src->len && tf_bytes_append(b, src->p, src->len) < 0 ? nomem() : TF_OK;
}

int g_put_literal(tf_bytes *out, const char *s, size_t n)
{
	int rc = put(out, "\"");

	for (size_t i = 0; i < n && !rc; i++) {
		uint8_t c = (uint8_t)s[i];

		if (c == '"' || c == '\\')
			rc = putf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7F)
			rc = putf(out, "\\x%02X", c);
		else
			rc = tf_bytes_append(out, &s[i], 1) < 0 ? nomem() : TF_OK;
	}
	return rc ? rc : put(out, "\"");
}

/* "the root" or the JSON pointer, for messages. */
static const char *where(tf_bytes *path)
{
	if (!path->len)
		return "the root";
	if (tf_bytes_reserve(path, 1) < 0)
		return "(out of memory)";
	path->p[path->len] = 0;
	return path->p;
}

static int refuse(sg *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records a refusal ("'kw' at PATH is not supported..."); the generation goes on. */
static int refuse(sg *g, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return putf(&g->refused, "%s%s", g->refused.len ? "; " : "", msg);
}

static int invalid(tf_bytes *path, const char *what)
{
	return tf_diag_set(TF_ERR_INVALID, "json_schema: %s at %s", what, where(path));
}

/* Appends "/seg" (escaped as a JSON pointer token) to path; returns the old
 * length.  Out of memory, the path (for messages only) comes out short. */
static size_t path_push(tf_bytes *path, const char *seg, size_t len)
{
	size_t old = path->len;
	int rc = tf_bytes_append(path, "/", 1);

	for (size_t i = 0; i < len && !rc; i++)
		rc = seg[i] == '~' ? tf_bytes_append(path, "~0", 2) :
		     seg[i] == '/' ? tf_bytes_append(path, "~1", 2) : tf_bytes_append(path, &seg[i], 1);
	return old;
}

static size_t path_push_index(tf_bytes *path, size_t i)
{
	char num[24];

	snprintf(num, sizeof(num), "%zu", i);
	return path_push(path, num, strlen(num));
}

static int use_fixed(sg *g, int r, tf_bytes *x)
{
	g->fixed_used |= B(r);
	return put(x, fixed[r].name);
}

/* A new rule name "hint-N" into names; its offset in *at. */
static int new_name(sg *g, const char *hint, size_t *at)
{
	char name[48];
	size_t n = 0;

	for (; *hint && n < 24; hint++)
		name[n++] = (*hint >= 'a' && *hint <= 'z') || (*hint >= 'A' && *hint <= 'Z') ||
			    (*hint >= '0' && *hint <= '9') ? *hint : '-';
	snprintf(name + n, sizeof(name) - n, "%s%d", n ? "-" : "r", ++g->n_rules);
	*at = g->names.len;
	return tf_bytes_append(&g->names, name, strlen(name) + 1) < 0 ? nomem() : TF_OK;
}

static int put_rule(sg *g, const char *name, const tf_bytes *body)
{
	int rc = putf(&g->rules, "%s ::= ", name);

	if (!rc)
		rc = put_bytes(&g->rules, body);
	return rc ? rc : put(&g->rules, "\n");
}

/* Appends to x the name of a rule holding body: a new one, or one with the same body. */
static int rule(sg *g, const char *hint, const tf_bytes *body, tf_bytes *x)
{
	int added;
	size_t at;
	int32_t *slot = tf_strmap_slot(&g->bodies, body->len ? body->p : "", body->len, -1, &added);
	int rc;

	if (!slot)
		return nomem();
	if (!added)
		return put(x, g->names.p + *slot);
	if ((rc = new_name(g, hint, &at)) < 0)
		return rc;
	*slot = (int32_t)at;
	if ((rc = put_rule(g, g->names.p + at, body)) < 0)
		return rc;
	return put(x, g->names.p + at);
}

/* The JSON text of v as a GBNF literal. */
static int json_literal(const tf_val *v, tf_bytes *x)
{
	tf_bytes j = { 0 };
	int rc = tf_val_dump_json(v, &j) < 0 ? nomem() : TF_OK;

	if (!rc)
		rc = g_put_literal(x, j.p, j.len);
	tf_bytes_free(&j);
	return rc;
}

/* A non-negative integer keyword's value into *n (-1 when absent). */
static int count_kw(const tf_val *s, const char *kw, tf_bytes *path, int64_t *n)
{
	const tf_val *v = tf_val_dict_get(s, kw);
	char what[64];

	*n = -1;
	if (!v)
		return TF_OK;
	if (tf_val_kind_of(v) == TF_VAL_INT)
		*n = tf_val_as_int(v);
	else if (tf_val_kind_of(v) == TF_VAL_FLOAT && tf_val_as_float(v) == floor(tf_val_as_float(v)) &&
		 fabs(tf_val_as_float(v)) < 1e18)
		*n = (int64_t)tf_val_as_float(v);
	if (*n < 0) {
		snprintf(what, sizeof(what), "'%s' is not a non-negative integer", kw);
		return invalid(path, what);
	}
	return TF_OK;
}

/* The type bits of a value (integral numbers are integers too). */
static unsigned value_types(const tf_val *v)
{
	switch (tf_val_kind_of(v)) {
	case TF_VAL_NONE: return T_NULL;
	case TF_VAL_BOOL: return T_BOOLEAN;
	case TF_VAL_INT: return T_INTEGER | T_NUMBER;
	case TF_VAL_FLOAT:
		return tf_val_as_float(v) == floor(tf_val_as_float(v)) ? T_INTEGER | T_NUMBER : T_NUMBER;
	case TF_VAL_STR: return T_STRING;
	case TF_VAL_LIST: return T_ARRAY;
	default: return T_OBJECT;
	}
}

/* Whether v (at any depth) holds a float JSON cannot spell (NaN, infinities). */
static bool has_nonfinite(const tf_val *v)
{
	if (tf_val_kind_of(v) == TF_VAL_FLOAT)
		return !isfinite(tf_val_as_float(v));
	for (size_t i = 0; i < tf_val_len(v); i++)
		if (has_nonfinite(tf_val_at(v, i)))
			return true;
	return false;
}

/* enum / const: the values of the allowed types, as literals. */
static int gen_enum(sg *g, const tf_val *s, unsigned types, tf_bytes *path, tf_bytes *x)
{
	const tf_val *c = tf_val_dict_get(s, "const"), *e = tf_val_dict_get(s, "enum");
	const char *kw = c ? "const" : "enum";
	size_t n = c ? 1 : tf_val_len(e), kept = 0;
	int rc = TF_OK;

	if (c && e)
		return refuse(g, "'enum' beside 'const' at %s is not supported", where(path));
	if (e && tf_val_kind_of(e) != TF_VAL_LIST)
		return invalid(path, "'enum' is not a list");
	for (size_t i = 0; i < n && !rc; i++) {
		const tf_val *v = c ? c : tf_val_at(e, i);

		if (has_nonfinite(v))
			return refuse(g, "'%s' at %s is not supported: NaN and infinities are not JSON",
				      kw, where(path));
		if (!(value_types(v) & types))
			continue;
		if ((rc = put(x, kept++ ? " | " : "( ")) == 0)
			rc = json_literal(v, x);
	}
	if (!rc && !kept)
		return refuse(g, "'%s' at %s is not supported: it allows no value", kw, where(path));
	return rc ? rc : put(x, " )");
}

/* Appends "( a | b )" for the same-length digit strings lo..hi (n digits). */
static int digit_range(tf_bytes *x, const char *lo, const char *hi, int n)
{
	bool lo0 = true, hi9 = true;
	int rc = TF_OK, alts = 0;

	if (n == 0)
		return TF_OK;
	if (lo[0] == hi[0])
		return (rc = putf(x, "\"%c\" ", lo[0])) < 0 ? rc : digit_range(x, lo + 1, hi + 1, n - 1);
	for (int i = 1; i < n; i++)
		lo0 &= lo[i] == '0', hi9 &= hi[i] == '9';
	char from = lo0 ? lo[0] : (char)(lo[0] + 1), to = hi9 ? hi[0] : (char)(hi[0] - 1);
	char nines[24], zeros[24];
	memset(nines, '9', sizeof(nines));
	memset(zeros, '0', sizeof(zeros));
	rc = put(x, "( ");
	if (!rc && !lo0 && (rc = putf(x, "\"%c\" ", lo[0])) == 0)
		rc = digit_range(x, lo + 1, nines, n - 1), alts++;
	if (!rc && from <= to) {
		if ((rc = putf(x, "%s[%c-%c]", alts++ ? "| " : "", from, to)) == 0 && n > 1)
			rc = putf(x, " [0-9]{%d}", n - 1);
		if (!rc)
			rc = put(x, " ");
	}
	if (!rc && !hi9 && (rc = putf(x, "%s\"%c\" ", alts++ ? "| " : "", hi[0])) == 0)
		rc = digit_range(x, zeros, hi + 1, n - 1);
	return rc ? rc : put(x, ") ");
}

/* Alternatives for the decimal numbers lo..hi (0 <= lo <= hi), no leading zeros. */
static int uint_range(tf_bytes *x, uint64_t lo, uint64_t hi, bool *first)
{
	char a[24], b[24];
	uint64_t p10 = 1;
	int rc = TF_OK;

	for (int len = 1; len <= 20 && lo <= hi && !rc; len++, p10 *= 10) {
		uint64_t top = len == 20 ? UINT64_MAX : p10 * 10 - 1;   /* the largest of len digits */
		if (lo > top)
			continue;
		uint64_t to = hi < top ? hi : top;
		snprintf(a, sizeof(a), "%" PRIu64, lo);
		snprintf(b, sizeof(b), "%" PRIu64, to);
		if ((rc = put(x, *first ? "" : "| ")) == 0)
			rc = digit_range(x, a, b, len);
		*first = false;
		if (to == hi)
			break;
		lo = to + 1;
	}
	return rc;
}

/* An integer bound: the smallest (want_min) or largest integer it allows. */
static int int_bound(const tf_val *v, bool exclusive, bool want_min, tf_bytes *path, const char *kw,
		     int64_t *out)
{
	char what[96];
	double d;

	if (tf_val_kind_of(v) == TF_VAL_INT) {
		int64_t i = tf_val_as_int(v);
		if (exclusive && i == (want_min ? INT64_MAX : INT64_MIN))
			goto range;
		*out = exclusive ? (want_min ? i + 1 : i - 1) : i;
		return TF_OK;
	}
	if (tf_val_kind_of(v) != TF_VAL_FLOAT) {
		snprintf(what, sizeof(what), "'%s' is not a number", kw);
		return invalid(path, what);
	}
	d = tf_val_as_float(v);
	d = want_min ? (exclusive ? floor(d) + 1 : ceil(d)) : (exclusive ? ceil(d) - 1 : floor(d));
	if (!(fabs(d) < 9e18))
		goto range;
	*out = (int64_t)d;
	return TF_OK;
range:
	snprintf(what, sizeof(what), "'%s' is beyond 64-bit integers", kw);
	return tf_diag_set(TF_ERR_UNSUPPORTED, "json_schema: %s at %s", what, where(path));
}

/* An integer within minimum/maximum and their exclusive forms. */
static int gen_int_range(sg *g, const tf_val *s, tf_bytes *path, tf_bytes *x)
{
	static const char *const kw[4] = { "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum" };
	int64_t lo = INT64_MIN, hi = INT64_MAX, b = 0;
	bool has_lo = false, has_hi = false, first = true;
	int rc;

	for (int k = 0; k < 4; k++) {
		const tf_val *v = tf_val_dict_get(s, kw[k]);
		if (!v)
			continue;
		if ((rc = int_bound(v, k & 1, k < 2, path, kw[k], &b)) < 0)
			return rc;
		if (k < 2)
			lo = has_lo && lo > b ? lo : b, has_lo = true;
		else
			hi = has_hi && hi < b ? hi : b, has_hi = true;
	}
	if (!has_hi)
		hi = lo > INT_DIGITS_MAX ? INT64_MAX : INT_DIGITS_MAX;
	if (!has_lo)
		lo = hi < -INT_DIGITS_MAX ? INT64_MIN + 1 : -INT_DIGITS_MAX;
	if (lo > hi)
		return refuse(g, "'minimum' and 'maximum' at %s are not supported: they allow no integer",
			      where(path));
	if ((rc = put(x, "( ")) < 0)
		return rc;
	if (lo < 0) {                   /* -1 .. lo as "-" and magnitudes */
		uint64_t mlo = hi < 0 ? (uint64_t)-(hi + 1) + 1 : 1, mhi = (uint64_t)-(lo + 1) + 1;
		bool inner = true;
		if ((rc = put(x, "\"-\" ( ")) < 0 || (rc = uint_range(x, mlo, mhi, &inner)) < 0 ||
		    (rc = put(x, ") ")) < 0)
			return rc;
		first = false;
	}
	if (hi >= 0 && (rc = uint_range(x, lo > 0 ? (uint64_t)lo : 0, (uint64_t)hi, &first)) < 0)
		return rc;
	return put(x, ")");
}

static int gen_string(sg *g, const tf_val *s, tf_bytes *path, tf_bytes *x)
{
	static const int formats[] = { R_DATE, R_TIME, R_DATE_TIME, R_UUID };
	const tf_val *fmt = tf_val_dict_get(s, "format"), *pat = tf_val_dict_get(s, "pattern");
	int64_t min, max;
	tf_bytes body = { 0 };
	char why[256];
	int rc;

	if ((rc = count_kw(s, "minLength", path, &min)) < 0 || (rc = count_kw(s, "maxLength", path, &max)) < 0)
		return rc;
	if (fmt || pat) {
		const char *kw = fmt ? "format" : "pattern";
		const char *others[] = { "pattern", "minLength", "maxLength" };
		for (int i = fmt ? 0 : 1; i < 3; i++)
			if (tf_val_dict_get(s, others[i]) &&
			    (rc = refuse(g, "'%s' beside '%s' at %s is not supported", others[i], kw,
					 where(path))) < 0)
				return rc;
	}
	if (fmt) {
		const char *f = tf_val_as_str(fmt, NULL);
		if (!f)
			return invalid(path, "'format' is not a string");
		for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
			if (!strcmp(f, fixed[formats[i]].name)) {
				g->fixed_used |= B(formats[i]);
				return putf(x, "( \"\\\"\" %s \"\\\"\" )", f);
			}
		if ((rc = refuse(g, "'format' '%s' at %s is not supported", f, where(path))) < 0)
			return rc;
		return use_fixed(g, R_STRING, x);
	}
	if (pat) {
		size_t len;
		const char *re = tf_val_as_str(pat, &len);
		if (!re)
			return invalid(path, "'pattern' is not a string");
		g->fixed_used |= B(R_CHAR);
		if ((rc = put(&body, "\"\\\"\" ")) == 0 &&
		    (rc = g_regex_gbnf(re, len, "char", &body, why, sizeof(why))) == TF_ERR_UNSUPPORTED) {
			tf_bytes_free(&body);
			if ((rc = refuse(g, "'pattern' at %s is not supported: %s", where(path), why)) < 0)
				return rc;
			return use_fixed(g, R_STRING, x);
		}
		if (rc < 0) {           /* out of memory */
			tf_bytes_free(&body);
			return nomem();
		}
		if ((rc = put(&body, " \"\\\"\"")) == 0)
			rc = rule(g, "pattern", &body, x);
		tf_bytes_free(&body);
		return rc;
	}
	if (min < 0 && max < 0)
		return use_fixed(g, R_STRING, x);
	if (min > COUNT_MAX || max > COUNT_MAX)
		return refuse(g, "'%s' at %s is not supported above %d", min > COUNT_MAX ? "minLength" :
			      "maxLength", where(path), COUNT_MAX);
	if (max >= 0 && max < (min < 0 ? 0 : min))
		return refuse(g, "'maxLength' at %s is not supported: below 'minLength'", where(path));
	g->fixed_used |= B(R_CHAR);
	if (max < 0)
		return putf(x, "( \"\\\"\" char{%d,} \"\\\"\" )", (int)(min < 0 ? 0 : min));
	return putf(x, "( \"\\\"\" char{%d,%d} \"\\\"\" )", (int)(min < 0 ? 0 : min), (int)max);
}

/* "x{lo,hi}" with hi < 0 unbounded, for the array's repeated items. */
static int put_count(tf_bytes *b, int64_t lo, int64_t hi)
{
	if (hi < 0)
		return lo ? putf(b, "{%d,}", (int)lo) : put(b, "*");
	return putf(b, "{%d,%d}", (int)lo, (int)hi);
}

/*
 * The array's items from the i-th on (i already written): the prefixItems
 * one at a time, required up to minItems and nested options after, then
 * the items schema repeated up to maxItems.
 */
static int array_items(tf_bytes *b, int64_t i, int64_t n_prefix, const tf_bytes *prefix,
		       const char *item, int64_t min, int64_t max)
{
	const char *sep = i ? "\",\" ws " : "";
	int rc;

	if (max >= 0 && i >= max)
		return TF_OK;
	if (i >= n_prefix) {
		int64_t lo = min > i ? min - i : 0, hi = max < 0 ? -1 : max - i;
		if (i)
			return (rc = putf(b, "( \",\" ws %s ws )", item)) < 0 ? rc : put_count(b, lo, hi);
		if ((rc = putf(b, "%s%s ws ( \",\" ws %s ws )", lo ? "" : "( ", item, item)) < 0 ||
		    (rc = put_count(b, lo ? lo - 1 : 0, hi < 0 ? -1 : hi - 1)) < 0)
			return rc;
		return lo ? TF_OK : put(b, " )?");
	}
	if ((rc = putf(b, "%s%s%s ws ", i < min ? "" : "( ", sep, prefix[i].p)) < 0 ||
	    (rc = array_items(b, i + 1, n_prefix, prefix, item, min, max)) < 0)
		return rc;
	return i < min ? TF_OK : put(b, " )?");
}

static int gen_array(sg *g, const tf_val *s, tf_bytes *path, tf_bytes *x)
{
	const tf_val *items = tf_val_dict_get(s, "items"), *pre = tf_val_dict_get(s, "prefixItems");
	int64_t min, max, n_prefix = pre ? (int64_t)tf_val_len(pre) : 0;
	tf_bytes item = { 0 }, body = { 0 }, *prefix = NULL;
	int rc;

	if ((rc = count_kw(s, "minItems", path, &min)) < 0 || (rc = count_kw(s, "maxItems", path, &max)) < 0)
		return rc;
	if (pre && tf_val_kind_of(pre) != TF_VAL_LIST)
		return invalid(path, "'prefixItems' is not a list");
	min = min < 0 ? 0 : min;
	if (items && tf_val_kind_of(items) == TF_VAL_BOOL && !tf_val_as_bool(items))
		max = max < 0 || max > n_prefix ? n_prefix : max;      /* items: false */
	if (min > COUNT_MAX || max > COUNT_MAX + n_prefix)
		return refuse(g, "'%s' at %s is not supported above %d", min > COUNT_MAX ? "minItems" :
			      "maxItems", where(path), COUNT_MAX);
	if (max >= 0 && min > max)
		return refuse(g, "'minItems' at %s is not supported: it allows no array", where(path));
	if (n_prefix > PREFIX_MAX)
		return refuse(g, "'prefixItems' at %s is not supported with more than %d schemas", where(path),
			      PREFIX_MAX);
	if (n_prefix && !(prefix = calloc((size_t)n_prefix, sizeof(*prefix))))
		return nomem();
	for (int64_t i = 0; i < n_prefix && i != max && !rc; i++) {
		size_t old = path_push(path, "prefixItems", 11);
		path_push_index(path, (size_t)i);
		if ((rc = gen(g, tf_val_at(pre, (size_t)i), path, &prefix[i])) == 0 &&
		    tf_bytes_append(&prefix[i], "", 1) < 0)
			rc = nomem();
		path->len = old;
	}
	if (!rc && (max < 0 || max > n_prefix)) {
		size_t old = path_push(path, "items", 5);
		rc = gen(g, items, path, &item);
		path->len = old;
		if (!rc && tf_bytes_append(&item, "", 1) < 0)
			rc = nomem();
	}
	g->fixed_used |= B(R_WS);
	if (!rc && (rc = put(&body, "\"[\" ws ")) == 0 &&
	    (rc = array_items(&body, 0, n_prefix, prefix, item.p, min, max)) == 0 &&
	    (rc = put(&body, " \"]\"")) == 0)
		rc = rule(g, "array", &body, x);
	for (int64_t i = 0; i < n_prefix; i++)
		tf_bytes_free(&prefix[i]);
	free(prefix);
	tf_bytes_free(&item);
	tf_bytes_free(&body);
	return rc;
}

/* A key JSON may spell raw: valid UTF-8 above U+001F but '"' and '\'. */
static bool raw_key(const char *k, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)k[i] < 0x20 || k[i] == '"' || k[i] == '\\')
			return false;
	return tf_utf8_valid(k, n, NULL);
}

/*
 * The raw key text of any string but keys[a..b) (sorted, sharing their first
 * d bytes; each ending at a character boundary): a rule per trie node.
 * At a node: the end, unless a key ends here; each next character that a
 * key goes on with, then the rule of its node; any other character, then
 * anything.
 */
static int key_not_in(sg *g, tf_val *const *keys, size_t a, size_t b, size_t d, tf_bytes *x)
{
	tf_bytes body = { 0 }, cls = { 0 };
	bool ends = false;
	int rc = TF_OK;

	g->fixed_used |= B(R_KEY_CHAR);
	for (size_t i = a; i < b && !rc;) {
		size_t len, len2;
		const char *k = tf_val_as_str(keys[i], &len);
		uint32_t cp;
		char cpbuf[16];

		if (len == d) {
			ends = true, i++;
			continue;
		}
		int n = tf_utf8_next((const uint8_t *)k + d, len - d, &cp);
		size_t j = i + 1;
		while (j < b) {
			const char *k2 = tf_val_as_str(keys[j], &len2);
			if (len2 < d + (size_t)n || memcmp(k2 + d, k + d, (size_t)n))
				break;
			j++;
		}
		snprintf(cpbuf, sizeof(cpbuf), cp > 0xFFFF ? "\\U%08X" : "\\u%04X", (unsigned)cp);
		if ((rc = put(&cls, cpbuf)) == 0 && (rc = put(&body, body.len ? " | " : "")) == 0 &&
		    (rc = g_put_literal(&body, k + d, (size_t)n)) == 0 && (rc = put(&body, " ")) == 0)
			rc = key_not_in(g, keys, i, j, d + (size_t)n, &body);
		i = j;
	}
	if (!rc && (rc = putf(&body, "%s[^\"\\\\\\x00-\\x1F", body.len ? " | " : "")) == 0 &&
	    (rc = put_bytes(&body, &cls)) == 0 && (rc = put(&body, "] key-char*")) == 0 && !ends)
		rc = put(&body, " | ");         /* the empty alternative last */
	if (!rc)
		rc = rule(g, "key", &body, x);
	tf_bytes_free(&body);
	tf_bytes_free(&cls);
	return rc;
}

static int cmp_key(const void *a, const void *b)
{
	size_t la, lb;
	const char *ka = tf_val_as_str(*(tf_val *const *)a, &la), *kb = tf_val_as_str(*(tf_val *const *)b, &lb);
	int c = memcmp(ka, kb, la < lb ? la : lb);

	return c ? c : (la > lb) - (la < lb);
}

/* "NAME-rK" (kind 'r') or "NAME-cK"; "" for the end when no extra members follow. */
static void object_rule_name(char *buf, size_t size, const char *name, char kind, size_t k, size_t n,
			     bool extra)
{
	if (k == n && !extra)
		buf[0] = 0;
	else
		snprintf(buf, size, "%s-%c%zu", name, kind, k);
}

/*
 * Objects with properties: rule R_k writes the members from the k-th on
 * when none is written yet, C_k when one is (each member after a comma).
 * A required member must come; an optional one may be skipped.  After the
 * last declared one, the extra members additionalProperties allows.
 */
static int gen_object(sg *g, const tf_val *s, tf_bytes *path, tf_bytes *x)
{
	const tf_val *props = tf_val_dict_get(s, "properties"), *req = tf_val_dict_get(s, "required");
	const tf_val *addl = tf_val_dict_get(s, "additionalProperties");
	size_t n = props ? tf_val_len(props) : 0, base;
	bool extra = addl && !(tf_val_kind_of(addl) == TF_VAL_BOOL && !tf_val_as_bool(addl));
	bool *required = NULL, *need_r = NULL, *need_c = NULL;
	tf_bytes *member = NULL, xmember = { 0 }, body = { 0 };
	tf_val **keys = NULL;
	int rc = TF_OK;

	if (props && tf_val_kind_of(props) != TF_VAL_DICT)
		return invalid(path, "'properties' is not an object");
	if (req && tf_val_kind_of(req) != TF_VAL_LIST)
		return invalid(path, "'required' is not a list");
	if (!props && !addl) {
		if (req && tf_val_len(req))
			return refuse(g, "'required' without 'properties' at %s is not supported", where(path));
		return use_fixed(g, R_OBJECT, x);
	}
	required = calloc(n + 1, sizeof(*required));
	need_r = calloc(n + 1, sizeof(*need_r));
	need_c = calloc(n + 1, sizeof(*need_c));
	member = calloc(n + 1, sizeof(*member));
	keys = calloc(n + 1, sizeof(*keys));
	if (!required || !need_r || !need_c || !member || !keys) {
		rc = nomem();
		goto out;
	}
	for (size_t i = 0; req && i < tf_val_len(req) && !rc; i++) {
		size_t len, k;
		const char *name = tf_val_as_str(tf_val_at(req, i), &len);
		if (!name) {
			rc = invalid(path, "'required' holds a non-string");
			break;
		}
		for (k = 0; k < n; k++) {
			size_t kl;
			const char *key = tf_val_as_str(tf_val_key_at(props, k), &kl);
			if (kl == len && !memcmp(key, name, len))
				break;
		}
		if (k == n)
			rc = refuse(g, "'required' at %s is not supported: '%s' is not in 'properties'",
				    where(path), name);
		else
			required[k] = true;
	}
	for (size_t k = 0; k < n && !rc; k++) {         /* "\"key\"" ws ":" ws value ws */
		size_t kl, old;
		tf_val *key = tf_val_key_at(props, k);
		const char *ks = tf_val_as_str(key, &kl);

		keys[k] = key;
		old = path_push(path, "properties", 10);
		path_push(path, ks, kl);
		if ((rc = json_literal(key, &member[k])) == 0 && (rc = put(&member[k], " ws \":\" ws ")) == 0 &&
		    (rc = gen(g, tf_val_at(props, k), path, &member[k])) == 0 &&
		    (rc = put(&member[k], " ws")) == 0 && tf_bytes_append(&member[k], "", 1) < 0)
			rc = nomem();
		path->len = old;
	}
	if (!rc && extra) {
		size_t n_raw = 0, old = path_push(path, "additionalProperties", 20);
		for (size_t k = 0; k < n && !rc; k++) {
			size_t kl;
			const char *ks = tf_val_as_str(keys[k], &kl);
			if (raw_key(ks, kl))
				keys[n_raw++] = keys[k];
			if (kl > KEY_MAX)
				rc = refuse(g, "'additionalProperties' at %s is not supported beside a property "
					    "name of over %d bytes", where(path), KEY_MAX);
		}
		qsort(keys, n_raw, sizeof(*keys), cmp_key);
		if ((rc = put(&xmember, "\"\\\"\" ")) == 0 && (rc = key_not_in(g, keys, 0, n_raw, 0, &xmember)) == 0 &&
		    (rc = put(&xmember, " \"\\\"\" ws \":\" ws ")) == 0 &&
		    (rc = gen(g, tf_val_kind_of(addl) == TF_VAL_BOOL ? NULL : addl, path, &xmember)) == 0 &&
		    (rc = put(&xmember, " ws")) == 0 && tf_bytes_append(&xmember, "", 1) < 0)
			rc = nomem();
		path->len = old;
	}
	if (rc)
		goto out;
	g->fixed_used |= B(R_WS);
	if ((rc = new_name(g, "object", &base)) < 0)
		goto out;
	need_r[0] = true;
	for (size_t k = 0; k < n; k++) {
		need_c[k + 1] |= need_r[k] || need_c[k];
		need_r[k + 1] |= need_r[k] && !required[k];
	}
	need_c[n] |= need_r[n];         /* R_n goes on with C_n */
	for (size_t k = 0; k <= n && !rc; k++) {
		for (int c = 0; c < 2 && !rc; c++) {
			char name[96], next_c[96], next_r[96];

			if (!(c ? need_c[k] : need_r[k]) || (k == n && !extra))
				continue;
			object_rule_name(name, sizeof(name), g->names.p + base, c ? 'c' : 'r', k, n, extra);
			object_rule_name(next_c, sizeof(next_c), g->names.p + base, 'c', k + (k < n), n, extra);
			object_rule_name(next_r, sizeof(next_r), g->names.p + base, c ? 'c' : 'r', k + 1, n, extra);
			body.len = 0;
			if (k == n)
				rc = putf(&body, "( %s%s %s )?", c ? "\",\" ws " : "", xmember.p, next_c);
			else if (required[k])
				rc = putf(&body, "%s%s %s", c ? "\",\" ws " : "", member[k].p, next_c);
			else
				rc = putf(&body, "%s%s %s | %s", c ? "\",\" ws " : "", member[k].p, next_c, next_r);
			if (!rc)
				rc = put_rule(g, name, &body);
		}
	}
	if (!rc) {
		char first[96];
		object_rule_name(first, sizeof(first), g->names.p + base, 'r', 0, n, extra);
		body.len = 0;
		if ((rc = putf(&body, "\"{\" ws %s \"}\"", first)) == 0)
			rc = rule(g, "object", &body, x);
	}
out:
	for (size_t k = 0; member && k <= n; k++)
		tf_bytes_free(&member[k]);
	free(member);
	free(required);
	free(need_r);
	free(need_c);
	free(keys);
	tf_bytes_free(&xmember);
	tf_bytes_free(&body);
	return rc;
}

/* A local $ref: the rule of the schema its JSON pointer names, made once. */
static int gen_ref(sg *g, const tf_val *s, tf_bytes *path, tf_bytes *x)
{
	size_t len, name_at;
	const char *ref = tf_val_as_str(tf_val_dict_get(s, "$ref"), &len);
	const tf_val *t = g->root;
	tf_bytes seg = { 0 }, target = { 0 }, body = { 0 };
	int added, rc = TF_OK;

	if (!ref)
		return invalid(path, "'$ref' is not a string");
	int32_t at = tf_strmap_get(&g->refs, ref, len);
	if (at >= 0)
		return put(x, g->names.p + at);
	if (len == 0 || ref[0] != '#' || (len > 1 && ref[1] != '/'))
		return refuse(g, "'$ref' '%s' at %s is not supported: only JSON pointers into this schema (#/...)",
			      ref, where(path));
	for (const char *p = ref + 1, *end = ref + len; p < end && t && !rc; ) {
		seg.len = 0;
		for (p++; p < end && *p != '/' && !rc; p++) {
			char c = *p;
			if (c == '~' && p + 1 < end && (p[1] == '0' || p[1] == '1'))
				c = *++p == '0' ? '~' : '/';
			rc = tf_bytes_append(&seg, &c, 1) < 0 ? nomem() : TF_OK;
		}
		if (tf_val_kind_of(t) == TF_VAL_DICT) {
			t = tf_val_dict_getn(t, seg.len ? seg.p : "", seg.len);
		} else if (tf_val_kind_of(t) == TF_VAL_LIST) {
			size_t i = 0, k;
			for (k = 0; k < seg.len && seg.p[k] >= '0' && seg.p[k] <= '9' && i < 1u << 30; k++)
				i = i * 10 + (size_t)(seg.p[k] - '0');
			t = seg.len && k == seg.len ? tf_val_at(t, i) : NULL;
		} else {
			t = NULL;
		}
	}
	if (!rc && !t)
		rc = tf_diag_set(TF_ERR_INVALID, "json_schema: '$ref' '%s' at %s names no schema", ref, where(path));
	if (!rc && (rc = tf_bytes_append(&seg, "", 1) < 0 ? nomem() : TF_OK) == 0 &&
	    (rc = new_name(g, seg.p, &name_at)) == 0) {
		int32_t *slot = tf_strmap_slot(&g->refs, ref, len, (int32_t)name_at, &added);
		if (!slot)
			rc = nomem();
	}
	if (!rc && tf_bytes_append(&target, ref + 1, len - 1) < 0)
		rc = nomem();
	if (!rc && (rc = gen(g, t, &target, &body)) == 0 && (rc = put_rule(g, g->names.p + name_at, &body)) == 0)
		rc = put(x, g->names.p + name_at);
	tf_bytes_free(&seg);
	tf_bytes_free(&target);
	tf_bytes_free(&body);
	return rc;
}

/* The "type" keyword as bits. */
static int parse_type(const tf_val *t, tf_bytes *path, unsigned *types)
{
	size_t n = tf_val_kind_of(t) == TF_VAL_LIST ? tf_val_len(t) : 1;

	*types = 0;
	for (size_t i = 0; i < n; i++) {
		const char *name = tf_val_as_str(tf_val_kind_of(t) == TF_VAL_LIST ? tf_val_at(t, i) : t, NULL);
		unsigned k = 0;

		while (name && k < 7 && strcmp(name, type_names[k]))
			k++;
		if (!name || k == 7)
			return invalid(path, "'type' names no JSON Schema type");
		*types |= 1u << k;
	}
	return *types ? TF_OK : invalid(path, "'type' is an empty list");
}

/* One type's values under the schema's keywords for it. */
static int gen_type(sg *g, const tf_val *s, unsigned type, bool bounded, tf_bytes *path, tf_bytes *x)
{
	switch (type) {
	case T_OBJECT: return gen_object(g, s, path, x);
	case T_ARRAY: return gen_array(g, s, path, x);
	case T_STRING: return gen_string(g, s, path, x);
	case T_INTEGER: return bounded ? gen_int_range(g, s, path, x) : use_fixed(g, R_INTEGER, x);
	case T_NUMBER: return use_fixed(g, R_NUMBER, x);
	case T_BOOLEAN: return use_fixed(g, R_BOOLEAN, x);
	default: return use_fixed(g, R_NULL, x);
	}
}

/* anyOf, oneOf (as anyOf) and allOf of one schema; comb is the keyword. */
static int gen_comb(sg *g, const tf_val *s, const char *comb, tf_bytes *path, tf_bytes *x)
{
	const tf_val *list = tf_val_dict_get(s, comb);
	size_t n = tf_val_len(list), old;
	int rc = TF_OK;

	if (tf_val_kind_of(list) != TF_VAL_LIST || n == 0)
		return invalid(path, "an 'anyOf', 'oneOf' or 'allOf' that is not a non-empty list");
	if (!strcmp(comb, "allOf") && n > 1)
		return refuse(g, "'allOf' at %s is not supported with %zu schemas (only one)",
			      where(path), n);
	if (n > 1)
		rc = put(x, "( ");
	for (size_t i = 0; i < n && !rc; i++) {
		old = path_push(path, comb, strlen(comb));
		path_push_index(path, i);
		if ((rc = put(x, i ? " | " : "")) == 0)
			rc = gen(g, tf_val_at(list, i), path, x);
		path->len = old;
	}
	return rc || n == 1 ? rc : put(x, " )");
}

/*
 * A schema's values as one GBNF symbol.  $ref, the combinators, enum and
 * const take no constraining keyword beside them (enum and const but
 * "type", whose values they are filtered by).  Without "type", the types
 * are those the keywords present apply to (any value when none): the
 * documents made are of those types only.
 */
static int gen(sg *g, const tf_val *s, tf_bytes *path, tf_bytes *x)
{
	static const char *const solo[] = { "$ref", "anyOf", "oneOf", "allOf", "enum", "const" };
	bool has[N_KEYWORDS] = { false };
	unsigned types = 0, implied = 0;
	size_t n_alt = 0;
	int rc;

	if (!s || (tf_val_kind_of(s) == TF_VAL_BOOL && tf_val_as_bool(s)))
		return use_fixed(g, R_VALUE, x);
	if (tf_val_kind_of(s) == TF_VAL_BOOL) {
		if ((rc = refuse(g, "the schema 'false' at %s is not supported", where(path))) < 0)
			return rc;
		return use_fixed(g, R_VALUE, x);
	}
	if (tf_val_kind_of(s) != TF_VAL_DICT)
		return invalid(path, "a schema that is not an object or a boolean");
	for (size_t i = 0; i < tf_val_len(s); i++) {
		const char *key = tf_val_as_str(tf_val_key_at(s, i), NULL);
		size_t k = 0;

		for (size_t a = 0; a < sizeof(annotations) / sizeof(annotations[0]); a++)
			if (!strcmp(key, annotations[a]))
				goto next;
		while (k < N_KEYWORDS && strcmp(key, keywords[k].name))
			k++;
		if (k == N_KEYWORDS && (rc = refuse(g, "'%s' at %s is not supported", key, where(path))) < 0)
			return rc;
		if (k < N_KEYWORDS)
			has[k] = true, implied |= keywords[k].type;
next:;
	}
	for (size_t i = 0; i < sizeof(solo) / sizeof(solo[0]); i++) {
		if (!tf_val_dict_get(s, solo[i]))
			continue;
		bool enum_like = i >= 4;
		for (size_t k = 0; k < N_KEYWORDS; k++)
			if (has[k] && strcmp(keywords[k].name, solo[i]) && !(enum_like && k == 0) &&
			    !(enum_like && !strcmp(keywords[k].name, i == 4 ? "const" : "enum")) &&
			    (rc = refuse(g, "'%s' beside '%s' at %s is not supported", keywords[k].name,
					 solo[i], where(path))) < 0)
				return rc;
		if (i == 0)
			return gen_ref(g, s, path, x);
		if (!enum_like)
			return gen_comb(g, s, solo[i], path, x);
		if (has[0] && (rc = parse_type(tf_val_dict_get(s, "type"), path, &types)) < 0)
			return rc;
		return gen_enum(g, s, has[0] ? types : T_ANY, path, x);
	}
	if (has[0] && (rc = parse_type(tf_val_dict_get(s, "type"), path, &types)) < 0)
		return rc;
	if (!has[0])
		types = implied ? implied : T_ANY;
	if (types == T_ANY && !implied)
		return use_fixed(g, R_VALUE, x);
	bool bounded = implied & T_INTEGER;
	if (bounded && (types & T_NUMBER)) {
		for (size_t k = 0; k < N_KEYWORDS; k++)
			if (has[k] && keywords[k].type == T_INTEGER &&
			    (rc = refuse(g, "'%s' at %s is not supported on numbers (only on integers)",
					 keywords[k].name, where(path))) < 0)
				return rc;
		bounded = false;
	}
	if (types & T_NUMBER)
		types &= ~(unsigned)T_INTEGER;  /* numbers hold the integers */
	for (unsigned t = 1; t < T_ANY; t <<= 1)
		n_alt += (types & t) != 0;
	if (n_alt > 1 && (rc = put(x, "( ")) < 0)
		return rc;
	for (unsigned t = 1, i = 0; t < T_ANY; t <<= 1) {
		if (!(types & t))
			continue;
		if ((i++ && (rc = put(x, " | ")) < 0) || (rc = gen_type(g, s, t, bounded, path, x)) < 0)
			return rc;
	}
	return n_alt > 1 ? put(x, " )") : TF_OK;
}

int tf_grammar_schema_gbnf(const tf_val *schema, char **out)
{
	sg g = { .root = schema };
	tf_bytes path = { 0 }, x = { 0 }, text = { 0 };
	int rc;

	*out = NULL;
	if (tf_strmap_init(&g.bodies, 64) < 0 || tf_strmap_init(&g.refs, 16) < 0) {
		rc = nomem();
		goto out;
	}
	rc = gen(&g, schema, &path, &x);
	if (!rc && g.refused.len)
		rc = tf_diag_set(TF_ERR_UNSUPPORTED, "json_schema: %.*s", (int)g.refused.len, g.refused.p);
	for (int r = 0; r < R_COUNT; r++)               /* what the fixed rules need */
		for (int k = 0; k < R_COUNT; k++)
			if (g.fixed_used & B(k))
				g.fixed_used |= fixed[k].needs;
	if (!rc && (rc = put(&text, "root ::= ")) == 0 && (rc = put_bytes(&text, &x)) == 0 &&
	    (rc = put(&text, "\n")) == 0)
		rc = put_bytes(&text, &g.rules);
	for (int k = 0; k < R_COUNT && !rc; k++)
		if (g.fixed_used & B(k))
			rc = put(&text, fixed[k].rules);
	if (!rc && tf_bytes_append(&text, "", 1) < 0)
		rc = nomem();
	if (!rc) {
		*out = text.p;
		text = (tf_bytes){ 0 };
	}
out:
	tf_bytes_free(&path);
	tf_bytes_free(&x);
	tf_bytes_free(&text);
	tf_bytes_free(&g.rules);
	tf_bytes_free(&g.refused);
	tf_bytes_free(&g.names);
	tf_strmap_free(&g.bodies);
	tf_strmap_free(&g.refs);
	return rc;
}
