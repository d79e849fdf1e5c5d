/* ling3.c - see ling3.h. */
#include "chat/ling3.h"

#include <string.h>

#include "tf/diag.h"

static const char tools_head[] =
	"# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
	"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
static const char tools_tail[] =
	"</tools>\n\nIf none of the functions can be used, point it out. If the given question "
	"lacks the parameters required by the function, also point it out.\nIf you need to use "
	"a function, for each function call, output the function name and arguments within the "
	"following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
	"<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
	"<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>\n";

/* A string view. */
typedef struct str {
	const char *p;
	size_t n;
} str;

static str get_str(const tf_val *d, const char *key)
{
	str s = { "", 0 };
	const char *p = tf_val_as_str(tf_val_dict_get(d, key), &s.n);

	if (p)
		s.p = p;
	else
		s.n = 0;
	return s;
}

/* Offset of the first (last: the last) needle in s, or -1. */
static ptrdiff_t find(str s, const char *needle, bool last)
{
	size_t k = strlen(needle), i;
	ptrdiff_t at = -1;

	for (i = 0; i + k <= s.n; i++)
		if (!memcmp(s.p + i, needle, k)) {
			at = (ptrdiff_t)i;
			if (!last)
				break;
		}
	return at;
}

static str lstrip_nl(str s)
{
	while (s.n && *s.p == '\n') {
		s.p++;
		s.n--;
	}
	return s;
}

static str rstrip_nl(str s)
{
	while (s.n && s.p[s.n - 1] == '\n')
		s.n--;
	return s;
}

static int text(tf_chat_prompt *p, str s)
{
	return tf_chat_prompt_text(p, s.p, s.n);
}

static int markup(tf_chat_prompt *p, const char *s)
{
	return tf_chat_prompt_markup(p, s);
}

/* "detailed thinking on" or "off" from chat_template_kwargs. */
static int thinking(const tf_val *req, bool *on)
{
	const tf_val *v = tf_val_dict_get(tf_val_dict_get(req, "chat_template_kwargs"),
					  "enable_thinking");

	*on = true;
	if (!v)
		return TF_OK;
	if (tf_val_kind_of(v) != TF_VAL_BOOL)
		return tf_diag_set(TF_ERR_INVALID,
				   "chat_template_kwargs.enable_thinking: expected true or false");
	*on = tf_val_as_bool(v);
	return TF_OK;
}

static int tools_block(tf_chat_prompt *p, const tf_val *tools)
{
	tf_bytes json = { 0 };
	size_t i;
	int rc = markup(p, tools_head);

	for (i = 0; i < tf_val_len(tools) && !rc; i++) {
		json.len = 0;
		if (tf_val_dump_json(tf_val_at(tools, i), &json) || tf_bytes_append(&json, "\n", 1))
			rc = tf_diag_set(TF_ERR_NOMEM, "chat prompt: out of memory");
		else
			rc = tf_chat_prompt_text(p, json.p, json.len);
	}
	tf_bytes_free(&json);
	return rc ? rc : markup(p, tools_tail);
}

/* The first turn: always a system turn, with the tools and the thinking line. */
static int system_turn(tf_chat_prompt *p, const tf_val *req, const tf_val *first, bool think)
{
	const tf_val *tools = tf_val_dict_get(req, "tools");
	str sys = get_str(first, "content");
	bool has_sys = !strcmp(get_str(first, "role").p, "system");
	bool said = has_sys && (find(sys, "detailed thinking on", false) >= 0 ||
				find(sys, "detailed thinking off", false) >= 0);
	int rc;

	if ((rc = markup(p, "<role>SYSTEM</role>")))
		return rc;
	if (has_sys && (rc = text(p, sys)))
		return rc;
	if (has_sys && (tf_val_len(tools) || !said) && (rc = markup(p, "\n")))
		return rc;
	if (tf_val_len(tools) && (rc = tools_block(p, tools)))
		return rc;
	if (!said && (rc = markup(p, think ? "detailed thinking on" : "detailed thinking off")))
		return rc;
	return markup(p, "<|role_end|>");
}

/* An argument value: a string as is, anything else as JSON. */
static int arg_value(tf_chat_prompt *p, const tf_val *v)
{
	tf_bytes json = { 0 };
	size_t n;
	const char *s = tf_val_as_str(v, &n);
	int rc;

	if (s)
		return tf_chat_prompt_text(p, s, n);
	if (tf_val_dump_json(v, &json))
		rc = tf_diag_set(TF_ERR_NOMEM, "chat prompt: out of memory");
	else
		rc = tf_chat_prompt_text(p, json.p, json.len);
	tf_bytes_free(&json);
	return rc;
}

