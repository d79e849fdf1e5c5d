/*
 * responses.c - POST /v1/responses: OpenAI's Responses API over the chat
 * path.  The request's input items and instructions become chat messages
 * (a function_call an assistant's tool call, a function_call_output a tool
 * message), its function tools chat tools; the reply comes back as output
 * items (reasoning, message, function_call), streamed as typed events.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "tf/diag.h"

/* ---- the request ---- */

/* What is honoured, refused by name, or metadata; the rest is listed in
 * X-TensorFold-Ignored. */
static const char *const known[] = {
	"model", "input", "instructions", "max_output_tokens", "temperature", "top_p",
	"stream", "tools", "tool_choice", "parallel_tool_calls", "text", "metadata", "user",
	"store", "truncation", "previous_response_id", "background", "include", "seed",
	"prompt", "conversation", "safety_identifier", "prompt_cache_key", NULL,
};

/* Set key of d to v (taken); false when out of memory. */
static bool put_val(tf_val *d, const char *key, tf_val *v)
{
	return v && !tf_val_dict_set(d, key, strlen(key), v);
}

/* A copy of src's key into dst, when src has it. */
static bool copy(tf_val *dst, const tf_val *src, const char *from, const char *to)
{
	tf_val *v = tf_val_dict_get(src, from);

	return !v || tf_val_kind_of(v) == TF_VAL_NONE || put_val(dst, to, tf_val_ref(v));
}

static tf_val *message(const char *role, tf_val *content)
{
	tf_val *m = tf_val_dict();

	if (!m || !put_val(m, "role", tf_val_cstr(role)) || !put_val(m, "content", content)) {
		tf_val_unref(m);
		return NULL;
	}
	return m;
}

/* An input message's content: a string, or its text parts joined. */
static int content_text(const tf_val *c, size_t i, tf_val **out, serve_err *err)
{
	tf_bytes b = { 0 };

	if (tf_val_kind_of(c) == TF_VAL_STR) {
		*out = tf_val_ref((tf_val *)c);
		return 0;
	}
	if (tf_val_kind_of(c) != TF_VAL_LIST)
		return serve_fail(err, 400, "input", "input[%zu].content must be a string or an "
				  "array of text parts", i);
	for (size_t k = 0; k < tf_val_len(c); k++) {
		const tf_val *part = tf_val_at(c, k);
		const char *type = tf_val_as_str(tf_val_dict_get(part, "type"), NULL);
		size_t n;
		const char *text = tf_val_as_str(tf_val_dict_get(part, "text"), &n);
		if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text")) || !text) {
			tf_bytes_free(&b);
			return serve_fail(err, 400, "input", "input[%zu].content[%zu]: only "
					  "input_text and output_text parts are supported", i, k);
		}
		if ((k && tf_bytes_append(&b, "\n", 1)) || tf_bytes_append(&b, text, n)) {
			tf_bytes_free(&b);
			return serve_fail(err, 500, NULL, "out of memory");
		}
	}
	*out = tf_val_str(b.p ? b.p : "", b.len);
	tf_bytes_free(&b);
	return *out ? 0 : serve_fail(err, 500, NULL, "out of memory");
}

/* A function_call item as a tool call of the assistant message *last
 * (made when the message before is not one). */
static int add_call(tf_val *msgs, const tf_val *it, size_t i, serve_err *err)
{
	size_t n = tf_val_len(msgs);
	tf_val *last = n ? tf_val_at(msgs, n - 1) : NULL;
	tf_val *calls = last ? tf_val_dict_get(last, "tool_calls") : NULL;
	tf_val *fn = tf_val_dict(), *call = tf_val_dict();
	const char *name = tf_val_as_str(tf_val_dict_get(it, "name"), NULL);

	if (!name || tf_val_kind_of(tf_val_dict_get(it, "arguments")) != TF_VAL_STR) {
		tf_val_unref(fn);
		tf_val_unref(call);
		return serve_fail(err, 400, "input", "input[%zu]: a function_call needs a name "
				  "and its arguments as a JSON string", i);
	}
	bool ok = fn && call && copy(fn, it, "name", "name") &&
		  copy(fn, it, "arguments", "arguments") && copy(call, it, "call_id", "id") &&
		  put_val(call, "type", tf_val_cstr("function")) && put_val(call, "function", fn);
	if (ok && !calls) {
		const char *role = last ? tf_val_as_str(tf_val_dict_get(last, "role"), NULL) : NULL;
		if (!role || strcmp(role, "assistant")) {
			last = message("assistant", tf_val_cstr(""));
			ok = last && !tf_val_list_push(msgs, last);
		}
		ok = ok && put_val(last, "tool_calls", calls = tf_val_list());
	}
	if (!ok || tf_val_list_push(calls, call)) {
		tf_val_unref(ok ? NULL : call);
		return serve_fail(err, 500, NULL, "out of memory");
	}
	return 0;
}

