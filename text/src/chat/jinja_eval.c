/*
 * jinja_eval.c - runs a parsed template: scopes as Jinja keeps them (a for
 * loop's body gets a fresh scope each iteration, a macro sees the template's
 * top level, if blocks share their parent's), Undefined as jinja2's default
 * Undefined, Python's operators, and limits on nesting, work and output.
 */
#include "chat/jinja_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"
#include "unicode/unicode.h"

#define EVAL_MAX_DEPTH 64             /* macro calls inside macro calls */
#define EVAL_MAX_NEST 600             /* nodes run inside nodes: bounds the C stack */
#define EVAL_MAX_STEPS 5000000u       /* statements, expressions and iterations run */
#define EVAL_MAX_OUTPUT (64u << 20)   /* bytes written, captured ones too */
#define KEY_REPR_MAX 200              /* of a missing key, in a message */

struct scope {
	tf_val *vars;          /* a DICT */
	struct scope *parent;  /* NULL: then the caller's variables, then globals */
};

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

struct jrun {
	const tf_jinja *t;
	const tf_val *vars;
	tf_bytes *out;
	struct scope *scope, *root;
	int depth, ctl;
	int nest;   /* expressions and statements being run, one inside another */
	size_t steps, written;
};

int tf_jinja_fail(struct jrun *r, const struct jnode *at, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tf_jinja_error(r->t, at->pos, TF_ERR_INVALID, "%s", msg);
}

int tf_jinja_fail_diag(struct jrun *r, const struct jnode *at, int status)
{
	if (status == TF_ERR_NOMEM)
		return status;
	char msg[400];
	snprintf(msg, sizeof(msg), "%s", tf_diag_msg());
	return tf_jinja_fail(r, at, "%s", msg);
}

int tf_jinja_defined(struct jrun *r, const struct jnode *at, const tf_val *v)
{
	const char *why = tf_val_undefined_why(v);
	return why ? tf_jinja_fail(r, at, "%s", why) : 0;
}

const char *tf_jinja_type_name(const tf_val *v)
{
	switch (tf_val_kind_of(v)) {
	case TF_VAL_NONE: return "NoneType";
	case TF_VAL_BOOL: return "bool";
	case TF_VAL_INT: return "int";
	case TF_VAL_FLOAT: return "float";
	case TF_VAL_STR: return "str";
	case TF_VAL_LIST: return tf_val_seq_name(tf_val_seq_of(v));
	case TF_VAL_DICT: return tf_val_is_namespace(v) ? "Namespace" : "dict";
	case TF_VAL_UNDEFINED: return "Undefined";
	case TF_VAL_FUNC: return "function";
	}
	return "object";
}

int tf_jinja_output_check(struct jrun *r, const struct jnode *at, size_t more)
{
	if (more > EVAL_MAX_OUTPUT - r->written)
		return tf_jinja_fail(r, at, "output beyond %u bytes", EVAL_MAX_OUTPUT);
	r->written += more;
	return 0;
}

size_t tf_jinja_output_left(const struct jrun *r)
{
	return EVAL_MAX_OUTPUT - r->written;
}

int tf_jinja_steps(struct jrun *r, const struct jnode *at, size_t n)
{
	if (n > EVAL_MAX_STEPS - r->steps) {
		r->steps = EVAL_MAX_STEPS;
		return tf_jinja_fail(r, at, "template ran beyond %u steps", EVAL_MAX_STEPS);
	}
	r->steps += n;
	return 0;
}

static int step(struct jrun *r, const struct jnode *at)
{
	return tf_jinja_steps(r, at, 1);
}

/* One step more, one level deeper (the caller undoes r->nest++ after). */
static int enter(struct jrun *r, const struct jnode *at)
{
	if (++r->nest > EVAL_MAX_NEST)
		return tf_jinja_fail(r, at, "expressions and calls nested deeper than %d",
				     EVAL_MAX_NEST);
	return step(r, at);
}

int tf_jinja_to_str(struct jrun *r, const struct jnode *at, const tf_val *v, tf_val **out)
{
	if (tf_val_kind_of(v) == TF_VAL_STR) {
		*out = tf_val_ref((tf_val *)v);
		return 0;
	}
	tf_bytes b = { 0 };
	return tf_jinja_dump_str(r, at, tf_val_dump_py(v, false, tf_jinja_output_left(r), &b), &b,
				 out);
}

int tf_jinja_dump_str(struct jrun *r, const struct jnode *at, int rc, tf_bytes *b, tf_val **out)
{
	/* past the bound, b->len is more than the check allows */
	rc = rc == 0 || rc == TF_ERR_RANGE ? tf_jinja_output_check(r, at, b->len)
					   : tf_jinja_fail_diag(r, at, rc);
	if (rc == 0)
		rc = tf_jinja_give(0, tf_val_str(b->p ? b->p : "", b->len), out);
	tf_bytes_free(b);
	return rc;
}

