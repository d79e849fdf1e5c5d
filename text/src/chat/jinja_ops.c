/*
 * jinja_ops.c - Python's operators on template values: arithmetic with its
 * int/float rules and floor semantics, ~ and + and * on strings and lists,
 * ordering, ==, "in", unary minus, with Python's TypeErrors as failures.
 */
#define _GNU_SOURCE
#include "chat/jinja_int.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"

/* A list or a tuple, not a lazy iterable or view. */
static bool is_seq(const tf_val *v)
{
	return tf_val_kind_of(v) == TF_VAL_LIST && tf_val_seq_of(v) <= TF_SEQ_TUPLE;
}

/* A list, a tuple or a range: what takes an index and a slice. */
bool tf_jinja_indexable(const tf_val *v)
{
	return is_seq(v) || tf_val_seq_of(v) == TF_SEQ_RANGE;
}

static bool is_num(const tf_val *v)
{
	tf_val_kind k = tf_val_kind_of(v);
	return k == TF_VAL_BOOL || k == TF_VAL_INT || k == TF_VAL_FLOAT;
}

int64_t tf_jinja_as_int(const tf_val *v)
{
	return tf_val_kind_of(v) == TF_VAL_BOOL ? tf_val_as_bool(v) : tf_val_as_int(v);
}

static double as_float(const tf_val *v)
{
	return tf_val_kind_of(v) == TF_VAL_BOOL ? tf_val_as_bool(v) : tf_val_as_float(v);
}

int tf_jinja_less(struct jrun *r, const struct jnode *at, const tf_val *a, const tf_val *b,
		  bool *out)
{
	int rc;
	if ((rc = tf_jinja_defined(r, at, a)) < 0 || (rc = tf_jinja_defined(r, at, b)) < 0)
		return rc;
	if (is_num(a) && is_num(b)) {
		if (tf_val_kind_of(a) != TF_VAL_FLOAT && tf_val_kind_of(b) != TF_VAL_FLOAT)
			*out = tf_jinja_as_int(a) < tf_jinja_as_int(b);
		else
			*out = as_float(a) < as_float(b);
		return 0;
	}
	tf_val_kind k = tf_val_kind_of(a);
	if (k == tf_val_kind_of(b) && k == TF_VAL_STR) {
		size_t la, lb;
		const char *sa = tf_val_as_str(a, &la), *sb = tf_val_as_str(b, &lb);
		int c = memcmp(sa, sb, la < lb ? la : lb);
		*out = c < 0 || (c == 0 && la < lb);
		return 0;
	}
	if (is_seq(a) && is_seq(b) && tf_val_seq_of(a) == tf_val_seq_of(b)) {
		size_t na = tf_val_len(a), nb = tf_val_len(b);
		for (size_t i = 0; i < na && i < nb; i++)
			if (!tf_val_equal(tf_val_at(a, i), tf_val_at(b, i)))
				return tf_jinja_less(r, at, tf_val_at(a, i), tf_val_at(b, i), out);
		*out = na < nb;
		return 0;
	}
	return tf_jinja_fail(r, at, "'<' not supported between instances of '%s' and '%s'",
			     tf_jinja_type_name(a), tf_jinja_type_name(b));
}

static int type_error(struct jrun *r, const struct jnode *n, const char *op, const tf_val *a,
		      const tf_val *b)
{
	return tf_jinja_fail(r, n, "unsupported operand type(s) for %s: '%s' and '%s'", op,
			     tf_jinja_type_name(a), tf_jinja_type_name(b));
}

static int concat(struct jrun *r, const struct jnode *n, const tf_val *a, const tf_val *b,
		  tf_val **out)
{
	tf_val *sa = NULL, *sb = NULL;
	size_t la, lb;
	int rc;

	if ((rc = tf_jinja_to_str(r, n, a, &sa)) == 0 &&
	    (rc = tf_jinja_to_str(r, n, b, &sb)) == 0) {
		const char *pa = tf_val_as_str(sa, &la), *pb = tf_val_as_str(sb, &lb);
		if ((rc = tf_jinja_output_check(r, n, la + lb)) == 0) {
			char *buf = malloc(la + lb + 1);
			if (!buf) {
				rc = TF_ERR_NOMEM;
			} else {
				memcpy(buf, pa, la);
				memcpy(buf + la, pb, lb);
				*out = tf_val_str(buf, la + lb);
				free(buf);
				rc = *out ? 0 : TF_ERR_NOMEM;
			}
		}
	}
	tf_val_unref(sa);
	tf_val_unref(sb);
	return rc;
}