/* input (a string or items) and instructions as chat messages. */
static int messages(const tf_val *body, tf_val *msgs, serve_err *err)
{
	const tf_val *in = tf_val_dict_get(body, "input");
	const tf_val *instr = tf_val_dict_get(body, "instructions");
	tf_val *m, *content = NULL;

	if (tf_val_kind_of(instr) == TF_VAL_STR &&
	    (!(m = message("system", tf_val_ref((tf_val *)instr))) || tf_val_list_push(msgs, m)))
		return serve_fail(err, 500, NULL, "out of memory");
	if (tf_val_kind_of(in) == TF_VAL_STR) {
		if (!(m = message("user", tf_val_ref((tf_val *)in))) || tf_val_list_push(msgs, m))
			return serve_fail(err, 500, NULL, "out of memory");
		return 0;
	}
	if (tf_val_kind_of(in) != TF_VAL_LIST || !tf_val_len(in))
		return serve_fail(err, 400, "input", "'input' must be a string or a non-empty "
				  "array of items");
	for (size_t i = 0; i < tf_val_len(in); i++) {
		const tf_val *it = tf_val_at(in, i);
		const char *type = tf_val_as_str(tf_val_dict_get(it, "type"), NULL);
		const char *role = tf_val_as_str(tf_val_dict_get(it, "role"), NULL);
		if (tf_val_kind_of(it) != TF_VAL_DICT)
			return serve_fail(err, 400, "input", "input[%zu] must be an object", i);
		if (type && !strcmp(type, "function_call")) {
			if (add_call(msgs, it, i, err))
				return -1;
			continue;
		}
		if (type && !strcmp(type, "function_call_output")) {
			if (tf_val_kind_of(tf_val_dict_get(it, "output")) != TF_VAL_STR)
				return serve_fail(err, 400, "input", "input[%zu].output must be a "
						  "string", i);
			if (!(m = message("tool", tf_val_ref(tf_val_dict_get(it, "output")))) ||
			    !copy(m, it, "call_id", "tool_call_id") || tf_val_list_push(msgs, m))
				return serve_fail(err, 500, NULL, "out of memory");
			continue;
		}
		if (type && !strcmp(type, "reasoning"))
			continue;       /* the template drops past turns' reasoning */
		if ((type && strcmp(type, "message")) || !role)
			return serve_fail(err, 400, "input", "input[%zu]: type '%s' is not supported "
					  "(message, function_call, function_call_output)", i,
					  type ? type : "(none)");
		if (content_text(tf_val_dict_get(it, "content"), i, &content, err))
			return -1;
		if (!(m = message(role, content)) || tf_val_list_push(msgs, m))
			return serve_fail(err, 500, NULL, "out of memory");
	}
	return 0;
}

