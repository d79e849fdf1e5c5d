/*
 * jinja_str.c - Python's str methods for templates: startswith, endswith,
 * split, rsplit, strip, lstrip, rstrip, replace, upper, lower, capitalize,
 * find, count, join, on code points as Python counts them.  Case mapping
 * uses the C library's Unicode tables (C.UTF-8) plus Python's special cases
 * for ß, İ and a final sigma; the other characters whose case mapping
 * grows (ligatures, some Greek) are refused rather than mapped wrongly.
 */
#define _GNU_SOURCE
#include "chat/jinja_int.h"

#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "tf/error.h"
#include "unicode/unicode.h"

/* Decoded code points of a STR. */
struct cps {
	uint32_t *v;
	size_t n;
};

static int cps_of(const tf_val *s, struct cps *out)
{
	size_t len;
	const char *p = tf_val_as_str(s, &len);
	out->n = 0;
	if (!(out->v = malloc((len + 1) * sizeof(*out->v))))
		return TF_ERR_NOMEM;
	for (size_t i = 0; i < len;) {
		int k = tf_utf8_next((const uint8_t *)p + i, len - i, &out->v[out->n]);
		if (k <= 0) {   /* not UTF-8: keep the byte as a code point of its own */
			out->v[out->n] = (uint8_t)p[i];
			k = 1;
		}
		out->n++;
		i += (size_t)k;
	}
	return 0;
}

static int put_cp(tf_bytes *b, uint32_t cp)
{
	char u[4];
	return tf_bytes_append(b, u, (size_t)tf_utf8_put(cp, u));
}

static int str_out(tf_bytes *b, tf_val **out)
{
	*out = tf_val_str(b->p ? b->p : "", b->len);
	tf_bytes_free(b);
	return *out ? 0 : TF_ERR_NOMEM;
}

/* ---- case ---- */

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_init(void) { utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }

/* Code points whose upper case in Python is not one code point. */
static bool special_upper(uint32_t c)
{
	return c == 0x149 || c == 0x1F0 || c == 0x390 || c == 0x3B0 || c == 0x587 ||
	       (c >= 0x1E96 && c <= 0x1E9A) || (c >= 0x1F50 && c <= 0x1F56) ||
	       (c >= 0x1F80 && c <= 0x1FFC) || (c >= 0xFB00 && c <= 0xFB17);
}

/* Unicode's Case_Ignorable, for the characters templates meet: the final
 * sigma rule looks through them. */
static bool case_ignorable(uint32_t c)
{
	return c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xA8 ||
	       c == 0xAD || c == 0xAF || c == 0xB4 || c == 0xB7 || c == 0xB8 ||
	       (c >= 0x2B0 && c <= 0x36F) || (c >= 0x2018 && c <= 0x2019) || c == 0x2024 ||
	       c == 0x2027 || (c >= 0x200B && c <= 0x200F);
}

static bool is_cased(uint32_t c)
{
	if (c < 0x80)
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
	return utf8_locale &&
	       (iswupper_l((wint_t)c, utf8_locale) || iswlower_l((wint_t)c, utf8_locale));
}

/* Appends c upper- (up) or lower-cased, or upper for a title (capitalize's
 * first character); cs and i give a sigma its context. */
static int case_one(struct jrun *r, const struct jnode *at, const struct cps *cs, size_t i, bool up,
		    bool title, tf_bytes *b)
{
	uint32_t c = cs->v[i];
	if (c < 0x80) {
		if (up && c >= 'a' && c <= 'z')
			c -= 32;
		else if (!up && c >= 'A' && c <= 'Z')
			c += 32;
		return put_cp(b, c);
	}
	if (up && c == 0xDF)
		return tf_bytes_append(b, title ? "Ss" : "SS", 2);
	if (!up && c == 0x130)
		return tf_bytes_append(b, "i\xCC\x87", 3);
	if ((up && special_upper(c)) ||
	    (title && ((c >= 0x1C4 && c <= 0x1CC) || (c >= 0x1F1 && c <= 0x1F3))))
		return tf_jinja_fail(r, at, "case mapping of U+%04X is not supported", c);
	pthread_once(&utf8_once, utf8_init);
	if (!utf8_locale)
		return tf_jinja_fail(r, at, "no C.UTF-8 locale for the case of U+%04X", c);
	if (!up && c == 0x3A3) {
		/* final sigma: after a cased letter and not before one */
		bool before = false, after = false;
		for (size_t k = i; k-- > 0 && !before;)
			if (is_cased(cs->v[k]))
				before = true;
			else if (!case_ignorable(cs->v[k]))
				break;
		for (size_t k = i + 1; k < cs->n && !after; k++)
			if (is_cased(cs->v[k]))
				after = true;
			else if (!case_ignorable(cs->v[k]))
				break;
		return put_cp(b, before && !after ? 0x3C2 : 0x3C3);
	}
	wint_t m = up ? towupper_l((wint_t)c, utf8_locale) : towlower_l((wint_t)c, utf8_locale);
	return put_cp(b, (uint32_t)m);
}

