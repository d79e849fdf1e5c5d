/*
 * jinja_builtin.c - the filters, tests, methods and global functions that
 * chat templates use, with jinja2's semantics (its filters.py, tests.py and
 * defaults.py) and HF transformers' tojson and globals.
 */
#define _GNU_SOURCE
#include "chat/jinja_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diag.h"

#define RANGE_MAX 100000   /* jinja2's sandbox refuses longer ranges */

static int ret(tf_val *v, tf_val **out)
{
	*out = v;
	return v ? 0 : TF_ERR_NOMEM;
}

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
		if (tf_val_is_namespace(v))
			break;
		*n = (int64_t)tf_val_len(v);
		return 0;
	case TF_VAL_UNDEFINED:
		*n = 0;
		return 0;
	default:
		break;
	}
	return jinja_fail(r, at, "object of type '%s' has no len()", jinja_type_name(v));
}

/* Applies the test called name (with args) to v; used by select and friends. */
static int test_by_name(struct jrun *r, const struct jnode *at, const tf_val *name, tf_val *v,
			tf_val **rest, size_t nrest, bool *yes)
{
	const char *s = tf_val_as_str(name, NULL);
	int idx = s ? jinja_test_find(s) : -1;
	if (idx < 0)
		return jinja_fail(r, at, "no test named '%s'", s ? s : "?");
	struct jargs a = { .pos = rest, .npos = nrest };
	return jinja_test_call(r, at, idx, v, &a, yes);
}

/* item.attr as join, map and selectattr read it, or NULL. */
static tf_val *item_attr(const tf_val *item, const tf_val *attr)
{
	const char *name = tf_val_as_str(attr, NULL);
	return name ? tf_val_dict_get(item, name) : NULL;
}

/* ---- filters ---- */

typedef int (*filter_fn)(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
			 tf_val **out);

static int f_length(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	int64_t n = 0;
	int rc = jinja_args_check(r, at, "length", a, 0, NULL);
	if (rc == 0 && (rc = length(r, at, v, &n)) == 0)
		rc = ret(tf_val_int(n), out);
	return rc;
}

static int f_tojson(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	static const char *const names[] = { "ensure_ascii", "indent", "separators", "sort_keys", NULL };
	tf_json_style st = { -1, ", ", ": ", false };
	tf_val *ascii = jinja_arg(a, -1, "ensure_ascii"), *indent = jinja_arg(a, 0, "indent"),
	       *seps = jinja_arg(a, -1, "separators"), *sort = jinja_arg(a, -1, "sort_keys");
	tf_bytes b = { 0 };
	int rc = jinja_args_check(r, at, "tojson", a, 1, names);

	if (rc < 0)
		return rc;
	if (ascii && tf_val_truthy(ascii))
		return jinja_fail(r, at, "tojson(ensure_ascii=True) is not supported");
	if (indent && tf_val_kind_of(indent) != TF_VAL_NONE) {
		if (tf_val_kind_of(indent) != TF_VAL_INT || tf_val_as_int(indent) > 64)
			return jinja_fail(r, at, "tojson indent must be an integer up to 64");
		st.indent = tf_val_as_int(indent) < 0 ? 0 : (int)tf_val_as_int(indent);
		st.item_sep = ",";
	}
	if (seps && tf_val_kind_of(seps) != TF_VAL_NONE) {
		const char *i = tf_val_as_str(tf_val_at(seps, 0), NULL), *k = tf_val_as_str(tf_val_at(seps, 1), NULL);
		if (tf_val_kind_of(seps) != TF_VAL_LIST || tf_val_len(seps) != 2 || !i || !k)
			return jinja_fail(r, at, "tojson separators must be two strings");
		st.item_sep = i;
		st.key_sep = k;
	}
	st.sort_keys = sort && tf_val_truthy(sort);
	if ((rc = tf_val_dump_json_style(v, &st, &b)) < 0) {
		tf_bytes_free(&b);
		return jinja_fail_diag(r, at, rc);
	}
	rc = ret(tf_val_str(b.p ? b.p : "", b.len), out);
	tf_bytes_free(&b);
	return rc;
}

