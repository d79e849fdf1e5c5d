/*
 * jinja_int.h - the insides of the Jinja interpreter (see jinja.h): tokens,
 * the syntax tree, and what the lexer, parser, evaluator and built-ins share.
 */
#ifndef TF_CHAT_JINJA_INT_H
#define TF_CHAT_JINJA_INT_H

#include <stdarg.h>
#include <stddef.h>

#include "chat/jinja.h"
#include "chat/value.h"

/* Operators of more than one character; one-character ones are themselves. */
enum {
	JOP_FLOORDIV = 256, JOP_POW, JOP_EQ, JOP_NE, JOP_LE, JOP_GE, JOP_IN, JOP_NOTIN,
};

enum jtok_kind {
	JT_EOF, JT_TEXT, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
	JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP,
};

struct jtok {
	enum jtok_kind kind;
	int op;          /* JT_OP */
	size_t pos;      /* byte offset in the (newline-normalised) source */
	tf_val *val;     /* TEXT, NAME, STRING: STR; INT, FLOAT: the number */
};

struct jtoks {
	struct jtok *v;
	size_t n, cap;
};

enum jnode_kind {
	/* statements */
	JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_BREAK, JN_CONTINUE,
	/* expressions */
	JN_CONST, JN_NAME, JN_LIST, JN_TUPLE, JN_DICT, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL,
	JN_FILTER, JN_TEST, JN_NEG, JN_NOT, JN_BINOP, JN_COMPARE, JN_AND, JN_OR, JN_COND,
	JN_KWARG,   /* name=a in a call, or a macro parameter with default a */
};

enum { JMACRO_VARARGS = 1, JMACRO_KWARGS = 2 };

struct jnode;
struct jlist {
	struct jnode **v;
	size_t n, cap;
};

/*
 * One node.  Children by kind:
 *   TEXT, CONST: val           OUTPUT: a          NAME: val (the name)
 *   IF: a cond, body then, alt else (an elif is an IF alone in alt)
 *   FOR: kids targets (NAMEs), a iterable, b filter or NULL, body, alt else;
 *        op set when the body sets names
 *   SET: a target (NAME, TUPLE of NAMEs or ATTR), b value
 *   SET_BLOCK: a target, body
 *   MACRO: val name, kids params, body; op JMACRO_* for names its body uses
 *   LIST, TUPLE: kids      DICT: kids keys and values alternating
 *   ATTR: a object, val name           ITEM: a object, b index or SLICE
 *   SLICE: a, b, c (start, stop, step; each may be NULL)
 *   CALL: a callee, kids arguments (KWARG for name=value)
 *   FILTER, TEST: a operand, val name, op the built-in's index, kids
 *        arguments; a TEST's neg set for "is not"
 *   NEG: op '-' or '+', a      NOT: a      BINOP: op, a, b      AND, OR: a, b
 *   COMPARE: a first operand, kids BINOPs with only b, each one step
 *   COND: a cond, b then, c else (NULL: undefined)
 */
struct jnode {
	enum jnode_kind kind;
	int op;
	int neg;
	size_t pos;
	tf_val *val;
	struct jnode *a, *b, *c;
	struct jlist kids, body, alt;
	struct jnode *next_alloc;   /* every node of a template, for freeing */
};

struct tf_jinja {
	char *name;
	char *src;      /* newline-normalised source: positions index it */
	size_t len;
	struct jlist body;
	struct jnode *nodes;
};

/* Splits src into tokens; TF_ERR_FORMAT naming NAME:LINE:COLUMN. */
int tf_jinja_lex(const tf_jinja *t, struct jtoks *out);
void tf_jinja_toks_free(struct jtoks *toks);

