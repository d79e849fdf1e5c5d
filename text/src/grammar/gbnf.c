/* gbnf.c - GBNF text to a program over bytes (grammar_int.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "strmap.h"
#include "tf/diag.h"
#include "unicode/unicode.h"

#define REPEAT_MAX 10000
#define NEST_MAX 1024           /* groups inside groups: the parser recurses */
#define ELEMS_MAX (1 << 22)     /* elements in all: repetitions copy literals */
#define UNBOUNDED (-1)

typedef struct rule {
	char *name;
	g_elem *el;             /* alternatives separated by G_ALT; no G_END yet */
	int32_t n, cap;
	const char *def;        /* where it is defined (or made), NULL until then */
	const char *ref;        /* its first reference */
	uint32_t *cls;          /* a class's rule: its code point ranges, lo/hi pairs */
	int32_t n_cls;
} rule;

typedef struct parser {
	const char *src, *end, *p;
	rule *rules;
	int32_t n_rules, cap_rules;
	tf_strmap names;        /* the named rules */
	uint64_t (*sets)[4];
	int32_t n_sets, cap_sets;
	int32_t byte_set[256];  /* the set holding just that byte, or -1 */
	int32_t made;           /* rules made for groups and repetitions so far */
	int depth;              /* groups open */
	int32_t n_elems;        /* elements in all rules */
} parser;

static int perr(const parser *ps, int code, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* "grammar: line L column C: ..." for the character at `at`. */
static int perr(const parser *ps, int code, const char *at, const char *fmt, ...)
{
	char msg[256];
	int line = 1, col = 1;
	va_list ap;

	for (const char *q = ps->src; q < at; q++) {
		if (*q == '\n')
			line++, col = 1;
		else if ((*q & 0xC0) != 0x80)
			col++;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tf_diag_set(code, "grammar: line %d column %d: %s", line, col, msg);
}

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "grammar: out of memory");
}

static bool is_name_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* Spaces, newlines and # comments. */
static void skip_space(parser *ps)
{
	while (ps->p < ps->end) {
		char c = *ps->p;

		if (c == '#')
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
		else if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			ps->p++;
		else
			break;
	}
}

/* Whether the text at p is `name ::=`: where the next rule starts. */
static bool at_rule_start(const parser *ps)
{
	const char *q = ps->p;

	while (q < ps->end && is_name_char(*q))
		q++;
	if (q == ps->p)
		return false;
	while (q < ps->end && (*q == ' ' || *q == '\t'))
		q++;
	return ps->end - q >= 3 && !memcmp(q, "::=", 3);
}

static int new_rule(parser *ps, const char *name, size_t len, const char *def)
{
	if (ps->n_rules == ps->cap_rules) {
		int32_t cap = ps->cap_rules ? 2 * ps->cap_rules : 64;
		rule *grown = realloc(ps->rules, (size_t)cap * sizeof(*grown));

		if (!grown)
			return nomem();
		ps->rules = grown;
		ps->cap_rules = cap;
	}
	rule *r = &ps->rules[ps->n_rules];
	*r = (rule){ .name = malloc(len + 1), .def = def };
	if (!r->name)
		return nomem();
	memcpy(r->name, name, len);
	r->name[len] = 0;
	return ps->n_rules++;
}

/* A rule for a group or repetition inside rule r, named "r-N". */
static int made_rule(parser *ps, int32_t r, const char *at)
{
	char name[128];
	int n = snprintf(name, sizeof(name), "%.100s-%d", ps->rules[r].name, ++ps->made);

	return new_rule(ps, name, (size_t)n, at);
}

/* The rule named name[0..len), made undefined on first sight. */
static int named_rule(parser *ps, const char *name, size_t len, const char *at)
{
	int added;
	int32_t *slot = tf_strmap_slot(&ps->names, name, len, ps->n_rules, &added);

	if (!slot)
		return nomem();
	if (!added)
		return *slot;
	int r = new_rule(ps, name, len, NULL);
	if (r >= 0)
		ps->rules[r].ref = at;
	return r;
}

