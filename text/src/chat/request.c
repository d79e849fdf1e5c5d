/* request.c - see tf/chat.h. */
#include "tf/chat.h"

#include <stdio.h>
#include <string.h>

#include "tf/diag.h"

static const char *const roles[] = { "system", "developer", "user", "assistant", "tool" };

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "chat request: out of memory");
}

static const char *kind_name(const tf_val *v)
{
	switch (tf_val_kind_of(v)) {
	case TF_VAL_NONE: return "null";
	case TF_VAL_BOOL: return "a boolean";
	case TF_VAL_INT:
	case TF_VAL_FLOAT: return "a number";
	case TF_VAL_STR: return "a string";
	case TF_VAL_LIST: return "an array";
	case TF_VAL_DICT: return "an object";
	default: return "another value";
	}
}

/* A "wrong type" failure at `where`. */
static int want(const char *where, const char *what, const tf_val *got)
{
	return tf_diag_set(TF_ERR_INVALID, "%s: expected %s, got %s", where, what, kind_name(got));
}

/* Sets key in d to v (taken); the failure is out of memory. */
static int set(tf_val *d, const char *key, tf_val *v)
{
	return tf_val_dict_set(d, key, strlen(key), v) ? nomem() : TF_OK;
}

/* A new DICT holding the entries of src. */
static tf_val *dict_copy(const tf_val *src)
{
	tf_val *d = tf_val_dict();
	size_t i, klen;

	for (i = 0; d && i < tf_val_len(src); i++) {
		const char *k = tf_val_as_str(tf_val_key_at(src, i), &klen);
		if (tf_val_dict_set(d, k, klen, tf_val_ref(tf_val_at(src, i)))) {
			tf_val_unref(d);
			return NULL;
		}
	}
	return d;
}

/* content: a string, null, or a list of {"type": "text", "text": ...}. */
static int content_str(const tf_val *c, const char *where, tf_val **out)
{
	tf_bytes b = { 0 };
	size_t i, len;
	int rc = TF_OK;

	*out = NULL;
	if (tf_val_kind_of(c) == TF_VAL_STR) {
		*out = tf_val_ref((tf_val *)c);
		return TF_OK;
	}
	if (tf_val_kind_of(c) == TF_VAL_NONE)  /* null or absent */
		return (*out = tf_val_cstr("")) ? TF_OK : nomem();
	if (tf_val_kind_of(c) != TF_VAL_LIST)
		return want(where, "a string, an array of text parts or null", c);
	for (i = 0; i < tf_val_len(c) && !rc; i++) {
		const tf_val *part = tf_val_at(c, i), *type = tf_val_dict_get(part, "type");
		const char *t = tf_val_as_str(type, &len), *text;

		text = tf_val_as_str(tf_val_dict_get(part, "text"), &len);
		if (!t || strcmp(t, "text") || !text)
			rc = tf_diag_set(TF_ERR_INVALID, "%s[%zu]: only text parts are supported "
					 "(\"type\": \"text\" with a string \"text\")", where, i);
		else if ((i && tf_bytes_append(&b, "\n", 1)) || tf_bytes_append(&b, text, len))
			rc = nomem();
	}
	if (!rc && !(*out = tf_val_str(b.p ? b.p : "", b.len)))
		rc = nomem();
	tf_bytes_free(&b);
	return rc;
}

