/*
 * jinja_parse.c - tokens to a syntax tree, by recursive descent with
 * Jinja's grammar and precedence (parser.py): conditional expressions, or,
 * and, not, comparisons, + -, ~, * / // %, **, unary minus, then postfix
 * access, filters and tests.  Also tf_jinja_parse and tf_jinja_free.
 */
#include "chat/jinja_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"

#define PARSE_MAX_DEPTH 200

struct parser {
	tf_jinja *t;
	struct jtoks toks;
	size_t i;
	int depth;
	int loops;   /* enclosing for loops, for break and continue */
	struct jnode *loop;   /* the innermost FOR whose own scope a set writes to */
	struct jnode *macro;  /* the MACRO being parsed */
};

static const struct jtok *cur(const struct parser *p) { return &p->toks.v[p->i]; }

static void advance(struct parser *p)
{
	if (cur(p)->kind != JT_EOF)
		p->i++;
}

static int fail_at(const struct parser *p, const struct jtok *tok, const char *what)
{
	return tf_jinja_error(p->t, tok->pos, TF_ERR_FORMAT, "%s", what);
}

static bool is_op(const struct parser *p, int op)
{
	return cur(p)->kind == JT_OP && cur(p)->op == op;
}

static bool is_word(const struct jtok *tok, const char *w)
{
	return tok->kind == JT_NAME && strcmp(tf_val_as_str(tok->val, NULL), w) == 0;
}

static bool skip_op(struct parser *p, int op)
{
	if (!is_op(p, op))
		return false;
	advance(p);
	return true;
}

static bool skip_word(struct parser *p, const char *w)
{
	if (!is_word(cur(p), w))
		return false;
	advance(p);
	return true;
}

static int expect_op(struct parser *p, int op)
{
	if (skip_op(p, op))
		return 0;
	char what[40];
	snprintf(what, sizeof(what), "expected '%c'", op);
	return fail_at(p, cur(p), what);
}

static int expect_end(struct parser *p)
{
	if (cur(p)->kind != JT_BLOCK_END)
		return fail_at(p, cur(p), "expected the end of the block tag");
	advance(p);
	return 0;
}

static struct jnode *node_new(struct parser *p, enum jnode_kind kind, size_t pos)
{
	struct jnode *n = calloc(1, sizeof(*n));
	if (n) {
		n->kind = kind;
		n->pos = pos;
		n->next_alloc = p->t->nodes;
		p->t->nodes = n;
	}
	return n;
}

static int list_push(struct jlist *l, struct jnode *n)
{
	if (!n)
		return TF_ERR_NOMEM;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		struct jnode **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return TF_ERR_NOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = n;
	return 0;
}

static int enter(struct parser *p)
{
	if (++p->depth > PARSE_MAX_DEPTH)
		return fail_at(p, cur(p), "nested too deep");
	return 0;
}

/* ---- expressions ---- */

static int parse_expr(struct parser *p, struct jnode **out);
static int parse_or(struct parser *p, struct jnode **out);
static int parse_unary(struct parser *p, bool with_filter, struct jnode **out);

/* *left becomes a node of kind over it (and right).  A chain of these (a.b.c,
 * a + b + c, x|f|g) nests as deep as it is long, and evaluating it recurses
 * as deep, so each counts as a level until its chain's parser returns. */
static int binop(struct parser *p, enum jnode_kind kind, int op, size_t pos, struct jnode **left,
		 struct jnode *right)
{
	int rc = enter(p);
	if (rc < 0)
		return rc;
	struct jnode *n = node_new(p, kind, pos);
	if (!n)
		return TF_ERR_NOMEM;
	n->op = op;
	n->a = *left;
	n->b = right;
	*left = n;
	return 0;
}

