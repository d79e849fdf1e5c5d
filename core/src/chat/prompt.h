/*
 * prompt.h - a rendered chat prompt and its token ids.
 *
 * A built-in template writes its markup with tf_chat_prompt_markup() and the
 * request's texts with tf_chat_prompt_text().  Every "<...>" tag of the
 * markup is recorded; when encoding, a tag that is a special token of the
 * tokenizer becomes that token, and everything else (other markup and the
 * texts) is encoded with special tokens as plain text.  So a user who types
 * "<|role_end|>" cannot end a turn, and a prompt whose texts hold no special
 * tokens gets the ids HF would give the rendered text.
 *
 * A prompt from a Jinja template has no tags recorded ("marked" false): its
 * text is encoded with special tokens recognised anywhere, as HF and vLLM
 * encode the output of apply_chat_template.
 */
#ifndef TF_CHAT_PROMPT_H
#define TF_CHAT_PROMPT_H

#include <stdbool.h>
#include <stddef.h>

#include "tokenizer.h"

typedef struct tf_chat_span {
	size_t off, len;
} tf_chat_span;

typedef struct tf_chat_prompt {
	tf_bytes text;
	tf_chat_span *tags;     /* markup tags, in order */
	size_t n_tags, cap;
	bool marked;            /* tags are known: the rest is plain text */
} tf_chat_prompt;

void tf_chat_prompt_free(tf_chat_prompt *p);

/* Appends request text (never a special token). */
int tf_chat_prompt_text(tf_chat_prompt *p, const char *s, size_t len);
/* Appends template markup, recording each "<...>" tag in it. */
int tf_chat_prompt_markup(tf_chat_prompt *p, const char *s);

/* Appends the ids of text[from..] (from: 0, or a byte offset between a tag
 * and what precedes it, such as the end of an earlier prompt). */
int tf_chat_prompt_encode(const tf_chat_prompt *p, const tf_tokenizer *tok, size_t from,
			  tf_tokens *out);

/* True when the prompt ends inside an opened "<think>" block, so the reply
 * starts with reasoning. */
bool tf_chat_prompt_thinking(const tf_chat_prompt *p);

#endif /* TF_CHAT_PROMPT_H */
