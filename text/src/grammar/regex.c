/*
 * regex.c - a JSON Schema "pattern" as GBNF over the JSON spelling of a string.
 *
 * Supported: literals, escaped metacharacters, \n \t \r \f \v \xHH \uHHHH,
 * \d \w \s (ASCII: a subset of Python's Unicode classes, so whatever is
 * made matches), classes [...] and [^...] with ranges, '.', groups ( ),
 * (?: ) and (?P<name> ), '|', the quantifiers * + ? {m} {m,} {m,n} {,n}
 * (lazy ones too: the language is the same), '^' first and '$' last.
 * Without '^' (or '$') any text may come before (or after), as re.search
 * finds the match anywhere.  Each character becomes its JSON spellings: '"'
 * and '\' escaped, controls as escapes, the rest raw.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "unicode/unicode.h"

#define RX_DEPTH 64

typedef struct rx {
	const char *p, *end;
	tf_bytes *out;
	char *why;
	size_t why_len;
	int depth;
} rx;

static int refuse(rx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(rx *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why, r->why_len, fmt, ap);
	va_end(ap);
	return TF_ERR_UNSUPPORTED;
}

static int put(rx *r, const char *s)
{
	return tf_bytes_append(r->out, s, strlen(s));
}

/* The JSON spelling of cp that its string must hold escaped: '"', '\', a control. */
static const char *json_escape(uint32_t cp, char buf[8])
{
	static const char *const named[32] = {
		['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t",
	};

	if (cp == '"')
		return "\\\"";
	if (cp == '\\')
		return "\\\\";
	if (cp >= 0x20)
		return NULL;
	if (named[cp])
		return named[cp];
	snprintf(buf, 8, "\\u%04x", (unsigned)cp);
	return buf;
}

static int put_class_range(tf_bytes *b, uint32_t lo, uint32_t hi)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), lo > 0xFFFF ? "\\U%08X" : "\\u%04X", (unsigned)lo);

	if (hi > lo) {
		buf[n++] = '-';
		snprintf(buf + n, sizeof(buf) - (size_t)n, hi > 0xFFFF ? "\\U%08X" : "\\u%04X",
			 (unsigned)hi);
	}
	return tf_bytes_append(b, buf, strlen(buf));
}

/*
 * The set of code points rg (n pairs, room for n + 2; negated when neg) as
 * "( [raw] | "escape" ... )": one class for the members spelled raw, a
 * literal for each member spelled escaped ('"', '\', the controls).
 */
static int put_set(rx *r, uint32_t *rg, int32_t n, bool neg)
{
	static const uint32_t holes[3][2] = { { 0, 0x1F }, { '"', '"' }, { '\\', '\\' } };
	uint32_t set[2 * (G_CLASS_MAX + 8)];
	int32_t m = g_ranges(rg, n, neg, set);
	tf_bytes raw = { 0 };
	bool first = true;
	char buf[8];
	int rc = put(r, "(");

	for (int32_t i = 0; i < m && !rc; i++) {
		uint32_t lo = set[2 * i], hi = set[2 * i + 1];

		for (int h = 0; h < 3 && lo <= hi && !rc; h++) {
			if (holes[h][1] < lo || holes[h][0] > hi)
				continue;
			if (lo < holes[h][0])
				rc = put_class_range(&raw, lo, holes[h][0] - 1);
			lo = holes[h][1] + 1;
		}
		if (lo <= hi && !rc)
			rc = put_class_range(&raw, lo, hi);
	}
	if (raw.len && !rc && (rc = put(r, " [")) == 0 && (rc = tf_bytes_append(r->out, raw.p, raw.len)) == 0)
		rc = put(r, "]"), first = false;
	for (int32_t i = 0; i < m && !rc; i++)
		for (uint32_t cp = set[2 * i]; cp <= set[2 * i + 1] && cp <= '\\' && !rc; cp++) {
			const char *e = json_escape(cp, buf);
			if (e && (rc = put(r, first ? " " : " | ")) == 0)
				rc = g_put_literal(r->out, e, strlen(e)), first = false;
		}
	tf_bytes_free(&raw);
	if (!rc && first)
		rc = put(r, " []");             /* the empty set: nothing matches */
	return rc ? rc : put(r, " )");
}

/* One character as its JSON spelling, a literal. */
static int put_cp(rx *r, uint32_t cp)
{
	char buf[8], u[4];
	const char *e = json_escape(cp, buf);

	if (e)
		return g_put_literal(r->out, e, strlen(e));
	return g_put_literal(r->out, u, (size_t)tf_utf8_put(cp, u));
}

