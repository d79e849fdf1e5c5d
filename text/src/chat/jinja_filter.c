/*
 * jinja_filter.c - the filters chat templates use, with jinja2's semantics
 * (its filters.py) and HF transformers' tojson.
 */
#include "chat/jinja_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tf/error.h"
#include "unicode/unicode.h"

/* len() as Python counts: code points, items, entries. */
static int length(struct jrun *r, const struct jnode *at, const tf_val *v, int64_t *n)
{
	size_t len;
	const char *s = tf_val_as_str(v, &len);
	switch (tf_val_kind_of(v)) {
	case TF_VAL_STR:
		*n = 0;
		for (size_t i = 0; i < len; i++)
			*n += ((uint8_t)s[i] & 0xC0) != 0x80;
		return 0;
	case TF_VAL_LIST:
	case TF_VAL_DICT:
		if (tf_val_is_namespace(v) || tf_val_seq_of(v) == TF_SEQ_GENERATOR)
			break;
		*n = (int64_t)tf_val_len(v);
		return 0;
	case TF_VAL_UNDEFINED:
		*n = 0;
		return 0;
	default:
		break;
	}
	return tf_jinja_fail(r, at, "object of type '%s' has no len()", tf_jinja_type_name(v));
}

/* Applies the test called name (with args) to v; used by select and friends. */
static int test_by_name(struct jrun *r, const struct jnode *at, const tf_val *name, tf_val *v,
			tf_val **rest, size_t nrest, bool *yes)
{
	const char *s = tf_val_as_str(name, NULL);
	int idx = s ? tf_jinja_test_find(s) : -1;
	if (idx < 0)
		return tf_jinja_fail(r, at, "no test named '%s'", s ? s : "?");
	struct jargs a = { .pos = rest, .npos = nrest };
	return tf_jinja_test_call(r, at, idx, v, &a, yes);
}

/* item.attr as join, map and selectattr read it, or NULL. */
static tf_val *item_attr(const tf_val *item, const tf_val *attr)
{
	const char *name = tf_val_as_str(attr, NULL);
	return name ? tf_val_dict_get(item, name) : NULL;
}

/* ---- filters ---- */

static int f_length(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		    tf_val **out)
{
	int64_t n = 0;
	int rc = tf_jinja_args_check(r, at, "length", a, 0, NULL);
	if (rc == 0 && (rc = length(r, at, v, &n)) == 0)
		rc = tf_jinja_give(0, tf_val_int(n), out);
	return rc;
}

static int f_tojson(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		    tf_val **out)
{
	static const char *const names[] = { "ensure_ascii", "indent", "separators", "sort_keys",
					     NULL };
	tf_json_style st = { -1, ", ", ": ", false, tf_jinja_output_left(r) };
	tf_val *ascii = tf_jinja_arg(a, -1, "ensure_ascii"), *indent = tf_jinja_arg(a, 0, "indent"),
	       *seps = tf_jinja_arg(a, -1, "separators"), *sort = tf_jinja_arg(a, -1, "sort_keys");
	tf_bytes b = { 0 };
	int rc = tf_jinja_args_check(r, at, "tojson", a, 1, names);

	if (rc < 0)
		return rc;
	if (ascii && tf_val_truthy(ascii))
		return tf_jinja_fail(r, at, "tojson(ensure_ascii=True) is not supported");
	if (indent && tf_val_kind_of(indent) != TF_VAL_NONE) {
		if (tf_val_kind_of(indent) != TF_VAL_INT || tf_val_as_int(indent) > 64)
			return tf_jinja_fail(r, at, "tojson indent must be an integer up to 64");
		st.indent = tf_val_as_int(indent) < 0 ? 0 : (int)tf_val_as_int(indent);
		st.item_sep = ",";
	}
	if (seps && tf_val_kind_of(seps) != TF_VAL_NONE) {
		const char *i = tf_val_as_str(tf_val_at(seps, 0), NULL),
			   *k = tf_val_as_str(tf_val_at(seps, 1), NULL);
		if (tf_val_kind_of(seps) != TF_VAL_LIST || tf_val_len(seps) != 2 || !i || !k)
			return tf_jinja_fail(r, at, "tojson separators must be two strings");
		st.item_sep = i;
		st.key_sep = k;
	}
	st.sort_keys = sort && tf_val_truthy(sort);
	return tf_jinja_dump_str(r, at, tf_val_dump_json_style(v, &st, &b), &b, out);
}