/* Comma-separated expressions after an opening bracket, up to close. */
static int parse_items(struct parser *p, struct jnode *n, int close, bool pairs)
{
	int rc;
	while (!skip_op(p, close)) {
		if (n->kids.n && (rc = expect_op(p, ',')) < 0)
			return rc;
		if (skip_op(p, close))
			break;
		struct jnode *e;
		if ((rc = parse_expr(p, &e)) < 0 || (rc = list_push(&n->kids, e)) < 0)
			return rc;
		if (pairs && ((rc = expect_op(p, ':')) < 0 || (rc = parse_expr(p, &e)) < 0 ||
			      (rc = list_push(&n->kids, e)) < 0))
			return rc;
	}
	return 0;
}

/* expr, expr, ... as a TUPLE when there is a comma; plain expr otherwise. */
static int parse_tuple(struct parser *p, bool with_cond, bool parens, struct jnode **out)
{
	size_t pos = cur(p)->pos;
	struct jnode *t = NULL, *e;
	int rc;

	if (parens && is_op(p, ')'))
		return (*out = node_new(p, JN_TUPLE, pos)) ? 0 : TF_ERR_NOMEM;
	for (;;) {
		if ((rc = with_cond ? parse_expr(p, &e) : parse_or(p, &e)) < 0)
			return rc;
		if (!is_op(p, ',')) {
			if (t && (rc = list_push(&t->kids, e)) < 0)
				return rc;
			*out = t ? t : e;
			return 0;
		}
		advance(p);
		if (!t && !(t = node_new(p, JN_TUPLE, pos)))
			return TF_ERR_NOMEM;
		if ((rc = list_push(&t->kids, e)) < 0)
			return rc;
		/* A trailing comma ends the tuple. */
		if (cur(p)->kind == JT_VAR_END || cur(p)->kind == JT_BLOCK_END || is_op(p, ')') ||
		    is_op(p, '='))
			return (*out = t), 0;
	}
}

static int parse_primary(struct parser *p, struct jnode **out)
{
	const struct jtok *tok = cur(p);
	struct jnode *n = NULL;
	int rc;

	switch (tok->kind) {
	case JT_NAME: {
		static const struct { const char *w; int v; } lits[] = {
			{ "true", 1 }, { "True", 1 }, { "false", 0 }, { "False", 0 },
			{ "none", -1 }, { "None", -1 },
		};
		advance(p);
		for (size_t k = 0; k < sizeof(lits) / sizeof(lits[0]); k++)
			if (is_word(tok, lits[k].w)) {
				if (!(n = node_new(p, JN_CONST, tok->pos)))
					return TF_ERR_NOMEM;
				n->val = lits[k].v < 0 ? tf_val_none() : tf_val_bool(lits[k].v);
				return (*out = n)->val ? 0 : TF_ERR_NOMEM;
			}
		if (!(n = node_new(p, JN_NAME, tok->pos)))
			return TF_ERR_NOMEM;
		n->val = tf_val_ref(tok->val);
		if (p->macro && is_word(tok, "varargs"))
			p->macro->op |= JMACRO_VARARGS;
		if (p->macro && is_word(tok, "kwargs"))
			p->macro->op |= JMACRO_KWARGS;
		return (*out = n), 0;
	}
	case JT_STRING: {
		tf_bytes b = { 0 };
		rc = 0;
		for (; cur(p)->kind == JT_STRING && rc == 0; advance(p)) {
			size_t len;
			const char *s = tf_val_as_str(cur(p)->val, &len);
			rc = tf_bytes_append(&b, s, len);
		}
		if (rc == 0 && !(n = node_new(p, JN_CONST, tok->pos)))
			rc = TF_ERR_NOMEM;
		if (rc == 0 && !(n->val = tf_val_str(b.p ? b.p : "", b.len)))
			rc = TF_ERR_NOMEM;
		tf_bytes_free(&b);
		return rc < 0 ? rc : (*out = n, 0);
	}
	case JT_INT:
	case JT_FLOAT:
		advance(p);
		if (!(n = node_new(p, JN_CONST, tok->pos)))
			return TF_ERR_NOMEM;
		n->val = tf_val_ref(tok->val);
		return (*out = n), 0;
	case JT_OP:
		if (tok->op == '(') {
			advance(p);
			if ((rc = parse_tuple(p, true, true, out)) < 0)
				return rc;
			return expect_op(p, ')');
		}
		if (tok->op == '[' || tok->op == '{') {
			advance(p);
			if (!(n = node_new(p, tok->op == '[' ? JN_LIST : JN_DICT, tok->pos)))
				return TF_ERR_NOMEM;
			*out = n;
			return parse_items(p, n, tok->op == '[' ? ']' : '}', tok->op == '{');
		}
		break;
	default:
		break;
	}
	return fail_at(p, tok,
		       tok->kind == JT_EOF || tok->kind == JT_VAR_END || tok->kind == JT_BLOCK_END
			       ? "expected an expression"
			       : "unexpected token");
}

