/*
 * chat.h - chat templates, stop tokens and the thinking/answer splitter.
 *
 * A template is data: the markup around each role's turn and what opens the
 * assistant's reply.  "ling3" (spec ling-arch.md section 5):
 *
 *   <role>SYSTEM</role>{system}<|role_end|><role>HUMAN</role>{user}<|role_end|>
 *   <role>ASSISTANT</role><think>\n          (the last part when thinking)
 *
 * "raw" adds nothing: the text goes to the model as written.
 */
#ifndef TF_CHAT_H
#define TF_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef enum tf_chat_role {
	TF_ROLE_SYSTEM,
	TF_ROLE_USER,
	TF_ROLE_ASSISTANT,
	TF_ROLE_COUNT,
} tf_chat_role;

typedef struct tf_chat_msg {
	tf_chat_role role;
	const char *text;
	size_t len;
} tf_chat_msg;

#define TF_CHAT_MAX_STOPS 4

typedef struct tf_chat_template {
	const char *name;
	const char *open[TF_ROLE_COUNT];  /* before a turn's text */
	const char *close;                /* after each turn */
	const char *reply;                /* opens the assistant's reply */
	const char *reply_think;          /* the same with thinking on */
	const char *stops[TF_CHAT_MAX_STOPS]; /* tokens that end a reply */
} tf_chat_template;

/* A built-in template by name ("ling3", "raw"), or NULL. */
const tf_chat_template *tf_chat_template_find(const char *name);

/*
 * The prompt for messages m[0..n) followed by the opening of the assistant's
 * reply, as text (for display and tests).
 */
int tf_chat_render(const tf_chat_template *t, const tf_chat_msg *m, size_t n,
		   bool think, tf_bytes *out);
/*
 * The same prompt as token ids: the markup is encoded with its special
 * tokens, the message texts with special tokens as plain text, so a user
 * cannot type "<|role_end|>" into a turn.  Every markup string ends at an
 * added token or at the end, so the ids equal encoding the rendered text
 * whenever the texts hold no special tokens.
 */
int tf_chat_encode(const tf_chat_template *t, const tf_tokenizer *tok,
		   const tf_chat_msg *m, size_t n, bool think, tf_tokens *out);

/* ---- stop tokens ---- */

#define TF_STOP_MAX 16

typedef struct tf_stopset {
	int32_t ids[TF_STOP_MAX];
	int n;
} tf_stopset;

/* Adds id once; TF_ERR_RANGE when the set is full. */
int tf_stop_add(tf_stopset *s, int32_t id);
bool tf_stop_has(const tf_stopset *s, int32_t id);
/* Adds the template's stop tokens that the tokenizer has. */
int tf_stop_add_template(tf_stopset *s, const tf_chat_template *t, const tf_tokenizer *tok);
/* Adds eos_token_id (a number or a list) of a generation_config.json; a
 * missing file adds nothing, an unreadable one is TF_ERR_IO, a malformed
 * one TF_ERR_FORMAT. */
int tf_stop_add_generation_config(tf_stopset *s, const char *path);

/* ---- thinking / answer ---- */

typedef enum tf_text_kind { TF_TEXT_ANSWER, TF_TEXT_THINKING } tf_text_kind;

typedef int (*tf_think_emit)(void *ctx, tf_text_kind kind, const char *text, size_t len);

/*
 * Splits streamed reply text into thinking and answer.  "<think>" starts
 * thinking and "</think>" ends it (both are dropped); "<tool_call>" also ends
 * it and stays in the answer.  A tail that may be the start of a marker is
 * held back until the next push shows what it is.
 */
typedef struct tf_think_split {
	bool thinking;
	tf_bytes hold;
} tf_think_split;

/* thinking: the prompt already opened the block (ling3 with think on). */
void tf_think_init(tf_think_split *s, bool thinking);
void tf_think_free(tf_think_split *s);
int tf_think_push(tf_think_split *s, const char *text, size_t len, tf_think_emit emit, void *ctx);
/* End of the reply: releases what was held back. */
int tf_think_flush(tf_think_split *s, tf_think_emit emit, void *ctx);

#endif /* TF_CHAT_H */
