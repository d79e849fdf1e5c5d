/*
 * jinja_builtin.c - the tests, methods and global functions that chat
 * templates use, with jinja2's semantics (its tests.py and defaults.py) and
 * HF transformers' globals.
 */
#include "chat/jinja_int.h"

#include <string.h>
#include <time.h>

#include "tf/error.h"

#define RANGE_MAX 100000   /* jinja2's sandbox refuses longer ranges */

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

int tf_jinja_test_find(const char *name)
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
	int rc = tf_jinja_args_check(r, at, name, a, 1, NULL);
	if (rc == 0 && !(*arg = tf_jinja_arg(a, 0, NULL)))
		rc = tf_jinja_fail(r, at, "test '%s' needs an argument", name);
	return rc;
}

/* A str whose cased characters are all lower (or upper), with one at least. */
static int case_test(struct jrun *r, const struct jnode *at, tf_val *v, bool upper, bool *out)
{
	tf_val *s, *mapped = NULL;
	int rc = tf_jinja_to_str(r, at, v, &s);
	if (rc < 0)
		return rc;
	struct jargs none = { 0 };
	if ((rc = tf_jinja_str_method(r, at, s, upper ? "upper" : "lower", &none, &mapped)) == 0) {
		tf_val *other = NULL;
		if ((rc = tf_jinja_str_method(r, at, s, upper ? "lower" : "upper", &none,
					      &other)) == 0)
			*out = tf_val_equal(s, mapped) && !tf_val_equal(s, other);
		tf_val_unref(other);
	}
	tf_val_unref(mapped);
	tf_val_unref(s);
	return rc;
}

int tf_jinja_test_call(struct jrun *r, const struct jnode *at, int index, tf_val *v,
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
		if ((rc = tf_jinja_args_check(r, at, name, args, 0, NULL)) < 0)
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
		/* a sequence has len() and an index: not a generator or a dict view */
		if (tests[index].id == T_SEQUENCE && k == TF_VAL_LIST)
			*out = tf_val_seq_of(v) <= TF_SEQ_RANGE &&
			       tf_val_seq_of(v) != TF_SEQ_GENERATOR;
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
			return tf_jinja_fail(
				r, at, "test '%s' needs integers (and a divisor other than 0)",
				name);
		int64_t x = k == TF_VAL_BOOL ? tf_val_as_bool(v) : tf_val_as_int(v),
			m = d == -1 ? 0 : x % d;
		*out = tests[index].id == T_ODD ? m != 0 : m == 0;
		return 0;
	}
	case T_EQ: *out = tf_val_equal(v, arg); return 0;
	case T_NE: *out = !tf_val_equal(v, arg); return 0;
	case T_LT: return tf_jinja_less(r, at, v, arg, out);
	case T_GT: return tf_jinja_less(r, at, arg, v, out);
	case T_LE:
	case T_GE:
		rc = tests[index].id == T_LE ? tf_jinja_less(r, at, arg, v, out)
					     : tf_jinja_less(r, at, v, arg, out);
		*out = !*out;
		return rc;
	case T_IN: return tf_jinja_contains(r, at, v, arg, out);
	case T_LOWER:
	case T_UPPER:
		return case_test(r, at, v, tests[index].id == T_UPPER, out);
	case T_SAMEAS:
		/* Python's "is": None, the bools and the cached small ints are one object each */
		*out = v == arg ||
		       (k == tf_val_kind_of(arg) &&
			(k == TF_VAL_NONE || k == TF_VAL_BOOL ||
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
		if ((rc = tf_jinja_args_check(r, at, "get", a, 2, NULL)) < 0)
			return rc;
		tf_val *key = tf_jinja_arg(a, 0, NULL), *def = tf_jinja_arg(a, 1, NULL);
		size_t len;
		const char *s = tf_val_as_str(key, &len);
		if (!key)
			return tf_jinja_fail(r, at, "get expected at least 1 argument, got 0");
		tf_val *v = s ? tf_val_dict_getn(d, s, len) : NULL;
		if (!v)
			v = def;
		return tf_jinja_give(0, v ? tf_val_ref(v) : tf_val_none(), out);
	}
	bool items = !strcmp(name, "items"), keys = !strcmp(name, "keys"),
	     values = !strcmp(name, "values");
	if (!items && !keys && !values)
		return 1;
	if ((rc = tf_jinja_args_check(r, at, name, a, 0, NULL)) < 0)
		return rc;
	tf_val_seq seq = items ? TF_SEQ_DICT_ITEMS : keys ? TF_SEQ_DICT_KEYS : TF_SEQ_DICT_VALUES;
	tf_val *l = tf_val_seq_new(seq);
	rc = l ? 0 : TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(d) && rc == 0; i++) {
		tf_val *k = tf_val_key_at(d, i), *v = tf_val_at(d, i), *pair;
		if (!items) {
			rc = tf_val_list_push(l, tf_val_ref(keys ? k : v));
			continue;
		}
		if (!(pair = tf_val_seq_new(TF_SEQ_TUPLE)) ||
		    tf_val_list_push(pair, tf_val_ref(k)) < 0 ||
		    tf_val_list_push(pair, tf_val_ref(v)) < 0) {
			tf_val_unref(pair);
			rc = TF_ERR_NOMEM;
			break;
		}
		rc = tf_val_list_push(l, pair);
	}
	return tf_jinja_give(rc, l, out);
}