static int parse_call_args(struct parser *p, struct jnode *call)
{
	int rc;
	advance(p);   /* ( */
	while (!skip_op(p, ')')) {
		if (call->kids.n && (rc = expect_op(p, ',')) < 0)
			return rc;
		if (skip_op(p, ')'))
			break;
		if (is_op(p, '*') || is_op(p, JOP_POW))
			return fail_at(p, cur(p), "*args and **kwargs in calls are not supported");
		struct jnode *e;
		if (cur(p)->kind == JT_NAME && p->toks.v[p->i + 1].kind == JT_OP &&
		    p->toks.v[p->i + 1].op == '=') {
			if (!(e = node_new(p, JN_KWARG, cur(p)->pos)))
				return TF_ERR_NOMEM;
			e->val = tf_val_ref(cur(p)->val);
			p->i += 2;
			if ((rc = parse_expr(p, &e->a)) < 0)
				return rc;
		} else {
			for (size_t k = 0; k < call->kids.n; k++)
				if (call->kids.v[k]->kind == JN_KWARG)
					return fail_at(
						p, cur(p),
						"positional argument after keyword argument");
			if ((rc = parse_expr(p, &e)) < 0)
				return rc;
		}
		if ((rc = list_push(&call->kids, e)) < 0)
			return rc;
	}
	return 0;
}

/* obj[...]: an index or a slice start:stop:step. */
static int parse_subscript(struct parser *p, struct jnode **obj)
{
	size_t pos = cur(p)->pos;
	struct jnode *idx = NULL, *parts[3] = { NULL, NULL, NULL };
	int rc;

	advance(p);   /* [ */
	if (!is_op(p, ':') && (rc = parse_expr(p, &parts[0])) < 0)
		return rc;
	if (is_op(p, ':')) {
		for (int k = 1; k < 3 && skip_op(p, ':'); k++)
			if (!is_op(p, ']') && !is_op(p, ':') && (rc = parse_expr(p, &parts[k])) < 0)
				return rc;
		if (!(idx = node_new(p, JN_SLICE, pos)))
			return TF_ERR_NOMEM;
		idx->a = parts[0];
		idx->b = parts[1];
		idx->c = parts[2];
	} else {
		idx = parts[0];
	}
	if ((rc = expect_op(p, ']')) < 0)
		return rc;
	return binop(p, JN_ITEM, 0, pos, obj, idx);
}

static int parse_postfix(struct parser *p, struct jnode **n)
{
	int rc;
	for (;;) {
		size_t pos = cur(p)->pos;
		if (skip_op(p, '.')) {
			const struct jtok *tok = cur(p);
			struct jnode *e;
			if (tok->kind == JT_INT) {
				if (!(e = node_new(p, JN_CONST, tok->pos)))
					return TF_ERR_NOMEM;
				e->val = tf_val_ref(tok->val);
				advance(p);
				if ((rc = binop(p, JN_ITEM, 0, pos, n, e)) < 0)
					return rc;
				continue;
			}
			if (tok->kind != JT_NAME)
				return fail_at(p, tok, "expected a name after '.'");
			if ((rc = binop(p, JN_ATTR, 0, pos, n, NULL)) < 0)
				return rc;
			(*n)->val = tf_val_ref(tok->val);
			advance(p);
		} else if (is_op(p, '[')) {
			if ((rc = parse_subscript(p, n)) < 0)
				return rc;
		} else if (is_op(p, '(')) {
			if ((rc = binop(p, JN_CALL, 0, pos, n, NULL)) < 0 ||
			    (rc = parse_call_args(p, *n)) < 0)
				return rc;
		} else {
			return 0;
		}
	}
}

