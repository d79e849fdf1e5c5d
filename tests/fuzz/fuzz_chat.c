/*
 * fuzz_chat.c - chat requests and model replies on hostile bytes.
 *
 * The input is read two ways.  As a request body: whatever the checker
 * accepts must render through the built-in template, ending at a turn's end
 * or at the generation prompt.  As a reply: the parser must give the same
 * reasoning, answer and tool calls whether the text comes whole or one byte
 * at a time, and every tool call's arguments must be a JSON object.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tf/chat.h"
#include "tf/reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The events as records: part, length, bytes; text events of one part in a
 * row are one record, since text may come cut anywhere. */
typedef struct events {
	tf_bytes b;
	size_t last;                    /* offset of the last record */
	int last_part;                  /* -1: none */
} events;

static int record(events *e, int part, const char *p, size_t n)
{
	uint32_t len = (uint32_t)n, old;
	uint8_t tag = (uint8_t)part;

	if (part == e->last_part && part != TF_REPLY_TOOL_CALL) {
		memcpy(&old, e->b.p + e->last + 1, 4);
		old += len;
		memcpy(e->b.p + e->last + 1, &old, 4);
		return tf_bytes_append(&e->b, p, n);
	}
	e->last = e->b.len;
	e->last_part = part;
	return tf_bytes_append(&e->b, &tag, 1) || tf_bytes_append(&e->b, &len, 4) ||
	       tf_bytes_append(&e->b, p, n);
}

static int on_event(void *ctx, const tf_reply_event *ev)
{
	tf_val *args;

	if (ev->part != TF_REPLY_TOOL_CALL)
		return record(ctx, ev->part, ev->text, ev->len);
	if (tf_val_parse_json(ev->arguments, ev->args_len, &args) ||
	    tf_val_kind_of(args) != TF_VAL_DICT)
		abort();
	tf_val_unref(args);
	return record(ctx, ev->part, ev->name, ev->name_len) ||
	       record(ctx, ev->part, ev->arguments, ev->args_len);
}

static void parse_reply(const char *s, size_t n, bool thinking, size_t step, events *out)
{
	tf_reply r;

	out->b.len = 0;
	out->last_part = -1;
	tf_reply_init(&r, thinking, on_event, out);
	for (size_t i = 0; i < n; i += step)
		if (tf_reply_push(&r, s + i, n - i < step ? n - i : step))
			abort();
	if (tf_reply_finish(&r))
		abort();
	tf_reply_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	tf_chat_template *t;
	tf_chat_prompt p = { 0 };
	events whole = { .last_part = -1 }, bytes = { .last_part = -1 };
	tf_val *req;

	if (!tf_chat_request_parse(s, size, &req)) {
		if (tf_chat_template_init("ling3", NULL, &t))
			abort();
		if (!tf_chat_render(t, req, &p) && p.text.len < 12)
			abort();       /* at least the system turn's <|role_end|> */
		tf_chat_prompt_free(&p);
		tf_chat_template_free(t);
		tf_val_unref(req);
	}
	for (int thinking = 0; thinking < 2; thinking++) {
		parse_reply(s, size, thinking, size ? size : 1, &whole);
		parse_reply(s, size, thinking, 1, &bytes);
		if (whole.b.len != bytes.b.len ||
		    (whole.b.len && memcmp(whole.b.p, bytes.b.p, whole.b.len)))
			abort();
	}
	tf_bytes_free(&whole.b);
	tf_bytes_free(&bytes.b);
	return 0;
}