int tf_jinja_iterate(struct jrun *r, const struct jnode *at, tf_val *v, tf_val **out)
{
	tf_val *l = NULL;
	tf_val_kind kind = tf_val_kind_of(v);
	size_t len = 0;
	/* the caller passes over every item: count them before making any */
	if (kind == TF_VAL_STR)
		tf_val_as_str(v, &len);
	else if (kind == TF_VAL_LIST || kind == TF_VAL_DICT)
		len = tf_val_len(v);
	int rc = tf_jinja_steps(r, at, len);

	if (rc < 0)
		return rc;
	switch (kind) {
	case TF_VAL_LIST:
		*out = tf_val_ref(v);
		return 0;
	case TF_VAL_UNDEFINED:
		return (*out = tf_val_list()) ? 0 : TF_ERR_NOMEM;
	case TF_VAL_DICT:
		if (tf_val_is_namespace(v))
			break;
		if (!(l = tf_val_list()))
			return TF_ERR_NOMEM;
		for (size_t i = 0; i < tf_val_len(v) && rc == 0; i++)
			rc = tf_val_list_push(l, tf_val_ref(tf_val_key_at(v, i)));
		break;
	case TF_VAL_STR: {
		const char *s = tf_val_as_str(v, NULL);
		if (!(l = tf_val_list()))
			return TF_ERR_NOMEM;
		for (size_t i = 0; i < len && rc == 0;) {
			uint32_t cp;
			int n = tf_utf8_next((const uint8_t *)s + i, len - i, &cp);
			n = n > 0 ? n : 1;
			rc = tf_val_list_push(l, tf_val_str(s + i, (size_t)n));
			i += (size_t)n;
		}
		break;
	}
	default:
		break;
	}
	if (!l)
		return tf_jinja_fail(r, at, "'%s' object is not iterable", tf_jinja_type_name(v));
	if (rc < 0) {
		tf_val_unref(l);
		return rc;
	}
	*out = l;
	return 0;
}

int tf_jinja_give(int rc, tf_val *v, tf_val **out)
{
	if (rc == 0 && !v)
		rc = TF_ERR_NOMEM;
	if (rc < 0)
		tf_val_unref(v);
	else
		*out = v;
	return rc;
}

int tf_jinja_list_extend(tf_val *l, const tf_val *src)
{
	int rc = l ? 0 : TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(src) && rc == 0; i++)
		rc = tf_val_list_push(l, tf_val_ref(tf_val_at(src, i)));
	return rc;
}

/* ---- names ---- */

static tf_val *lookup(const struct jrun *r, const char *name, size_t len)
{
	for (const struct scope *s = r->scope; s; s = s->parent) {
		tf_val *v = tf_val_dict_getn(s->vars, name, len);
		if (v)
			return tf_val_ref(v);
	}
	tf_val *v = tf_val_dict_getn(r->vars, name, len);
	return v ? tf_val_ref(v) : tf_jinja_global(name);
}

static int assign(struct jrun *r, const char *name, size_t len, tf_val *v)
{
	return tf_val_dict_set(r->scope->vars, name, len, v);
}