/* | filter(args) and is [not] test args, in any number. */
static int parse_filters(struct parser *p, struct jnode **n)
{
	int rc;
	for (;;) {
		bool filter = is_op(p, '|');
		if (!filter && !is_word(cur(p), "is"))
			return 0;
		size_t pos = cur(p)->pos;
		advance(p);
		bool neg = !filter && skip_word(p, "not");
		const struct jtok *name = cur(p);
		if (name->kind != JT_NAME)
			return fail_at(p, name,
				       filter ? "expected a filter name" : "expected a test name");
		const char *s = tf_val_as_str(name->val, NULL);
		int idx = filter ? tf_jinja_filter_find(s) : tf_jinja_test_find(s);
		if (idx < 0)
			return tf_jinja_error(p->t, name->pos, TF_ERR_FORMAT, "no %s named '%s'",
					      filter ? "filter" : "test", s);
		if ((rc = binop(p, filter ? JN_FILTER : JN_TEST, idx, pos, n, NULL)) < 0)
			return rc;
		(*n)->neg = neg;
		(*n)->val = tf_val_ref(name->val);
		advance(p);
		const struct jtok *next = cur(p);
		if (is_op(p, '(')) {
			if ((rc = parse_call_args(p, *n)) < 0)
				return rc;
		} else if (!filter &&
			   (next->kind == JT_NAME || next->kind == JT_STRING ||
			    next->kind == JT_INT || next->kind == JT_FLOAT || is_op(p, '[') ||
			    is_op(p, '{')) &&
			   !is_word(next, "else") && !is_word(next, "or") &&
			   !is_word(next, "and")) {
			/* "x is divisibleby 3": one argument without parentheses */
			struct jnode *arg;
			if (is_word(next, "is"))
				return fail_at(p, next, "tests cannot be chained with 'is'");
			if ((rc = parse_primary(p, &arg)) < 0 ||
			    (rc = parse_postfix(p, &arg)) < 0 ||
			    (rc = list_push(&(*n)->kids, arg)) < 0)
				return rc;
		}
	}
}

static int parse_unary(struct parser *p, bool with_filter, struct jnode **out)
{
	size_t pos = cur(p)->pos;
	int rc, depth = p->depth;

	if ((rc = enter(p)) < 0)
		return rc;
	if (is_op(p, '-') || is_op(p, '+')) {
		int op = cur(p)->op;
		advance(p);
		struct jnode *n = node_new(p, JN_NEG, pos);
		if (!n)
			return TF_ERR_NOMEM;
		n->op = op;
		if ((rc = parse_unary(p, false, &n->a)) < 0)
			return rc;
		*out = n;
	} else if ((rc = parse_primary(p, out)) < 0) {
		return rc;
	}
	if ((rc = parse_postfix(p, out)) < 0 || (with_filter && (rc = parse_filters(p, out)) < 0))
		return rc;
	p->depth = depth;
	return 0;
}

/* Left-associative binary levels: each entry's operators over the next level. */
static int parse_level(struct parser *p, int level, struct jnode **out)
{
	static const int ops[][5] = {
		{ '+', '-' }, { '~' }, { '*', '/', JOP_FLOORDIV, '%' }, { JOP_POW },
	};
	int depth = p->depth,
	    rc = level == 3 ? parse_unary(p, true, out) : parse_level(p, level + 1, out);

	while (rc == 0 && cur(p)->kind == JT_OP) {
		int op = cur(p)->op;
		bool match = false;
		for (int k = 0; k < 5 && ops[level][k]; k++)
			match |= ops[level][k] == op;
		if (!match)
			break;
		size_t pos = cur(p)->pos;
		struct jnode *right;
		advance(p);
		if ((rc = level == 3 ? parse_unary(p, true, &right)
				     : parse_level(p, level + 1, &right)) < 0)
			return rc;
		rc = binop(p, JN_BINOP, op, pos, out, right);
	}
	if (rc == 0)
		p->depth = depth;
	return rc;
}