/* s * n or list * n: n copies, none when n <= 0. */
static int repeat(struct jrun *r, const struct jnode *n, const tf_val *seq, int64_t times,
		  tf_val **out)
{
	size_t len = 0;
	const char *s = tf_val_as_str(seq, &len);
	size_t unit = s ? len : tf_val_len(seq) * sizeof(tf_val *);
	int rc = 0;

	if (times < 0 || unit == 0)
		times = 0;   /* nothing to repeat: no work either */
	if (unit && (uint64_t)times > SIZE_MAX / unit)
		return tf_jinja_fail(r, n, "repetition beyond the output limit");
	if ((rc = tf_jinja_output_check(r, n, unit * (size_t)times)) < 0)
		return rc;
	if (s) {
		tf_bytes b = { 0 };
		for (int64_t k = 0; k < times && rc == 0; k++)
			rc = tf_bytes_append(&b, s, len);
		if (rc == 0 && !(*out = tf_val_str(b.p ? b.p : "", b.len)))
			rc = TF_ERR_NOMEM;
		tf_bytes_free(&b);
		return rc;
	}
	if ((rc = tf_jinja_steps(r, n, tf_val_len(seq) * (size_t)times)) < 0)
		return rc;
	tf_val *l = tf_val_seq_new(tf_val_seq_of(seq));
	rc = l ? 0 : TF_ERR_NOMEM;
	for (int64_t k = 0; k < times && rc == 0; k++)
		rc = tf_jinja_list_extend(l, seq);
	return tf_jinja_give(rc, l, out);
}

/* a + b of two LISTs or two tuples. */
static int join_lists(const tf_val *a, const tf_val *b, tf_val **out)
{
	tf_val *l = tf_val_seq_new(tf_val_seq_of(a));
	int rc = tf_jinja_list_extend(l, a);
	if (rc == 0)
		rc = tf_jinja_list_extend(l, b);
	return tf_jinja_give(rc, l, out);
}

/* x // y (floor set) or x % y as CPython's float_divmod computes them, signed
 * zeros and rounding included. */
static double py_divmod(double x, double y, bool floor_div)
{
	double mod = fmod(x, y), div = (x - mod) / y;
	if (mod != 0) {
		if ((y < 0) != (mod < 0)) {
			mod += y;
			div -= 1.0;
		}
	} else {
		mod = copysign(0.0, y);
	}
	if (!floor_div)
		return mod;
	if (div == 0)
		return copysign(0.0, x / y);
	double fd = floor(div);
	return div - fd > 0.5 ? fd + 1.0 : fd;
}

int tf_jinja_arith(struct jrun *r, const struct jnode *n, const tf_val *a, const tf_val *b,
		 tf_val **out)
{
	static const char *const names[] = { [JOP_FLOORDIV - 256] = "//",
					     [JOP_POW - 256] = "** or pow()" };
	char opname[4] = { (char)n->op, 0 };
	const char *op = n->op >= 256 ? names[n->op - 256] : opname;
	int rc;

	tf_val_kind ka = tf_val_kind_of(a), kb = tf_val_kind_of(b);
	if (n->op == '~')
		return concat(r, n, a, b, out);
	if (n->op == '%' && ka == TF_VAL_STR)
		return tf_jinja_fail(r, n, "printf-style '%%' string formatting is not supported");
	if ((rc = tf_jinja_defined(r, n, a)) < 0 || (rc = tf_jinja_defined(r, n, b)) < 0)
		return rc;
	if (n->op == '+' && ka == TF_VAL_STR && kb == TF_VAL_STR)
		return concat(r, n, a, b, out);
	if (n->op == '+' && is_seq(a) && is_seq(b) && tf_val_seq_of(a) == tf_val_seq_of(b))
		return join_lists(a, b, out);
	if (n->op == '*' && (ka == TF_VAL_STR || is_seq(a)) &&
	    (kb == TF_VAL_INT || kb == TF_VAL_BOOL))
		return repeat(r, n, a, tf_jinja_as_int(b), out);
	if (n->op == '*' && (kb == TF_VAL_STR || is_seq(b)) &&
	    (ka == TF_VAL_INT || ka == TF_VAL_BOOL))
		return repeat(r, n, b, tf_jinja_as_int(a), out);
	if (!is_num(a) || !is_num(b))
		return type_error(r, n, op, a, b);
	if (ka != TF_VAL_FLOAT && kb != TF_VAL_FLOAT && n->op != '/' &&
	    !(n->op == JOP_POW && tf_jinja_as_int(b) < 0)) {
		int64_t x = tf_jinja_as_int(a), y = tf_jinja_as_int(b), z = 0;
		bool over = false;
		switch (n->op) {
		case '+': over = __builtin_add_overflow(x, y, &z); break;
		case '-': over = __builtin_sub_overflow(x, y, &z); break;
		case '*': over = __builtin_mul_overflow(x, y, &z); break;
		case JOP_FLOORDIV:
		case '%':
			if (y == 0)
				return tf_jinja_fail(r, n, "integer division or modulo by zero");
			if (x == INT64_MIN && y == -1) {
				over = n->op == JOP_FLOORDIV;
				break;
			}
			z = n->op == '%' ? x % y : x / y;
			if (n->op == '%' && z != 0 && ((z < 0) != (y < 0)))
				z += y;
			else if (n->op == JOP_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0)))
				z--;
			break;
		case JOP_POW:   /* y >= 0 here; by squaring */
			for (z = 1; y && !over; y >>= 1)
				over = ((y & 1) && __builtin_mul_overflow(z, x, &z)) ||
				       (y > 1 && __builtin_mul_overflow(x, x, &x));
			break;
		}
		if (over)
			return tf_jinja_fail(r, n, "integer result beyond 64 bits");
		return (*out = tf_val_int(z)) ? 0 : TF_ERR_NOMEM;
	}
	double x = as_float(a), y = as_float(b), z = 0;
	switch (n->op) {
	case '+': z = x + y; break;
	case '-': z = x - y; break;
	case '*': z = x * y; break;
	case '/':
	case JOP_FLOORDIV:
	case '%':
		if (y == 0)
			return tf_jinja_fail(r, n,
					     n->op == '/'
						     ? "division by zero"
						     : "float modulo or floor division by zero");
		z = n->op == '/' ? x / y : py_divmod(x, y, n->op == JOP_FLOORDIV);
		break;
	case JOP_POW:
		if (x == 0 && y < 0)
			return tf_jinja_fail(r, n, "0.0 cannot be raised to a negative power");
		if (x < 0 && isfinite(y) && y != floor(y))
			return tf_jinja_fail(r, n, "a complex result is not supported");
		z = pow(x, y);
		if (isinf(z) && isfinite(x) && isfinite(y))
			return tf_jinja_fail(r, n, "Numerical result out of range");
		break;
	}
	return (*out = tf_val_float(z)) ? 0 : TF_ERR_NOMEM;
}

