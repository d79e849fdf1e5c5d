/*
 * goldens.h - the Ling-3 chat-template goldens (TF_TESTDATA/chat/
 * ling3-goldens.jsonl): one {"case", "request", "prompt"} per line, with
 * the prompt the shipped template makes of the request.
 */
#ifndef TF_TEST_CHAT_GOLDENS_H
#define TF_TEST_CHAT_GOLDENS_H

#include <stdbool.h>

#include "chat/value.h"
#include "tf/chat.h"

#define TF_GOLDENS TF_TESTDATA "/chat/ling3-goldens.jsonl"

/* Every case, as a LIST of the lines' DICTs; aborts the test on failure. */
tf_val *goldens_load(void);
/* Rewrites each tool call's arguments object as a JSON string, as an
 * OpenAI client sends it. */
void goldens_stringify_args(tf_val *request);
/* Renders every case with t (arguments as JSON strings with stringify),
 * logs each that differs, and returns how many match byte for byte. */
size_t goldens_render_all(const tf_chat_template *t, bool stringify);

#endif /* TF_TEST_CHAT_GOLDENS_H */