/* Function tools as chat's; tool_choice as chat's. */
static int tools(const tf_val *body, tf_val *chat, serve_err *err)
{
	const tf_val *list = tf_val_dict_get(body, "tools"), *tc = tf_val_dict_get(body,
										   "tool_choice");
	tf_val *out = tf_val_list();

	if (!out || !put_val(chat, "tools", out))
		return serve_fail(err, 500, NULL, "out of memory");
	for (size_t i = 0; i < tf_val_len(list); i++) {
		const tf_val *t = tf_val_at(list, i);
		const char *type = tf_val_as_str(tf_val_dict_get(t, "type"), NULL);
		tf_val *fn = tf_val_dict(), *w = tf_val_dict();
		if (!type || strcmp(type, "function")) {
			tf_val_unref(fn);
			tf_val_unref(w);
			return serve_fail(err, 400, "tools", "tools[%zu]: type '%s' is not supported: "
					  "function tools only", i, type ? type : "(none)");
		}
		if (!fn || !w || !copy(fn, t, "name", "name") ||
		    !copy(fn, t, "description", "description") ||
		    !copy(fn, t, "parameters", "parameters") ||
		    !put_val(w, "type", tf_val_cstr("function")) || !put_val(w, "function", fn) ||
		    tf_val_list_push(out, w)) {
			tf_val_unref(w);
			return serve_fail(err, 500, NULL, "out of memory");
		}
	}
	if (!tf_val_len(list))
		tf_val_dict_set(chat, "tools", 5, tf_val_none());
	if (tf_val_kind_of(tc) == TF_VAL_DICT) {
		tf_val *fn = tf_val_dict(), *w = tf_val_dict();
		if (!fn || !w || !copy(fn, tc, "name", "name") ||
		    !put_val(w, "type", tf_val_cstr("function")) || !put_val(w, "function", fn) ||
		    !put_val(chat, "tool_choice", w))
			return serve_fail(err, 500, NULL, "out of memory");
	} else if (!copy(chat, body, "tool_choice", "tool_choice")) {
		return serve_fail(err, 500, NULL, "out of memory");
	}
	return 0;
}

/* text.format as chat's response_format. */
static int text_format(const tf_val *body, tf_val *chat, serve_err *err)
{
	const tf_val *f = tf_val_dict_get(tf_val_dict_get(body, "text"), "format");
	const char *type = tf_val_as_str(tf_val_dict_get(f, "type"), NULL);
	tf_val *rf, *js;

	if (!f || tf_val_kind_of(f) == TF_VAL_NONE)
		return 0;
	if (!type)
		return serve_fail(err, 400, "text", "'text.format' needs a type");
	rf = tf_val_dict();
	if (!rf || !put_val(chat, "response_format", rf) ||
	    !put_val(rf, "type", tf_val_cstr(type)))
		return serve_fail(err, 500, NULL, "out of memory");
	if (strcmp(type, "json_schema"))
		return 0;
	js = tf_val_dict();
	if (!js || !put_val(rf, "json_schema", js) || !copy(js, f, "name", "name") ||
	    !copy(js, f, "schema", "schema") || !copy(js, f, "strict", "strict"))
		return serve_fail(err, 500, NULL, "out of memory");
	return 0;
}

/* Fields that would change the reply in ways not supported. */
static int refuse(const tf_val *body, serve_err *err)
{
	static const char *const no[] = { "previous_response_id", "background", "prompt",
					  "conversation", NULL };
	const tf_val *inc = tf_val_dict_get(body, "include");

	for (const char *const *k = no; *k; k++) {
		const tf_val *v = tf_val_dict_get(body, *k);
		if (v && tf_val_kind_of(v) != TF_VAL_NONE &&
		    !(tf_val_kind_of(v) == TF_VAL_BOOL && !tf_val_as_bool(v)))
			return serve_fail(err, 400, *k, "'%s' is not supported: this server keeps "
					  "no responses", *k);
	}
	if (tf_val_len(inc))
		return serve_fail(err, 400, "include", "'include' is not supported");
	return 0;
}

/* The request's fields the response object repeats, into j->echo. */
static int echo_fields(const tf_val *body, serve_job *j, serve_err *err)
{
	static const char *const keys[] = { "instructions", "tools", "tool_choice",
					     "parallel_tool_calls", "max_output_tokens",
					     "temperature", "top_p", "text", "metadata", NULL };

	if (!(j->echo = cJSON_CreateObject()))
		return serve_fail(err, 500, NULL, "out of memory");
	for (const char *const *k = keys; *k; k++) {
		const tf_val *v = tf_val_dict_get(body, *k);
		tf_bytes json = { 0 };
		cJSON *c = NULL;
		if (!v)
			continue;
		if (!tf_val_dump_json(v, &json))
			c = cJSON_ParseWithLength(json.p, json.len);
		tf_bytes_free(&json);
		if (!c || !cJSON_AddItemToObject(j->echo, *k, c)) {
			cJSON_Delete(c);
			return serve_fail(err, 500, NULL, "out of memory");
		}
	}
	return 0;
}