static int push(parser *ps, int32_t r, int32_t op, int32_t arg)
{
	rule *ru = &ps->rules[r];

	if (++ps->n_elems > ELEMS_MAX)
		return perr(ps, TF_ERR_RANGE, ps->p, "the grammar grows past %d elements", ELEMS_MAX);
	if (ru->n == ru->cap) {
		int32_t cap = ru->cap ? 2 * ru->cap : 8;
		g_elem *grown = realloc(ru->el, (size_t)cap * sizeof(*grown));

		if (!grown)
			return nomem();
		ru->el = grown;
		ru->cap = cap;
	}
	ru->el[ru->n++] = (g_elem){ op, arg };
	return TF_OK;
}

/* The id of a byte set, equal sets sharing one. */
static int intern_set(parser *ps, const uint64_t set[4])
{
	for (int32_t i = 0; i < ps->n_sets; i++)
		if (!memcmp(ps->sets[i], set, sizeof(ps->sets[i])))
			return i;
	if (ps->n_sets == ps->cap_sets) {
		int32_t cap = ps->cap_sets ? 2 * ps->cap_sets : 64;
		uint64_t (*grown)[4] = realloc(ps->sets, (size_t)cap * sizeof(*grown));

		if (!grown)
			return nomem();
		ps->sets = grown;
		ps->cap_sets = cap;
	}
	memcpy(ps->sets[ps->n_sets], set, sizeof(ps->sets[0]));
	return ps->n_sets++;
}

static int push_range(parser *ps, int32_t r, unsigned lo, unsigned hi)
{
	uint64_t set[4] = { 0 };
	int id;

	if (lo == hi && ps->byte_set[lo] >= 0)
		return push(ps, r, G_BYTE, ps->byte_set[lo]);
	for (unsigned b = lo; b <= hi; b++)
		set[b >> 6] |= 1ull << (b & 63);
	if ((id = intern_set(ps, set)) < 0)
		return id;
	if (lo == hi)
		ps->byte_set[lo] = id;
	return push(ps, r, G_BYTE, id);
}

static int push_char(parser *ps, int32_t r, uint32_t cp)
{
	char u[4];
	int n = tf_utf8_put(cp, u), rc = TF_OK;

	for (int i = 0; i < n && !rc; i++)
		rc = push_range(ps, r, (uint8_t)u[i], (uint8_t)u[i]);
	return rc;
}

/*
 * Appends to rule r one alternative per run of UTF-8 sequences spelling
 * lo..hi (U+0080 up): split, as RE2 and Rust's regex do, into ranges whose
 * sequences are a byte range at each position.
 */
static int utf8_alts(parser *ps, int32_t r, uint32_t lo, uint32_t hi)
{
	static const uint32_t last[2] = { 0x7FF, 0xFFFF };
	char a[4], b[4];
	int n, rc;

	for (int i = 0; i < 2; i++)
		if (lo <= last[i] && hi > last[i])
			return (rc = utf8_alts(ps, r, lo, last[i])) < 0 ? rc :
			       utf8_alts(ps, r, last[i] + 1, hi);
	n = tf_utf8_put(lo, a);
	for (int i = 1; i < n; i++) {
		uint32_t m = (1u << (6 * i)) - 1;

		if ((lo & ~m) == (hi & ~m))
			continue;
		if (lo & m)
			return (rc = utf8_alts(ps, r, lo, lo | m)) < 0 ? rc :
			       utf8_alts(ps, r, (lo | m) + 1, hi);
		if ((hi & m) != m)
			return (rc = utf8_alts(ps, r, lo, (hi & ~m) - 1)) < 0 ? rc :
			       utf8_alts(ps, r, hi & ~m, hi);
	}
	tf_utf8_put(hi, b);
	if (ps->rules[r].n && (rc = push(ps, r, G_ALT, 0)) < 0)
		return rc;
	for (int i = 0; i < n; i++)
		if ((rc = push_range(ps, r, (uint8_t)a[i], (uint8_t)b[i])) < 0)
			return rc;
	return TF_OK;
}