/* upper(), lower(), capitalize() (first upper, the rest lower) and
 * jinja2's title filter (mode 't'). */
/* What jinja2's title filter splits words at. */
static bool title_sep(uint32_t c)
{
	return tf_jinja_isspace(c) || (c < 0x80 && strchr("-({[<", (int)c) && c);
}

static int change_case(struct jrun *r, const struct jnode *at, tf_val *self, int mode, tf_val **out)
{
	struct cps cs, item;
	tf_bytes b = { 0 };
	int rc = cps_of(self, &cs);

	/* title: each run of separators or of other characters is an item,
	 * upper-cased at its first character and lower-cased after it */
	item = cs;
	for (size_t i = 0; i < cs.n && rc == 0; i++) {
		if (mode == 't' && (i == 0 || title_sep(cs.v[i]) != title_sep(cs.v[i - 1]))) {
			size_t end = i + 1;
			while (end < cs.n && title_sep(cs.v[end]) == title_sep(cs.v[i]))
				end++;
			item = (struct cps){ cs.v + i, end - i };
		}
		size_t k = (size_t)(cs.v + i - item.v);
		bool first = mode == 't' ? k == 0 : mode == 'c' && i == 0;
		/* title lowers item[1:] as a string of its own (the sigma rule sees only it) */
		struct cps rest = { item.v + 1, item.n - 1 };
		bool own = mode == 't' && k > 0;
		rc = case_one(r, at, own ? &rest : &item, own ? k - 1 : k, mode == 'u' || first,
			      mode == 'c' && first, &b);
	}
	free(cs.v);
	if (rc < 0) {
		tf_bytes_free(&b);
		return rc;
	}
	return str_out(&b, out);
}

/* ---- strip and split ---- */

/* The code point at s[i] and its length in bytes; a byte that is not UTF-8
 * is one unit that matches nothing (UINT32_MAX). */
static size_t cp_at(const char *s, size_t len, size_t i, uint32_t *cp)
{
	int k = tf_utf8_next((const uint8_t *)s + i, len - i, cp);
	if (k > 0)
		return (size_t)k;
	*cp = UINT32_MAX;
	return 1;
}

/* The code point ending at s[end] and its length, as cp_at reads it. */
static size_t cp_before(const char *s, size_t end, uint32_t *cp)
{
	size_t start = end - 1;
	while (start > 0 && end - start < 4 && ((uint8_t)s[start] & 0xC0) == 0x80)
		start--;
	if (cp_at(s, end, start, cp) == end - start)
		return end - start;
	*cp = UINT32_MAX;
	return 1;
}

static bool in_set(uint32_t c, const struct cps *set)
{
	if (!set)
		return tf_jinja_isspace(c);
	for (size_t k = 0; k < set->n; k++)
		if (set->v[k] == c)
			return true;
	return false;
}

/* strip (mode 0), lstrip ('l'), rstrip ('r') of chars (NULL or None: whitespace). */
static int strip(tf_val *self, int mode, const tf_val *chars, tf_val **out)
{
	struct cps set = { 0 };
	bool use_set = tf_val_kind_of(chars) == TF_VAL_STR;
	size_t len, lo = 0, hi, n;
	const char *s = tf_val_as_str(self, &len);
	uint32_t cp;

	if (use_set && cps_of(chars, &set) < 0)
		return TF_ERR_NOMEM;
	hi = len;
	while (mode != 'r' && lo < hi && (n = cp_at(s, hi, lo, &cp)) &&
	       in_set(cp, use_set ? &set : NULL))
		lo += n;
	while (mode != 'l' && hi > lo && (n = cp_before(s, hi, &cp)) &&
	       in_set(cp, use_set ? &set : NULL))
		hi -= n;
	free(set.v);
	return tf_jinja_give(0, tf_val_str(s + lo, hi - lo), out);
}

/* A piece [lo, hi) of bytes found by split. */
struct piece {
	size_t lo, hi;
};