int serve_parse_responses(serve *s, const char *text, size_t len, serve_job *j,
			  serve_err *err)
{
	tf_val *body = NULL, *chat = tf_val_dict(), *msgs = tf_val_list();
	int rc = 0;

	if (!chat || !msgs || !put_val(chat, "messages", msgs))
		rc = serve_fail(err, 500, NULL, "out of memory");
	else if (tf_val_parse_json(text, len, &body))
		rc = serve_fail(err, 400, NULL, "the body is not valid JSON: %s", tf_diag_msg());
	else if (tf_val_kind_of(body) != TF_VAL_DICT)
		rc = serve_fail(err, 400, NULL, "the body must be a JSON object");
	if (!rc)
		rc = refuse(body, err);
	if (!rc)
		rc = messages(body, msgs, err);
	if (!rc)
		rc = tools(body, chat, err);
	if (!rc)
		rc = text_format(body, chat, err);
	if (!rc && !(copy(chat, body, "max_output_tokens", "max_tokens") &&
		     copy(chat, body, "temperature", "temperature") &&
		     copy(chat, body, "top_p", "top_p") && copy(chat, body, "stream", "stream") &&
		     copy(chat, body, "seed", "seed") &&
		     copy(chat, body, "parallel_tool_calls", "parallel_tool_calls")))
		rc = serve_fail(err, 500, NULL, "out of memory");
	if (!rc) {
		serve_note_unknown(s, body, known, NULL, j);
		rc = echo_fields(body, j, err);
	}
	if (!rc)
		rc = serve_parse_chat_val(s, chat, j, err);
	tf_val_unref(body);
	tf_val_unref(chat);
	return rc;
}

/* ---- the reply ---- */

typedef enum item_kind { ITEM_NONE, ITEM_REASONING, ITEM_MESSAGE } item_kind;

/* One streamed event: "event: TYPE" and its data, numbered. */
static int event(serve *s, serve_req *r, const char *type, cJSON *o)
{
	char *text = NULL;
	int rc = TF_OK;

	if (!o || !cJSON_AddStringToObject(o, "type", type) ||
	    !cJSON_AddNumberToObject(o, "sequence_number", (double)r->n_chunks++) ||
	    !(text = cJSON_PrintUnformatted(o)))
		rc = tf_diag_set(TF_ERR_NOMEM, "out of memory");
	cJSON_Delete(o);
	if (!rc)
		rc = serve_put_event(s, r->job, type, text);
	cJSON_free(text);
	return rc;
}

static void item_id(const serve_req *r, int at, char *buf, size_t size)
{
	snprintf(buf, size, "%s_%d", r->job->id, at);
}

/* Output item `at` of r as it stands; the text of a reasoning or message
 * item is r's from its start. */
static cJSON *item(const serve_req *r, int at, item_kind kind, const char *status)
{
	char id[80];
	cJSON *it = cJSON_CreateObject(), *content, *part;
	const tf_bytes *b = kind == ITEM_REASONING ? &r->reasoning : &r->answer;
	size_t from = r->item_from < b->len ? r->item_from : b->len;
	char *text = strndup(b->p ? b->p + from : "", b->len - from);

	item_id(r, at, id, sizeof(id));
	bool ok = it && text && cJSON_AddStringToObject(it, "id", id) &&
		  cJSON_AddStringToObject(it, "type", kind == ITEM_REASONING ? "reasoning" :
					  "message") &&
		  (content = cJSON_AddArrayToObject(it, "content")) &&
		  (part = cJSON_CreateObject()) && cJSON_AddItemToArray(content, part);
	if (ok && kind == ITEM_REASONING)
		ok = cJSON_AddArrayToObject(it, "summary") &&
		     cJSON_AddStringToObject(part, "type", "reasoning_text") &&
		     cJSON_AddStringToObject(part, "text", text);
	else if (ok)
		ok = cJSON_AddStringToObject(it, "status", status) &&
		     cJSON_AddStringToObject(it, "role", "assistant") &&
		     cJSON_AddStringToObject(part, "type", "output_text") &&
		     cJSON_AddStringToObject(part, "text", text) &&
		     cJSON_AddArrayToObject(part, "annotations");
	free(text);
	if (!ok) {
		cJSON_Delete(it);
		return NULL;
	}
	return it;
}