/* \d \w \s as ranges appended at rg[2 * *n]; 0 when c is not one. */
static int shorthand(char c, uint32_t *rg, int32_t *n)
{
	static const uint32_t d[] = { '0', '9' }, w[] = { '0', '9', 'A', 'Z', '_', '_', 'a', 'z' },
			      s[] = { '\t', '\r', ' ', ' ' };
	const uint32_t *src = c == 'd' ? d : c == 'w' ? w : c == 's' ? s : NULL;
	int32_t k = c == 'd' ? 1 : c == 'w' ? 4 : 2;

	if (!src)
		return 0;
	memcpy(rg + 2 * *n, src, (size_t)k * 2 * sizeof(*rg));
	*n += k;
	return 1;
}

static int hex_value(rx *r, int digits, uint32_t *cp)
{
	*cp = 0;
	for (int i = 0; i < digits; i++, r->p++) {
		char c = r->p < r->end ? *r->p : 0;
		int v = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
		if (v < 0)
			return refuse(r, "a \\x or \\u escape wants %d hex digits", digits);
		*cp = *cp << 4 | (uint32_t)v;
	}
	return TF_OK;
}

/* One character: raw or escaped (r->p past the backslash when esc). */
static int literal_char(rx *r, bool esc, bool in_class, uint32_t *cp)
{
	int n;

	if (!esc) {
		n = tf_utf8_next((const uint8_t *)r->p, (size_t)(r->end - r->p), cp);
		if (n <= 0)
			return refuse(r, "invalid UTF-8");
		r->p += n;
		return TF_OK;
	}
	char c = *r->p++;
	switch (c) {
	case 'n': *cp = '\n'; return TF_OK;
	case 't': *cp = '\t'; return TF_OK;
	case 'r': *cp = '\r'; return TF_OK;
	case 'f': *cp = '\f'; return TF_OK;
	case 'v': *cp = '\v'; return TF_OK;
	case 'x': return hex_value(r, 2, cp);
	case 'u':
		if ((n = hex_value(r, 4, cp)) == 0 && *cp >= 0xD800 && *cp <= 0xDFFF)
			return refuse(r, "the surrogate \\u%04X", (unsigned)*cp);
		return n;
	}
	if (in_class && c == 'b') {
		*cp = '\b';
		return TF_OK;
	}
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c & 0x80))
		return refuse(r, "the escape \\%c", c);
	*cp = (uint8_t)c;
	return TF_OK;
}

static int parse_class(rx *r)
{
	uint32_t rg[2 * (G_CLASS_MAX + 8)];
	int32_t n = 0;
	bool neg = r->p < r->end && *r->p == '^';
	int rc;

	r->p += neg;
	for (bool first = true; r->p < r->end && (*r->p != ']' || first); first = false) {
		uint32_t lo, hi;
		bool esc = *r->p == '\\';

		if (n >= G_CLASS_MAX)
			return refuse(r, "a class of more than %d ranges", G_CLASS_MAX);
		if (*r->p == '[')
			return refuse(r, "'[' inside a class");
		if (esc && ++r->p >= r->end)
			break;
		if (esc && shorthand(*r->p, rg, &n)) {
			if (neg)
				return refuse(r, "\\%c inside [^...]", *r->p);
			r->p++;
			continue;
		}
		if ((rc = literal_char(r, esc, true, &lo)) < 0)
			return rc;
		hi = lo;
		if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
			r->p++;
			esc = *r->p == '\\';
			if (esc && ++r->p >= r->end)
				break;
			if ((rc = literal_char(r, esc, true, &hi)) < 0)
				return rc;
			if (hi < lo)
				return refuse(r, "a class range out of order");
		}
		rg[2 * n] = lo, rg[2 * n + 1] = hi, n++;
	}
	if (r->p >= r->end)
		return refuse(r, "an unterminated class");
	r->p++;
	return put_set(r, rg, n, neg);
}

static int parse_alt(rx *r, int *branches);

