/*
 * jinja.h - a Jinja interpreter for the chat templates checkpoints carry.
 *
 * Real checkpoints ship their prompt format as a Jinja program
 * (tokenizer_config.json's chat_template, or chat_template.jinja).  This
 * renders the subset such templates use, with the environment HF
 * transformers gives them: trim_blocks, lstrip_blocks, loop controls, and
 * tojson as json.dumps(ensure_ascii=False).  Values are chat/value.h's.
 *
 *     tf_jinja *t;
 *     if (tf_jinja_parse(src, len, "chat_template.jinja", &t) < 0) ...
 *     if (tf_jinja_render(t, vars, &out) < 0) ...        vars: a DICT
 *     tf_jinja_free(t);
 *
 * Failures set the diag to "NAME:LINE:COLUMN: what" and return
 * TF_ERR_FORMAT (the template cannot be parsed) or TF_ERR_INVALID (it
 * failed while rendering: an undefined value used where Jinja fails, a type
 * error, raise_exception()).
 */
#ifndef TF_CHAT_JINJA_H
#define TF_CHAT_JINJA_H

#include <stddef.h>

#include "chat/value.h"

typedef struct tf_jinja tf_jinja;

int tf_jinja_parse(const char *src, size_t len, const char *name, tf_jinja **out);
/* Appends the output of t run with the variables of the DICT vars. */
int tf_jinja_render(const tf_jinja *t, const tf_val *vars, tf_bytes *out);
void tf_jinja_free(tf_jinja *t);

#endif /* TF_CHAT_JINJA_H */