static int cmp_range(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int32_t g_ranges(uint32_t *rg, int32_t n, bool neg, uint32_t *out)
{
	int32_t m = 0, k = 0;
	uint32_t next = 0;

	qsort(rg, (size_t)n, 2 * sizeof(*rg), cmp_range);
	for (int32_t i = 0; i < n; i++) {               /* merge */
		if (m && rg[2 * i] <= out[2 * m - 1] + 1) {
			if (rg[2 * i + 1] > out[2 * m - 1])
				out[2 * m - 1] = rg[2 * i + 1];
		} else {
			out[2 * m] = rg[2 * i], out[2 * m + 1] = rg[2 * i + 1], m++;
		}
	}
	if (neg) {
		for (int32_t i = 0; i < m; i++) {
			if (out[2 * i] > next)
				rg[2 * k] = next, rg[2 * k + 1] = out[2 * i] - 1, k++;
			next = out[2 * i + 1] + 1;
		}
		if (next <= 0x10FFFF)
			rg[2 * k] = next, rg[2 * k + 1] = 0x10FFFF, k++;
	} else {
		memcpy(rg, out, (size_t)m * 2 * sizeof(*rg));
		k = m;
	}
	m = 0;
	for (int32_t i = 0; i < k; i++) {               /* without U+D800..U+DFFF */
		uint32_t lo = rg[2 * i], hi = rg[2 * i + 1];

		if (lo < 0xD800 && hi >= 0xD800)
			out[2 * m] = lo, out[2 * m + 1] = 0xD7FF, m++, lo = 0xE000;
		else if (lo >= 0xD800 && lo <= 0xDFFF)
			lo = 0xE000;
		if (lo <= hi)
			out[2 * m] = lo, out[2 * m + 1] = hi, m++;
	}
	return m;
}

/*
 * Appends a character class (g_ranges of rg, neg).  A class of ASCII alone
 * is one byte set; others a rule of UTF-8 sequences, one per distinct class.
 */
/* The byte set of the ASCII members of ranges rg (m pairs). */
static int ascii_set(parser *ps, const uint32_t *rg, int32_t m)
{
	uint64_t set[4] = { 0 };

	for (int32_t i = 0; i < m && rg[2 * i] < 0x80; i++)
		for (uint32_t b = rg[2 * i]; b <= rg[2 * i + 1] && b < 0x80; b++)
			set[b >> 6] |= 1ull << (b & 63);
	return intern_set(ps, set);
}

static int push_class(parser *ps, int32_t r, uint32_t *in, int32_t n, bool neg, const char *at)
{
	uint32_t rg[2 * (G_CLASS_MAX + 2)];
	int32_t m = g_ranges(in, n, neg, rg), c;
	int rc;

	if (m == 0 || rg[2 * m - 1] < 0x80)
		return (c = ascii_set(ps, rg, m)) < 0 ? c : push(ps, r, G_BYTE, c);
	for (c = 0; c < ps->n_rules; c++)
		if (ps->rules[c].n_cls == m && !memcmp(ps->rules[c].cls, rg, (size_t)m * 2 * sizeof(*rg)))
			return push(ps, r, G_REF, c);
	if ((c = made_rule(ps, r, at)) < 0)
		return c;
	if (!(ps->rules[c].cls = malloc((size_t)m * 2 * sizeof(*rg))))
		return nomem();
	memcpy(ps->rules[c].cls, rg, (size_t)m * 2 * sizeof(*rg));
	ps->rules[c].n_cls = m;
	if (rg[0] < 0x80) {
		int s = ascii_set(ps, rg, m);
		if (s < 0)
			return s;
		if ((rc = push(ps, c, G_BYTE, s)) < 0)
			return rc;
	}
	for (int32_t i = 0; i < m; i++) {
		uint32_t lo = rg[2 * i] < 0x80 ? 0x80 : rg[2 * i];
		if (lo <= rg[2 * i + 1] && (rc = utf8_alts(ps, c, lo, rg[2 * i + 1])) < 0)
			return rc;
	}
	return push(ps, r, G_REF, c);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		return (c | 0x20) - 'a' + 10;
	return -1;
}

/* One character of a literal or class, escapes decoded, into *cp. */
static int parse_char(parser *ps, uint32_t *cp)
{
	const char *at = ps->p;
	int n;

	if (*ps->p != '\\') {
		n = tf_utf8_next((const uint8_t *)ps->p, (size_t)(ps->end - ps->p), cp);
		if (n <= 0)
			return perr(ps, TF_ERR_FORMAT, at, "invalid UTF-8");
		ps->p += n;
		return TF_OK;
	}
	if (++ps->p >= ps->end)
		return perr(ps, TF_ERR_FORMAT, at, "unfinished escape");
	switch (*ps->p++) {
	case 'x': n = 2; break;
	case 'u': n = 4; break;
	case 'U': n = 8; break;
	case 'n': *cp = '\n'; return TF_OK;
	case 'r': *cp = '\r'; return TF_OK;
	case 't': *cp = '\t'; return TF_OK;
	case '\\': case '"': case '[': case ']': case '-': case '^':
		*cp = (uint8_t)ps->p[-1];
		return TF_OK;
	default:
		return perr(ps, TF_ERR_FORMAT, at, "unknown escape '\\%c'", ps->p[-1]);
	}
	*cp = 0;
	for (int i = 0; i < n; i++, ps->p++) {
		int d = ps->p < ps->end ? hex_digit(*ps->p) : -1;
		if (d < 0)
			return perr(ps, TF_ERR_FORMAT, at, "escape wants %d hex digits", n);
		*cp = *cp << 4 | (uint32_t)d;
	}
	if (*cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF))
		return perr(ps, TF_ERR_FORMAT, at, "escape U+%X is not a character", (unsigned)*cp);
	return TF_OK;
}