/* A new UNDEFINED whose message is fmt's. */
static int undefined(tf_val **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int undefined(tf_val **out, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tf_jinja_give(0, tf_val_undefined(msg), out);
}

/* jinja2's name for an object in "has no attribute" messages. */
static void object_repr(const tf_val *obj, char *buf, size_t size)
{
	if (tf_val_kind_of(obj) == TF_VAL_NONE)
		snprintf(buf, size, "None");
	else
		snprintf(buf, size, "%s object", tf_jinja_type_name(obj));
}

static int no_attr(const tf_val *obj, const char *name, tf_val **out)
{
	char what[64];
	object_repr(obj, what, sizeof(what));
	return undefined(out, "'%s' has no attribute '%s'", what, name);
}

/* ---- expressions ---- */

static int eval(struct jrun *r, const struct jnode *n, tf_val **out);

/* Index i of a sequence of len n as Python reads a negative one; -1 outside. */
static ptrdiff_t seq_index(int64_t i, size_t n)
{
	if (i < 0)
		i += (int64_t)n;
	return i < 0 || (uint64_t)i >= n ? -1 : (ptrdiff_t)i;
}

/* Byte offsets of each code point of s, and len at the end. */
static int char_offsets(const char *s, size_t len, size_t **offs, size_t *n)
{
	*offs = malloc((len + 1) * sizeof(**offs));
	if (!*offs)
		return TF_ERR_NOMEM;
	*n = 0;
	for (size_t i = 0; i < len; (*n)++) {
		(*offs)[*n] = i;
		uint32_t cp;
		int k = tf_utf8_next((const uint8_t *)s + i, len - i, &cp);
		i += k > 0 ? (size_t)k : 1;
	}
	(*offs)[*n] = len;
	return 0;
}

static int get_item(struct jrun *r, const struct jnode *at, tf_val *obj, tf_val *key, tf_val **out)
{
	tf_val_kind k = tf_val_kind_of(obj), kk = tf_val_kind_of(key);
	char what[64];

	if (k == TF_VAL_DICT && kk == TF_VAL_STR) {
		size_t len;
		const char *s = tf_val_as_str(key, &len);
		tf_val *v = tf_val_dict_getn(obj, s, len);
		if (v)
			return (*out = tf_val_ref(v)), 0;
		return no_attr(obj, s, out);
	}
	if ((tf_jinja_indexable(obj) || k == TF_VAL_STR) &&
	    (kk == TF_VAL_INT || kk == TF_VAL_BOOL)) {
		if (k == TF_VAL_LIST) {
			ptrdiff_t i = seq_index(tf_jinja_as_int(key), tf_val_len(obj));
			if (i >= 0)
				return (*out = tf_val_ref(tf_val_at(obj, (size_t)i))), 0;
		} else {
			size_t len, *offs, n;
			const char *s = tf_val_as_str(obj, &len);
			int rc = char_offsets(s, len, &offs, &n);
			if (rc < 0)
				return rc;
			ptrdiff_t i = seq_index(tf_jinja_as_int(key), n);
			if (i >= 0)
				*out = tf_val_str(s + offs[i], offs[i + 1] - offs[i]);
			free(offs);
			if (i >= 0)
				return *out ? 0 : TF_ERR_NOMEM;
		}
		char num[32];
		snprintf(num, sizeof(num), "%" PRId64, tf_jinja_as_int(key));
		object_repr(obj, what, sizeof(what));
		return undefined(out, "'%s' has no element %s", what, num);
	}
	if (kk == TF_VAL_STR)
		return no_attr(obj, tf_val_as_str(key, NULL), out);
	tf_bytes b = { 0 };
	int rc = tf_val_dump_py(key, true, KEY_REPR_MAX, &b);
	if (rc == TF_ERR_RANGE)
		rc = tf_bytes_append(&b, "...", 3);
	if (rc == 0 && (rc = tf_bytes_append(&b, "", 1)) == 0) {
		object_repr(obj, what, sizeof(what));
		rc = undefined(out, "'%s' has no element %s", what, b.p);
	}
	tf_bytes_free(&b);
	return rc < 0 ? tf_jinja_fail_diag(r, at, rc) : 0;
}

/* Python's slice.indices() and the items it picks. */
static int slice_bound(struct jrun *r, const struct jnode *n, int64_t def, int64_t *out)
{
	if (!n)
		return (*out = def), 0;
	tf_val *v;
	int rc = eval(r, n, &v);
	if (rc < 0)
		return rc;
	tf_val_kind k = tf_val_kind_of(v);
	if (k == TF_VAL_INT || k == TF_VAL_BOOL)
		*out = tf_jinja_as_int(v);
	else if (k == TF_VAL_NONE)
		*out = def;
	else
		rc = tf_jinja_fail(r, n, "slice indices must be integers or None");
	tf_val_unref(v);
	return rc;
}

static int get_slice(struct jrun *r, const struct jnode *sl, tf_val *obj, tf_val **out)
{
	int64_t start, stop, step;
	int rc;

	if ((rc = slice_bound(r, sl->c, 1, &step)) < 0)
		return rc;
	if (step == 0)
		return tf_jinja_fail(r, sl, "slice step cannot be zero");
	if (step == INT64_MIN)
		step = -INT64_MAX;
	bool is_str = tf_val_kind_of(obj) == TF_VAL_STR;
	size_t len = 0, *offs = NULL, n;
	const char *s = NULL;
	if (is_str) {
		s = tf_val_as_str(obj, &len);
		if ((rc = char_offsets(s, len, &offs, &n)) < 0)
			return rc;
	} else if (tf_jinja_indexable(obj)) {
		n = tf_val_len(obj);
	} else {
		/* jinja2 slices with Python's own [a:b:c], which fails on the rest */
		return tf_val_kind_of(obj) == TF_VAL_DICT
			       ? tf_jinja_fail(r, sl, "unhashable type: 'slice'")
			       : tf_jinja_fail(r, sl, "'%s' object is not subscriptable",
					       tf_jinja_type_name(obj));
	}
	int64_t N = (int64_t)n;
	if ((rc = slice_bound(r, sl->a, step < 0 ? N - 1 : 0, &start)) < 0 ||
	    (rc = slice_bound(r, sl->b, step < 0 ? -N - 1 : N, &stop)) < 0)
		goto cleanup;
	/* clamp as PySlice_AdjustIndices does */
	int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? N - 1 : N;
	if (start < 0)
		start = start + N < lo ? lo : start + N;
	else if (start > hi)
		start = hi;
	if (stop < 0)
		stop = stop + N < lo ? lo : stop + N;
	else if (stop > hi)
		stop = hi;
	tf_bytes b = { 0 };
	tf_val *l = is_str ? NULL : tf_val_seq_new(tf_val_seq_of(obj));
	if (!is_str && !l) {
		rc = TF_ERR_NOMEM;
		goto cleanup;
	}
	for (int64_t i = start; rc == 0 && (step > 0 ? i < stop : i > stop); i += step) {
		if (is_str)
			rc = tf_bytes_append(&b, s + offs[i], offs[i + 1] - offs[i]);
		else
			rc = tf_val_list_push(l, tf_val_ref(tf_val_at(obj, (size_t)i)));
		if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
			break;
	}
	if (is_str && rc == 0 && !(l = tf_val_str(b.p ? b.p : "", b.len)))
		rc = TF_ERR_NOMEM;
	tf_bytes_free(&b);
	if (rc < 0)
		tf_val_unref(l);
	else
		*out = l;
cleanup:
	free(offs);
	return rc;
}

static int get_attr(struct jrun *r, const struct jnode *at, tf_val *obj, const char *name,
		    tf_val **out)
{
	tf_val *v = tf_val_kind_of(obj) == TF_VAL_DICT ? tf_val_dict_get(obj, name) : NULL;
	if (v)
		return (*out = tf_val_ref(v)), 0;
	if (tf_jinja_has_method(obj, name))
		return tf_jinja_fail(r, at, "method '%s' of %s used without a call: not supported",
				     name, tf_jinja_type_name(obj));
	return no_attr(obj, name, out);
}

/* Evaluated call arguments; a few live inside, more are allocated. */
#define ARGS_INLINE 6
struct argbuf {
	struct jargs a;
	tf_val *pos[ARGS_INLINE], *named[ARGS_INLINE];
	const char *names[ARGS_INLINE];
};

static void args_free(struct argbuf *b)
{
	struct jargs *a = &b->a;
	for (size_t i = 0; i < a->npos; i++)
		tf_val_unref(a->pos[i]);
	for (size_t i = 0; i < a->nnamed; i++)
		tf_val_unref(a->named[i]);
	if (a->pos != b->pos) {
		free(a->pos);
		free(a->names);
		free(a->named);
	}
	*a = (struct jargs){ 0 };
}

static int eval_args(struct jrun *r, const struct jlist *kids, struct argbuf *b)
{
	struct jargs *a = &b->a;
	int rc = 0;

	*a = (struct jargs){ b->pos, 0, b->names, b->named, 0 };
	if (kids->n > ARGS_INLINE) {
		a->pos = calloc(kids->n, sizeof(*a->pos));
		a->names = calloc(kids->n, sizeof(*a->names));
		a->named = calloc(kids->n, sizeof(*a->named));
		if (!a->pos || !a->names || !a->named)
			rc = TF_ERR_NOMEM;
	}
	for (size_t i = 0; i < kids->n && rc == 0; i++) {
		const struct jnode *k = kids->v[i];
		if (k->kind == JN_KWARG) {
			a->names[a->nnamed] = tf_val_as_str(k->val, NULL);
			rc = eval(r, k->a, &a->named[a->nnamed]);
			a->nnamed += rc == 0;
		} else {
			rc = eval(r, k, &a->pos[a->npos]);
			a->npos += rc == 0;
		}
	}
	if (rc < 0)
		args_free(b);
	return rc;
}

tf_val *tf_jinja_arg(const struct jargs *args, int i, const char *name)
{
	if (i >= 0 && (size_t)i < args->npos)
		return args->pos[i];
	for (size_t k = 0; name && k < args->nnamed; k++)
		if (!strcmp(args->names[k], name))
			return args->named[k];
	return NULL;
}

int tf_jinja_args_check(struct jrun *r, const struct jnode *at, const char *fn,
			const struct jargs *args, size_t max_pos, const char *const *names)
{
	if (args->npos > max_pos)
		return tf_jinja_fail(r, at,
				     "%s() takes at most %zu positional argument%s (%zu given)", fn,
				     max_pos, max_pos == 1 ? "" : "s", args->npos);
	for (size_t k = 0; k < args->nnamed; k++) {
		size_t j = 0;
		while (names && names[j] && strcmp(names[j], args->names[k]))
			j++;
		if (!names || !names[j])
			return tf_jinja_fail(r, at, "%s() got an unexpected keyword argument '%s'",
					     fn, args->names[k]);
		if (j < args->npos)
			return tf_jinja_fail(r, at, "%s() got multiple values for argument '%s'",
					     fn, args->names[k]);
	}
	return 0;
}

static int exec_body(struct jrun *r, const struct jlist *body);

/* Runs body with output captured into a new STR. */
static int capture(struct jrun *r, const struct jlist *body, tf_val **out)
{
	tf_bytes buf = { 0 }, *saved = r->out;
	r->out = &buf;
	int rc = exec_body(r, body);
	r->out = saved;
	if (rc == 0 && !(*out = tf_val_str(buf.p ? buf.p : "", buf.len)))
		rc = TF_ERR_NOMEM;
	tf_bytes_free(&buf);
	return rc;
}

/* The scope a macro was defined in, while it is still running (the macro
 * closes over it, as jinja2's do); else the top level. */
static struct scope *macro_home(const struct jrun *r, const tf_val *fn, const char *name,
				size_t len)
{
	for (struct scope *s = r->scope; s; s = s->parent)
		if (tf_val_dict_getn(s->vars, name, len) == fn)
			return s;
	return r->root;
}

/* varargs (a tuple of the extra positional arguments) and kwargs (a dict of
 * the unknown named ones), for a macro whose body names them. */
static int macro_extras(struct jrun *r, const struct jnode *at, const struct jnode *m,
			const struct jargs *args)
{
	const char *name = tf_val_as_str(m->val, NULL);
	tf_val *varargs = tf_val_seq_new(TF_SEQ_TUPLE), *kwargs = tf_val_dict();
	int rc = varargs && kwargs ? 0 : TF_ERR_NOMEM;

	if (rc == 0 && args->npos > m->kids.n && !(m->op & JMACRO_VARARGS))
		rc = tf_jinja_fail(r, at, "macro '%s' takes not more than %zu argument(s)", name,
				   m->kids.n);
	for (size_t k = m->kids.n; rc == 0 && k < args->npos; k++)
		rc = tf_val_list_push(varargs, tf_val_ref(args->pos[k]));
	for (size_t k = 0; rc == 0 && k < args->nnamed; k++) {
		size_t j = 0;
		while (j < m->kids.n &&
		       strcmp(tf_val_as_str(m->kids.v[j]->val, NULL), args->names[k]))
			j++;
		if (j < m->kids.n && j < args->npos)
			rc = tf_jinja_fail(r, at,
					   "macro '%s' got multiple values for argument '%s'", name,
					   args->names[k]);
		else if (j == m->kids.n && !(m->op & JMACRO_KWARGS))
			rc = tf_jinja_fail(r, at, "macro '%s' takes no keyword argument '%s'", name,
					   args->names[k]);
		else if (j == m->kids.n)
			rc = tf_val_dict_set(kwargs, args->names[k], strlen(args->names[k]),
					     tf_val_ref(args->named[k]));
	}
	if (rc == 0 && (m->op & JMACRO_VARARGS)) {
		rc = assign(r, "varargs", 7, varargs);
		varargs = NULL;
	}
	if (rc == 0 && (m->op & JMACRO_KWARGS)) {
		rc = assign(r, "kwargs", 6, kwargs);
		kwargs = NULL;
	}
	tf_val_unref(varargs);
	tf_val_unref(kwargs);
	return rc;
}

static int call_macro(struct jrun *r, const struct jnode *at, const tf_val *fn,
		      const struct jargs *args, tf_val **out)
{
	const struct jnode *m = tf_val_func_ptr(fn);
	size_t nlen;
	const char *name = tf_val_as_str(m->val, &nlen);
	struct scope sc = { tf_val_dict(), macro_home(r, fn, name, nlen) }, *saved = r->scope;
	int rc = 0;

	if (!sc.vars)
		return TF_ERR_NOMEM;
	if (r->depth >= EVAL_MAX_DEPTH) {
		rc = tf_jinja_fail(r, at, "macro calls nested deeper than %d", EVAL_MAX_DEPTH);
		goto cleanup;
	}
	r->scope = &sc;
	r->depth++;
	rc = macro_extras(r, at, m, args);
	for (size_t j = 0; j < m->kids.n && rc == 0; j++) {
		const struct jnode *p = m->kids.v[j];
		size_t len;
		const char *pname = tf_val_as_str(p->val, &len);
		tf_val *v = j < args->npos ? tf_val_ref(args->pos[j]) : NULL;
		for (size_t k = 0; !v && k < args->nnamed; k++)
			if (!strcmp(args->names[k], pname))
				v = tf_val_ref(args->named[k]);
		if (!v && p->a)
			rc = eval(r, p->a, &v);
		else if (!v)
			rc = undefined(&v, "parameter '%s' was not provided", pname);
		if (rc == 0)
			rc = assign(r, pname, len, v);
	}
	if (rc == 0)
		rc = capture(r, &m->body, out);
	r->depth--;
	r->scope = saved;
cleanup:
	tf_val_unref(sc.vars);
	return rc;
}

static int call(struct jrun *r, const struct jnode *at, tf_val *fn, tf_val *self,
		const struct jargs *args, tf_val **out)
{
	int rc;
	if ((rc = tf_jinja_defined(r, at, fn)) < 0)
		return rc;
	if (tf_val_func_tag(fn) == JFUNC_MACRO)
		return call_macro(r, at, fn, args, out);
	if (tf_val_func_tag(fn) == JFUNC_BUILTIN)
		return tf_jinja_global_call(r, at, fn, self, args, out);
	return tf_jinja_fail(r, at, "'%s' object is not callable", tf_jinja_type_name(fn));
}

static int eval_call(struct jrun *r, const struct jnode *n, tf_val **out)
{
	tf_val *obj = NULL, *fn = NULL;
	struct argbuf args = { 0 };
	int rc;

	if (n->a->kind == JN_ATTR) {
		if ((rc = eval(r, n->a->a, &obj)) < 0)
			return rc;
		if ((rc = tf_jinja_defined(r, n->a, obj)) < 0 ||
		    (rc = eval_args(r, &n->kids, &args)) < 0)
			goto cleanup;
		const char *name = tf_val_as_str(n->a->val, NULL);
		if ((rc = tf_jinja_method_call(r, n, obj, name, &args.a, out)) <= 0)
			goto cleanup;
		if ((rc = get_attr(r, n->a, obj, name, &fn)) == 0)
			rc = call(r, n, fn, obj, &args.a, out);
		goto cleanup;
	}
	if ((rc = eval(r, n->a, &fn)) == 0 && (rc = eval_args(r, &n->kids, &args)) == 0)
		rc = call(r, n, fn, NULL, &args.a, out);
cleanup:
	args_free(&args);
	tf_val_unref(obj);
	tf_val_unref(fn);
	return rc;
}

static int eval_filter(struct jrun *r, const struct jnode *n, tf_val **out)
{
	tf_val *v;
	struct argbuf args;
	int rc = eval(r, n->a, &v);
	if (rc < 0)
		return rc;
	if ((rc = eval_args(r, &n->kids, &args)) == 0) {
		if (n->kind == JN_FILTER) {
			rc = tf_jinja_filter_call(r, n, n->op, v, &args.a, out);
		} else {
			bool yes;
			if ((rc = tf_jinja_test_call(r, n, n->op, v, &args.a, &yes)) == 0)
				rc = (*out = tf_val_bool(yes != n->neg)) ? 0 : TF_ERR_NOMEM;
		}
		args_free(&args);
	}
	tf_val_unref(v);
	return rc;
}

static int eval_compare(struct jrun *r, const struct jnode *n, tf_val **out)
{
	tf_val *left, *right = NULL;
	bool yes = true;
	int rc = eval(r, n->a, &left);

	for (size_t i = 0; i < n->kids.n && rc == 0 && yes; i++) {
		const struct jnode *s = n->kids.v[i];
		if ((rc = eval(r, s->b, &right)) < 0)
			break;
		rc = tf_jinja_compare(r, s, s->op, left, right, &yes);
		tf_val_unref(left);
		left = right;
	}
	tf_val_unref(left);
	if (rc < 0)
		return rc;
	return (*out = tf_val_bool(yes)) ? 0 : TF_ERR_NOMEM;
}

static int eval_seq(struct jrun *r, const struct jnode *n, tf_val **out)
{
	tf_val *c = n->kind == JN_DICT    ? tf_val_dict()
		    : n->kind == JN_TUPLE ? tf_val_seq_new(TF_SEQ_TUPLE)
					  : tf_val_list();
	int rc = c ? 0 : TF_ERR_NOMEM;

	for (size_t i = 0; i < n->kids.n && rc == 0; i++) {
		tf_val *v, *k;
		if ((rc = eval(r, n->kids.v[i], &v)) < 0)
			break;
		if (n->kind != JN_DICT) {
			rc = tf_val_list_push(c, v);
			continue;
		}
		k = v;
		if ((rc = eval(r, n->kids.v[++i], &v)) == 0) {
			size_t len;
			const char *s = tf_val_as_str(k, &len);
			if (s)
				rc = tf_val_dict_set(c, s, len, v);
			else {
				tf_val_unref(v);
				rc = tf_jinja_fail(
					r, n->kids.v[i - 1],
					"dict keys other than strings are not supported");
			}
		}
		tf_val_unref(k);
	}
	return tf_jinja_give(rc, c, out);
}

static int eval_node(struct jrun *r, const struct jnode *n, tf_val **out)
{
	tf_val *a = NULL, *b = NULL;
	int rc;

	switch (n->kind) {
	case JN_CONST:
		*out = tf_val_ref(n->val);
		return 0;
	case JN_NAME: {
		size_t len;
		const char *s = tf_val_as_str(n->val, &len);
		if ((*out = lookup(r, s, len)))
			return 0;
		return undefined(out, "'%s' is undefined", s);
	}
	case JN_LIST:
	case JN_TUPLE:
	case JN_DICT:
		return eval_seq(r, n, out);
	case JN_ATTR:
		if ((rc = eval(r, n->a, &a)) == 0 && (rc = tf_jinja_defined(r, n, a)) == 0)
			rc = get_attr(r, n, a, tf_val_as_str(n->val, NULL), out);
		break;
	case JN_ITEM:
		if ((rc = eval(r, n->a, &a)) < 0 || (rc = tf_jinja_defined(r, n, a)) < 0)
			break;
		if (n->b->kind == JN_SLICE)
			rc = get_slice(r, n->b, a, out);
		else if ((rc = eval(r, n->b, &b)) == 0)
			rc = get_item(r, n, a, b, out);
		break;
	case JN_CALL:
		return eval_call(r, n, out);
	case JN_FILTER:
	case JN_TEST:
		return eval_filter(r, n, out);
	case JN_NEG:
		if ((rc = eval(r, n->a, &a)) == 0)
			rc = tf_jinja_neg(r, n, a, out);
		break;
	case JN_NOT:
		if ((rc = eval(r, n->a, &a)) == 0)
			rc = (*out = tf_val_bool(!tf_val_truthy(a))) ? 0 : TF_ERR_NOMEM;
		break;
	case JN_AND:
	case JN_OR:
		if ((rc = eval(r, n->a, &a)) < 0)
			break;
		if (tf_val_truthy(a) == (n->kind == JN_OR)) {
			*out = a;
			return 0;
		}
		return tf_val_unref(a), eval(r, n->b, out);
	case JN_BINOP:
		if ((rc = eval(r, n->a, &a)) == 0 && (rc = eval(r, n->b, &b)) == 0)
			rc = tf_jinja_arith(r, n, a, b, out);
		break;
	case JN_COMPARE:
		return eval_compare(r, n, out);
	case JN_COND:
		if ((rc = eval(r, n->a, &a)) < 0)
			break;
		if (tf_val_truthy(a))
			rc = eval(r, n->b, out);
		else if (n->c)
			rc = eval(r, n->c, out);
		else
			rc = undefined(out, "the inline if-expression evaluated to false and "
					    "no else section was defined");
		break;
	default: return tf_jinja_fail(r, n, "not an expression");
	}
	tf_val_unref(a);
	tf_val_unref(b);
	return rc;
}

static int eval(struct jrun *r, const struct jnode *n, tf_val **out)
{
	int rc;
	*out = NULL;
	if ((rc = enter(r, n)) == 0)
		rc = eval_node(r, n, out);
	r->nest--;
	return rc;
}

/* ---- statements ---- */

static int emit(struct jrun *r, const struct jnode *at, const char *s, size_t len)
{
	int rc = tf_jinja_output_check(r, at, len);
	return rc < 0 ? rc : tf_bytes_append(r->out, s, len);
}

/* Binds targets (NAMEs) to v, unpacking it when there are several. */
static int bind(struct jrun *r, const struct jnode *at, const struct jlist *targets, tf_val *v)
{
	size_t len;
	const char *name;
	int rc;

	if (targets->n == 1) {
		name = tf_val_as_str(targets->v[0]->val, &len);
		return assign(r, name, len, tf_val_ref(v));
	}
	tf_val *items;
	if ((rc = tf_jinja_iterate(r, at, v, &items)) < 0)
		return rc;
	if (tf_val_len(items) != targets->n) {
		rc = tf_val_len(items) > targets->n
			     ? tf_jinja_fail(r, at, "too many values to unpack (expected %zu)",
					     targets->n)
			     : tf_jinja_fail(r, at,
					     "not enough values to unpack (expected %zu, got %zu)",
					     targets->n, tf_val_len(items));
	}
	for (size_t i = 0; i < targets->n && rc == 0; i++) {
		name = tf_val_as_str(targets->v[i]->val, &len);
		rc = assign(r, name, len, tf_val_ref(tf_val_at(items, i)));
	}
	tf_val_unref(items);
	return rc;
}

/* Sets the loop object's fields for iteration i of the items.  Like
 * jinja2's LoopContext it is one object for the whole loop.  A template that
 * stored the loop in a namespace among the items would make it hold itself
 * through previtem or nextitem: refused, as a cycle is never freed. */
static int loop_update(struct jrun *r, const struct jnode *at, tf_val *l, const tf_val *items,
		       size_t i)
{
	size_t n = tf_val_len(items), fields = i == 0 ? 12 : 8;   /* the last 4 never change */
	const struct { const char *k; tf_val *v;
	} f[] = {
		{ "index", tf_val_int((int64_t)i + 1) },
		{ "index0", tf_val_int((int64_t)i) },
		{ "revindex", tf_val_int((int64_t)(n - i)) },
		{ "revindex0", tf_val_int((int64_t)(n - i - 1)) },
		{ "first", tf_val_bool(i == 0) },
		{ "last", tf_val_bool(i + 1 == n) },
		{ "previtem", i > 0 ? tf_val_ref(tf_val_at(items, i - 1))
				    : tf_val_undefined("there is no previous item") },
		{ "nextitem", i + 1 < n ? tf_val_ref(tf_val_at(items, i + 1))
					: tf_val_undefined("there is no next item") },
		{ "length", i == 0 ? tf_val_int((int64_t)n) : NULL },
		{ "depth", i == 0 ? tf_val_int(1) : NULL },
		{ "depth0", i == 0 ? tf_val_int(0) : NULL },
		{ "cycle", i == 0 ? tf_jinja_global("loop.cycle") : NULL },
	};
	int rc = 0;
	for (size_t k = 6; k < 8 && rc == 0; k++)   /* previtem, nextitem */
		if ((rc = tf_val_reaches(f[k].v, l)) > 0)
			rc = tf_jinja_fail(r, at, "loop.%s would hold the loop itself", f[k].k);
	for (size_t k = 0; k < fields; k++)
		if (rc == 0)
			rc = tf_val_dict_set(l, f[k].k, strlen(f[k].k), f[k].v);
		else
			tf_val_unref(f[k].v);
	return rc;
}

/* A new scope for an iteration: a fresh one when the body may set names
 * (they must not outlive the iteration), else the same one reused. */
static int iteration_scope(const struct jnode *n, struct scope *sc)
{
	if (sc->vars && !n->op)
		return 0;
	tf_val_unref(sc->vars);
	return (sc->vars = tf_val_dict()) ? 0 : TF_ERR_NOMEM;
}

static int exec_for(struct jrun *r, const struct jnode *n)
{
	tf_val *seq = NULL, *all = NULL, *items = NULL, *loop = NULL;
	struct scope sc = { NULL, r->scope };
	int rc;

	if ((rc = eval(r, n->a, &seq)) < 0 || (rc = tf_jinja_iterate(r, n->a, seq, &all)) < 0)
		goto cleanup;
	r->scope = &sc;
	if (!n->b)
		items = tf_val_ref(all);
	else if (!(items = tf_val_list()))
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; n->b && i < tf_val_len(all) && rc == 0; i++) {
		tf_val *keep = NULL;
		if ((rc = step(r, n)) == 0 && (rc = iteration_scope(n, &sc)) == 0 &&
		    (rc = bind(r, n, &n->kids, tf_val_at(all, i))) == 0 &&
		    (rc = eval(r, n->b, &keep)) == 0 && tf_val_truthy(keep))
			rc = tf_val_list_push(items, tf_val_ref(tf_val_at(all, i)));
		tf_val_unref(keep);
	}
	if (rc == 0 && tf_val_len(items) && !(loop = tf_val_dict()))
		rc = TF_ERR_NOMEM;
	for (size_t i = 0; i < tf_val_len(items) && rc == 0; i++) {
		if ((rc = step(r, n)) < 0 || (rc = iteration_scope(n, &sc)) < 0 ||
		    (rc = bind(r, n, &n->kids, tf_val_at(items, i))) < 0 ||
		    (rc = loop_update(r, n, loop, items, i)) < 0 ||
		    (rc = assign(r, "loop", 4, tf_val_ref(loop))) < 0)
			break;
		rc = exec_body(r, &n->body);
		if (r->ctl == CTL_BREAK) {
			r->ctl = CTL_NONE;
			break;
		}
		r->ctl = CTL_NONE;
	}
	if (rc == 0 && tf_val_len(items) == 0) {
		/* the else body has a fresh scope of its own too */
		tf_val_unref(sc.vars);
		rc = (sc.vars = tf_val_dict()) ? exec_body(r, &n->alt) : TF_ERR_NOMEM;
	}
	r->scope = sc.parent;
cleanup:
	tf_val_unref(sc.vars);
	tf_val_unref(loop);
	tf_val_unref(seq);
	tf_val_unref(all);
	tf_val_unref(items);
	return rc;
}

