/*
 * tf/reply.h - a model's reply read back the way the Ling-3 template writes it.
 *
 * The reply is reasoning up to "</think>", then the answer; "<tool_call>"
 * also ends the reasoning.  Each block
 *
 *     <tool_call>NAME
 *     <arg_key>K</arg_key>
 *     <arg_value>V</arg_value>
 *     </tool_call>
 *
 * becomes a tool call whose arguments are a JSON object: a value that parses
 * as JSON (3, true, {"a": 1}) with no NaN or infinity in it is kept typed,
 * any other is a string.  The
 * "\n" the template writes before a call is not part of the answer.  A block
 * that does not parse, is not valid UTF-8, or is not closed, stays in the
 * answer as text.
 *
 * Streaming: push the text in pieces of any size; events come as soon as
 * they are known, and only a tail that may be the start of a marker is held
 * back (a tool call is reported once its block closes).
 *
 *     tf_reply r;
 *     tf_reply_init(&r, tf_chat_prompt_thinking(&prompt), on_event, ctx);
 *     while (...) tf_reply_push(&r, text, len);
 *     tf_reply_finish(&r);
 *     tf_reply_free(&r);
 */
#ifndef TF_REPLY_H
#define TF_REPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "tf/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_reply_part {
	TF_REPLY_REASONING,
	TF_REPLY_ANSWER,
	TF_REPLY_TOOL_CALL,
} tf_reply_part;

typedef struct tf_reply_event {
	tf_reply_part part;
	const char *text;               /* REASONING, ANSWER: never empty */
	size_t len;
	const char *name;               /* TOOL_CALL */
	size_t name_len;
	const char *arguments;          /* TOOL_CALL: a JSON object */
	size_t args_len;
} tf_reply_event;

/* A negative return stops the parser and is passed on. */
typedef int (*tf_reply_fn)(void *ctx, const tf_reply_event *ev);

/* Its fields are the parser's own. */
typedef struct tf_reply {
	int state;
	tf_bytes hold;                  /* maybe the start of a marker */
	tf_bytes call;                  /* the body of an open <tool_call> */
	bool nl;                        /* the "\n" before it was left out */
	tf_reply_fn fn;
	void *ctx;
} tf_reply;

/* thinking: the prompt opened "<think>", so the reply starts in reasoning.
 * Otherwise a reply that starts with "<think>" opens it itself. */
void tf_reply_init(tf_reply *r, bool thinking, tf_reply_fn fn, void *ctx);
void tf_reply_free(tf_reply *r);
int tf_reply_push(tf_reply *r, const char *text, size_t len);
/* The end of the reply: releases what was held back. */
int tf_reply_finish(tf_reply *r);

/*
 * A whole reply as an OpenAI assistant message: {"role": "assistant",
 * "content", "reasoning_content" (when there was reasoning), "tool_calls"
 * (when there were calls)}.
 */
int tf_reply_parse(const char *text, size_t len, bool thinking, tf_val **msg);

/* The message of a reply's parts; calls: a LIST of tf_reply_tool_call()s,
 * or NULL. */
int tf_reply_message(const tf_bytes *reasoning, const tf_bytes *answer, tf_val *calls,
		     tf_val **msg);
/* A TOOL_CALL event as OpenAI spells a call: {"type": "function",
 * "function": {"name", "arguments": JSON text}}. */
int tf_reply_tool_call(const tf_reply_event *ev, tf_val **call);

#ifdef __cplusplus
}
#endif
#endif /* TF_REPLY_H */