/* Filters that are str methods of str(v): trim, lower, upper, capitalize, replace. */
static int str_filter(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		      const char *method, tf_val **out)
{
	tf_val *s;
	int rc = tf_jinja_to_str(r, at, v, &s);
	if (rc < 0)
		return rc;
	rc = tf_jinja_str_method(r, at, s, method, a, out);
	tf_val_unref(s);
	return rc;
}

static int f_trim(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		  tf_val **out)
{
	return str_filter(r, at, v, a, "strip", out);
}

static int f_lower(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		   tf_val **out)
{
	return str_filter(r, at, v, a, "lower", out);
}

static int f_upper(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		   tf_val **out)
{
	return str_filter(r, at, v, a, "upper", out);
}

static int f_capitalize(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
			tf_val **out)
{
	return str_filter(r, at, v, a, "capitalize", out);
}

static int f_title(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		   tf_val **out)
{
	tf_val *s;
	int rc = tf_jinja_args_check(r, at, "title", a, 0, NULL);
	if (rc < 0 || (rc = tf_jinja_to_str(r, at, v, &s)) < 0)
		return rc;
	rc = tf_jinja_str_title(r, at, s, out);
	tf_val_unref(s);
	return rc;
}

static int f_replace(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		     tf_val **out)
{
	/* jinja2's replace takes str() of its arguments */
	static const char *const names[] = { "old", "new", "count", NULL };
	tf_val *strs[2] = { NULL, NULL }, *count = tf_jinja_arg(a, 2, "count");
	int rc = tf_jinja_args_check(r, at, "replace", a, 3, names);
	for (int i = 0; i < 2 && rc == 0; i++) {
		tf_val *x = tf_jinja_arg(a, i, names[i]);
		rc = x ? tf_jinja_to_str(r, at, x, &strs[i])
		       : tf_jinja_fail(r, at, "replace() missing argument '%s'", names[i]);
	}
	if (rc == 0) {
		tf_val *pos[3] = { strs[0], strs[1], count };
		struct jargs b = { .pos = pos, .npos = count ? 3 : 2 };
		rc = str_filter(r, at, v, &b, "replace", out);
	}
	tf_val_unref(strs[0]);
	tf_val_unref(strs[1]);
	return rc;
}

static int f_string(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		    tf_val **out)
{
	int rc = tf_jinja_args_check(r, at, "string", a, 0, NULL);
	return rc < 0 ? rc : tf_jinja_to_str(r, at, v, out);
}