/* Sets the diag to "NAME:LINE:COLUMN: what" for the byte at pos; returns status. */
int tf_jinja_error(const tf_jinja *t, size_t pos, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Python's str.isspace for one code point. */
bool tf_jinja_isspace(uint32_t cp);

/* ---- built-ins (jinja_filter.c, jinja_builtin.c) ---- */

struct jrun;

/* Arguments of a call: positional, then named. */
struct jargs {
	tf_val **pos;
	size_t npos;
	const char **names;
	tf_val **named;
	size_t nnamed;
};

/* A filter (self the value filtered) or a global function (self what it was
 * read from, or NULL). */
typedef int (*tf_jinja_fn)(struct jrun *r, const struct jnode *at, tf_val *self,
			   const struct jargs *args, tf_val **out);

/* Index of the filter or test called name, or -1. */
int tf_jinja_filter_find(const char *name);
int tf_jinja_test_find(const char *name);
int tf_jinja_filter_call(struct jrun *r, const struct jnode *at, int index, tf_val *self,
			 const struct jargs *args, tf_val **out);
int tf_jinja_test_call(struct jrun *r, const struct jnode *at, int index, tf_val *self,
		       const struct jargs *args, bool *out);
/* self.name(args) for a method of STR, DICT or LIST, or of the loop object;
 * 1 (and no *out) when self has no such method. */
int tf_jinja_method_call(struct jrun *r, const struct jnode *at, tf_val *self, const char *name,
			 const struct jargs *args, tf_val **out);
/* True when self has a method called name (only a call can use it). */
bool tf_jinja_has_method(const tf_val *self, const char *name);
/* The global function called name (range, namespace, raise_exception, ...),
 * as a FUNC, or NULL. */
tf_val *tf_jinja_global(const char *name);
/* Calls a built-in FUNC; self is the object it was read from, or NULL. */
int tf_jinja_global_call(struct jrun *r, const struct jnode *at, tf_val *fn, tf_val *self,
			 const struct jargs *args, tf_val **out);
/* FUNC tags: a macro (p its MACRO node) or a built-in (p its table entry). */
enum { JFUNC_MACRO, JFUNC_BUILTIN };

/* Python's str methods (jinja_str.c): self.name(args) for a STR self; 1
 * (and no *out) when str has no such method. */
int tf_jinja_str_method(struct jrun *r, const struct jnode *at, tf_val *self, const char *name,
			const struct jargs *args, tf_val **out);
/* jinja2's title filter (not Python's str.title) of a STR. */
int tf_jinja_str_title(struct jrun *r, const struct jnode *at, tf_val *self, tf_val **out);

/* ---- evaluator services for the built-ins (jinja_eval.c) ---- */

/* A render failure at node at: "NAME:LINE:COLUMN: what", TF_ERR_INVALID. */
int tf_jinja_fail(struct jrun *r, const struct jnode *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Passes on an error a value function set (the diag gets the place). */
int tf_jinja_fail_diag(struct jrun *r, const struct jnode *at, int status);
/* Fails when v is UNDEFINED (its message); else 0. */
int tf_jinja_defined(struct jrun *r, const struct jnode *at, const tf_val *v);
/* Python's str(v) as a new STR. */
int tf_jinja_to_str(struct jrun *r, const struct jnode *at, const tf_val *v, tf_val **out);
/* Python's type name of v, for messages ("str", "dict", "NoneType"). */
const char *tf_jinja_type_name(const tf_val *v);
/* A new LIST of what iterating v gives (keys of a DICT, characters of a STR). */
int tf_jinja_iterate(struct jrun *r, const struct jnode *at, tf_val *v, tf_val **out);
/* The argument called name, or at position i (-1: only by name); NULL if
 * absent.  Fails when more than max positional arguments were given. */
tf_val *tf_jinja_arg(const struct jargs *args, int i, const char *name);
int tf_jinja_args_check(struct jrun *r, const struct jnode *at, const char *fn,
			const struct jargs *args, size_t max_pos, const char *const *names);
/* Hands v to *out when rc is 0 (TF_ERR_NOMEM when v is NULL), else drops
 * it; returns rc. */
int tf_jinja_give(int rc, tf_val *v, tf_val **out);
/* Appends the items of the LIST src to the LIST l. */
int tf_jinja_list_extend(tf_val *l, const tf_val *src);
/* Counts bytes a render appends, captured or printed or made into a string
 * (str() of a container, tojson); fails past the limit. */
int tf_jinja_output_check(struct jrun *r, const struct jnode *at, size_t more);
/* The bytes tf_jinja_output_check still allows. */
size_t tf_jinja_output_left(const struct jrun *r);
/* What a dump bounded by tf_jinja_output_left returned (rc) and wrote (b)
 * as a STR in *out, its bytes counted; past the bound, or on the dump's
 * failure, fails naming `at`.  Frees b either way. */
int tf_jinja_dump_str(struct jrun *r, const struct jnode *at, int rc, tf_bytes *b, tf_val **out);
/* Counts n units of work: statements, expressions, items a loop or a filter
 * passes over, items a list repetition makes; fails past the limit. */
int tf_jinja_steps(struct jrun *r, const struct jnode *at, size_t n);

/* ---- operators (jinja_ops.c) ---- */

/* A list, a tuple or a range: what takes an index and a slice. */
bool tf_jinja_indexable(const tf_val *v);
/* An INT's or a BOOL's value. */
int64_t tf_jinja_as_int(const tf_val *v);
/* a op b for the BINOP at n: + - * / // % ** ~. */
int tf_jinja_arith(struct jrun *r, const struct jnode *n, const tf_val *a, const tf_val *b,
		   tf_val **out);
/* a op b for op == != < > <= >= in, not in. */
int tf_jinja_compare(struct jrun *r, const struct jnode *n, int op, const tf_val *a,
		     const tf_val *b, bool *out);
/* -v or +v (n->op) of a number. */
int tf_jinja_neg(struct jrun *r, const struct jnode *n, tf_val *v, tf_val **out);
/* Python a < b (lt) for numbers, strings and lists; a TypeError otherwise. */
int tf_jinja_less(struct jrun *r, const struct jnode *at, const tf_val *a, const tf_val *b,
		  bool *out);
/* Python's item in c (a substring, an item, a key); a TypeError otherwise. */
int tf_jinja_contains(struct jrun *r, const struct jnode *at, const tf_val *item, const tf_val *c,
		      bool *out);

#endif /* TF_CHAT_JINJA_INT_H */
