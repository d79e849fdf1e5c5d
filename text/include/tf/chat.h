/*
 * tf/chat.h - chat: an OpenAI request, the template that renders it into a
 * prompt, the prompt's token ids, and the ids that end the reply.
 *
 * Every face (tfrun chat, tfrun --render-chat, the server) turns a request
 * into a prompt here, so they all write the same bytes:
 *
 *     tf_val *req;
 *     if (tf_chat_request_parse(body, len, &req) < 0) ...  tf_diag_msg() says where
 *     tf_chat_prompt p = { 0 };
 *     if (tf_chat_render(t, req, &p) < 0) ...
 *     tf_tokens ids = { 0 };
 *     tf_chat_prompt_encode(&p, tok, 0, &ids);
 *     ... generate until an id of the stop set; read the reply with tf/reply.h,
 *     ... starting in reasoning when tf_chat_prompt_thinking(&p)
 *     tf_chat_prompt_free(&p);
 *     tf_val_unref(req);
 */
#ifndef TF_CHAT_H
#define TF_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/conf.h"
#include "tf/tokenizer.h"
#include "tf/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * --- requests ---
 *
 * tf_chat_request_check() takes the parsed body of a /v1/chat/completions
 * request and returns the values a chat template is given:
 *
 *     { "messages": [...], "tools": [...] | None,
 *       "add_generation_prompt": bool, "chat_template_kwargs": {...} }
 *
 * Each message keeps its keys, with
 *   - "role" one of system, user, assistant, tool ("developer" becomes
 *     "system", as OpenAI's newer name for it);
 *   - "content" a string: null becomes "", a list of text parts is joined
 *     with "\n" (as vLLM does for templates that take strings);
 *   - "reasoning_content" a string or null;
 *   - each of an assistant's "tool_calls" as {"id", "type", "function":
 *     {"name", "arguments"}} with the arguments an object: OpenAI sends
 *     them as a JSON string, which is parsed here.
 * add_generation_prompt defaults to true, chat_template_kwargs to {}.
 *
 * Anything else wrong is TF_ERR_INVALID naming the place:
 * "messages[2].tool_calls[0].function.arguments: not JSON: line 1 column 9: ...".
 */
int tf_chat_request_check(const tf_val *body, tf_val **out);
/* The same from JSON text; malformed JSON is TF_ERR_FORMAT. */
int tf_chat_request_parse(const char *json, size_t len, tf_val **out);

/*
 * --- templates ---
 *
 *   "jinja"  the checkpoint's own: chat_template.jinja in its folder, else
 *            tokenizer_config.json's chat_template (a string, or a list of
 *            {"name", "template"} of which "default" is used), run with the
 *            variables HF apply_chat_template passes: bos_token,
 *            eos_token... from tokenizer_config.json, every
 *            chat_template_kwargs key, messages (tool-call arguments as
 *            objects), tools, documents (None), add_generation_prompt.
 *            Its prompt is encoded as HF encodes the output of
 *            apply_chat_template.
 *   "ling3"  built in: the Ling-3 template, written without Jinja.
 *   "raw"    the messages' contents one after another, nothing added.
 *   "auto"   "jinja" when the checkpoint has a template, else "ling3".
 */
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

/*
 * --- prompts ---
 *
 * A built-in template records every "<...>" tag of the markup it writes;
 * when encoding, a tag that is a special token of the tokenizer becomes
 * that token, and everything else (other markup and the request's texts)
 * is encoded with special tokens as plain text.  So a user who types
 * "<|role_end|>" cannot end a turn, and a prompt whose texts hold no
 * special tokens gets the ids HF would give the rendered text.  A prompt
 * from a Jinja template has no tags recorded ("marked" false): its text is
 * encoded with special tokens recognised anywhere, as HF and vLLM do.
 */
typedef struct tf_chat_span {
	size_t off, len;
} tf_chat_span;

/* Zero-initialise; then tf_chat_prompt_free().  Read `text`; the rest is
 * the template's. */
typedef struct tf_chat_prompt {
	tf_bytes text;
	tf_chat_span *tags;     /* markup tags, in order */
	size_t n_tags, cap;
	bool marked;            /* tags are known: the rest is plain text */
} tf_chat_prompt;

/* Appends the prompt for req (from tf_chat_request_check()) to out. */
int tf_chat_render(const tf_chat_template *t, const tf_val *req, tf_chat_prompt *out);
void tf_chat_prompt_free(tf_chat_prompt *p);

/* Appends the ids of text[from..] (from: 0, or a byte offset between a tag
 * and what precedes it, such as the end of an earlier prompt). */
int tf_chat_prompt_encode(const tf_chat_prompt *p, const tf_tokenizer *tok, size_t from,
			  tf_tokens *out);

/* True when the prompt ends inside an opened "<think>" block, so the reply
 * starts with reasoning. */
bool tf_chat_prompt_thinking(const tf_chat_prompt *p);

/*
 * --- the ids that end a reply ---
 *
 * Gathered from the model (config.json's eos_token_id), the checkpoint's
 * generation_config.json and the chat template's own end markers.
 */
#define TF_STOP_MAX 16

typedef struct tf_stopset {
	int32_t ids[TF_STOP_MAX];
	int n;
} tf_stopset;

/* Adds id once; TF_ERR_RANGE when the set is full. */
int tf_stop_add(tf_stopset *s, int32_t id);
bool tf_stop_has(const tf_stopset *s, int32_t id);
/* Adds the ids of the NULL-terminated token spellings that the tokenizer has. */
int tf_stop_add_tokens(tf_stopset *s, const char *const *names, const tf_tokenizer *tok);
/* Adds eos_token_id (a number or a list) of a generation_config.json; a
 * missing file adds nothing, an unreadable one is TF_ERR_IO, a malformed
 * one TF_ERR_FORMAT. */
int tf_stop_add_generation_config(tf_stopset *s, const char *path);

/*
 * --- forced tool calls ---
 *
 * The GBNF (tf/grammar.h) of a reply that is tool calls in the Ling-3
 * format: calls of the function named `only` (NULL: of any of `tools`,
 * chat's tools list), one, or one or more when `several`; each call's
 * arguments those of its parameters' schema, the required ones all there.
 * A new string in *out, free() it; a parameter schema the grammar cannot
 * follow is TF_ERR_UNSUPPORTED naming it, a name not among the tools
 * TF_ERR_INVALID.
 */
int tf_chat_tool_gbnf(const tf_val *tools, const char *only, bool several, char **out);

#ifdef __cplusplus
}
#endif
#endif /* TF_CHAT_H */