static int parse_atom(rx *r)
{
	uint32_t rg[2 * 8], cp;
	int32_t n = 0;
	char c = *r->p++;
	int rc, branches;

	switch (c) {
	case '(':
		if (r->end - r->p >= 2 && r->p[0] == '?' && r->p[1] == ':') {
			r->p += 2;
		} else if (r->end - r->p >= 3 && !memcmp(r->p, "?P<", 3)) {
			const char *gt = memchr(r->p, '>', (size_t)(r->end - r->p));
			if (!gt)
				return refuse(r, "an unterminated group name");
			r->p = gt + 1;
		} else if (r->p < r->end && *r->p == '?') {
			return refuse(r, "the group '(?%c'", r->p + 1 < r->end ? r->p[1] : ' ');
		}
		if (++r->depth > RX_DEPTH)
			return refuse(r, "groups nested deeper than %d", RX_DEPTH);
		if ((rc = parse_alt(r, &branches)) < 0)
			return rc;
		r->depth--;
		if (r->p >= r->end || *r->p != ')')
			return refuse(r, "'(' without its ')'");
		r->p++;
		return TF_OK;
	case '[':
		return parse_class(r);
	case '.':
		rg[0] = '\n', rg[1] = '\n';
		return put_set(r, rg, 1, true);
	case '^': case '$':
		return refuse(r, "'%c' inside the pattern", c);
	case '*': case '+': case '?': case '{':
		return refuse(r, "'%c' with nothing to repeat", c);
	case ')':
		return refuse(r, "')' without its '('");
	case '\\':
		if (r->p >= r->end)
			return refuse(r, "a trailing backslash");
		if (shorthand(*r->p, rg, &n)) {
			r->p++;
			return put_set(r, rg, n, false);
		}
		if (strchr("DWSbBAZzG", *r->p) || (*r->p >= '0' && *r->p <= '9'))
			return refuse(r, "the escape \\%c", *r->p);
		if ((rc = literal_char(r, true, false, &cp)) < 0)
			return rc;
		return put_cp(r, cp);
	}
	r->p--;
	if ((rc = literal_char(r, false, false, &cp)) < 0)
		return rc;
	return put_cp(r, cp);
}

static int parse_count(rx *r, int *v)
{
	const char *start = r->p;

	*v = 0;
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
		if ((*v = *v * 10 + (*r->p++ - '0')) > 10000)
			return refuse(r, "a repetition count above 10000");
	return r->p > start;
}

/* A quantifier after an atom, if any, written GBNF's way. */
static int parse_quant(rx *r)
{
	char buf[32];
	int min, max, rc;

	if (r->p >= r->end || !strchr("*+?{", *r->p))
		return TF_OK;
	if (*r->p != '{') {
		buf[0] = *r->p++, buf[1] = 0;
	} else {
		r->p++;
		if ((rc = parse_count(r, &min)) < 0)
			return rc;
		max = min;
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			int has_max = parse_count(r, &max);
			if (has_max < 0)
				return has_max;
			if (!has_max)
				max = -1;
		} else if (!rc) {
			return refuse(r, "'{' that is not a quantifier");
		}
		if (r->p >= r->end || *r->p != '}')
			return refuse(r, "'{' that is not a quantifier");
		r->p++;
		if (max >= 0 && max < min)
			return refuse(r, "a repetition {%d,%d}", min, max);
		if (max < 0)
			snprintf(buf, sizeof(buf), "{%d,}", min);
		else
			snprintf(buf, sizeof(buf), "{%d,%d}", min, max);
	}
	if (r->p < r->end && *r->p == '+')
		return refuse(r, "a possessive quantifier");
	r->p += r->p < r->end && *r->p == '?';          /* lazy: the same strings */
	if (r->p < r->end && strchr("*+?{", *r->p))
		return refuse(r, "a repeated quantifier");
	return put(r, buf);
}

static int parse_seq(rx *r)
{
	int rc = TF_OK;

	while (!rc && r->p < r->end && *r->p != '|' && *r->p != ')')
		if ((rc = put(r, " ")) == 0 && (rc = parse_atom(r)) == 0)
			rc = parse_quant(r);
	return rc;
}

/* "( seq | seq ... )"; *branches: how many. */
static int parse_alt(rx *r, int *branches)
{
	int rc = put(r, "(");

	*branches = 1;
	if (!rc)
		rc = parse_seq(r);
	while (!rc && r->p < r->end && *r->p == '|') {
		r->p++;
		(*branches)++;
		if ((rc = put(r, " |")) == 0)
			rc = parse_seq(r);
	}
	return rc ? rc : put(r, " )");
}

int g_regex_gbnf(const char *re, size_t len, const char *any_char, tf_bytes *out, char *why,
		 size_t why_len)
{
	rx r = { .p = re, .end = re + len, .out = out, .why = why, .why_len = why_len };
	bool start = len && re[0] == '^', end = false;
	size_t slashes = 0;
	int rc, branches;

	r.p += start;
	if (r.end > r.p && r.end[-1] == '$') {
		while (r.end - 1 - (ptrdiff_t)slashes > r.p && r.end[-2 - (ptrdiff_t)slashes] == '\\')
			slashes++;
		if (slashes % 2 == 0)
			end = true, r.end--;
	}
	if (!start && ((rc = put(&r, any_char)) < 0 || (rc = put(&r, "* ")) < 0))
		return rc;
	if ((rc = parse_alt(&r, &branches)) < 0)
		return rc;
	if (r.p < r.end)
		return refuse(&r, "')' without its '('");
	if (branches > 1 && (start || end))
		return refuse(&r, "'|' outside a group with '^' or '$' (write ^(a|b)$)");
	if (!end && ((rc = put(&r, " ")) < 0 || (rc = put(&r, any_char)) < 0 || (rc = put(&r, "*")) < 0))
		return rc;
	return TF_OK;
}