static int piece_add(struct piece **v, size_t *n, size_t lo, size_t hi)
{
	struct piece *p = realloc(*v, (*n + 1) * sizeof(**v));
	if (!p)
		return TF_ERR_NOMEM;
	*v = p;
	p[(*n)++] = (struct piece){ lo, hi };
	return 0;
}

/* Byte length of the whitespace character ending at end, or 0. */
static size_t space_before(const char *s, size_t end)
{
	uint32_t cp;
	size_t n = cp_before(s, end, &cp);
	return tf_jinja_isspace(cp) ? n : 0;
}

/* Byte length of the whitespace character at s[i], or 0. */
static size_t space_after(const char *s, size_t len, size_t i)
{
	uint32_t cp;
	size_t n = cp_at(s, len, i, &cp);
	return tf_jinja_isspace(cp) ? n : 0;
}

/* Pieces of split() (from the left) on runs of whitespace. */
static int split_space(const char *s, size_t len, int64_t max, struct piece **v, size_t *n)
{
	size_t i = 0, k;
	int rc = 0;
	for (; max != 0 && rc == 0; max--) {
		while (i < len && (k = space_after(s, len, i)))
			i += k;
		if (i == len)
			return 0;
		size_t j = i;
		while (i < len && !space_after(s, len, i))
			i++;
		rc = piece_add(v, n, j, i);
	}
	while (i < len && (k = space_after(s, len, i)))
		i += k;
	return rc == 0 && i < len ? piece_add(v, n, i, len) : rc;
}

/* Pieces of rsplit() on runs of whitespace, from the right. */
static int rsplit_space(const char *s, size_t len, int64_t max, struct piece **v, size_t *n)
{
	size_t i = len, k;
	int rc = 0;
	for (; max != 0 && rc == 0; max--) {
		while (i > 0 && (k = space_before(s, i)))
			i -= k;
		if (i == 0)
			return 0;
		size_t j = i;
		while (i > 0 && !space_before(s, i))
			i--;
		rc = piece_add(v, n, i, j);
	}
	while (i > 0 && (k = space_before(s, i)))
		i -= k;
	return rc == 0 && i > 0 ? piece_add(v, n, 0, i) : rc;
}

/* Pieces of split(sep), or of rsplit(sep) from the right. */
static int split_sep(const char *s, size_t len, const char *sep, size_t sl, int64_t max, bool right,
		     struct piece **v, size_t *n)
{
	size_t lo = 0, hi = len;
	int rc = 0;
	for (; max != 0 && rc == 0; max--) {
		const char *m = NULL;
		if (!right) {
			m = hi - lo >= sl ? memmem(s + lo, hi - lo, sep, sl) : NULL;
		} else {
			for (size_t e = hi; !m && e >= lo + sl; e--)
				if (memcmp(s + e - sl, sep, sl) == 0)
					m = s + e - sl;
		}
		if (!m)
			break;
		size_t at = (size_t)(m - s);
		rc = right ? piece_add(v, n, at + sl, hi) : piece_add(v, n, lo, at);
		if (right)
			hi = at;
		else
			lo = at + sl;
	}
	return rc == 0 ? piece_add(v, n, lo, hi) : rc;
}

/* split()/rsplit() (right) with sep (NULL or None: runs of whitespace). */
static int split(struct jrun *r, const struct jnode *at, tf_val *self, const tf_val *sep,
		 const tf_val *maxsplit, bool right, tf_val **out)
{
	size_t len, sl = 0, n = 0;
	const char *s = tf_val_as_str(self, &len), *sp = NULL;
	struct piece *v = NULL;
	int64_t max = -1;
	int rc;

	if (tf_val_kind_of(sep) == TF_VAL_STR) {
		sp = tf_val_as_str(sep, &sl);
		if (!sl)
			return tf_jinja_fail(r, at, "empty separator");
	} else if (sep && tf_val_kind_of(sep) != TF_VAL_NONE) {
		return tf_jinja_fail(r, at, "must be str or None, not %s", tf_jinja_type_name(sep));
	}
	if (maxsplit) {
		if (tf_val_kind_of(maxsplit) != TF_VAL_INT)
			return tf_jinja_fail(r, at, "maxsplit must be an integer");
		max = tf_val_as_int(maxsplit) < 0 ? -1 : tf_val_as_int(maxsplit);
	}
	if (!sp)
		rc = right ? rsplit_space(s, len, max, &v, &n) : split_space(s, len, max, &v, &n);
	else
		rc = split_sep(s, len, sp, sl, max, right, &v, &n);
	tf_val *list = rc == 0 ? tf_val_list() : NULL;
	if (rc == 0 && !list)
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct piece *p = &v[right ? n - 1 - i : i];
		rc = tf_val_list_push(list, tf_val_str(s + p->lo, p->hi - p->lo));
	}
	free(v);
	if (rc < 0) {
		tf_val_unref(list);
		return rc;
	}
	*out = list;
	return 0;
}

