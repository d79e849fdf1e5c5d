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
 * Templates:
 *   "jinja"  the checkpoint's own: chat_template.jinja in its folder, else
 *            tokenizer_config.json's chat_template (a string, or a list of
 *            {"name", "template"} of which "default" is used), run by
 *            chat/jinja.h with the variables HF apply_chat_template passes:
 *            bos_token, eos_token... from tokenizer_config.json, every
 *            chat_template_kwargs key, messages (tool-call arguments as
 *            objects), tools, documents (None), add_generation_prompt.
 *            Its prompt is encoded as HF does (prompt.h).
 *   "ling3"  built in (chat/ling3.h).
 *   "raw"    the messages' contents one after another, nothing added.
 *   "auto"   "jinja" when the checkpoint has a template, else "ling3".
 */
#ifndef TF_CHAT_TEMPLATE_H
#define TF_CHAT_TEMPLATE_H

#include "chat/prompt.h"
#include "chat/value.h"
#include "conf.h"

typedef enum tf_chat_kind {
	TF_CHAT_LING3,
	TF_CHAT_RAW,
	TF_CHAT_JINJA,
} tf_chat_kind;

typedef struct tf_chat_template tf_chat_template;

/* name: "auto", "jinja", "ling3" or "raw" (NULL: "auto"); dir: the
 * checkpoint folder, NULL for none. */
int tf_chat_template_init(const char *name, const char *dir, tf_chat_template **out);
/* The template an INI's [chat] template names, for its [model] path. */
int tf_chat_template_from_conf(const tf_conf *c, tf_chat_template **out);
void tf_chat_template_free(tf_chat_template *t);
tf_chat_kind tf_chat_template_kind(const tf_chat_template *t);
/* The spellings of the tokens that end a reply, NULL-terminated. */
const char *const *tf_chat_template_stops(const tf_chat_template *t);

/* Appends the prompt for req (from tf_chat_request_check()) to out. */
int tf_chat_render(const tf_chat_template *t, const tf_val *req, tf_chat_prompt *out);

#endif /* TF_CHAT_TEMPLATE_H */