static cJSON *at_index(const serve_req *r, cJSON *o)
{
	char id[80];

	item_id(r, r->n_items - 1, id, sizeof(id));
	if (o && cJSON_AddStringToObject(o, "item_id", id) &&
	    cJSON_AddNumberToObject(o, "output_index", r->n_items - 1) &&
	    cJSON_AddNumberToObject(o, "content_index", 0))
		return o;
	cJSON_Delete(o);
	return NULL;
}

/* The open reasoning or message item, closed. */
static int close_item(serve *s, serve_req *r)
{
	item_kind k = (item_kind)r->item_open;
	const tf_bytes *b = k == ITEM_REASONING ? &r->reasoning : &r->answer;
	cJSON *o, *it;
	int rc;

	if (k == ITEM_NONE)
		return TF_OK;
	r->item_open = ITEM_NONE;
	o = at_index(r, cJSON_CreateObject());
	it = item(r, r->n_items - 1, k, "completed");
	char *text = strndup(b->p ? b->p + r->item_from : "", b->len - r->item_from);
	if (!o || !it || !text || !cJSON_AddStringToObject(o, "text", text)) {
		cJSON_Delete(o);
		cJSON_Delete(it);
		free(text);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	free(text);
	rc = event(s, r, k == ITEM_REASONING ? "response.reasoning_text.done" :
		   "response.output_text.done", o);
	if (!rc && k == ITEM_MESSAGE) {
		cJSON *part = cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItem(it, "content"),
								 0), 1);
		o = at_index(r, cJSON_CreateObject());
		if (!o || !part || !cJSON_AddItemToObject(o, "part", part)) {
			cJSON_Delete(part);
			cJSON_Delete(o);
			cJSON_Delete(it);
			return tf_diag_set(TF_ERR_NOMEM, "out of memory");
		}
		rc = event(s, r, "response.content_part.done", o);
	}
	o = cJSON_CreateObject();
	if (!rc && (!o || !cJSON_AddNumberToObject(o, "output_index", r->n_items - 1) ||
		    !cJSON_AddItemToObject(o, "item", it))) {
		cJSON_Delete(o);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	return rc ? rc : event(s, r, "response.output_item.done", o);
}

