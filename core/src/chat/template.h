/*
 * template.h - the chat template a model runs with, and rendering through it.
 *
 * Every face (tfrun chat, tfrun --render-chat, the server) turns a request
 * into a prompt through tf_chat_render(), so they all write the same bytes:
 *
 *     tf_val *req;                          from tf_chat_request_parse()
 *     tf_chat_prompt p = { 0 };
 *     if (tf_chat_render(t, req, &p) < 0) ...
 *     tf_chat_prompt_encode(&p, tok, 0, &ids);
 *
 * Templates: "ling3" (built in, chat/ling3.h) and "raw" (the messages'
 * contents one after another, nothing added).
 */
#ifndef TF_CHAT_TEMPLATE_H
#define TF_CHAT_TEMPLATE_H

#include "chat/prompt.h"
#include "chat/value.h"
#include "conf.h"

typedef enum tf_chat_kind {
	TF_CHAT_LING3,
	TF_CHAT_RAW,
} tf_chat_kind;

typedef struct tf_chat_template tf_chat_template;

/* name: "ling3" or "raw" (NULL: "ling3"). */
int tf_chat_template_init(const char *name, tf_chat_template **out);
/* The template an INI's [chat] template names. */
int tf_chat_template_from_conf(const tf_conf *c, tf_chat_template **out);
void tf_chat_template_free(tf_chat_template *t);
tf_chat_kind tf_chat_template_kind(const tf_chat_template *t);
/* The spellings of the tokens that end a reply, NULL-terminated. */
const char *const *tf_chat_template_stops(const tf_chat_template *t);

/* Appends the prompt for req (from tf_chat_request_check()) to out. */
int tf_chat_render(const tf_chat_template *t, const tf_val *req, tf_chat_prompt *out);

#endif /* TF_CHAT_TEMPLATE_H */
