/*
 * prompt.h - how a built-in template writes a prompt (tf/chat.h): its
 * markup with tf_chat_prompt_markup(), which records every "<...>" tag in
 * it, and the request's texts with tf_chat_prompt_text().
 */
#ifndef TF_CHAT_PROMPT_H
#define TF_CHAT_PROMPT_H

#include <stddef.h>

#include "tf/chat.h"

/* Appends request text (never a special token). */
int tf_chat_prompt_text(tf_chat_prompt *p, const char *s, size_t len);
/* Appends template markup, recording each "<...>" tag in it. */
int tf_chat_prompt_markup(tf_chat_prompt *p, const char *s);

#endif /* TF_CHAT_PROMPT_H */