static int compare_op(struct parser *p)
{
	const struct jtok *tok = cur(p);
	if (tok->kind == JT_OP && (tok->op == JOP_EQ || tok->op == JOP_NE || tok->op == '<' ||
				   tok->op == '>' || tok->op == JOP_LE || tok->op == JOP_GE))
		return tok->op;
	if (is_word(tok, "in"))
		return JOP_IN;
	if (is_word(tok, "not") && is_word(tok + 1, "in"))
		return JOP_NOTIN;
	return 0;
}

static int parse_compare(struct parser *p, struct jnode **out)
{
	struct jnode *cmp = NULL;
	int rc = parse_level(p, 0, out), op;

	while (rc == 0 && (op = compare_op(p))) {
		if (!cmp) {
			if (!(cmp = node_new(p, JN_COMPARE, (*out)->pos)))
				return TF_ERR_NOMEM;
			cmp->a = *out;
		}
		struct jnode *step = node_new(p, JN_BINOP, cur(p)->pos);
		if (!step)
			return TF_ERR_NOMEM;
		step->op = op;
		advance(p);
		if (op == JOP_NOTIN)
			advance(p);
		if ((rc = parse_level(p, 0, &step->b)) < 0)
			return rc;
		rc = list_push(&cmp->kids, step);
	}
	if (cmp)
		*out = cmp;
	return rc;
}

static int parse_not(struct parser *p, struct jnode **out)
{
	if (!is_word(cur(p), "not"))
		return parse_compare(p, out);
	struct jnode *n = node_new(p, JN_NOT, cur(p)->pos);
	int rc;
	if (!n)
		return TF_ERR_NOMEM;
	advance(p);
	if ((rc = enter(p)) < 0 || (rc = parse_not(p, &n->a)) < 0)
		return rc;
	p->depth--;
	*out = n;
	return 0;
}

/* a and b and ... over not-expressions, or a or b or ... over those. */
static int parse_logic(struct parser *p, bool is_or, struct jnode **out)
{
	int depth = p->depth, rc = is_or ? parse_logic(p, false, out) : parse_not(p, out);
	while (rc == 0 && is_word(cur(p), is_or ? "or" : "and")) {
		size_t pos = cur(p)->pos;
		struct jnode *right;
		advance(p);
		if ((rc = is_or ? parse_logic(p, false, &right) : parse_not(p, &right)) == 0)
			rc = binop(p, is_or ? JN_OR : JN_AND, 0, pos, out, right);
	}
	if (rc == 0)
		p->depth = depth;
	return rc;
}

static int parse_or(struct parser *p, struct jnode **out) { return parse_logic(p, true, out); }

/* a if cond else b, or a plain or-expression. */
static int parse_expr(struct parser *p, struct jnode **out)
{
	int rc, depth = p->depth;
	if ((rc = enter(p)) < 0 || (rc = parse_or(p, out)) < 0)
		return rc;
	while (is_word(cur(p), "if")) {
		struct jnode *n = node_new(p, JN_COND, cur(p)->pos);
		if (!n)
			return TF_ERR_NOMEM;
		if ((rc = enter(p)) < 0)   /* a if b else c if d ...: one level more each */
			return rc;
		advance(p);
		n->b = *out;
		if ((rc = parse_or(p, &n->a)) < 0)
			return rc;
		if (skip_word(p, "else") && (rc = parse_expr(p, &n->c)) < 0)
			return rc;
		*out = n;
	}
	p->depth = depth;
	return 0;
}