/* A set block's body, captured in a scope of its own (names it sets stay in it). */
static int capture_block(struct jrun *r, const struct jnode *n, tf_val **out)
{
	struct scope sc = { tf_val_dict(), r->scope };
	int rc = sc.vars ? 0 : TF_ERR_NOMEM;
	if (rc == 0) {
		r->scope = &sc;
		rc = capture(r, &n->body, out);
		r->scope = sc.parent;
	}
	tf_val_unref(sc.vars);
	return rc;
}

static int exec_set(struct jrun *r, const struct jnode *n)
{
	const struct jnode *target = n->a;
	tf_val *v, *obj = NULL;
	int rc = n->kind == JN_SET_BLOCK ? capture_block(r, n, &v) : eval(r, n->b, &v);

	if (rc < 0)
		return rc;
	if (target->kind == JN_NAME) {
		size_t len;
		const char *s = tf_val_as_str(target->val, &len);
		return assign(r, s, len, v);
	}
	if (target->kind == JN_TUPLE) {
		rc = bind(r, n, &target->kids, v);
		tf_val_unref(v);
		return rc;
	}
	if ((rc = eval(r, target->a, &obj)) == 0) {
		size_t len;
		const char *s = tf_val_as_str(target->val, &len);
		if (!tf_val_is_namespace(obj))
			rc = tf_jinja_fail(r, n, "cannot assign attribute on non-namespace object");
		else if ((rc = tf_val_reaches(v, obj)) > 0)
			rc = tf_jinja_fail(r, n, "cannot store a namespace inside itself");
		else if (rc == 0)
			rc = tf_val_dict_set(obj, s, len, tf_val_ref(v));
	}
	tf_val_unref(obj);
	tf_val_unref(v);
	return rc;
}