static int parse_literal(parser *ps, int32_t r)
{
	const char *at = ps->p++;
	uint32_t cp;
	int rc;

	while (ps->p < ps->end && *ps->p != '"')
		if ((rc = parse_char(ps, &cp)) < 0 || (rc = push_char(ps, r, cp)) < 0)
			return rc;
	if (ps->p >= ps->end)
		return perr(ps, TF_ERR_FORMAT, at, "unterminated literal");
	ps->p++;
	return TF_OK;
}

static int parse_class(parser *ps, int32_t r)
{
	const char *at = ps->p++;
	uint32_t rg[2 * (G_CLASS_MAX + 2)];
	int32_t n = 0;
	bool neg = ps->p < ps->end && *ps->p == '^';
	int rc;

	ps->p += neg;
	while (ps->p < ps->end && *ps->p != ']') {
		uint32_t lo, hi;
		const char *from = ps->p;

		if ((rc = parse_char(ps, &lo)) < 0)
			return rc;
		hi = lo;
		if (ps->end - ps->p >= 2 && ps->p[0] == '-' && ps->p[1] != ']') {
			ps->p++;
			if ((rc = parse_char(ps, &hi)) < 0)
				return rc;
			if (hi < lo)
				return perr(ps, TF_ERR_FORMAT, from, "range end before its start");
		}
		if (n == G_CLASS_MAX)
			return perr(ps, TF_ERR_FORMAT, from, "more than %d ranges in a class", G_CLASS_MAX);
		rg[2 * n] = lo, rg[2 * n + 1] = hi, n++;
	}
	if (ps->p >= ps->end)
		return perr(ps, TF_ERR_FORMAT, at, "unterminated character class");
	ps->p++;
	return push_class(ps, r, rg, n, neg, at);
}

static int parse_count(parser *ps, int *v)
{
	*v = 0;
	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
		*v = *v * 10 + (*ps->p++ - '0');
		if (*v > REPEAT_MAX)
			return perr(ps, TF_ERR_FORMAT, ps->p - 1, "repetition count above %d", REPEAT_MAX);
	}
	return TF_OK;
}

/* After *, +, ?, {...}: the bounds in *min, *max (UNBOUNDED). */
static int parse_bounds(parser *ps, int *min, int *max)
{
	const char *at = ps->p;
	const char *digits;
	int rc;

	switch (*ps->p++) {
	case '*': *min = 0, *max = UNBOUNDED; return TF_OK;
	case '+': *min = 1, *max = UNBOUNDED; return TF_OK;
	case '?': *min = 0, *max = 1; return TF_OK;
	}
	skip_space(ps);
	digits = ps->p;
	if ((rc = parse_count(ps, min)) < 0)
		return rc;
	skip_space(ps);
	*max = *min;
	if (ps->p < ps->end && *ps->p == ',') {
		ps->p++;
		skip_space(ps);
		const char *d2 = ps->p;
		if ((rc = parse_count(ps, max)) < 0)
			return rc;
		if (ps->p == d2)
			*max = UNBOUNDED;
		skip_space(ps);
	} else if (ps->p == digits) {
		return perr(ps, TF_ERR_FORMAT, at, "expected a count after '{'");
	}
	if (ps->p >= ps->end || *ps->p != '}')
		return perr(ps, TF_ERR_FORMAT, at, "expected '}'");
	ps->p++;
	if (*max != UNBOUNDED && *max < *min)
		return perr(ps, TF_ERR_FORMAT, at, "repetition {%d,%d}: maximum below minimum", *min, *max);
	return TF_OK;
}