/* ---- statements ---- */

static int parse_body(struct parser *p, struct jlist *body, const char *const *ends);

static int parse_if(struct parser *p, struct jnode *n)
{
	static const char *const ends[] = { "elif", "else", "endif", NULL };
	int rc;

	if ((rc = parse_expr(p, &n->a)) < 0 || (rc = expect_end(p)) < 0 ||
	    (rc = parse_body(p, &n->body, ends)) < 0)
		return rc;
	if (is_word(cur(p), "elif")) {
		struct jnode *elif = node_new(p, JN_IF, cur(p)->pos);
		advance(p);
		if ((rc = list_push(&n->alt, elif)) < 0)
			return rc;
		return parse_if(p, elif);
	}
	if (skip_word(p, "else")) {
		static const char *const endif[] = { "endif", NULL };
		if ((rc = expect_end(p)) < 0 || (rc = parse_body(p, &n->alt, endif)) < 0)
			return rc;
	}
	advance(p);   /* endif */
	return expect_end(p);
}

/* A node of kind named by the NAME token here, which it takes; what says
 * what was expected when the token is not a name. */
static int take_name(struct parser *p, enum jnode_kind kind, const char *what, struct jnode **out)
{
	const struct jtok *tok = cur(p);
	if (tok->kind != JT_NAME)
		return fail_at(p, tok, what);
	if (!(*out = node_new(p, kind, tok->pos)))
		return TF_ERR_NOMEM;
	(*out)->val = tf_val_ref(tok->val);
	advance(p);
	return 0;
}

/* name or name, name, ... as assignment targets into l. */
static int parse_targets(struct parser *p, struct jlist *l)
{
	int rc;
	do {
		struct jnode *n;
		if ((rc = take_name(p, JN_NAME, "expected a variable name", &n)) < 0 ||
		    (rc = list_push(l, n)) < 0)
			return rc;
	} while (skip_op(p, ','));
	return 0;
}

static int parse_for(struct parser *p, struct jnode *n)
{
	static const char *const ends[] = { "else", "endfor", NULL };
	static const char *const endfor[] = { "endfor", NULL };
	int rc;

	if ((rc = parse_targets(p, &n->kids)) < 0)
		return rc;
	if (!skip_word(p, "in"))
		return fail_at(p, cur(p), "expected 'in'");
	if ((rc = parse_tuple(p, false, false, &n->a)) < 0)
		return rc;
	if (skip_word(p, "if") && (rc = parse_expr(p, &n->b)) < 0)
		return rc;
	if (is_word(cur(p), "recursive"))
		return fail_at(p, cur(p), "recursive loops are not supported");
	if ((rc = expect_end(p)) < 0)
		return rc;
	struct jnode *outer = p->loop;
	p->loops++;
	p->loop = n;
	rc = parse_body(p, &n->body, ends);
	p->loop = outer;
	p->loops--;
	if (rc < 0)
		return rc;
	if (skip_word(p, "else") &&
	    ((rc = expect_end(p)) < 0 || (rc = parse_body(p, &n->alt, endfor)) < 0))
		return rc;
	advance(p);   /* endfor */
	return expect_end(p);
}