/* A new output item of kind k, announced. */
static int open_item(serve *s, serve_req *r, item_kind k)
{
	cJSON *o = cJSON_CreateObject(), *it;
	int rc;

	r->item_open = k;
	r->item_from = (k == ITEM_REASONING ? r->reasoning : r->answer).len;
	it = item(r, r->n_items++, k, "in_progress");
	if (!o || !it || !cJSON_AddNumberToObject(o, "output_index", r->n_items - 1) ||
	    !cJSON_AddItemToObject(o, "item", it)) {
		cJSON_Delete(o);
		cJSON_Delete(it);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	if ((rc = event(s, r, "response.output_item.added", o)) || k != ITEM_MESSAGE)
		return rc;
	o = at_index(r, cJSON_CreateObject());
	cJSON *part = cJSON_CreateObject();
	if (!o || !part || !cJSON_AddStringToObject(part, "type", "output_text") ||
	    !cJSON_AddStringToObject(part, "text", "") ||
	    !cJSON_AddArrayToObject(part, "annotations") || !cJSON_AddItemToObject(o, "part", part)) {
		cJSON_Delete(o);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	return event(s, r, "response.content_part.added", o);
}

/* The response object: its output items so far (all of them at the end). */
static cJSON *response(const serve *s, const serve_req *r, const char *status)
{
	const serve_job *j = r->job;
	cJSON *o = cJSON_CreateObject(), *out, *u, *d;
	bool ok = o && cJSON_AddStringToObject(o, "id", j->id) &&
		  cJSON_AddStringToObject(o, "object", "response") &&
		  cJSON_AddNumberToObject(o, "created_at", (double)j->created) &&
		  cJSON_AddStringToObject(o, "status", status) &&
		  cJSON_AddStringToObject(o, "model", s->model_name) &&
		  cJSON_AddNullToObject(o, "error") &&
		  (out = cJSON_AddArrayToObject(o, "output"));
	int at = 0;
	cJSON *f;

	/* The request's own settings, OpenAI's defaults where it gave none. */
	cJSON_ArrayForEach(f, j->echo)
		ok = ok && cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, true));
	if (ok && !cJSON_HasObjectItem(o, "tools"))
		ok = cJSON_AddArrayToObject(o, "tools");
	if (ok && !cJSON_HasObjectItem(o, "tool_choice"))
		ok = cJSON_AddStringToObject(o, "tool_choice", "auto");
	if (ok && !cJSON_HasObjectItem(o, "parallel_tool_calls"))
		ok = cJSON_AddBoolToObject(o, "parallel_tool_calls", true);

	if (ok && !strcmp(status, "incomplete"))
		ok = (d = cJSON_AddObjectToObject(o, "incomplete_details")) &&
		     cJSON_AddStringToObject(d, "reason", "max_output_tokens");
	else if (ok)
		ok = cJSON_AddNullToObject(o, "incomplete_details");
	if (ok && strcmp(status, "in_progress")) {
		serve_req tmp = *r;     /* whole texts: each kind's from 0 */
		tmp.item_from = 0;
		if (r->reasoning.len)
			ok = cJSON_AddItemToArray(out, item(&tmp, at++, ITEM_REASONING, "completed"));
		for (size_t i = 0; ok && i < tf_val_len(r->calls); i++)
			ok = cJSON_AddItemToArray(out, serve_resp_call(r, tf_val_at(r->calls, i),
								       at++, "completed"));
		if (ok && (r->answer.len || !at))
			ok = cJSON_AddItemToArray(out, item(&tmp, at++, ITEM_MESSAGE, "completed"));
		ok = ok && (u = cJSON_AddObjectToObject(o, "usage")) &&
		     cJSON_AddNumberToObject(u, "input_tokens", (double)j->prompt_tokens) &&
		     cJSON_AddNumberToObject(u, "output_tokens", (double)r->n_gen) &&
		     cJSON_AddNumberToObject(u, "total_tokens", (double)(j->prompt_tokens +
									  r->n_gen)) &&
		     (d = cJSON_AddObjectToObject(u, "input_tokens_details")) &&
		     cJSON_AddNumberToObject(d, "cached_tokens", (double)r->cached) &&
		     (d = cJSON_AddObjectToObject(u, "output_tokens_details")) &&
		     cJSON_AddNumberToObject(d, "reasoning_tokens", (double)r->n_reasoning);
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

cJSON *serve_resp_call(const serve_req *r, const tf_val *call, int at, const char *status)
{
	const tf_val *fn = tf_val_dict_get(call, "function");
	const char *name = tf_val_as_str(tf_val_dict_get(fn, "name"), NULL);
	const char *args = tf_val_as_str(tf_val_dict_get(fn, "arguments"), NULL);
	const char *call_id = tf_val_as_str(tf_val_dict_get(call, "id"), NULL);
	char id[80];
	cJSON *it = cJSON_CreateObject();

	item_id(r, at, id, sizeof(id));
	if (it && cJSON_AddStringToObject(it, "id", id) &&
	    cJSON_AddStringToObject(it, "type", "function_call") &&
	    cJSON_AddStringToObject(it, "status", status) &&
	    cJSON_AddStringToObject(it, "call_id", call_id ? call_id : id) &&
	    cJSON_AddStringToObject(it, "name", name ? name : "") &&
	    cJSON_AddStringToObject(it, "arguments", args ? args : "{}"))
		return it;
	cJSON_Delete(it);
	return NULL;
}

/* {"response": the response object} for an event, or NULL. */
static cJSON *with_response(const serve *s, const serve_req *r, const char *status)
{
	cJSON *o = cJSON_CreateObject(), *resp = response(s, r, status);

	if (o && resp && cJSON_AddItemToObject(o, "response", resp))
		return o;
	cJSON_Delete(o);
	cJSON_Delete(resp);
	return NULL;
}

/* The stream's first events, before its first output. */
static int begin(serve *s, serve_req *r)
{
	int rc;

	if (r->n_chunks)
		return TF_OK;
	if ((rc = event(s, r, "response.created", with_response(s, r, "in_progress"))))
		return rc;
	return event(s, r, "response.in_progress", with_response(s, r, "in_progress"));
}

int serve_resp_text(serve *s, serve_req *r, bool reasoning, const char *text, size_t len)
{
	item_kind k = reasoning ? ITEM_REASONING : ITEM_MESSAGE;
	tf_bytes *b = reasoning ? &r->reasoning : &r->answer;
	int rc;

	if (!reasoning && !r->n_reasoning && r->reasoning.len)
		r->n_reasoning = r->n_gen;      /* its tokens: those up to the answer's */
	if (!r->job->stream)
		return tf_bytes_append(b, text, len) ? tf_diag_set(TF_ERR_NOMEM, "out of memory") :
		       TF_OK;
	if ((rc = begin(s, r)) ||
	    (r->item_open != (int)k && ((rc = close_item(s, r)) || (rc = open_item(s, r, k)))))
		return rc;
	if (tf_bytes_append(b, text, len))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	cJSON *o = at_index(r, cJSON_CreateObject());
	char *t = strndup(text, len);
	if (!o || !t || !cJSON_AddStringToObject(o, "delta", t)) {
		free(t);
		cJSON_Delete(o);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	free(t);
	return event(s, r, reasoning ? "response.reasoning_text.delta" :
		     "response.output_text.delta", o);
}

int serve_resp_tool_call(serve *s, serve_req *r, const tf_val *call)
{
	cJSON *o, *it;
	int rc;

	if (!r->n_reasoning && r->reasoning.len)
		r->n_reasoning = r->n_gen;
	if (!r->job->stream)
		return TF_OK;
	if ((rc = begin(s, r)) || (rc = close_item(s, r)))
		return rc;
	int at = r->n_items++;
	const char *args = tf_val_as_str(tf_val_dict_get(tf_val_dict_get(call, "function"),
							 "arguments"), NULL);
	char id[80];
	item_id(r, at, id, sizeof(id));
	const char *type[] = { "response.output_item.added",
			       "response.function_call_arguments.delta",
			       "response.function_call_arguments.done",
			       "response.output_item.done" };
	for (int e = 0; !rc && e < 4; e++) {
		o = cJSON_CreateObject();
		bool ok = o && cJSON_AddNumberToObject(o, "output_index", at);
		if (e == 0 || e == 3) {
			it = serve_resp_call(r, call, at, e ? "completed" : "in_progress");
			ok = ok && it && cJSON_AddItemToObject(o, "item", it);
		} else {
			ok = ok && cJSON_AddStringToObject(o, "item_id", id) &&
			     cJSON_AddStringToObject(o, e == 1 ? "delta" : "arguments",
						     args ? args : "{}");
		}
		rc = ok ? event(s, r, type[e], o) : tf_diag_set(TF_ERR_NOMEM, "out of memory");
		if (!ok)
			cJSON_Delete(o);
	}
	return rc;
}

int serve_resp_end(serve *s, serve_req *r)
{
	const char *status = strcmp(r->finish, "length") ? "completed" : "incomplete";
	cJSON *o;
	int rc;

	if (r->reasoning.len && !r->n_reasoning)
		r->n_reasoning = r->n_gen;      /* it never closed */
	if (!r->job->stream) {
		char *text = NULL;
		o = response(s, r, status);
		text = o ? cJSON_PrintUnformatted(o) : NULL;
		cJSON_Delete(o);
		rc = text ? serve_put_event(s, r->job, NULL, text) :
		     tf_diag_set(TF_ERR_NOMEM, "out of memory");
		cJSON_free(text);
		return rc;
	}
	if ((rc = begin(s, r)) || (rc = close_item(s, r)))
		return rc;
	return event(s, r, !strcmp(status, "completed") ? "response.completed" :
		     "response.incomplete", with_response(s, r, status));
}