/*
 * Rewrites the symbol at rule r's elements [start, n) as repeated min..max
 * times (llama.cpp's way): min copies, then X* as a rule `R ::= X R |`, or
 * up to max as nested rules `R1 ::= X R2 |`, ..., `Rk ::= X |`.
 */
static int repeat(parser *ps, int32_t r, int32_t start, int min, int max, const char *at)
{
	int32_t k = ps->rules[r].n - start, prev = -1;
	g_elem *x = malloc((size_t)k * sizeof(*x));
	int rc = TF_OK;

	if (!x)
		return nomem();
	memcpy(x, ps->rules[r].el + start, (size_t)k * sizeof(*x));
	ps->rules[r].n = start;
	for (int i = 0; i < min && !rc; i++)
		for (int32_t j = 0; j < k && !rc; j++)
			rc = push(ps, r, x[j].op, x[j].arg);
	for (int i = max == UNBOUNDED ? 1 : max - min; i > 0 && !rc; i--) {
		int32_t q = made_rule(ps, r, at);

		if ((rc = q < 0 ? q : TF_OK) < 0)
			break;
		for (int32_t j = 0; j < k && !rc; j++)
			rc = push(ps, q, x[j].op, x[j].arg);
		if (!rc && (max == UNBOUNDED || prev >= 0))
			rc = push(ps, q, G_REF, max == UNBOUNDED ? q : prev);
		if (!rc)
			rc = push(ps, q, G_ALT, 0);
		prev = q;
	}
	if (!rc && prev >= 0)
		rc = push(ps, r, G_REF, prev);
	free(x);
	return rc;
}

static int parse_alternates(parser *ps, int32_t r);

/* Symbols up to '|', ')', the next rule or the end. */
static int parse_sequence(parser *ps, int32_t r)
{
	int32_t last = -1;      /* where the last symbol's elements start */
	int rc = TF_OK;

	for (;;) {
		skip_space(ps);
		if (ps->p >= ps->end)
			return TF_OK;
		const char *at = ps->p;
		char c = *at;
		int32_t start = ps->rules[r].n;

		if (c == '"') {
			rc = parse_literal(ps, r);
		} else if (c == '[') {
			rc = parse_class(ps, r);
		} else if (c == '.') {
			uint32_t any[2 * (1 + 2)] = { 0, 0x10FFFF };
			ps->p++;
			rc = push_class(ps, r, any, 1, false, at);
		} else if (c == '(') {
			int32_t q = made_rule(ps, r, at);
			ps->p++;
			if (++ps->depth > NEST_MAX)
				return perr(ps, TF_ERR_FORMAT, at, "groups nested deeper than %d", NEST_MAX);
			if ((rc = q < 0 ? q : parse_alternates(ps, q)) < 0)
				return rc;
			ps->depth--;
			skip_space(ps);
			if (ps->p >= ps->end || *ps->p != ')')
				return perr(ps, TF_ERR_FORMAT, at, "'(' without its ')'");
			ps->p++;
			rc = push(ps, r, G_REF, q);
		} else if (is_name_char(c)) {
			if (at_rule_start(ps))
				return TF_OK;
			while (ps->p < ps->end && is_name_char(*ps->p))
				ps->p++;
			int32_t q = named_rule(ps, at, (size_t)(ps->p - at), at);
			rc = q < 0 ? q : push(ps, r, G_REF, q);
		} else if (c == '*' || c == '+' || c == '?' || c == '{') {
			int min, max;
			if (last < 0 || last == ps->rules[r].n)
				return perr(ps, TF_ERR_FORMAT, at, "'%c' has nothing to repeat", c);
			if ((rc = parse_bounds(ps, &min, &max)) < 0 ||
			    (rc = repeat(ps, r, last, min, max, at)) < 0)
				return rc;
			last = -1;
			continue;
		} else {
			return TF_OK;
		}
		if (rc < 0)
			return rc;
		last = start;
	}
}