/* One tool call as {"id", "type", "function": {"name", "arguments": {...}}}. */
static int check_call(const tf_val *tc, const char *where, tf_val **out)
{
	char at[160];
	const tf_val *fn = tf_val_dict_get(tc, "function"), *args;
	tf_val *f = NULL, *parsed = NULL;
	size_t len;
	const char *s;
	int rc;

	*out = NULL;
	if (tf_val_kind_of(tc) != TF_VAL_DICT)
		return want(where, "an object", tc);
	snprintf(at, sizeof(at), "%s.function", where);
	if (tf_val_kind_of(fn) != TF_VAL_DICT)
		return want(at, "an object", fn);
	snprintf(at, sizeof(at), "%s.function.name", where);
	if (tf_val_kind_of(tf_val_dict_get(fn, "name")) != TF_VAL_STR)
		return want(at, "a string", tf_val_dict_get(fn, "name"));
	snprintf(at, sizeof(at), "%s.function.arguments", where);
	args = tf_val_dict_get(fn, "arguments");
	if ((s = tf_val_as_str(args, &len))) {
		if ((rc = tf_val_parse_json(s, len, &parsed)))
			return rc == TF_ERR_NOMEM ? nomem() :
				tf_diag_prefix(TF_ERR_INVALID, "%s: not JSON", at);
	} else if (!args || tf_val_kind_of(args) == TF_VAL_NONE) {
		parsed = tf_val_dict();
	} else {
		parsed = tf_val_ref((tf_val *)args);
	}
	if (!parsed)
		return nomem();
	if (tf_val_kind_of(parsed) != TF_VAL_DICT) {
		rc = want(at, "an object (or a JSON string of one)", parsed);
		goto cleanup;
	}
	if (!(f = dict_copy(fn)) || !(*out = dict_copy(tc))) {
		rc = nomem();
		goto cleanup;
	}
	if ((rc = set(f, "arguments", tf_val_ref(parsed))) ||
	    (!tf_val_dict_get(tc, "type") && (rc = set(*out, "type", tf_val_cstr("function")))) ||
	    (rc = set(*out, "function", tf_val_ref(f)))) {
		tf_val_unref(*out);
		*out = NULL;
	}
cleanup:
	tf_val_unref(parsed);
	tf_val_unref(f);
	return rc;
}

typedef int (*check_fn)(const tf_val *item, const char *where, tf_val **out);

/* dest[key] = the list of fn(item) for each item of the LIST src. */
static int check_each(const tf_val *src, const char *where, check_fn fn, tf_val *dest,
		      const char *key)
{
	char at[128];
	tf_val *list = tf_val_list(), *v;
	size_t i;
	int rc = TF_OK;

	if (!list)
		return nomem();
	for (i = 0; i < tf_val_len(src) && !rc; i++) {
		snprintf(at, sizeof(at), "%s[%zu]", where, i);
		if (!(rc = fn(tf_val_at(src, i), at, &v)) && tf_val_list_push(list, v))
			rc = nomem();
	}
	if (rc) {
		tf_val_unref(list);
		return rc;
	}
	return set(dest, key, list);
}

static int check_calls(const tf_val *calls, const char *where, tf_val *msg)
{
	if (!calls || tf_val_kind_of(calls) == TF_VAL_NONE)
		return TF_OK;
	if (tf_val_kind_of(calls) != TF_VAL_LIST)
		return want(where, "an array", calls);
	return check_each(calls, where, check_call, msg, "tool_calls");
}

static int check_message(const tf_val *m, const char *where, tf_val **out)
{
	char at[160];
	const tf_val *role = tf_val_dict_get(m, "role"),
		     *reason = tf_val_dict_get(m, "reasoning_content");
	const char *r;
	tf_val *msg = NULL, *content;
	size_t k, len;
	int rc;

	*out = NULL;
	if (tf_val_kind_of(m) != TF_VAL_DICT)
		return want(where, "an object", m);
	snprintf(at, sizeof(at), "%s.role", where);
	if (!(r = tf_val_as_str(role, &len)))
		return want(at, "a string", role);
	for (k = 0; k < sizeof(roles) / sizeof(*roles) && strcmp(r, roles[k]); k++)
		;
	if (k == sizeof(roles) / sizeof(*roles))
		return tf_diag_set(TF_ERR_INVALID, "%s: unknown role '%s' (expected system, "
				   "developer, user, assistant or tool)", at, r);
	snprintf(at, sizeof(at), "%s.reasoning_content", where);
	if (tf_val_kind_of(reason) != TF_VAL_NONE && tf_val_kind_of(reason) != TF_VAL_STR)
		return want(at, "a string or null", reason);
	snprintf(at, sizeof(at), "%s.content", where);
	if ((rc = content_str(tf_val_dict_get(m, "content"), at, &content)))
		return rc;
	if (!(msg = dict_copy(m))) {
		tf_val_unref(content);
		return nomem();
	}
	/* OpenAI's newer name for the system prompt. */
	if (!strcmp(r, "developer") && (rc = set(msg, "role", tf_val_cstr("system")))) {
		tf_val_unref(content);
		tf_val_unref(msg);
		return rc;
	}
	snprintf(at, sizeof(at), "%s.tool_calls", where);
	if (!(rc = set(msg, "content", content)) &&
	    !(rc = check_calls(tf_val_dict_get(m, "tool_calls"), at, msg)) &&
	    strcmp(r, "assistant") && tf_val_len(tf_val_dict_get(msg, "tool_calls")))
		rc = tf_diag_set(TF_ERR_INVALID, "%s: only an assistant message has tool calls", at);
	if (rc)
		tf_val_unref(msg);
	else
		*out = msg;
	return rc;
}

