/*
 * request.h - an OpenAI chat request body, checked, as templates read it.
 *
 * tf_chat_request_check() takes the parsed body of a /v1/chat/completions
 * request and returns the values a chat template is given:
 *
 *     { "messages": [...], "tools": [...] | None,
 *       "add_generation_prompt": bool, "chat_template_kwargs": {...} }
 *
 * Each message keeps its keys, with
 *   - "role" one of system, user, assistant, tool;
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
#ifndef TF_CHAT_REQUEST_H
#define TF_CHAT_REQUEST_H

#include <stddef.h>

#include "chat/value.h"

int tf_chat_request_check(const tf_val *body, tf_val **out);
/* The same from JSON text; malformed JSON is TF_ERR_FORMAT. */
int tf_chat_request_parse(const char *json, size_t len, tf_val **out);

#endif /* TF_CHAT_REQUEST_H */