static int parse_alternates(parser *ps, int32_t r)
{
	int rc = parse_sequence(ps, r);

	while (rc == TF_OK && ps->p < ps->end && *ps->p == '|') {
		ps->p++;
		if ((rc = push(ps, r, G_ALT, 0)) == TF_OK)
			rc = parse_sequence(ps, r);
	}
	return rc;
}

static int parse_rules(parser *ps)
{
	int rc;

	skip_space(ps);
	while (ps->p < ps->end) {
		const char *at = ps->p;

		while (ps->p < ps->end && is_name_char(*ps->p))
			ps->p++;
		if (ps->p == at)
			return perr(ps, TF_ERR_FORMAT, at, "expected a rule name");
		size_t len = (size_t)(ps->p - at);
		while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t'))
			ps->p++;
		if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3))
			return perr(ps, TF_ERR_FORMAT, ps->p, "expected '::=' after '%.*s'", (int)len, at);
		ps->p += 3;
		int32_t r = named_rule(ps, at, len, at);
		if (r < 0)
			return r;
		if (ps->rules[r].def)
			return perr(ps, TF_ERR_INVALID, at, "rule '%s' is defined twice", ps->rules[r].name);
		ps->rules[r].def = at;
		if ((rc = parse_alternates(ps, r)) < 0)
			return rc;
		if (ps->p < ps->end && !at_rule_start(ps))
			return perr(ps, TF_ERR_FORMAT, ps->p, "unexpected '%c'", *ps->p);
	}
	return TF_OK;
}

/* The rules end to end, each closed by G_END; alts: where each alternative starts. */
static int flatten(parser *ps, g_prog *p)
{
	int32_t n = 0, n_alts = 0;

	for (int32_t r = 0; r < ps->n_rules; r++) {
		n += ps->rules[r].n + 1;
		n_alts++;
		for (int32_t i = 0; i < ps->rules[r].n; i++)
			n_alts += ps->rules[r].el[i].op == G_ALT;
	}
	p->elems = malloc((size_t)n * sizeof(*p->elems));
	p->alts = malloc((size_t)n_alts * sizeof(*p->alts));
	p->alt_first = malloc((size_t)(ps->n_rules + 1) * sizeof(*p->alt_first));
	if (!p->elems || !p->alts || !p->alt_first)
		return nomem();
	p->n_rules = ps->n_rules;
	n = n_alts = 0;
	for (int32_t r = 0; r < ps->n_rules; r++) {
		p->alt_first[r] = n_alts;
		p->alts[n_alts++] = n;
		for (int32_t i = 0; i < ps->rules[r].n; i++) {
			p->elems[n++] = ps->rules[r].el[i];
			if (ps->rules[r].el[i].op == G_ALT)
				p->alts[n_alts++] = n;
		}
		p->elems[n++] = (g_elem){ G_END, 0 };
	}
	p->alt_first[ps->n_rules] = n_alts;
	p->n_elems = n;
	p->sets = ps->sets;
	p->n_sets = ps->n_sets;
	ps->sets = NULL;
	return TF_OK;
}

/*
 * Refuses left recursion that grows the stack.  An edge r -> s: rule r may
 * start with s (what comes before s in the alternative can be empty); it
 * is a tail edge when s ends the alternative (match.c pushes nothing for
 * it).  A cycle of tail edges only comes back to a (position, stack) pair
 * already met, which g_expand follows once (so `("a"?)*` is fine); a cycle
 * with another edge pushes forever.  Such a cycle exists when a strongly
 * connected component (Tarjan's, iterative) holds a non-tail edge.
 */