bool tf_jinja_has_method(const tf_val *self, const char *name)
{
	static const char *const str[] = { "startswith", "endswith", "split",   "rsplit", "strip",
					   "lstrip",     "rstrip",   "replace", "upper",  "lower",
					   "capitalize", "find",     "count",   "join",   NULL };
	static const char *const dict[] = { "get", "items", "keys", "values", NULL };
	const char *const *names =
		tf_val_kind_of(self) == TF_VAL_STR                                  ? str
		: tf_val_kind_of(self) == TF_VAL_DICT && !tf_val_is_namespace(self) ? dict
										    : NULL;
	for (size_t i = 0; names && names[i]; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

int tf_jinja_method_call(struct jrun *r, const struct jnode *at, tf_val *self, const char *name,
			 const struct jargs *args, tf_val **out)
{
	switch (tf_val_kind_of(self)) {
	case TF_VAL_STR: return tf_jinja_str_method(r, at, self, name, args, out);
	case TF_VAL_DICT:
		return tf_val_is_namespace(self) ? 1 : dict_method(r, at, self, name, args, out);
	default:
		return 1;
	}
}

/* ---- globals ---- */

static int g_range(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a,
		   tf_val **out)
{
	int64_t v[3] = { 0, 0, 1 };
	int rc = tf_jinja_args_check(r, at, "range", a, 3, NULL);
	(void)self;
	if (rc < 0)
		return rc;
	if (!a->npos)
		return tf_jinja_fail(r, at, "range expected at least 1 argument, got 0");
	for (size_t i = 0; i < a->npos; i++) {
		tf_val_kind k = tf_val_kind_of(a->pos[i]);
		if (k != TF_VAL_INT && k != TF_VAL_BOOL)
			return tf_jinja_fail(r, at,
					     "'%s' object cannot be interpreted as an integer",
					     tf_jinja_type_name(a->pos[i]));
		v[a->npos == 1 ? 1 : i] =
			k == TF_VAL_BOOL ? tf_val_as_bool(a->pos[i]) : tf_val_as_int(a->pos[i]);
	}
	if (v[2] == 0)
		return tf_jinja_fail(r, at, "range() arg 3 must not be zero");
	double n = v[2] > 0 ? ((double)v[1] - (double)v[0]) / (double)v[2] :
			      ((double)v[0] - (double)v[1]) / -(double)v[2];
	if (n > RANGE_MAX)
		return tf_jinja_fail(r, at,
				     "range too big: the sandbox blocks ranges larger than %d",
				     RANGE_MAX);
	tf_val *l = tf_val_seq_new(TF_SEQ_RANGE);
	rc = l ? 0 : TF_ERR_NOMEM;
	for (int64_t x = v[0]; rc == 0 && (v[2] > 0 ? x < v[1] : x > v[1]); x += v[2])
		rc = tf_val_list_push(l, tf_val_int(x));
	return tf_jinja_give(rc, l, out);
}

/* namespace(...) and dict(...): from a dict argument and keyword arguments. */
static int make_dict(struct jrun *r, const struct jnode *at, const struct jargs *a, bool ns,
		     tf_val **out)
{
	const char *fn = ns ? "namespace" : "dict";
	tf_val *init = tf_jinja_arg(a, 0, NULL), *d;
	int rc = 0;

	if (a->npos > 1)
		return tf_jinja_fail(r, at, "%s() takes at most 1 positional argument", fn);
	if (init && tf_val_kind_of(init) != TF_VAL_DICT)
		return tf_jinja_fail(r, at, "%s() takes a dict as its argument", fn);
	if (!(d = ns ? tf_val_namespace() : tf_val_dict()))
		return TF_ERR_NOMEM;
	for (size_t i = 0; rc == 0 && init && i < tf_val_len(init); i++) {
		size_t len;
		const char *k = tf_val_as_str(tf_val_key_at(init, i), &len);
		rc = tf_val_dict_set(d, k, len, tf_val_ref(tf_val_at(init, i)));
	}
	for (size_t i = 0; rc == 0 && i < a->nnamed; i++)
		rc = tf_val_dict_set(d, a->names[i], strlen(a->names[i]), tf_val_ref(a->named[i]));
	return tf_jinja_give(rc, d, out);
}

static int g_namespace(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a,
		       tf_val **out)
{
	(void)self;
	return make_dict(r, at, a, true, out);
}

static int g_dict(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a,
		  tf_val **out)
{
	(void)self;
	return make_dict(r, at, a, false, out);
}

static int g_raise(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a,
		   tf_val **out)
{
	tf_val *msg = tf_jinja_arg(a, 0, NULL), *s = NULL;
	int rc = tf_jinja_args_check(r, at, "raise_exception", a, 1, NULL);
	(void)self;
	(void)out;
	if (rc == 0 && msg && (rc = tf_jinja_to_str(r, at, msg, &s)) == 0)
		rc = tf_jinja_fail(r, at, "raise_exception: %s", tf_val_as_str(s, NULL));
	else if (rc == 0)
		rc = tf_jinja_fail(r, at, "raise_exception()");
	tf_val_unref(s);
	return rc;
}

static int g_strftime_now(struct jrun *r, const struct jnode *at, tf_val *self,
			  const struct jargs *a, tf_val **out)
{
	const char *fmt = tf_val_as_str(tf_jinja_arg(a, 0, NULL), NULL);
	char buf[256];
	int rc = tf_jinja_args_check(r, at, "strftime_now", a, 1, NULL);
	(void)self;
	if (rc < 0)
		return rc;
	if (!fmt)
		return tf_jinja_fail(r, at, "strftime_now() needs a format string");
	time_t now = time(NULL);
	struct tm tm;
	size_t n = strftime(buf, sizeof(buf), fmt, localtime_r(&now, &tm));
	if (!n && fmt[0])
		return tf_jinja_fail(r, at, "strftime_now(): the result is too long");
	return tf_jinja_give(0, tf_val_str(buf, n), out);
}

static int g_cycle(struct jrun *r, const struct jnode *at, tf_val *self, const struct jargs *a,
		   tf_val **out)
{
	tf_val *i = tf_val_dict_get(self, "index0");
	int rc = tf_jinja_args_check(r, at, "cycle", a, a->npos, NULL);
	if (rc < 0)
		return rc;
	if (!a->npos || !i)
		return tf_jinja_fail(r, at, "no items for cycling given");
	return tf_jinja_give(0, tf_val_ref(a->pos[tf_val_as_int(i) % (int64_t)a->npos]), out);
}

static const struct jglobal { const char *name; tf_jinja_fn fn; } globals[] = {
	{ "range", g_range }, { "namespace", g_namespace }, { "dict", g_dict },
	{ "raise_exception", g_raise }, { "strftime_now", g_strftime_now },
	{ "loop.cycle", g_cycle },
};

tf_val *tf_jinja_global(const char *name)
{
	for (size_t i = 0; i < sizeof(globals) / sizeof(globals[0]); i++)
		if (!strcmp(globals[i].name, name))
			return tf_val_func(JFUNC_BUILTIN, &globals[i]);
	return NULL;
}

int tf_jinja_global_call(struct jrun *r, const struct jnode *at, tf_val *fn, tf_val *self,
			 const struct jargs *args, tf_val **out)
{
	const struct jglobal *g = tf_val_func_ptr(fn);
	return g->fn(r, at, self, args, out);
}