int tf_jinja_contains(struct jrun *r, const struct jnode *n, const tf_val *item, const tf_val *c,
		      bool *out)
{
	size_t ln, hn;
	switch (tf_val_kind_of(c)) {
	case TF_VAL_STR: {
		const char *h = tf_val_as_str(c, &hn), *needle = tf_val_as_str(item, &ln);
		if (!needle)
			return tf_jinja_fail(
				r, n, "'in <string>' requires string as left operand, not %s",
				tf_jinja_type_name(item));
		*out = ln == 0 || (ln <= hn && memmem(h, hn, needle, ln) != NULL);
		return 0;
	}
	case TF_VAL_LIST:
		*out = false;
		for (size_t i = 0; i < tf_val_len(c) && !*out; i++)
			*out = tf_val_equal(item, tf_val_at(c, i));
		return 0;
	case TF_VAL_DICT:
		if (tf_val_is_namespace(c))
			break;
		if ((tf_val_kind_of(item) == TF_VAL_LIST && tf_val_seq_of(item) == TF_SEQ_LIST) ||
		    tf_val_kind_of(item) == TF_VAL_DICT)
			return tf_jinja_fail(r, n, "unhashable type: '%s'",
					     tf_jinja_type_name(item));
		*out = tf_val_kind_of(item) == TF_VAL_STR &&
		       tf_val_dict_getn(c, tf_val_as_str(item, NULL),
					(tf_val_as_str(item, &ln), ln));
		return 0;
	case TF_VAL_UNDEFINED:
		*out = false;
		return 0;
	default:
		break;
	}
	return tf_jinja_fail(r, n, "argument of type '%s' is not iterable", tf_jinja_type_name(c));
}

int tf_jinja_compare(struct jrun *r, const struct jnode *n, int op, const tf_val *a,
		     const tf_val *b, bool *out)
{
	switch (op) {
	case JOP_EQ:
	case JOP_NE:
		*out = tf_val_equal(a, b) == (op == JOP_EQ);
		return 0;
	case '<': return tf_jinja_less(r, n, a, b, out);
	case '>': return tf_jinja_less(r, n, b, a, out);
	case JOP_LE:
	case JOP_GE: {
		int rc = op == JOP_LE ? tf_jinja_less(r, n, b, a, out)
				      : tf_jinja_less(r, n, a, b, out);
		*out = !*out;
		return rc;
	}
	case JOP_IN:
	case JOP_NOTIN: {
		int rc = tf_jinja_contains(r, n, a, b, out);
		*out = *out == (op == JOP_IN);
		return rc;
	}
	}
	return TF_ERR_INTERNAL;
}

int tf_jinja_neg(struct jrun *r, const struct jnode *n, tf_val *v, tf_val **out)
{
	int rc = tf_jinja_defined(r, n, v);
	if (rc < 0)
		return rc;
	tf_val_kind k = tf_val_kind_of(v);
	if (k == TF_VAL_FLOAT)
		*out = tf_val_float(n->op == '-' ? -tf_val_as_float(v) : tf_val_as_float(v));
	else if (k == TF_VAL_INT || k == TF_VAL_BOOL) {
		int64_t i = tf_jinja_as_int(v);
		if (n->op == '-' && i == INT64_MIN)
			return tf_jinja_fail(r, n, "integer result beyond 64 bits");
		*out = tf_val_int(n->op == '-' ? -i : i);
	} else
		return tf_jinja_fail(r, n, "bad operand type for unary %c: '%s'", n->op,
				     tf_jinja_type_name(v));
	return *out ? 0 : TF_ERR_NOMEM;
}