/* replace(old, new, count): an empty old goes between every character. */
static int replace(struct jrun *r, const struct jnode *at, tf_val *self, const tf_val *old,
		   const tf_val *new, const tf_val *count, tf_val **out)
{
	size_t len, ol, nl;
	const char *s = tf_val_as_str(self, &len), *o = tf_val_as_str(old, &ol),
		   *w = tf_val_as_str(new, &nl);
	int64_t max = -1;
	tf_bytes b = { 0 };
	int rc = 0;

	if (!o || !w)
		return tf_jinja_fail(r, at, "replace() arguments must be str, not %s",
				     tf_jinja_type_name(o ? new : old));
	if (count && tf_val_kind_of(count) != TF_VAL_NONE) {
		if (tf_val_kind_of(count) != TF_VAL_INT)
			return tf_jinja_fail(r, at, "replace() count must be an integer");
		max = tf_val_as_int(count);
	}
	size_t i = 0;
	while (rc == 0 && i <= len && max != 0) {
		const char *m;
		size_t step = 0;
		if (!ol) {
			m = s + i;
			if (i < len) {
				uint32_t cp;
				int k = tf_utf8_next((const uint8_t *)s + i, len - i, &cp);
				step = k > 0 ? (size_t)k : 1;
			}
		} else {
			m = len - i >= ol ? memmem(s + i, len - i, o, ol) : NULL;
		}
		if (!m)
			break;
		size_t atb = (size_t)(m - s);
		if ((rc = tf_jinja_output_check(r, at, atb - i + nl)) == 0 &&
		    (rc = tf_bytes_append(&b, s + i, atb - i)) == 0)
			rc = tf_bytes_append(&b, w, nl);
		if (rc == 0 && !ol)
			rc = tf_bytes_append(&b, s + atb, step);
		i = atb + (ol ? ol : step);
		if (!ol && step == 0)
			i = len + 1;
		max--;
	}
	if (rc == 0 && i < len)
		rc = tf_bytes_append(&b, s + i, len - i);
	if (rc < 0) {
		tf_bytes_free(&b);
		return rc;
	}
	return str_out(&b, out);
}

/* startswith/endswith with a str or a tuple of them. */
static int affix(struct jrun *r, const struct jnode *at, tf_val *self, const tf_val *arg, bool end,
		 tf_val **out)
{
	size_t len;
	const char *s = tf_val_as_str(self, &len);
	bool yes = false;
	bool tuple = tf_val_seq_of(arg) == TF_SEQ_TUPLE;
	size_t n = tf_val_kind_of(arg) == TF_VAL_STR ? 1 : tuple ? tf_val_len(arg) : 0;

	if (!n && !tuple)
		return tf_jinja_fail(r, at, "%s first arg must be str or a tuple of str, not %s",
				     end ? "endswith" : "startswith", tf_jinja_type_name(arg));
	for (size_t i = 0; i < n && !yes; i++) {
		const tf_val *a = tf_val_kind_of(arg) == TF_VAL_STR ? arg : tf_val_at(arg, i);
		size_t al;
		const char *p = tf_val_as_str(a, &al);
		if (!p)
			return tf_jinja_fail(r, at, "tuple for %s must only contain str, not %s",
					     end ? "endswith" : "startswith",
					     tf_jinja_type_name(a));
		yes = al <= len && memcmp(end ? s + len - al : s, p, al) == 0;
	}
	return (*out = tf_val_bool(yes)) ? 0 : TF_ERR_NOMEM;
}

/* find (index in code points or -1) and count of non-overlapping matches. */
static int search(struct jrun *r, const struct jnode *at, tf_val *self, const tf_val *sub,
		  bool count, tf_val **out)
{
	size_t len, sl;
	const char *s = tf_val_as_str(self, &len), *p = tf_val_as_str(sub, &sl);
	int64_t result = count ? 0 : -1;

	if (!p)
		return tf_jinja_fail(r, at, "must be str, not %s", tf_jinja_type_name(sub));
	if (count && !sl) {
		struct cps cs;
		if (cps_of(self, &cs) < 0)
			return TF_ERR_NOMEM;
		free(cs.v);
		result = (int64_t)cs.n + 1;
	}
	for (size_t i = 0; sl && i + sl <= len;) {
		const char *m = memmem(s + i, len - i, p, sl);
		if (!m)
			break;
		if (!count) {
			result = 0;
			for (const char *c = s; c < m; c++)
				result += ((uint8_t)*c & 0xC0) != 0x80;
			break;
		}
		result++;
		i = (size_t)(m - s) + sl;
	}
	if (!count && !sl)
		result = 0;
	return (*out = tf_val_int(result)) ? 0 : TF_ERR_NOMEM;
}