static int tool_call(tf_chat_prompt *p, const tf_val *tc)
{
	const tf_val *fn = tf_val_dict_get(tc, "function"), *args = tf_val_dict_get(fn, "arguments");
	size_t i, n;
	const char *k;
	int rc;

	if ((rc = markup(p, "<tool_call>")) || (rc = text(p, get_str(fn, "name"))) ||
	    (rc = markup(p, "\n")))
		return rc;
	for (i = 0; i < tf_val_len(args); i++) {
		k = tf_val_as_str(tf_val_key_at(args, i), &n);
		if ((rc = markup(p, "<arg_key>")) || (rc = tf_chat_prompt_text(p, k, n)) ||
		    (rc = markup(p, "</arg_key>\n<arg_value>")) ||
		    (rc = arg_value(p, tf_val_at(args, i))) || (rc = markup(p, "</arg_value>")))
			return rc;
	}
	return markup(p, "\n</tool_call>");
}

/*
 * Past reasoning is kept: reasoning_content when it is a non-empty string,
 * else the text of a <think>...</think> at the head of the content.
 */
static int assistant_turn(tf_chat_prompt *p, const tf_val *m)
{
	const tf_val *calls = tf_val_dict_get(m, "tool_calls");
	str content = get_str(m, "content"), reason = get_str(m, "reasoning_content");
	ptrdiff_t at;
	size_t i;
	int rc;

	if (!reason.n && (at = find(content, "</think>", false)) >= 0) {
		str head = rstrip_nl((str){ content.p, (size_t)at });
		ptrdiff_t open = find(head, "<think>", true);

		if (open >= 0)
			head = (str){ head.p + open + 7, head.n - (size_t)open - 7 };
		reason = lstrip_nl(head);
		at = find(content, "</think>", true) + 8;
		content = lstrip_nl((str){ content.p + at, content.n - (size_t)at });
	}
	if (reason.n) {
		content = lstrip_nl(content);
		reason = rstrip_nl(lstrip_nl(reason));
	}
	if ((rc = markup(p, "<role>ASSISTANT</role>\n<think>")) || (rc = text(p, reason)) ||
	    (rc = markup(p, "</think>")) || (rc = text(p, content)))
		return rc;
	for (i = 0; i < tf_val_len(calls); i++)
		if (((i || content.n) && (rc = markup(p, "\n"))) ||
		    (rc = tool_call(p, tf_val_at(calls, i))))
			return rc;
	return markup(p, "<|role_end|>");
}

static int turn(tf_chat_prompt *p, const tf_val *msgs, size_t i)
{
	const tf_val *m = tf_val_at(msgs, i);
	const char *role = get_str(m, "role").p;
	bool prev_tool = i && !strcmp(get_str(tf_val_at(msgs, i - 1), "role").p, "tool");
	bool next_tool = i + 1 < tf_val_len(msgs) &&
			 !strcmp(get_str(tf_val_at(msgs, i + 1), "role").p, "tool");
	int rc;

	if (!strcmp(role, "assistant"))
		return assistant_turn(p, m);
	if (!strcmp(role, "tool")) {
		if ((!prev_tool && (rc = markup(p, "<role>OBSERVATION</role>"))) ||
		    (rc = markup(p, "\n<tool_response>\n")) ||
		    (rc = text(p, get_str(m, "content"))) || (rc = markup(p, "\n</tool_response>")))
			return rc;
		return next_tool ? TF_OK : markup(p, "<|role_end|>");
	}
	if ((rc = markup(p, !strcmp(role, "user") ? "<role>HUMAN</role>" : "<role>SYSTEM</role>")) ||
	    (rc = text(p, get_str(m, "content"))))
		return rc;
	return markup(p, "<|role_end|>");
}

int tf_ling3_render(const tf_val *req, tf_chat_prompt *out)
{
	const tf_val *msgs = tf_val_dict_get(req, "messages"), *first = tf_val_at(msgs, 0);
	size_t i = !strcmp(get_str(first, "role").p, "system");
	bool think;
	int rc;

	if ((rc = thinking(req, &think)) || (rc = system_turn(out, req, first, think)))
		return rc;
	for (; i < tf_val_len(msgs); i++)
		if ((rc = turn(out, msgs, i)))
			return rc;
	if (!tf_val_as_bool(tf_val_dict_get(req, "add_generation_prompt")))
		return TF_OK;
	return markup(out, think ? "<role>ASSISTANT</role>\n<think>" :
			      "<role>ASSISTANT</role>\n<think></think>");
}