static int check_messages(const tf_val *msgs, tf_val *req)
{
	if (tf_val_kind_of(msgs) != TF_VAL_LIST)
		return msgs ? want("messages", "an array", msgs) :
			tf_diag_set(TF_ERR_INVALID, "messages: missing");
	if (!tf_val_len(msgs))
		return tf_diag_set(TF_ERR_INVALID, "messages: empty");
	return check_each(msgs, "messages", check_message, req, "messages");
}

static int check_tools(const tf_val *tools, tf_val *req)
{
	char at[32];
	size_t i;

	if (!tools || tf_val_kind_of(tools) == TF_VAL_NONE)
		return set(req, "tools", tf_val_none());
	if (tf_val_kind_of(tools) != TF_VAL_LIST)
		return want("tools", "an array", tools);
	for (i = 0; i < tf_val_len(tools); i++) {
		snprintf(at, sizeof(at), "tools[%zu]", i);
		if (tf_val_kind_of(tf_val_at(tools, i)) != TF_VAL_DICT)
			return want(at, "an object", tf_val_at(tools, i));
	}
	return set(req, "tools", tf_val_ref((tf_val *)tools));
}

int tf_chat_request_check(const tf_val *body, tf_val **out)
{
	const tf_val *agp = tf_val_dict_get(body, "add_generation_prompt"),
		     *kw = tf_val_dict_get(body, "chat_template_kwargs");
	tf_val *req;
	int rc;

	*out = NULL;
	if (tf_val_kind_of(body) != TF_VAL_DICT)
		return want("request", "a JSON object", body);
	if (agp && tf_val_kind_of(agp) != TF_VAL_BOOL)
		return want("add_generation_prompt", "true or false", agp);
	if (kw && tf_val_kind_of(kw) != TF_VAL_NONE && tf_val_kind_of(kw) != TF_VAL_DICT)
		return want("chat_template_kwargs", "an object", kw);
	if (!(req = tf_val_dict()))
		return nomem();
	if ((rc = check_messages(tf_val_dict_get(body, "messages"), req)) ||
	    (rc = check_tools(tf_val_dict_get(body, "tools"), req)) ||
	    (rc = set(req, "add_generation_prompt", tf_val_bool(!agp || tf_val_as_bool(agp)))) ||
	    (rc = set(req, "chat_template_kwargs", tf_val_kind_of(kw) == TF_VAL_DICT ?
		      tf_val_ref((tf_val *)kw) : tf_val_dict()))) {
		tf_val_unref(req);
		return rc;
	}
	*out = req;
	return TF_OK;
}

int tf_chat_request_parse(const char *json, size_t len, tf_val **out)
{
	tf_val *body;
	int rc = tf_val_parse_json(json, len, &body);

	*out = NULL;
	if (rc)
		return rc;
	rc = tf_chat_request_check(body, out);
	tf_val_unref(body);
	return rc;
}