/* sep.join(items): every item must be a str. */
static int join(struct jrun *r, const struct jnode *at, tf_val *self, tf_val *items, tf_val **out)
{
	size_t sl;
	const char *sep = tf_val_as_str(self, &sl);
	tf_val *list = NULL;
	tf_bytes b = { 0 };
	int rc = tf_jinja_iterate(r, at, items, &list);

	for (size_t i = 0; rc == 0 && i < tf_val_len(list); i++) {
		size_t il;
		const char *s = tf_val_as_str(tf_val_at(list, i), &il);
		if (!s)
			rc = tf_jinja_fail(r, at,
					   "sequence item %zu: expected str instance, %s found", i,
					   tf_jinja_type_name(tf_val_at(list, i)));
		else if ((rc = tf_jinja_output_check(r, at, il + sl)) == 0 &&
			 (rc = i ? tf_bytes_append(&b, sep, sl) : 0) == 0)
			rc = tf_bytes_append(&b, s, il);
	}
	tf_val_unref(list);
	if (rc < 0) {
		tf_bytes_free(&b);
		return rc;
	}
	return str_out(&b, out);
}

int tf_jinja_str_title(struct jrun *r, const struct jnode *at, tf_val *self, tf_val **out)
{
	return change_case(r, at, self, 't', out);
}

int tf_jinja_str_method(struct jrun *r, const struct jnode *at, tf_val *self, const char *name,
			const struct jargs *args, tf_val **out)
{
	static const char *const strip_args[] = { "chars", NULL },
				 *const split_args[] = { "sep", "maxsplit", NULL },
				 *const replace_args[] = { "old", "new", "count", NULL };
	tf_val *a0 = tf_jinja_arg(args, 0, NULL), *a1 = tf_jinja_arg(args, 1, NULL);
	int rc;

	if (!strcmp(name, "startswith") || !strcmp(name, "endswith") || !strcmp(name, "find") ||
	    !strcmp(name, "count") || !strcmp(name, "join")) {
		if ((rc = tf_jinja_args_check(r, at, name, args, 1, NULL)) < 0)
			return rc;
		if (!a0)
			return tf_jinja_fail(r, at, "%s() takes exactly one argument (0 given)",
					     name);
		if (name[0] == 's' || name[0] == 'e')
			return affix(r, at, self, a0, name[0] == 'e', out);
		if (name[0] == 'j')
			return join(r, at, self, a0, out);
		return search(r, at, self, a0, name[0] == 'c', out);
	}
	if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
		if ((rc = tf_jinja_args_check(r, at, name, args, 1, strip_args)) < 0)
			return rc;
		a0 = tf_jinja_arg(args, 0, "chars");
		if (a0 && tf_val_kind_of(a0) != TF_VAL_STR && tf_val_kind_of(a0) != TF_VAL_NONE)
			return tf_jinja_fail(r, at, "%s arg must be None or str", name);
		return strip(self, name[0] == 's' ? 0 : name[0], a0, out);
	}
	if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
		if ((rc = tf_jinja_args_check(r, at, name, args, 2, split_args)) < 0)
			return rc;
		return split(r, at, self, tf_jinja_arg(args, 0, "sep"),
			     tf_jinja_arg(args, 1, "maxsplit"), name[0] == 'r', out);
	}
	if (!strcmp(name, "replace")) {
		if ((rc = tf_jinja_args_check(r, at, name, args, 3, replace_args)) < 0)
			return rc;
		a0 = tf_jinja_arg(args, 0, "old");
		a1 = tf_jinja_arg(args, 1, "new");
		if (!a0 || !a1)
			return tf_jinja_fail(r, at, "replace() takes at least 2 arguments");
		return replace(r, at, self, a0, a1, tf_jinja_arg(args, 2, "count"), out);
	}
	if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize")) {
		if ((rc = tf_jinja_args_check(r, at, name, args, 0, NULL)) < 0)
			return rc;
		return change_case(r, at, self,
				   name[0] == 'c'   ? 'c'
				   : name[0] == 'u' ? 'u'
						    : 'l',
				   out);
	}
	return 1;
}