static int exec_one(struct jrun *r, const struct jnode *n)
{
	tf_val *v = NULL, *s = NULL;
	int rc;

	switch (n->kind) {
	case JN_TEXT: {
		size_t len;
		const char *t = tf_val_as_str(n->val, &len);
		return emit(r, n, t, len);
	}
	case JN_OUTPUT:
		if ((rc = eval(r, n->a, &v)) == 0 && (rc = tf_jinja_to_str(r, n->a, v, &s)) == 0) {
			size_t len;
			const char *t = tf_val_as_str(s, &len);
			rc = emit(r, n, t, len);
		}
		break;
	case JN_IF:
		if ((rc = eval(r, n->a, &v)) == 0)
			rc = exec_body(r, tf_val_truthy(v) ? &n->body : &n->alt);
		break;
	case JN_FOR:
		return exec_for(r, n);
	case JN_SET:
	case JN_SET_BLOCK:
		return exec_set(r, n);
	case JN_MACRO: {
		size_t len;
		const char *name = tf_val_as_str(n->val, &len);
		tf_val *fn = tf_val_func(JFUNC_MACRO, n);
		return fn ? assign(r, name, len, fn) : TF_ERR_NOMEM;
	}
	case JN_BREAK:
	case JN_CONTINUE:
		r->ctl = n->kind == JN_BREAK ? CTL_BREAK : CTL_CONTINUE;
		return 0;
	default: return tf_jinja_fail(r, n, "not a statement");
	}
	tf_val_unref(v);
	tf_val_unref(s);
	return rc;
}

static int exec_node(struct jrun *r, const struct jnode *n)
{
	int rc = enter(r, n);
	if (rc == 0)
		rc = exec_one(r, n);
	r->nest--;
	return rc;
}

static int exec_body(struct jrun *r, const struct jlist *body)
{
	for (size_t i = 0; i < body->n; i++) {
		int rc = exec_node(r, body->v[i]);
		if (rc < 0)
			return rc;
		if (r->ctl)
			return 0;
	}
	return 0;
}

int tf_jinja_render(const tf_jinja *t, const tf_val *vars, tf_bytes *out)
{
	struct scope root = { tf_val_dict(), NULL };
	struct jrun r = { .t = t, .vars = vars, .out = out, .scope = &root, .root = &root };
	size_t start = out->len;
	int rc;

	if (!root.vars)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", t->name);
	if (tf_val_kind_of(vars) != TF_VAL_DICT)
		rc = tf_diag_set(TF_ERR_INVALID, "%s: the variables are not a dict", t->name);
	else
		rc = exec_body(&r, &t->body);
	if (rc == TF_ERR_NOMEM)
		tf_diag_set(rc, "%s: out of memory", t->name);
	if (rc < 0)
		out->len = start;
	tf_val_unref(root.vars);
	return rc;
}