static int parse_set(struct parser *p, struct jnode *n)
{
	static const char *const ends[] = { "endset", NULL };
	const struct jtok *tok = cur(p);
	int rc = TF_ERR_NOMEM;

	if (tok->kind == JT_NAME && tok[1].kind == JT_OP && tok[1].op == '.') {
		/* ns.attr = value */
		if ((rc = parse_primary(p, &n->a)) < 0 ||
		    (rc = binop(p, JN_ATTR, 0, cur(p)->pos, &n->a, NULL)) < 0)
			return rc;
		p->depth--;
		advance(p);
		if (cur(p)->kind != JT_NAME)
			return fail_at(p, cur(p), "expected an attribute name");
		n->a->val = tf_val_ref(cur(p)->val);
		advance(p);
	} else {
		if (!(n->a = node_new(p, JN_TUPLE, tok->pos)) ||
		    (rc = parse_targets(p, &n->a->kids)) < 0)
			return rc;
		if (n->a->kids.n == 1)
			n->a = n->a->kids.v[0];
	}
	if (skip_op(p, '=')) {
		if ((rc = parse_tuple(p, true, false, &n->b)) < 0)
			return rc;
		return expect_end(p);
	}
	if (cur(p)->kind != JT_BLOCK_END)
		return fail_at(p, cur(p), "expected '=' or the end of the block tag");
	if (n->a->kind != JN_NAME)
		return fail_at(p, tok, "a set block assigns one name");
	n->kind = JN_SET_BLOCK;
	if ((rc = expect_end(p)) < 0 || (rc = parse_body(p, &n->body, ends)) < 0)
		return rc;
	advance(p);   /* endset */
	return expect_end(p);
}

static int parse_macro(struct parser *p, struct jnode *n)
{
	static const char *const ends[] = { "endmacro", NULL };
	int rc, loops = p->loops;
	struct jnode *loop = p->loop, *macro = p->macro;

	if (cur(p)->kind != JT_NAME)
		return fail_at(p, cur(p), "expected a macro name");
	n->val = tf_val_ref(cur(p)->val);
	advance(p);
	if ((rc = expect_op(p, '(')) < 0)
		return rc;
	while (!skip_op(p, ')')) {
		if (n->kids.n && (rc = expect_op(p, ',')) < 0)
			return rc;
		const struct jtok *tok = cur(p);
		struct jnode *param;
		if ((rc = take_name(p, JN_KWARG, "expected a parameter name", &param)) < 0)
			return rc;
		if (skip_op(p, '=') && (rc = parse_expr(p, &param->a)) < 0)
			return rc;
		if (!param->a && n->kids.n && n->kids.v[n->kids.n - 1]->a)
			return fail_at(p, tok, "non-default parameter follows a default one");
		if ((rc = list_push(&n->kids, param)) < 0)
			return rc;
	}
	if ((rc = expect_end(p)) < 0)
		return rc;
	p->loops = 0;
	p->loop = NULL;
	p->macro = n;
	rc = parse_body(p, &n->body, ends);
	p->loops = loops;
	p->loop = loop;
	p->macro = macro;
	if (rc < 0)
		return rc;
	advance(p);   /* endmacro */
	if (cur(p)->kind == JT_NAME)
		advance(p);
	return expect_end(p);
}

static int parse_statement(struct parser *p, struct jlist *body)
{
	const struct jtok *tok = cur(p);
	struct jnode *n = NULL;
	int rc;

	if (tok->kind != JT_NAME)
		return fail_at(p, tok, "expected a tag name");
	const char *w = tf_val_as_str(tok->val, NULL);
	advance(p);
	if (!strcmp(w, "if") || !strcmp(w, "for") || !strcmp(w, "set") || !strcmp(w, "macro")) {
		enum jnode_kind kind = w[0] == 'i'   ? JN_IF
				       : w[0] == 'f' ? JN_FOR
				       : w[0] == 's' ? JN_SET
						     : JN_MACRO;
		if (!(n = node_new(p, kind, tok->pos)) || (rc = list_push(body, n)) < 0)
			return TF_ERR_NOMEM;
		if ((kind == JN_SET || kind == JN_MACRO) && p->loop)
			p->loop->op = 1;   /* its body sets names: a fresh scope per iteration */
		return kind == JN_IF ? parse_if(p, n) : kind == JN_FOR ? parse_for(p, n) :
		       kind == JN_SET ? parse_set(p, n) : parse_macro(p, n);
	}
	if (!strcmp(w, "break") || !strcmp(w, "continue")) {
		if (!p->loops)
			return fail_at(p, tok,
				       w[0] == 'b' ? "'break' outside a loop"
						   : "'continue' outside a loop");
		if ((rc = list_push(body, node_new(p, w[0] == 'b' ? JN_BREAK : JN_CONTINUE,
						   tok->pos))) < 0)
			return rc;
		return expect_end(p);
	}
	return tf_jinja_error(p->t, tok->pos, TF_ERR_FORMAT, "unknown or unsupported tag '%s'", w);
}

