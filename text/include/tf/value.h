/*
 * tf/value.h - the data of chat requests and templates, held as Python holds it.
 *
 * Chat templates are Jinja programs written against Python's values, and the
 * prompts they make embed Python's own spellings (json.dumps of the tools,
 * str() of an argument).  To make the same bytes, a request is parsed into
 * values that keep what Python keeps: ints apart from floats, dicts in
 * insertion order, strings with explicit lengths (they may hold U+0000).
 *
 * Values are reference counted.  Constructors return a new reference (NULL
 * when out of memory); containers take over the reference they are given,
 * even when they fail; getters return borrowed pointers.  The counts are
 * atomic: threads may share values that none of them changes.
 *
 *     tf_val *req;
 *     if (tf_val_parse_json(text, len, &req) < 0) ...      tf_diag_msg() names line:col
 *     const tf_val *msgs = tf_val_dict_get(req, "messages");
 *     ...
 *     tf_val_unref(req);
 */
#ifndef TF_VALUE_H
#define TF_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_val_kind {
	TF_VAL_NONE,   /* Python None, JSON null */
	TF_VAL_BOOL,
	TF_VAL_INT,    /* int64; JSON integers beyond it are refused */
	TF_VAL_FLOAT,
	TF_VAL_STR,
	TF_VAL_LIST,
	TF_VAL_DICT,   /* string keys, insertion order */
	/* Inside templates only (chat/jinja.h): */
	TF_VAL_UNDEFINED, /* Jinja: a missing name, key or item; holds why it is missing */
	TF_VAL_FUNC,   /* Jinja: a macro or built-in, opaque to all but the evaluator */
} tf_val_kind;

typedef struct tf_val tf_val;

tf_val *tf_val_none(void);
tf_val *tf_val_bool(bool b);
tf_val *tf_val_int(int64_t i);
tf_val *tf_val_float(double d);
tf_val *tf_val_str(const char *s, size_t len);
tf_val *tf_val_cstr(const char *s);
tf_val *tf_val_list(void);
tf_val *tf_val_dict(void);

tf_val *tf_val_ref(tf_val *v);          /* v, one reference more; NULL stays NULL */
void tf_val_unref(tf_val *v);           /* NULL is fine */

tf_val_kind tf_val_kind_of(const tf_val *v);
bool tf_val_as_bool(const tf_val *v);   /* the BOOL's value; false for other kinds */
int64_t tf_val_as_int(const tf_val *v); /* the INT's value; 0 for other kinds */
double tf_val_as_float(const tf_val *v);/* a FLOAT's or INT's value; 0 otherwise */
/* A STR's bytes (NUL-terminated after len) or NULL for other kinds. */
const char *tf_val_as_str(const tf_val *v, size_t *len);

/* Items of a LIST, entries of a DICT; 0 for other kinds. */
size_t tf_val_len(const tf_val *v);
/* The i-th item of a LIST, or the i-th value of a DICT; NULL out of range. */
tf_val *tf_val_at(const tf_val *v, size_t i);
/* The i-th key of a DICT (a STR), or NULL. */
tf_val *tf_val_key_at(const tf_val *v, size_t i);

/* Appends item (its reference is taken) to a LIST. */
int tf_val_list_push(tf_val *list, tf_val *item);
/* Sets key to v (its reference is taken); an existing key keeps its place. */
int tf_val_dict_set(tf_val *dict, const char *key, size_t klen, tf_val *v);
/* The value under key, or NULL when absent or dict is not a DICT. */
tf_val *tf_val_dict_get(const tf_val *dict, const char *key);
tf_val *tf_val_dict_getn(const tf_val *dict, const char *key, size_t klen);

/*
 * Parses one JSON text (RFC 8259, nesting up to 512 deep) as Python's
 * json.loads does: a duplicate key keeps its first place and its last value.
 * TF_ERR_FORMAT with "line L column C: ..." in the diag on malformed text,
 * TF_ERR_RANGE for an integer beyond int64.
 */
int tf_val_parse_json(const char *text, size_t len, tf_val **out);

/*
 * Appends v as Python's json.dumps(v, ensure_ascii=False) writes it: ", "
 * and ": " separators, floats as repr() spells them (1.0, 1e-05, Infinity,
 * NaN), non-ASCII text as is.
 */
int tf_val_dump_json(const tf_val *v, tf_bytes *out);

#ifdef __cplusplus
}
#endif
#endif /* TF_VALUE_H */
