/*
 * tf_jinja_lex.c - template text to tokens, with Jinja's whitespace control as
 * HF transformers configures it: trim_blocks (a block or comment tag eats
 * one newline after it), lstrip_blocks (spaces before a block or comment tag
 * on its own line go), "-" strips all whitespace on its side, "+" keeps it.
 */
#include "chat/jinja_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"
#include "unicode/unicode.h"

bool tf_jinja_isspace(uint32_t cp) { return tf_unicode_is_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

int tf_jinja_error(const tf_jinja *t, size_t pos, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	size_t line = 1, col = 1;

	for (size_t i = 0; i < pos && i < t->len; i++) {
		if (t->src[i] == '\n') {
			line++;
			col = 1;
		} else if (((uint8_t)t->src[i] & 0xC0) != 0x80) {
			col++;
		}
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tf_diag_set(status, "%s:%zu:%zu: %s", t->name, line, col, msg);
}

struct lexer {
	const tf_jinja *t;
	const char *s;
	size_t len, pos;
	struct jtoks *out;
	bool line_starting;   /* the last tag ended with a newline */
};

static int lex_fail(struct lexer *lx, size_t pos, const char *what)
{
	return tf_jinja_error(lx->t, pos, TF_ERR_FORMAT, "%s", what);
}

static int emit(struct lexer *lx, enum jtok_kind kind, int op, size_t pos, tf_val *val)
{
	if (lx->out->n == lx->out->cap) {
		size_t cap = lx->out->cap ? lx->out->cap * 2 : 64;
		struct jtok *v = realloc(lx->out->v, cap * sizeof(*v));
		if (!v) {
			tf_val_unref(val);
			return TF_ERR_NOMEM;
		}
		lx->out->v = v;
		lx->out->cap = cap;
	}
	lx->out->v[lx->out->n++] = (struct jtok){ kind, op, pos, val };
	return 0;
}

static int emit_val(struct lexer *lx, enum jtok_kind kind, size_t pos, tf_val *val)
{
	return val ? emit(lx, kind, 0, pos, val) : TF_ERR_NOMEM;
}

/* Length of the whitespace character at s[i], or 0. */
static size_t space_at(const char *s, size_t len, size_t i)
{
	uint32_t cp;
	int n = tf_utf8_next((const uint8_t *)s + i, len - i, &cp);
	return n > 0 && tf_jinja_isspace(cp) ? (size_t)n : 0;
}

/* Python's str.rstrip(): the length of s[0..n) without trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n)
{
	size_t end = n;
	while (end > 0) {
		size_t start = end - 1;
		while (start > 0 && ((uint8_t)s[start] & 0xC0) == 0x80)
			start--;
		if (space_at(s, end, start) != end - start)
			break;
		end = start;
	}
	return end;
}

static size_t skip_space(const char *s, size_t len, size_t i)
{
	size_t n;
	while (i < len && (n = space_at(s, len, i)) > 0)
		i += n;
	return i;
}

/* Emits the text s[start..end) before a tag whose whitespace sign is sign,
 * stripped as the sign (and lstrip_blocks for a block or comment) says. */
static int emit_text(struct lexer *lx, size_t start, size_t end, char sign, bool block)
{
	const char *s = lx->s + start;
	size_t n = end - start;

	if (sign == '-') {
		n = rstrip_len(s, n);
	} else if (sign != '+' && block) {
		size_t l = n;
		while (l > 0 && s[l - 1] != '\n')
			l--;
		if ((l > 0 || lx->line_starting) && l < n && skip_space(s, n, l) == n)
			n = l;
	}
	return n ? emit_val(lx, JT_TEXT, start, tf_val_str(s, n)) : 0;
}

/* Consumes the end of a block or comment tag at lx->pos ("-%}", "+%}" or
 * "%}", close being "%}" or "#}"), with what it eats after it. */
static void end_tag(struct lexer *lx, char sign)
{
	lx->pos += 2;
	if (sign == '-')
		lx->pos = skip_space(lx->s, lx->len, lx->pos);
	else if (sign != '+' && lx->pos < lx->len && lx->s[lx->pos] == '\n')
		lx->pos++;   /* trim_blocks */
	lx->line_starting = lx->s[lx->pos - 1] == '\n';
}

static int lex_comment(struct lexer *lx, size_t open)
{
	const char *e = NULL;
	for (size_t i = open + 2; i + 1 < lx->len; i++)
		if (lx->s[i] == '#' && lx->s[i + 1] == '}') {
			e = lx->s + i;
			break;
		}
	if (!e)
		return lex_fail(lx, open, "missing end of comment tag");
	size_t at = (size_t)(e - lx->s);
	char sign = at > lx->pos && (e[-1] == '-' || e[-1] == '+') ? e[-1] : 0;
	lx->pos = at;
	end_tag(lx, sign);
	return 0;
}

/* "{% raw %}" at open (with its sign): the length of the tag, or 0. */
static size_t raw_tag(const struct lexer *lx, size_t open, const char *word)
{
	size_t i = open + 2, wl = strlen(word);
	if (i < lx->len && (lx->s[i] == '-' || lx->s[i] == '+'))
		i++;
	i = skip_space(lx->s, lx->len, i);
	if (lx->len - i < wl || memcmp(lx->s + i, word, wl) != 0)
		return 0;
	i = skip_space(lx->s, lx->len, i + wl);
	if (i < lx->len && (lx->s[i] == '-' || lx->s[i] == '+'))
		i++;
	return lx->len - i >= 2 && memcmp(lx->s + i, "%}", 2) == 0 ? i + 2 - open : 0;
}

static int lex_raw(struct lexer *lx, size_t open, size_t taglen)
{
	char sign = lx->s[open + taglen - 3];
	lx->pos = open + taglen - 2;
	/* The raw tag's own end never trims a newline. */
	if (sign == '-')
		end_tag(lx, '-');
	else
		end_tag(lx, '+');
	for (size_t i = lx->pos; i + 1 < lx->len; i++) {
		size_t n;
		if (lx->s[i] != '{' || lx->s[i + 1] != '%' || !(n = raw_tag(lx, i, "endraw")))
			continue;
		char open_sign = lx->s[i + 2] == '-' || lx->s[i + 2] == '+' ? lx->s[i + 2] : 0;
		int rc = emit_text(lx, lx->pos, i, open_sign, true);
		if (rc < 0)
			return rc;
		lx->pos = i + n - 2;
		char close_sign = lx->s[i + n - 3];
		end_tag(lx, close_sign == '-' || close_sign == '+' ? close_sign : 0);
		return 0;
	}
	return lex_fail(lx, open, "missing end of raw directive");
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string literal at lx->pos, with Python's backslash escapes. */
static int lex_string(struct lexer *lx)
{
	size_t start = lx->pos;
	char q = lx->s[lx->pos++];
	tf_bytes b = { 0 };
	int rc = 0;

	for (;;) {
		if (lx->pos >= lx->len) {
			rc = lex_fail(lx, start, "unterminated string");
			goto cleanup;
		}
		char c = lx->s[lx->pos++];
		if (c == q)
			break;
		if (c != '\\' || lx->pos >= lx->len) {
			if ((rc = tf_bytes_append(&b, &c, 1)) < 0)
				goto cleanup;
			continue;
		}
		c = lx->s[lx->pos++];
		static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
		const char *e = strchr(from, c);
		if (c && e) {
			rc = tf_bytes_append(&b, &to[e - from], 1);
		} else if (c == '\n') {
			continue;
		} else if (c == 'x' || c == 'u' || c == 'U') {
			int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
			uint32_t cp = 0;
			for (int k = 0; k < digits; k++) {
				int h = lx->pos < lx->len ? hexval(lx->s[lx->pos]) : -1;
				if (h < 0) {
					rc = lex_fail(lx, lx->pos,
						      "truncated \\x, \\u or \\U escape");
					goto cleanup;
				}
				cp = cp * 16 + (uint32_t)h;
				lx->pos++;
			}
			if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
				rc = lex_fail(lx, lx->pos, "escape is not a Unicode scalar value");
				goto cleanup;
			}
			char u[4];
			rc = tf_bytes_append(&b, u, (size_t)tf_utf8_put(cp, u));
		} else if (c >= '0' && c <= '7') {
			uint32_t cp = (uint32_t)(c - '0');
			for (int k = 0; k < 2 && lx->pos < lx->len && lx->s[lx->pos] >= '0' &&
			     lx->s[lx->pos] <= '7'; k++)
				cp = cp * 8 + (uint32_t)(lx->s[lx->pos++] - '0');
			char u[4];
			rc = tf_bytes_append(&b, u, (size_t)tf_utf8_put(cp, u));
		} else {
			/* Python keeps an unknown escape as it is. */
			char two[2] = { '\\', c };
			rc = tf_bytes_append(&b, two, 2);
		}
		if (rc < 0)
			goto cleanup;
	}
	rc = emit_val(lx, JT_STRING, start, tf_val_str(b.p ? b.p : "", b.len));
cleanup:
	tf_bytes_free(&b);
	return rc;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c);
}

/* Digits with single underscores between them, from i; returns the end. */
static size_t digits(const char *s, size_t len, size_t i)
{
	while (i < len && is_digit(s[i])) {
		i++;
		if (i + 1 < len && s[i] == '_' && is_digit(s[i + 1]))
			i++;
	}
	return i;
}

static int lex_number(struct lexer *lx)
{
	const char *s = lx->s;
	size_t start = lx->pos, i = digits(s, lx->len, start);
	bool is_float = false;

	if (!(start > 0 && s[start - 1] == '.')) {
		if (i + 1 < lx->len && s[i] == '.' && is_digit(s[i + 1])) {
			i = digits(s, lx->len, i + 1);
			is_float = true;
		}
		if (i < lx->len && (s[i] == 'e' || s[i] == 'E')) {
			size_t j = i + 1;
			if (j < lx->len && (s[j] == '+' || s[j] == '-'))
				j++;
			if (j < lx->len && is_digit(s[j])) {
				i = digits(s, lx->len, j);
				is_float = true;
			}
		}
	}
	char buf[128];
	size_t n = 0;
	for (size_t k = start; k < i; k++)
		if (s[k] != '_' && n + 1 < sizeof(buf))
			buf[n++] = s[k];
	buf[n] = 0;
	if (i - start >= sizeof(buf))
		return lex_fail(lx, start, "number too long");
	lx->pos = i;
	if (is_float)
		return emit_val(lx, JT_FLOAT, start, tf_val_float(strtod(buf, NULL)));
	errno = 0;
	long long v = strtoll(buf, NULL, 10);
	if (errno == ERANGE)
		return lex_fail(lx, start, "integer beyond 64 bits");
	return emit_val(lx, JT_INT, start, tf_val_int(v));
}

static int lex_op(struct lexer *lx)
{
	static const struct { const char *s; int op; } two[] = {
		{ "//", JOP_FLOORDIV }, { "**", JOP_POW }, { "==", JOP_EQ },
		{ "!=", JOP_NE }, { "<=", JOP_LE }, { ">=", JOP_GE },
	};
	size_t at = lx->pos;
	for (size_t k = 0; k < sizeof(two) / sizeof(two[0]); k++)
		if (lx->len - at >= 2 && memcmp(lx->s + at, two[k].s, 2) == 0) {
			lx->pos += 2;
			return emit(lx, JT_OP, two[k].op, at, NULL);
		}
	char c = lx->s[at];
	if (!c || !strchr("+-/*%~[](){}=.:|,<>;", c))
		return lex_fail(lx, at, "unexpected character");
	lx->pos++;
	return emit(lx, JT_OP, c, at, NULL);
}

/* The inside of a {{ }} or {% %} tag from lx->pos to its end. */
static int lex_tag(struct lexer *lx, size_t open, bool block)
{
	const char *close = block ? "%}" : "}}";
	char stack[200];
	size_t depth = 0;
	int rc;

	if ((rc = emit(lx, block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, 0, open, NULL)) < 0)
		return rc;
	for (;;) {
		lx->pos = skip_space(lx->s, lx->len, lx->pos);
		const char *s = lx->s + lx->pos;
		size_t left = lx->len - lx->pos;
		if (!left)
			return lex_fail(lx, open, block ? "unclosed block tag: missing '%}'" :
						       "unclosed variable tag: missing '}}'");
		if (!depth) {
			char sign = 0;
			if (left >= 3 && (s[0] == '-' || (block && s[0] == '+')) &&
			    memcmp(s + 1, close, 2) == 0)
				sign = s[0];
			if (sign || (left >= 2 && memcmp(s, close, 2) == 0)) {
				size_t at = lx->pos;
				lx->pos += sign ? 1 : 0;
				if (block)
					end_tag(lx, sign);
				else if ((lx->pos += 2) && sign == '-')
					lx->pos = skip_space(lx->s, lx->len, lx->pos);
				if (!block)
					lx->line_starting = lx->s[lx->pos - 1] == '\n';
				return emit(lx, block ? JT_BLOCK_END : JT_VAR_END, 0, at, NULL);
			}
		}
		if (s[0] == '\'' || s[0] == '"') {
			rc = lex_string(lx);
		} else if (is_digit(s[0])) {
			rc = lex_number(lx);
		} else if (is_name(s[0])) {
			size_t n = 1;
			while (n < left && is_name(s[n]))
				n++;
			rc = emit_val(lx, JT_NAME, lx->pos, tf_val_str(s, n));
			lx->pos += n;
		} else {
			char c = s[0];
			if (c == '(' || c == '[' || c == '{') {
				if (depth == sizeof(stack))
					return lex_fail(lx, lx->pos, "brackets nested too deep");
				stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
			} else if (c == ')' || c == ']' || c == '}') {
				if (!depth || stack[depth - 1] != c)
					return tf_jinja_error(lx->t, lx->pos, TF_ERR_FORMAT,
							      "unexpected '%c'", c);
				depth--;
			}
			rc = lex_op(lx);
		}
		if (rc < 0)
			return rc;
	}
}

int tf_jinja_lex(const tf_jinja *t, struct jtoks *out)
{
	struct lexer lx = { .t = t, .s = t->src, .len = t->len, .out = out, .line_starting = true };
	int rc = 0;

	while (lx.pos < lx.len && rc == 0) {
		size_t open = lx.pos;
		while (open + 1 < lx.len && !(lx.s[open] == '{' && strchr("{%#", lx.s[open + 1])))
			open++;
		if (open + 1 >= lx.len) {
			rc = emit_text(&lx, lx.pos, lx.len, 0, false);
			break;
		}
		char kind = lx.s[open + 1];
		char sign = open + 2 < lx.len && (lx.s[open + 2] == '-' || lx.s[open + 2] == '+') ?
			    lx.s[open + 2] : 0;
		size_t raw = kind == '%' ? raw_tag(&lx, open, "raw") : 0;
		if ((rc = emit_text(&lx, lx.pos, open, sign, kind != '{')) < 0)
			break;
		lx.pos = open + 2 + (sign ? 1 : 0);
		if (raw)
			rc = lex_raw(&lx, open, raw);
		else if (kind == '#')
			rc = lex_comment(&lx, open);
		else
			rc = lex_tag(&lx, open, kind == '%');
	}
	if (rc == 0)
		rc = emit(&lx, JT_EOF, 0, lx.len, NULL);
	return rc;
}

void tf_jinja_toks_free(struct jtoks *toks)
{
	for (size_t i = 0; i < toks->n; i++)
		tf_val_unref(toks->v[i].val);
	free(toks->v);
	*toks = (struct jtoks){ 0 };
}