/* Nodes up to a block tag named in ends (left at its name), or EOF when
 * ends is NULL. */
static int parse_body(struct parser *p, struct jlist *body, const char *const *ends)
{
	int rc;

	if ((rc = enter(p)) < 0)
		return rc;
	for (;;) {
		const struct jtok *tok = cur(p);
		struct jnode *n;
		switch (tok->kind) {
		case JT_TEXT:
			if (!(n = node_new(p, JN_TEXT, tok->pos)))
				return TF_ERR_NOMEM;
			n->val = tf_val_ref(tok->val);
			if ((rc = list_push(body, n)) < 0)
				return rc;
			advance(p);
			break;
		case JT_VAR_BEGIN:
			advance(p);
			if (!(n = node_new(p, JN_OUTPUT, tok->pos)) ||
			    (rc = list_push(body, n)) < 0)
				return TF_ERR_NOMEM;
			if ((rc = parse_tuple(p, true, false, &n->a)) < 0)
				return rc;
			if (cur(p)->kind != JT_VAR_END)
				return fail_at(p, cur(p), "expected '}}'");
			advance(p);
			break;
		case JT_BLOCK_BEGIN:
			advance(p);
			for (size_t k = 0; ends && ends[k]; k++)
				if (is_word(cur(p), ends[k])) {
					p->depth--;
					return 0;
				}
			if ((rc = parse_statement(p, body)) < 0)
				return rc;
			break;
		case JT_EOF:
			if (ends) {
				/* the block's own end is the last of ends */
				size_t k = 0;
				char what[96];
				while (ends[k + 1])
					k++;
				snprintf(what, sizeof(what),
					 "unexpected end of template: expected '%s'", ends[k]);
				return fail_at(p, tok, what);
			}
			p->depth--;
			return 0;
		default:
			return fail_at(p, tok, "unexpected token outside a tag");
		}
	}
}

/* ---- the template ---- */

/* Jinja's view of the source: \r\n and \r as \n, one final newline dropped. */
static int normalise(tf_jinja *t, const char *src, size_t len)
{
	if (!(t->src = malloc(len + 1)))
		return TF_ERR_NOMEM;
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
			t->src[n++] = '\n';
		} else {
			t->src[n++] = src[i];
		}
	}
	if (n && t->src[n - 1] == '\n')
		n--;
	t->src[n] = 0;
	t->len = n;
	return 0;
}

int tf_jinja_parse(const char *src, size_t len, const char *name, tf_jinja **out)
{
	struct parser p = { 0 };
	tf_jinja *t = calloc(1, sizeof(*t));
	int rc = TF_ERR_NOMEM;

	*out = NULL;
	if (!t || !(t->name = strdup(name ? name : "<template>")) ||
	    (rc = normalise(t, src, len)) < 0)
		goto cleanup;
	p.t = t;
	if ((rc = tf_jinja_lex(t, &p.toks)) < 0 || (rc = parse_body(&p, &t->body, NULL)) < 0)
		goto cleanup;
	*out = t;
	t = NULL;
cleanup:
	if (rc == TF_ERR_NOMEM)
		tf_diag_set(rc, "%s: out of memory", name ? name : "<template>");
	tf_jinja_toks_free(&p.toks);
	tf_jinja_free(t);
	return rc;
}

void tf_jinja_free(tf_jinja *t)
{
	if (!t)
		return;
	for (struct jnode *n = t->nodes, *next; n; n = next) {
		next = n->next_alloc;
		tf_val_unref(n->val);
		free(n->kids.v);
		free(n->body.v);
		free(n->alt.v);
		free(n);
	}
	free(t->body.v);
	free(t->src);
	free(t->name);
	free(t);
}