static int f_list(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		  tf_val **out)
{
	tf_val *items;
	int rc = tf_jinja_args_check(r, at, "list", a, 0, NULL);
	if (rc < 0 || (rc = tf_jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	tf_val *l = tf_val_list();
	rc = tf_jinja_list_extend(l, items);
	tf_val_unref(items);
	return tf_jinja_give(rc, l, out);
}

static int f_join(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		  tf_val **out)
{
	static const char *const names[] = { "d", "attribute", NULL };
	tf_val *sep = tf_jinja_arg(a, 0, "d"), *attr = tf_jinja_arg(a, 1, "attribute"),
	       *items = NULL, *strs = NULL;
	tf_val *sep_str = NULL;
	int rc = tf_jinja_args_check(r, at, "join", a, 2, names);

	if (rc == 0 && (rc = tf_jinja_iterate(r, at, v, &items)) == 0 && !(strs = tf_val_list()))
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(items) && rc == 0; i++) {
		tf_val *item = tf_val_at(items, i), *s;
		if (attr && !(item = item_attr(item, attr))) {
			rc = tf_jinja_fail(r, at, "join: item %zu has no such attribute", i);
			break;
		}
		if ((rc = tf_jinja_to_str(r, at, item, &s)) == 0)
			rc = tf_val_list_push(strs, s);
	}
	if (rc == 0 && sep)
		rc = tf_jinja_to_str(r, at, sep, &sep_str);
	else if (rc == 0 && !(sep_str = tf_val_str("", 0)))
		rc = TF_ERR_NOMEM;
	if (rc == 0)
		rc = tf_jinja_str_method(r, at, sep_str, "join",
					 &(struct jargs){ .pos = &strs, .npos = 1 }, out);
	tf_val_unref(sep_str);
	tf_val_unref(items);
	tf_val_unref(strs);
	return rc;
}

static int f_default(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		     tf_val **out)
{
	static const char *const names[] = { "default_value", "boolean", NULL };
	tf_val *def = tf_jinja_arg(a, 0, "default_value"), *boolean = tf_jinja_arg(a, 1, "boolean");
	int rc = tf_jinja_args_check(r, at, "default", a, 2, names);
	if (rc < 0)
		return rc;
	if (tf_val_kind_of(v) == TF_VAL_UNDEFINED ||
	    (boolean && tf_val_truthy(boolean) && !tf_val_truthy(v)))
		return tf_jinja_give(0, def ? tf_val_ref(def) : tf_val_str("", 0), out);
	return tf_jinja_give(0, tf_val_ref(v), out);
}

static int f_items(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		   tf_val **out)
{
	int rc = tf_jinja_args_check(r, at, "items", a, 0, NULL);
	if (rc < 0)
		return rc;
	if (tf_val_kind_of(v) == TF_VAL_UNDEFINED)
		return tf_jinja_give(0, tf_val_seq_new(TF_SEQ_GENERATOR), out);
	if (tf_val_kind_of(v) != TF_VAL_DICT || tf_val_is_namespace(v))
		return tf_jinja_fail(r, at, "Can only get item pairs from a mapping.");
	/* jinja2's items filter yields the pairs: a generator, not a view */
	tf_val *view = NULL, *gen = tf_val_seq_new(TF_SEQ_GENERATOR);
	if ((rc = tf_jinja_method_call(r, at, v, "items", a, &view)) == 0)
		rc = tf_jinja_list_extend(gen, view);
	tf_val_unref(view);
	return tf_jinja_give(rc, gen, out);
}

/* first (sign 1) or last (-1) item. */
static int end_item(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		    int sign, tf_val **out)
{
	tf_val *items;
	int rc = tf_jinja_args_check(r, at, sign > 0 ? "first" : "last", a, 0, NULL);
	if (rc == 0 && sign < 0 && tf_val_seq_of(v) == TF_SEQ_GENERATOR)
		rc = tf_jinja_fail(r, at, "'generator' object is not reversible");
	if (rc < 0 || (rc = tf_jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	size_t n = tf_val_len(items);
	if (!n)
		rc = tf_jinja_give(0,
				   tf_val_undefined(sign > 0 ? "No first item, sequence was empty."
							     : "No last item, sequence was empty."),
				   out);
	else
		rc = tf_jinja_give(0, tf_val_ref(tf_val_at(items, sign > 0 ? 0 : n - 1)), out);
	tf_val_unref(items);
	return rc;
}

static int f_first(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		   tf_val **out)
{
	return end_item(r, at, v, a, 1, out);
}

static int f_last(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		  tf_val **out)
{
	return end_item(r, at, v, a, -1, out);
}

static int f_abs(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		 tf_val **out)
{
	int rc = tf_jinja_args_check(r, at, "abs", a, 0, NULL);
	if (rc < 0)
		return rc;
	switch (tf_val_kind_of(v)) {
	case TF_VAL_INT:
		if (tf_val_as_int(v) == INT64_MIN)
			return tf_jinja_fail(r, at, "integer result beyond 64 bits");
		return tf_jinja_give(
			0, tf_val_int(tf_val_as_int(v) < 0 ? -tf_val_as_int(v) : tf_val_as_int(v)),
			out);
	case TF_VAL_BOOL: return tf_jinja_give(0, tf_val_int(tf_val_as_bool(v)), out);
	case TF_VAL_FLOAT: return tf_jinja_give(0, tf_val_float(fabs(tf_val_as_float(v))), out);
	default:
		return tf_jinja_fail(r, at, "bad operand type for abs(): '%s'",
				     tf_jinja_type_name(v));
	}
}

/* select/reject (by a test of the item) and selectattr/rejectattr (of an
 * attribute of it): keep says which outcome stays. */
static int select_items(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
			bool by_attr, bool keep, tf_val **out)
{
	tf_val *items, *l = NULL;
	size_t skip = by_attr ? 1 : 0;
	int rc = tf_jinja_args_check(r, at, "select", a, a->npos, NULL);

	if (rc < 0 || (rc = tf_jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	if (by_attr && !a->npos)
		rc = tf_jinja_fail(r, at, "selectattr/rejectattr need an attribute name");
	else if (!(l = tf_val_seq_new(TF_SEQ_GENERATOR)))
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(items) && rc == 0; i++) {
		tf_val *item = tf_val_at(items, i), *x;
		bool yes = false;
		if (by_attr)
			x = (x = item_attr(item, a->pos[0]))
				    ? tf_val_ref(x)
				    : tf_val_undefined("no such attribute");
		else
			x = tf_val_ref(item);
		if (!x) {
			rc = TF_ERR_NOMEM;
			break;
		}
		if (a->npos > skip)
			rc = test_by_name(r, at, a->pos[skip], x, a->pos + skip + 1,
					  a->npos - skip - 1, &yes);
		else
			yes = tf_val_truthy(x);
		tf_val_unref(x);
		if (rc == 0 && yes == keep)
			rc = tf_val_list_push(l, tf_val_ref(item));
	}
	tf_val_unref(items);
	return tf_jinja_give(rc, l, out);
}

static int f_select(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		    tf_val **out)
{
	return select_items(r, at, v, a, false, true, out);
}

static int f_reject(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		    tf_val **out)
{
	return select_items(r, at, v, a, false, false, out);
}

static int f_selectattr(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
			tf_val **out)
{
	return select_items(r, at, v, a, true, true, out);
}

static int f_rejectattr(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
			tf_val **out)
{
	return select_items(r, at, v, a, true, false, out);
}

/* map(attribute='x', default=d) or map('filter', args...). */
static int f_map(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		 tf_val **out)
{
	static const char *const names[] = { "attribute", "default", NULL };
	tf_val *attr = tf_jinja_arg(a, -1, "attribute"), *def = tf_jinja_arg(a, -1, "default"),
	       *items, *l = NULL;
	int rc = tf_jinja_args_check(r, at, "map", a, attr ? 0 : a->npos, names);
	const char *fname = attr ? NULL : tf_val_as_str(tf_jinja_arg(a, 0, NULL), NULL);
	int fidx = fname ? tf_jinja_filter_find(fname) : -1;

	if (rc < 0)
		return rc;
	if (!attr && fidx < 0)
		return tf_jinja_fail(r, at, "map needs attribute= or the name of a filter");
	if ((rc = tf_jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	if (!(l = tf_val_seq_new(TF_SEQ_GENERATOR)))
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(items) && rc == 0; i++) {
		tf_val *item = tf_val_at(items, i), *x;
		if (attr) {
			x = item_attr(item, attr);
			if (x || def)
				rc = tf_val_list_push(l, tf_val_ref(x ? x : def));
			else
				rc = tf_val_list_push(l, tf_val_undefined("no such attribute"));
		} else {
			struct jargs rest = { .pos = a->pos + 1, .npos = a->npos - 1 };
			if ((rc = tf_jinja_filter_call(r, at, fidx, item, &rest, &x)) == 0)
				rc = tf_val_list_push(l, x);
		}
	}
	tf_val_unref(items);
	return tf_jinja_give(rc, l, out);
}

/* Python's int(s) (ints) or float(s) of a str: surrounding whitespace,
 * a sign, digits with single underscores between them, and for floats a
 * point, an exponent, inf and nan.  False when s is not such a number. */
static bool py_number(const char *s, size_t len, bool is_int, double *d, int64_t *i)
{
	char buf[128];
	size_t lo = 0, hi = len, n = 0;
	uint32_t cp;
	int k;

	while (lo < hi && (k = tf_utf8_next((const uint8_t *)s + lo, hi - lo, &cp)) > 0 &&
	       tf_jinja_isspace(cp))
		lo += (size_t)k;
	while (hi > lo && s[hi - 1] >= 0 && s[hi - 1] <= ' ' &&
	       tf_jinja_isspace((uint8_t)s[hi - 1]))
		hi--;
	if (hi - lo >= sizeof(buf))
		return false;
	for (size_t j = lo; j < hi; j++) {
		char c = s[j];
		bool digit_before = j > lo && s[j - 1] >= '0' && s[j - 1] <= '9';
		if (c == '_' && digit_before && j + 1 < hi && s[j + 1] >= '0' && s[j + 1] <= '9')
			continue;
		if (!(c >= '0' && c <= '9') &&
		    !(!is_int && (strchr(".eE", c) || ((c | 32) >= 'a' && (c | 32) <= 'z'))) &&
		    !((c == '+' || c == '-') && (j == lo || (!is_int && (s[j - 1] | 32) == 'e'))))
			return false;
		buf[n++] = c;
	}
	buf[n] = 0;
	if (!n)
		return false;
	char *end;
	errno = 0;
	if (is_int) {
		*i = strtoll(buf, &end, 10);
		return *end == 0 && errno == 0;
	}
	const char *word = buf + (buf[0] == '+' || buf[0] == '-');
	if (((word[0] | 32) >= 'a' && (word[0] | 32) <= 'z') && strcasecmp(word, "inf") &&
	    strcasecmp(word, "infinity") && strcasecmp(word, "nan"))
		return false;   /* strtod would also read hex and "infinit" prefixes */
	if (strchr(buf, 'x') || strchr(buf, 'X') || strchr(buf, 'p') || strchr(buf, 'P'))
		return false;
	*d = strtod(buf, &end);
	return *end == 0;
}

/* int(default=0) and float(default=0.0) as jinja2's do_int and do_float. */
static int to_number(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		     bool is_int, tf_val **out)
{
	static const char *const names[] = { "default", NULL };
	tf_val *def = tf_jinja_arg(a, 0, "default");
	tf_val_kind k = tf_val_kind_of(v);
	double d = 0;
	int64_t i = 0;
	bool ok = true;
	int rc = tf_jinja_args_check(r, at, is_int ? "int" : "float", a, 1, names);

	if (rc < 0 || (rc = tf_jinja_defined(r, at, v)) < 0) /* Undefined's int() fails */
		return rc;
	if (k == TF_VAL_INT || k == TF_VAL_BOOL) {
		i = k == TF_VAL_BOOL ? tf_val_as_bool(v) : tf_val_as_int(v);
		d = (double)i;
	} else if (k == TF_VAL_FLOAT) {
		d = tf_val_as_float(v);
	} else if (k == TF_VAL_STR) {
		size_t len;
		const char *s = tf_val_as_str(v, &len);
		/* "42.23"|int is 42: an int filter falls back on float() */
		if (!is_int || !py_number(s, len, true, &d, &i))
			ok = py_number(s, len, false, &d, &i);
		else
			d = (double)i;
		k = ok && is_int && d == (double)i ? TF_VAL_INT : TF_VAL_FLOAT;
	} else {
		ok = false;
	}
	if (!ok || (is_int && isnan(d)))
		return tf_jinja_give(0,
				     def      ? tf_val_ref(def)
				     : is_int ? tf_val_int(0)
					      : tf_val_float(0),
				     out);
	if (!is_int)
		return tf_jinja_give(0, tf_val_float(d), out);
	if (k == TF_VAL_FLOAT) {
		if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
			return tf_jinja_fail(r, at, "int: %g is beyond 64 bits", d);
		i = (int64_t)d;
	}
	return tf_jinja_give(0, tf_val_int(i), out);
}

static int f_int(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		 tf_val **out)
{
	return to_number(r, at, v, a, true, out);
}

static int f_float(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		   tf_val **out)
{
	return to_number(r, at, v, a, false, out);
}

/* A str backwards, or the items backwards. */
static int f_reverse(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		     tf_val **out)
{
	tf_val *items, *l = NULL;
	int rc = tf_jinja_args_check(r, at, "reverse", a, 0, NULL);
	if (rc < 0 || (rc = tf_jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	bool str = tf_val_kind_of(v) == TF_VAL_STR;
	tf_bytes b = { 0 };
	/* reversed() of a sequence is an iterator; of a generator, a new list */
	tf_val_seq seq = tf_val_seq_of(v) == TF_SEQ_GENERATOR ? TF_SEQ_LIST : TF_SEQ_GENERATOR;
	if (!str && !(l = tf_val_seq_new(seq)))
		rc = TF_ERR_NOMEM;
	for (size_t i = tf_val_len(items); i-- > 0 && rc == 0;) {
		size_t len;
		const char *s = tf_val_as_str(tf_val_at(items, i), &len);
		rc = str ? tf_bytes_append(&b, s, len)
			 : tf_val_list_push(l, tf_val_ref(tf_val_at(items, i)));
	}
	if (str && rc == 0)
		l = tf_val_str(b.p ? b.p : "", b.len);
	tf_bytes_free(&b);
	tf_val_unref(items);
	return tf_jinja_give(rc, l, out);
}

/* No autoescaping here: safe changes nothing. */
static int f_safe(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		  tf_val **out)
{
	int rc = tf_jinja_args_check(r, at, "safe", a, 0, NULL);
	return rc < 0 ? rc : tf_jinja_to_str(r, at, v, out);
}

/* Length of the line break at s[i] as str.splitlines() sees them, or 0. */
static size_t line_break(const char *s, size_t len, size_t i)
{
	uint32_t cp;
	int k = tf_utf8_next((const uint8_t *)s + i, len - i, &cp);
	if (k <= 0)
		return 0;
	if (cp == '\r' && i + 1 < len && s[i + 1] == '\n')
		return 2;
	return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
	       cp == 0x85 || cp == 0x2028 || cp == 0x2029 ? (size_t)k : 0;
}

/* indent(width=4, first=False, blank=False) as jinja2 3.1 does it. */
static int f_indent(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		    tf_val **out)
{
	static const char *const names[] = { "width", "first", "blank", NULL };
	tf_val *width = tf_jinja_arg(a, 0, "width"), *first = tf_jinja_arg(a, 1, "first"),
	       *blank = tf_jinja_arg(a, 2, "blank"), *sv = NULL;
	tf_bytes pad = { 0 }, b = { 0 };
	int rc = tf_jinja_args_check(r, at, "indent", a, 3, names);

	if (rc == 0 && width && tf_val_kind_of(width) == TF_VAL_STR) {
		size_t wl;
		const char *w = tf_val_as_str(width, &wl);
		rc = tf_bytes_append(&pad, w, wl);
	} else if (rc == 0) {
		int64_t n = width ? tf_val_as_int(width) : 4;
		if (width && tf_val_kind_of(width) != TF_VAL_INT)
			rc = tf_jinja_fail(r, at, "indent width must be an integer or a str");
		for (int64_t k = 0; k < n && k < 256 && rc == 0; k++)
			rc = tf_bytes_append(&pad, " ", 1);
	}
	if (rc == 0)
		rc = tf_jinja_to_str(r, at, v, &sv);
	size_t len = 0;
	const char *s = rc == 0 ? tf_val_as_str(sv, &len) : NULL;
	if (rc == 0 && first && tf_val_truthy(first))
		rc = tf_bytes_append(&b, pad.p, pad.len);
	/* the lines of s (those of s + "\n" for splitlines), joined by "\n",
	 * each after the first indented unless empty (indented anyway with blank) */
	for (size_t i = 0, line = 0; rc == 0 && i <= len; line++) {
		size_t j = i, brk = 0;
		while (j < len && !(brk = line_break(s, len, j)))
			j++;
		if (line > 0 && (rc = tf_bytes_append(&b, "\n", 1)) == 0 &&
		    (j > i || (blank && tf_val_truthy(blank))))
			rc = tf_bytes_append(&b, pad.p, pad.len);
		if (rc == 0)
			rc = tf_bytes_append(&b, s + i, j - i);
		i = j + (brk ? brk : 1);
	}
	tf_val *res = rc == 0 ? tf_val_str(b.p ? b.p : "", b.len) : NULL;
	tf_bytes_free(&pad);
	tf_bytes_free(&b);
	tf_val_unref(sv);
	return tf_jinja_give(rc, res, out);
}

static const struct { const char *name; tf_jinja_fn fn; } filters[] = {
	{ "abs", f_abs }, { "capitalize", f_capitalize }, { "count", f_length }, { "d", f_default },
	{ "default", f_default }, { "first", f_first }, { "float", f_float },
	{ "indent", f_indent }, { "int", f_int }, { "items", f_items }, { "join", f_join },
	{ "last", f_last }, { "length", f_length }, { "list", f_list }, { "lower", f_lower },
	{ "map", f_map }, { "reject", f_reject }, { "rejectattr", f_rejectattr },
	{ "replace", f_replace }, { "reverse", f_reverse }, { "safe", f_safe },
	{ "select", f_select }, { "selectattr", f_selectattr }, { "string", f_string },
	{ "title", f_title }, { "tojson", f_tojson }, { "trim", f_trim }, { "upper", f_upper },
};

int tf_jinja_filter_find(const char *name)
{
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		if (!strcmp(filters[i].name, name))
			return (int)i;
	return -1;
}

int tf_jinja_filter_call(struct jrun *r, const struct jnode *at, int index, tf_val *self,
			 const struct jargs *args, tf_val **out)
{
	return filters[index].fn(r, at, self, args, out);
}
