/*
 * value.h - the values of tf/value.h as the Jinja evaluator needs them too:
 * what a list stands for in Python, namespaces, undefined names and
 * functions, and Python's str(), repr(), bool() and ==.
 */
#ifndef TF_CHAT_VALUE_H
#define TF_CHAT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/value.h"

/* What a LIST stands for in Python: a list, a tuple, or one of the lazy
 * iterables and views that Jinja's filters and dict methods give. */
typedef enum tf_val_seq {
	TF_SEQ_LIST,
	TF_SEQ_TUPLE,
	TF_SEQ_GENERATOR,   /* map(), select(), ...: no len(), no index, always true */
	TF_SEQ_RANGE,
	TF_SEQ_DICT_ITEMS,  /* dict.items(), .keys(), .values(): no index */
	TF_SEQ_DICT_KEYS,
	TF_SEQ_DICT_VALUES,
} tf_val_seq;

/* An empty LIST standing for seq. */
tf_val *tf_val_seq_new(tf_val_seq seq);
/* What a LIST stands for (TF_SEQ_LIST for other kinds too), and its Python type name. */
tf_val_seq tf_val_seq_of(const tf_val *v);
const char *tf_val_seq_name(tf_val_seq seq);
/* A DICT read as attributes (Jinja's namespace()). */
tf_val *tf_val_namespace(void);
bool tf_val_is_namespace(const tf_val *v);
/* An UNDEFINED; why is the message for using it ("'x' is undefined"). */
tf_val *tf_val_undefined(const char *why);
const char *tf_val_undefined_why(const tf_val *v);  /* NULL for other kinds */
/* A FUNC: tag and p mean what the evaluator says. */
tf_val *tf_val_func(int tag, const void *p);
int tf_val_func_tag(const tf_val *v);
const void *tf_val_func_ptr(const tf_val *v);

/* 1 when target is v or an item or value inside v at any depth, else 0;
 * TF_ERR_NOMEM.  Templates mutate namespaces (and the evaluator a loop
 * object): storing a value that reaches the container would make a cycle,
 * which reference counts never free. */
int tf_val_reaches(const tf_val *v, const tf_val *target);

/* Appends d as Python's repr(float) spells it. */
int tf_val_dump_float(double d, tf_bytes *out);

/* json.dumps's indent (< 0: None), separators and sort_keys; max_len bounds
 * what a dump appends (SIZE_MAX: no bound). */
typedef struct tf_json_style {
	int indent;
	const char *item_sep, *key_sep;
	bool sort_keys;
	size_t max_len;
} tf_json_style;
/* tf_val_dump_json with a style; TF_ERR_INVALID for what json.dumps refuses:
 * UNDEFINED, FUNC, a namespace, a LIST that is neither a list nor a tuple;
 * TF_ERR_RANGE, with out partly written, once out->len passes st->max_len. */
int tf_val_dump_json_style(const tf_val *v, const tf_json_style *st, tf_bytes *out);

/*
 * Appends str(v), or repr(v) when repr is set, as Python spells them:
 * True, None, 1.5, [1, 'a'], {'k': (1,)}, dict_keys(['k']).  An UNDEFINED is
 * "" alone and Undefined inside a container; what Python spells with an
 * address (a FUNC, a namespace, a generator, a range) is TF_ERR_UNSUPPORTED.
 * TF_ERR_RANGE, with out partly written, once out->len passes max_len
 * (SIZE_MAX: no bound): a long list of dicts prints hundreds of times the
 * bytes the list holds.
 */
int tf_val_dump_py(const tf_val *v, bool repr, size_t max_len, tf_bytes *out);
/* Python's bool(v); an UNDEFINED is false, a FUNC and a generator true. */
bool tf_val_truthy(const tf_val *v);
/* Python's a == b: 1 == 1.0 == True, dicts in any order, tuple != list,
 * dict keys and items views as sets, generators and values views by identity. */
bool tf_val_equal(const tf_val *a, const tf_val *b);

#endif /* TF_CHAT_VALUE_H */