/* Filters that are str methods of str(v): trim, lower, upper, capitalize, replace. */
static int str_filter(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
		      const char *method, tf_val **out)
{
	tf_val *s;
	int rc = jinja_to_str(r, at, v, &s);
	if (rc < 0)
		return rc;
	rc = jinja_str_method(r, at, s, method, a, out);
	tf_val_unref(s);
	return rc;
}

static int f_trim(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return str_filter(r, at, v, a, "strip", out);
}

static int f_lower(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return str_filter(r, at, v, a, "lower", out);
}

static int f_upper(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return str_filter(r, at, v, a, "upper", out);
}

static int f_capitalize(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return str_filter(r, at, v, a, "capitalize", out);
}

static int f_replace(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	/* jinja2's replace takes str() of its arguments */
	static const char *const names[] = { "old", "new", "count", NULL };
	tf_val *strs[2] = { NULL, NULL }, *count = jinja_arg(a, 2, "count");
	int rc = jinja_args_check(r, at, "replace", a, 3, names);
	for (int i = 0; i < 2 && rc == 0; i++) {
		tf_val *x = jinja_arg(a, i, names[i]);
		rc = x ? jinja_to_str(r, at, x, &strs[i]) : jinja_fail(r, at, "replace() missing argument '%s'", names[i]);
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

static int f_string(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	int rc = jinja_args_check(r, at, "string", a, 0, NULL);
	return rc < 0 ? rc : jinja_to_str(r, at, v, out);
}

static int f_list(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	tf_val *items;
	int rc = jinja_args_check(r, at, "list", a, 0, NULL);
	if (rc < 0 || (rc = jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	tf_val *l = tf_val_list();
	rc = jinja_list_extend(l, items);
	tf_val_unref(items);
	return jinja_give(rc, l, out);
}

static int f_join(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	static const char *const names[] = { "d", "attribute", NULL };
	tf_val *sep = jinja_arg(a, 0, "d"), *attr = jinja_arg(a, 1, "attribute"), *items = NULL, *strs = NULL;
	tf_val *sep_str = NULL;
	int rc = jinja_args_check(r, at, "join", a, 2, names);

	if (rc == 0 && (rc = jinja_iterate(r, at, v, &items)) == 0 && !(strs = tf_val_list()))
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(items) && rc == 0; i++) {
		tf_val *item = tf_val_at(items, i), *s;
		if (attr && !(item = item_attr(item, attr))) {
			rc = jinja_fail(r, at, "join: item %zu has no such attribute", i);
			break;
		}
		if ((rc = jinja_to_str(r, at, item, &s)) == 0)
			rc = tf_val_list_push(strs, s);
	}
	if (rc == 0 && sep)
		rc = jinja_to_str(r, at, sep, &sep_str);
	else if (rc == 0 && !(sep_str = tf_val_str("", 0)))
		rc = TF_ERR_NOMEM;
	if (rc == 0)
		rc = jinja_str_method(r, at, sep_str, "join", &(struct jargs){ .pos = &strs, .npos = 1 }, out);
	tf_val_unref(sep_str);
	tf_val_unref(items);
	tf_val_unref(strs);
	return rc;
}

static int f_default(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	static const char *const names[] = { "default_value", "boolean", NULL };
	tf_val *def = jinja_arg(a, 0, "default_value"), *boolean = jinja_arg(a, 1, "boolean");
	int rc = jinja_args_check(r, at, "default", a, 2, names);
	if (rc < 0)
		return rc;
	if (tf_val_kind_of(v) == TF_VAL_UNDEFINED || (boolean && tf_val_truthy(boolean) && !tf_val_truthy(v)))
		return ret(def ? tf_val_ref(def) : tf_val_str("", 0), out);
	return ret(tf_val_ref(v), out);
}

static int f_items(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	int rc = jinja_args_check(r, at, "items", a, 0, NULL);
	if (rc < 0)
		return rc;
	if (tf_val_kind_of(v) == TF_VAL_UNDEFINED)
		return ret(tf_val_list(), out);
	if (tf_val_kind_of(v) != TF_VAL_DICT || tf_val_is_namespace(v))
		return jinja_fail(r, at, "Can only get item pairs from a mapping.");
	return jinja_method_call(r, at, v, "items", a, out);
}

/* first (sign 1) or last (-1) item. */
static int end_item(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, int sign,
		    tf_val **out)
{
	tf_val *items;
	int rc = jinja_args_check(r, at, sign > 0 ? "first" : "last", a, 0, NULL);
	if (rc < 0 || (rc = jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	size_t n = tf_val_len(items);
	if (!n)
		rc = ret(tf_val_undefined(sign > 0 ? "No first item, sequence was empty." :
					  "No last item, sequence was empty."), out);
	else
		rc = ret(tf_val_ref(tf_val_at(items, sign > 0 ? 0 : n - 1)), out);
	tf_val_unref(items);
	return rc;
}

static int f_first(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return end_item(r, at, v, a, 1, out);
}

static int f_last(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return end_item(r, at, v, a, -1, out);
}

static int f_abs(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	int rc = jinja_args_check(r, at, "abs", a, 0, NULL);
	if (rc < 0)
		return rc;
	switch (tf_val_kind_of(v)) {
	case TF_VAL_INT:
		if (tf_val_as_int(v) == INT64_MIN)
			return jinja_fail(r, at, "integer result beyond 64 bits");
		return ret(tf_val_int(tf_val_as_int(v) < 0 ? -tf_val_as_int(v) : tf_val_as_int(v)), out);
	case TF_VAL_BOOL:
		return ret(tf_val_int(tf_val_as_bool(v)), out);
	case TF_VAL_FLOAT:
		return ret(tf_val_float(tf_val_as_float(v) < 0 ? -tf_val_as_float(v) : tf_val_as_float(v)), out);
	default:
		return jinja_fail(r, at, "bad operand type for abs(): '%s'", jinja_type_name(v));
	}
}

/* select/reject (by a test of the item) and selectattr/rejectattr (of an
 * attribute of it): keep says which outcome stays. */
static int select_items(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a,
			bool by_attr, bool keep, tf_val **out)
{
	tf_val *items, *l = NULL;
	size_t skip = by_attr ? 1 : 0;
	int rc = jinja_args_check(r, at, "select", a, a->npos, NULL);

	if (rc < 0 || (rc = jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	if (by_attr && !a->npos)
		rc = jinja_fail(r, at, "selectattr/rejectattr need an attribute name");
	else if (!(l = tf_val_list()))
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(items) && rc == 0; i++) {
		tf_val *item = tf_val_at(items, i), *x;
		bool yes = false;
		if (by_attr)
			x = (x = item_attr(item, a->pos[0])) ? tf_val_ref(x) : tf_val_undefined("no such attribute");
		else
			x = tf_val_ref(item);
		if (!x) {
			rc = TF_ERR_NOMEM;
			break;
		}
		if (a->npos > skip)
			rc = test_by_name(r, at, a->pos[skip], x, a->pos + skip + 1, a->npos - skip - 1, &yes);
		else
			yes = tf_val_truthy(x);
		tf_val_unref(x);
		if (rc == 0 && yes == keep)
			rc = tf_val_list_push(l, tf_val_ref(item));
	}
	tf_val_unref(items);
	return jinja_give(rc, l, out);
}

static int f_select(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return select_items(r, at, v, a, false, true, out);
}

static int f_reject(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return select_items(r, at, v, a, false, false, out);
}

static int f_selectattr(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return select_items(r, at, v, a, true, true, out);
}

static int f_rejectattr(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	return select_items(r, at, v, a, true, false, out);
}

/* map(attribute='x', default=d) or map('filter', args...). */
static int f_map(struct jrun *r, const struct jnode *at, tf_val *v, const struct jargs *a, tf_val **out)
{
	static const char *const names[] = { "attribute", "default", NULL };
	tf_val *attr = jinja_arg(a, -1, "attribute"), *def = jinja_arg(a, -1, "default"), *items, *l = NULL;
	int rc = jinja_args_check(r, at, "map", a, attr ? 0 : a->npos, names);
	const char *fname = attr ? NULL : tf_val_as_str(jinja_arg(a, 0, NULL), NULL);
	int fidx = fname ? jinja_filter_find(fname) : -1;

	if (rc < 0)
		return rc;
	if (!attr && fidx < 0)
		return jinja_fail(r, at, "map needs attribute= or the name of a filter");
	if ((rc = jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	if (!(l = tf_val_list()))
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
			if ((rc = jinja_filter_call(r, at, fidx, item, &rest, &x)) == 0)
				rc = tf_val_list_push(l, x);
		}
	}
	tf_val_unref(items);
	return jinja_give(rc, l, out);
}

static const struct { const char *name; filter_fn fn; } filters[] = {
	{ "abs", f_abs }, { "capitalize", f_capitalize }, { "count", f_length },
	{ "d", f_default }, { "default", f_default }, { "first", f_first }, { "items", f_items },
	{ "join", f_join }, { "last", f_last }, { "length", f_length }, { "list", f_list },
	{ "lower", f_lower }, { "map", f_map }, { "reject", f_reject }, { "rejectattr", f_rejectattr },
	{ "replace", f_replace }, { "select", f_select }, { "selectattr", f_selectattr },
	{ "string", f_string }, { "tojson", f_tojson }, { "trim", f_trim }, { "upper", f_upper },
};

int jinja_filter_find(const char *name)
{
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		if (!strcmp(filters[i].name, name))
			return (int)i;
	return -1;
}

int jinja_filter_call(struct jrun *r, const struct jnode *at, int index, tf_val *self,
		      const struct jargs *args, tf_val **out)
{
	return filters[index].fn(r, at, self, args, out);
}

/* ---- tests ---- */

enum {
	T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_FLOAT, T_BOOLEAN,
	T_MAPPING, T_ITERABLE, T_SEQUENCE, T_TRUE, T_FALSE, T_CALLABLE, T_ODD, T_EVEN,
	T_DIVISIBLEBY, T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_IN, T_LOWER, T_UPPER, T_SAMEAS,
};

static const struct { const char *name; int id; } tests[] = {
	{ "defined", T_DEFINED }, { "undefined", T_UNDEFINED }, { "none", T_NONE },
	{ "string", T_STRING }, { "number", T_NUMBER }, { "integer", T_INTEGER },
	{ "float", T_FLOAT }, { "boolean", T_BOOLEAN }, { "mapping", T_MAPPING },
	{ "iterable", T_ITERABLE }, { "sequence", T_SEQUENCE }, { "true", T_TRUE },
	{ "false", T_FALSE }, { "callable", T_CALLABLE }, { "odd", T_ODD }, { "even", T_EVEN },
	{ "divisibleby", T_DIVISIBLEBY }, { "eq", T_EQ }, { "equalto", T_EQ }, { "==", T_EQ },
	{ "ne", T_NE }, { "!=", T_NE }, { "lt", T_LT }, { "lessthan", T_LT }, { "<", T_LT },
	{ "le", T_LE }, { "<=", T_LE }, { "gt", T_GT }, { "greaterthan", T_GT }, { ">", T_GT },
	{ "ge", T_GE }, { ">=", T_GE }, { "in", T_IN }, { "lower", T_LOWER }, { "upper", T_UPPER },
	{ "sameas", T_SAMEAS },
};

int jinja_test_find(const char *name)
{
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!strcmp(tests[i].name, name))
			return (int)i;
	return -1;
}

/* The test's one argument (two-operand tests). */
static int test_arg(struct jrun *r, const struct jnode *at, const char *name, const struct jargs *a,
		    tf_val **arg)
{
	int rc = jinja_args_check(r, at, name, a, 1, NULL);
	if (rc == 0 && !(*arg = jinja_arg(a, 0, NULL)))
		rc = jinja_fail(r, at, "test '%s' needs an argument", name);
	return rc;
}

/* A str whose cased characters are all lower (or upper), with one at least. */
static int case_test(struct jrun *r, const struct jnode *at, tf_val *v, bool upper, bool *out)
{
	tf_val *s, *mapped = NULL;
	int rc = jinja_to_str(r, at, v, &s);
	if (rc < 0)
		return rc;
	struct jargs none = { 0 };
	if ((rc = jinja_str_method(r, at, s, upper ? "upper" : "lower", &none, &mapped)) == 0) {
		tf_val *other = NULL;
		if ((rc = jinja_str_method(r, at, s, upper ? "lower" : "upper", &none, &other)) == 0)
			*out = tf_val_equal(s, mapped) && !tf_val_equal(s, other);
		tf_val_unref(other);
	}
	tf_val_unref(mapped);
	tf_val_unref(s);
	return rc;
}

int jinja_test_call(struct jrun *r, const struct jnode *at, int index, tf_val *v,
		    const struct jargs *args, bool *out)
{
	const char *name = tests[index].name;
	tf_val_kind k = tf_val_kind_of(v);
	tf_val *arg = NULL;
	int rc = 0;

	switch (tests[index].id) {
	case T_DIVISIBLEBY: case T_EQ: case T_NE: case T_LT: case T_LE: case T_GT: case T_GE:
	case T_IN: case T_SAMEAS:
		if ((rc = test_arg(r, at, name, args, &arg)) < 0)
			return rc;
		break;
	default:
		if ((rc = jinja_args_check(r, at, name, args, 0, NULL)) < 0)
			return rc;
	}
	switch (tests[index].id) {
	case T_DEFINED: *out = k != TF_VAL_UNDEFINED; return 0;
	case T_UNDEFINED: *out = k == TF_VAL_UNDEFINED; return 0;
	case T_NONE: *out = k == TF_VAL_NONE; return 0;
	case T_STRING: *out = k == TF_VAL_STR; return 0;
	case T_NUMBER: *out = k == TF_VAL_INT || k == TF_VAL_FLOAT || k == TF_VAL_BOOL; return 0;
	case T_INTEGER: *out = k == TF_VAL_INT; return 0;
	case T_FLOAT: *out = k == TF_VAL_FLOAT; return 0;
	case T_BOOLEAN: *out = k == TF_VAL_BOOL; return 0;
	case T_MAPPING: *out = k == TF_VAL_DICT && !tf_val_is_namespace(v); return 0;
	case T_ITERABLE:
	case T_SEQUENCE:
		*out = k == TF_VAL_STR || k == TF_VAL_LIST || k == TF_VAL_UNDEFINED ||
		       (k == TF_VAL_DICT && !tf_val_is_namespace(v));
		return 0;
	case T_TRUE: *out = k == TF_VAL_BOOL && tf_val_as_bool(v); return 0;
	case T_FALSE: *out = k == TF_VAL_BOOL && !tf_val_as_bool(v); return 0;
	case T_CALLABLE: *out = k == TF_VAL_FUNC; return 0;
	case T_ODD:
	case T_EVEN:
	case T_DIVISIBLEBY: {
		int64_t d = tests[index].id == T_DIVISIBLEBY ? tf_val_as_int(arg) : 2;
		if ((k != TF_VAL_INT && k != TF_VAL_BOOL) ||
		    (arg && tf_val_kind_of(arg) != TF_VAL_INT) || d == 0)
			return jinja_fail(r, at, "test '%s' needs integers (and a divisor other than 0)", name);
		int64_t x = k == TF_VAL_BOOL ? tf_val_as_bool(v) : tf_val_as_int(v), m = d == -1 ? 0 : x % d;
		*out = tests[index].id == T_ODD ? m != 0 : m == 0;
		return 0;
	}
	case T_EQ: *out = tf_val_equal(v, arg); return 0;
	case T_NE: *out = !tf_val_equal(v, arg); return 0;
	case T_LT: return jinja_less(r, at, v, arg, out);
	case T_GT: return jinja_less(r, at, arg, v, out);
	case T_LE:
	case T_GE:
		rc = tests[index].id == T_LE ? jinja_less(r, at, arg, v, out) : jinja_less(r, at, v, arg, out);
		*out = !*out;
		return rc;
	case T_IN:
		return jinja_contains(r, at, v, arg, out);
	case T_LOWER:
	case T_UPPER:
		return case_test(r, at, v, tests[index].id == T_UPPER, out);
	case T_SAMEAS:
		/* Python's "is": None, the bools and the cached small ints are one object each */
		*out = v == arg || (k == tf_val_kind_of(arg) && (k == TF_VAL_NONE || k == TF_VAL_BOOL ||
			(k == TF_VAL_INT && tf_val_as_int(v) >= -5 && tf_val_as_int(v) <= 256)) &&
			tf_val_equal(v, arg));
		return 0;
	}
	return TF_ERR_INTERNAL;
}

/* ---- methods ---- */

static int dict_method(struct jrun *r, const struct jnode *at, tf_val *d, const char *name,
		       const struct jargs *a, tf_val **out)
{
	int rc;
	if (!strcmp(name, "get")) {
		if ((rc = jinja_args_check(r, at, "get", a, 2, NULL)) < 0)
			return rc;
		tf_val *key = jinja_arg(a, 0, NULL), *def = jinja_arg(a, 1, NULL);
		size_t len;
		const char *s = tf_val_as_str(key, &len);
		if (!key)
			return jinja_fail(r, at, "get expected at least 1 argument, got 0");
		tf_val *v = s ? tf_val_dict_getn(d, s, len) : NULL;
		if (!v)
			v = def;
		return ret(v ? tf_val_ref(v) : tf_val_none(), out);
	}
	bool items = !strcmp(name, "items"), keys = !strcmp(name, "keys"), values = !strcmp(name, "values");
	if (!items && !keys && !values)
		return 1;
	if ((rc = jinja_args_check(r, at, name, a, 0, NULL)) < 0)
		return rc;
	tf_val *l = tf_val_list();
	rc = l ? 0 : TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(d) && rc == 0; i++) {
		tf_val *k = tf_val_key_at(d, i), *v = tf_val_at(d, i), *pair;
		if (!items) {
			rc = tf_val_list_push(l, tf_val_ref(keys ? k : v));
			continue;
		}
		if (!(pair = tf_val_tuple()) || tf_val_list_push(pair, tf_val_ref(k)) < 0 ||
		    tf_val_list_push(pair, tf_val_ref(v)) < 0) {
			tf_val_unref(pair);
			rc = TF_ERR_NOMEM;
			break;
		}
		rc = tf_val_list_push(l, pair);
	}
	return jinja_give(rc, l, out);
}

bool jinja_has_method(const tf_val *self, const char *name)
{
	static const char *const str[] = { "startswith", "endswith", "split", "rsplit", "strip", "lstrip",
		"rstrip", "replace", "upper", "lower", "capitalize", "find", "count", "join", NULL };
	static const char *const dict[] = { "get", "items", "keys", "values", NULL };
	const char *const *names = tf_val_kind_of(self) == TF_VAL_STR ? str :
				   tf_val_kind_of(self) == TF_VAL_DICT && !tf_val_is_namespace(self) ? dict : NULL;
	for (size_t i = 0; names && names[i]; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

int jinja_method_call(struct jrun *r, const struct jnode *at, tf_val *self, const char *name,
		      const struct jargs *args, tf_val **out)
{
	switch (tf_val_kind_of(self)) {
	case TF_VAL_STR:
		return jinja_str_method(r, at, self, name, args, out);
	case TF_VAL_DICT:
		return tf_val_is_namespace(self) ? 1 : dict_method(r, at, self, name, args, out);
	default:
		return 1;
	}
}

/* ---- globals ---- */

typedef int (*global_fn)(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a,
			 tf_val **out);

static int g_range(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a, tf_val **out)
{
	int64_t v[3] = { 0, 0, 1 };
	int rc = jinja_args_check(r, at, "range", a, 3, NULL);
	(void)self;
	if (rc < 0)
		return rc;
	if (!a->npos)
		return jinja_fail(r, at, "range expected at least 1 argument, got 0");
	for (size_t i = 0; i < a->npos; i++) {
		tf_val_kind k = tf_val_kind_of(a->pos[i]);
		if (k != TF_VAL_INT && k != TF_VAL_BOOL)
			return jinja_fail(r, at, "'%s' object cannot be interpreted as an integer",
					  jinja_type_name(a->pos[i]));
		v[a->npos == 1 ? 1 : i] = k == TF_VAL_BOOL ? tf_val_as_bool(a->pos[i]) : tf_val_as_int(a->pos[i]);
	}
	if (v[2] == 0)
		return jinja_fail(r, at, "range() arg 3 must not be zero");
	double n = v[2] > 0 ? ((double)v[1] - (double)v[0]) / (double)v[2] :
			      ((double)v[0] - (double)v[1]) / -(double)v[2];
	if (n > RANGE_MAX)
		return jinja_fail(r, at, "range too big: the sandbox blocks ranges larger than %d", RANGE_MAX);
	tf_val *l = tf_val_list();
	rc = l ? 0 : TF_ERR_NOMEM;
	for (int64_t x = v[0]; rc == 0 && (v[2] > 0 ? x < v[1] : x > v[1]); x += v[2])
		rc = tf_val_list_push(l, tf_val_int(x));
	return jinja_give(rc, l, out);
}

/* namespace(...) and dict(...): from a dict argument and keyword arguments. */
static int make_dict(struct jrun *r, const struct jnode *at, const struct jargs *a, bool ns, tf_val **out)
{
	const char *fn = ns ? "namespace" : "dict";
	tf_val *init = jinja_arg(a, 0, NULL), *d;
	int rc = 0;

	if (a->npos > 1)
		return jinja_fail(r, at, "%s() takes at most 1 positional argument", fn);
	if (init && tf_val_kind_of(init) != TF_VAL_DICT)
		return jinja_fail(r, at, "%s() takes a dict as its argument", fn);
	if (!(d = ns ? tf_val_namespace() : tf_val_dict()))
		return TF_ERR_NOMEM;
	for (size_t i = 0; rc == 0 && init && i < tf_val_len(init); i++) {
		size_t len;
		const char *k = tf_val_as_str(tf_val_key_at(init, i), &len);
		rc = tf_val_dict_set(d, k, len, tf_val_ref(tf_val_at(init, i)));
	}
	for (size_t i = 0; rc == 0 && i < a->nnamed; i++)
		rc = tf_val_dict_set(d, a->names[i], strlen(a->names[i]), tf_val_ref(a->named[i]));
	return jinja_give(rc, d, out);
}

static int g_namespace(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a, tf_val **out)
{
	(void)self;
	return make_dict(r, at, a, true, out);
}

static int g_dict(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a, tf_val **out)
{
	(void)self;
	return make_dict(r, at, a, false, out);
}

static int g_raise(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a, tf_val **out)
{
	tf_val *msg = jinja_arg(a, 0, NULL), *s = NULL;
	int rc = jinja_args_check(r, at, "raise_exception", a, 1, NULL);
	(void)self;
	(void)out;
	if (rc == 0 && msg && (rc = jinja_to_str(r, at, msg, &s)) == 0)
		rc = jinja_fail(r, at, "raise_exception: %s", tf_val_as_str(s, NULL));
	else if (rc == 0)
		rc = jinja_fail(r, at, "raise_exception()");
	tf_val_unref(s);
	return rc;
}

static int g_strftime_now(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a,
			  tf_val **out)
{
	const char *fmt = tf_val_as_str(jinja_arg(a, 0, NULL), NULL);
	char buf[256];
	int rc = jinja_args_check(r, at, "strftime_now", a, 1, NULL);
	(void)self;
	if (rc < 0)
		return rc;
	if (!fmt)
		return jinja_fail(r, at, "strftime_now() needs a format string");
	time_t now = time(NULL);
	struct tm tm;
	size_t n = strftime(buf, sizeof(buf), fmt, localtime_r(&now, &tm));
	if (!n && fmt[0])
		return jinja_fail(r, at, "strftime_now(): the result is too long");
	return ret(tf_val_str(buf, n), out);
}

static int g_cycle(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a, tf_val **out)
{
	tf_val *i = tf_val_dict_get(self, "index0");
	int rc = jinja_args_check(r, at, "cycle", a, a->npos, NULL);
	if (rc < 0)
		return rc;
	if (!a->npos || !i)
		return jinja_fail(r, at, "no items for cycling given");
	return ret(tf_val_ref(a->pos[tf_val_as_int(i) % (int64_t)a->npos]), out);
}

static const struct jglobal { const char *name; global_fn fn; } globals[] = {
	{ "range", g_range }, { "namespace", g_namespace }, { "dict", g_dict },
	{ "raise_exception", g_raise }, { "strftime_now", g_strftime_now },
	{ "loop.cycle", g_cycle },
};

tf_val *jinja_global(const char *name)
{
	for (size_t i = 0; i < sizeof(globals) / sizeof(globals[0]); i++)
		if (!strcmp(globals[i].name, name))
			return tf_val_func(JFUNC_BUILTIN, &globals[i]);
	return NULL;
}

int jinja_global_call(struct jrun *r, const struct jnode *at, tf_val *fn, tf_val *self,
		      const struct jargs *args, tf_val **out)
{
	const struct jglobal *g = tf_val_func_ptr(fn);
	return g->fn(r, at, self, args, out);
}
