/*
 * stops.h - the token ids that end a reply.
 *
 * Gathered from the model (config.json's eos_token_id), the checkpoint's
 * generation_config.json and the chat template's own end markers.
 */
#ifndef TF_CHAT_STOPS_H
#define TF_CHAT_STOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "tokenizer.h"

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

#endif /* TF_CHAT_STOPS_H */