static int check_left_recursion(parser *ps, const g_prog *p)
{
	int32_t nr = p->n_rules, n_edges = 0, top = 0, n_seen = 0, sp = 0;
	bool *nullable = calloc((size_t)nr, sizeof(*nullable)), changed = true;
	int32_t *first = malloc((size_t)(nr + 1) * sizeof(*first));
	int32_t *edges = malloc((size_t)p->n_elems * sizeof(*edges));
	bool *tail = malloc((size_t)p->n_elems * sizeof(*tail));
	int32_t *index = malloc((size_t)nr * sizeof(*index)), *low = malloc((size_t)nr * sizeof(*low));
	int32_t *comp = malloc((size_t)nr * sizeof(*comp)), *scc = malloc((size_t)nr * sizeof(*scc));
	int32_t *stack = malloc(2 * (size_t)nr * sizeof(*stack));
	bool *on = calloc((size_t)nr, sizeof(*on));
	int rc = TF_OK;

	if (!nullable || !first || !edges || !tail || !index || !low || !comp || !scc || !stack || !on) {
		rc = nomem();
		goto out;
	}
	while (changed) {
		changed = false;
		for (int32_t r = 0; r < nr; r++)
			for (int32_t a = p->alt_first[r]; a < p->alt_first[r + 1] && !nullable[r]; a++) {
				int32_t pos = p->alts[a];
				while (p->elems[pos].op == G_REF && nullable[p->elems[pos].arg])
					pos++;
				if (g_is_end(p, pos))
					nullable[r] = changed = true;
			}
	}
	for (int32_t r = 0; r < nr; r++) {
		first[r] = n_edges;
		for (int32_t a = p->alt_first[r]; a < p->alt_first[r + 1]; a++)
			for (int32_t pos = p->alts[a]; p->elems[pos].op == G_REF; pos++) {
				tail[n_edges] = g_is_end(p, pos + 1);
				edges[n_edges++] = p->elems[pos].arg;
				if (!nullable[p->elems[pos].arg])
					break;
			}
	}
	first[nr] = n_edges;
	memset(index, -1, (size_t)nr * sizeof(*index));
	for (int32_t s = 0; s < nr; s++) {
		if (index[s] >= 0)
			continue;
		index[s] = low[s] = n_seen++;
		scc[sp++] = s, on[s] = true;
		stack[top++] = s, stack[top++] = first[s];
		while (top) {
			int32_t u = stack[top - 2], *i = &stack[top - 1];
			if (*i < first[u + 1]) {
				int32_t v = edges[(*i)++];
				if (index[v] < 0) {
					index[v] = low[v] = n_seen++;
					scc[sp++] = v, on[v] = true;
					stack[top++] = v, stack[top++] = first[v];
				} else if (on[v] && index[v] < low[u]) {
					low[u] = index[v];
				}
				continue;
			}
			top -= 2;
			if (top && low[u] < low[stack[top - 2]])
				low[stack[top - 2]] = low[u];
			if (low[u] == index[u])
				do {
					on[scc[--sp]] = false;
					comp[scc[sp]] = u;
				} while (scc[sp] != u);
		}
	}
	for (int32_t r = 0; r < nr && !rc; r++)
		for (int32_t e = first[r]; e < first[r + 1] && !rc; e++)
			if (!tail[e] && comp[edges[e]] == comp[r])
				rc = perr(ps, TF_ERR_INVALID, ps->rules[r].def, "rule '%s' is left-recursive",
					  ps->rules[r].name);
out:
	free(nullable);
	free(first);
	free(edges);
	free(tail);
	free(index);
	free(low);
	free(comp);
	free(scc);
	free(stack);
	free(on);
	return rc;
}

int g_parse(const char *src, size_t len, g_prog *out)
{
	parser ps = { .src = src, .end = src + len, .p = src };
	int rc;

	memset(out, 0, sizeof(*out));
	memset(ps.byte_set, -1, sizeof(ps.byte_set));
	if ((rc = tf_strmap_init(&ps.names, 64)) < 0)
		return nomem();
	rc = parse_rules(&ps);
	for (int32_t r = 0; r < ps.n_rules && !rc; r++)
		if (!ps.rules[r].def)
			rc = perr(&ps, TF_ERR_INVALID, ps.rules[r].ref, "undefined rule '%s'", ps.rules[r].name);
	if (!rc && (out->root = tf_strmap_get(&ps.names, "root", 4)) < 0)
		rc = tf_diag_set(TF_ERR_INVALID, "grammar: no rule 'root'");
	if (!rc)
		rc = flatten(&ps, out);
	if (!rc)
		rc = check_left_recursion(&ps, out);
	for (int32_t r = 0; r < ps.n_rules; r++) {
		free(ps.rules[r].name);
		free(ps.rules[r].el);
		free(ps.rules[r].cls);
	}
	free(ps.rules);
	free(ps.sets);
	tf_strmap_free(&ps.names);
	if (rc)
		g_prog_free(out);
	return rc;
}

void g_prog_free(g_prog *p)
{
	free(p->elems);
	free(p->sets);
	free(p->alts);
	free(p->alt_first);
	memset(p, 0, sizeof(*p));
}
