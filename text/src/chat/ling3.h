/*
 * ling3.h - the built-in Ling-3 (Bailing V3) chat template.
 *
 * Writes what the template shipped with Ling-3.0-flash writes, byte for
 * byte (spec ling-arch.md section 5; tests/chat/test_ling3.c checks the
 * goldens): the system turn with its "detailed thinking on|off" line and
 * the tools block, user/system/tool turns, assistant turns with their
 * reasoning and tool calls, and the generation prompt.
 */
#ifndef TF_CHAT_LING3_H
#define TF_CHAT_LING3_H

#include "chat/prompt.h"
#include "chat/value.h"

/* req: a request from tf_chat_request_check().  chat_template_kwargs'
 * enable_thinking, when given, must be true or false. */
int tf_ling3_render(const tf_val *req, tf_chat_prompt *out);

#endif /* TF_CHAT_LING3_H */
