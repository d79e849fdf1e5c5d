/* reply.c - see tf/reply.h. */
#include "tf/reply.h"

#include <math.h>
#include <string.h>

#include "tf/diag.h"
#include "tf/utf8.h"

enum { START, REASONING, ANSWER, CALL };

static const char think_open[] = "<think>", think_close[] = "</think>",
		  call_open[] = "<tool_call>", call_close[] = "</tool_call>";

/* What ends each state (START is handled on its own). */
static const char *const ends[][2] = {
	[REASONING] = { think_close, call_open },
	[ANSWER] = { call_open, NULL },
	[CALL] = { call_close, NULL },
};

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "chat reply: out of memory");
}

void tf_reply_init(tf_reply *r, bool thinking, tf_reply_fn fn, void *ctx)
{
	memset(r, 0, sizeof(*r));
	r->state = thinking ? REASONING : START;
	r->fn = fn;
	r->ctx = ctx;
}

void tf_reply_free(tf_reply *r)
{
	tf_bytes_free(&r->hold);
	tf_bytes_free(&r->call);
}

static int emit_text(tf_reply *r, tf_reply_part part, const char *p, size_t n)
{
	tf_reply_event ev = { .part = part, .text = p, .len = n };

	return n ? r->fn(r->ctx, &ev) : TF_OK;
}

/* Where m first occurs in p[0..n), or n. */
static size_t find(const char *p, size_t n, const char *m)
{
	size_t k = strlen(m), i;

	for (i = 0; i + k <= n; i++)
		if (p[i] == m[0] && !memcmp(p + i, m, k))
			return i;
	return n;
}

/* Length of the longest tail of p[0..n) that begins m. */
static size_t partial(const char *p, size_t n, const char *m)
{
	size_t l;

	for (l = strlen(m) - 1 < n ? strlen(m) - 1 : n; l > 0; l--)
		if (!memcmp(p + n - l, m, l))
			return l;
	return 0;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && memchr(" \t\r\n", *p, 4))
		p++;
	return p;
}

/* p[0..n) begins with m: moves past it. */
static bool take(const char **p, const char *end, const char *m)
{
	size_t k = strlen(m);

	if ((size_t)(end - *p) < k || memcmp(*p, m, k))
		return false;
	*p += k;
	return true;
}

/* The text up to marker m (moving past it), or false. */
static bool upto(const char **p, const char *end, const char *m, const char **s, size_t *n)
{
	size_t at = find(*p, (size_t)(end - *p), m);

	if (at == (size_t)(end - *p))
		return false;
	*s = *p;
	*n = at;
	*p += at + strlen(m);
	return true;
}

/* v holds no NaN or infinity, which JSON cannot write. */
static bool all_finite(const tf_val *v)
{
	tf_val_kind kind = tf_val_kind_of(v);

	if (kind == TF_VAL_FLOAT)
		return isfinite(tf_val_as_float(v));
	if (kind == TF_VAL_LIST || kind == TF_VAL_DICT)
		for (size_t i = 0; i < tf_val_len(v); i++)
			if (!all_finite(tf_val_at(v, i)))
				return false;
	return true;
}

/* An argument value: typed when it parses as finite JSON, else the text. */
static tf_val *arg_value(const char *s, size_t n)
{
	tf_val *v;

	if (tf_val_parse_json(s, n, &v) == TF_OK) {
		if (all_finite(v))
			return v;
		tf_val_unref(v);
	}
	tf_diag_clear();
	return tf_val_str(s, n);
}

/* Parses "NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>..." into
 * name and a DICT; TF_ERR_FORMAT when it is not that shape. */
static int parse_call(const char *p, size_t n, const char **name, size_t *name_len,
		      tf_val **args)
{
	const char *end = p + n, *k, *v;
	size_t kn, vn, nl, tag, bad;
	int rc = TF_OK;

	if (!tf_utf8_valid(p, n, &bad))     /* the arguments must be JSON text */
		return TF_ERR_FORMAT;
	*name = p = skip_ws(p, end);
	nl = find(p, (size_t)(end - p), "\n");
	tag = find(p, (size_t)(end - p), "<arg_key>");
	*name_len = nl < tag ? nl : tag;
	p += *name_len;
	while (*name_len && memchr(" \t\r", (*name)[*name_len - 1], 3))
		(*name_len)--;
	if (!*name_len)
		return TF_ERR_FORMAT;
	if (!(*args = tf_val_dict()))
		return nomem();
	while ((p = skip_ws(p, end)) < end && !rc) {
		tf_val *val;

		bool ok = take(&p, end, "<arg_key>") && upto(&p, end, "</arg_key>", &k, &kn);

		p = skip_ws(p, end);
		if (!ok || !take(&p, end, "<arg_value>") || !upto(&p, end, "</arg_value>", &v, &vn))
			rc = TF_ERR_FORMAT;
		else if (!(val = arg_value(v, vn)) || tf_val_dict_set(*args, k, kn, val))
			rc = nomem();
	}
	if (rc) {
		tf_val_unref(*args);
		*args = NULL;
	}
	return rc;
}

/* A block that is not a call: its opening, and the "\n" before it, as text. */
static int emit_open(tf_reply *r)
{
	int rc = r->nl ? emit_text(r, TF_REPLY_ANSWER, "\n", 1) : TF_OK;

	r->nl = false;
	return rc ? rc : emit_text(r, TF_REPLY_ANSWER, call_open, strlen(call_open));
}

/* The end of a <tool_call> block: a call, or the block as answer text. */
static int end_call(tf_reply *r)
{
	tf_reply_event ev = { .part = TF_REPLY_TOOL_CALL };
	tf_bytes json = { 0 };
	tf_val *args = NULL;
	int rc = parse_call(r->call.p ? r->call.p : "", r->call.len, &ev.name, &ev.name_len, &args);

	if (rc == TF_ERR_FORMAT) {
		if ((rc = emit_open(r)) ||
		    (rc = emit_text(r, TF_REPLY_ANSWER, r->call.p, r->call.len)))
			goto cleanup;
		rc = emit_text(r, TF_REPLY_ANSWER, call_close, strlen(call_close));
		goto cleanup;
	}
	if (rc)
		goto cleanup;
	if (tf_val_dump_json(args, &json)) {
		rc = nomem();
		goto cleanup;
	}
	ev.arguments = json.p;
	ev.args_len = json.len;
	rc = r->fn(r->ctx, &ev);
cleanup:
	r->call.len = 0;
	r->nl = false;
	tf_val_unref(args);
	tf_bytes_free(&json);
	return rc;
}

/* Text of the current state up to a marker or the held tail. */
static int take_text(tf_reply *r, const char *p, size_t n)
{
	if (r->state == CALL)
		return tf_bytes_append(&r->call, p, n) ? nomem() : TF_OK;
	return emit_text(r, r->state == REASONING ? TF_REPLY_REASONING : TF_REPLY_ANSWER, p, n);
}

/* How much of the tail of p[0..n) to hold back in the current state. */
static size_t held(const tf_reply *r, const char *p, size_t n)
{
	size_t keep = 0, k, i;

	for (i = 0; i < 2 && ends[r->state][i]; i++)
		if ((k = partial(p, n, ends[r->state][i])) > keep)
			keep = k;
	/* The "\n" before a call is the template's. */
	if (r->state == ANSWER && keep < n && p[n - keep - 1] == '\n')
		keep++;
	return keep;
}

static int scan(tf_reply *r, const char *p, size_t n, bool final)
{
	int rc;

	while (n || (final && r->state == START)) {
		const char *m = NULL;
		size_t at = n, i, k, cut;

		if (r->state == START) {
			k = n < strlen(think_open) ? n : strlen(think_open);
			if (!final && k < strlen(think_open) && !memcmp(p, think_open, k))
				break;          /* too short to tell */
			r->state = ANSWER;
			if (k == strlen(think_open) && !memcmp(p, think_open, k)) {
				r->state = REASONING;
				p += k;
				n -= k;
			}
			continue;
		}
		for (i = 0; i < 2 && ends[r->state][i]; i++)
			if ((k = find(p, n, ends[r->state][i])) < at) {
				at = k;
				m = ends[r->state][i];
			}
		if (!m) {
			cut = final ? n : n - held(r, p, n);
			if ((rc = take_text(r, p, cut)))
				return rc;
			p += cut;
			n -= cut;
			break;
		}
		cut = at;
		if (m == call_open) {
			r->nl = r->state == ANSWER && at && p[at - 1] == '\n';
			cut -= r->nl;
		}
		if ((rc = take_text(r, p, cut)))
			return rc;
		if (m == call_close && (rc = end_call(r)))
			return rc;
		r->state = m == call_open ? CALL : ANSWER;
		p += at + strlen(m);
		n -= at + strlen(m);
	}
	r->hold.len = 0;
	return n && tf_bytes_append(&r->hold, p, n) ? nomem() : TF_OK;
}

int tf_reply_push(tf_reply *r, const char *text, size_t len)
{
	tf_bytes buf = r->hold;
	int rc;

	if (!buf.len)
		return scan(r, text, len, false);
	r->hold = (tf_bytes){ 0 };
	if (tf_bytes_append(&buf, text, len))
		rc = nomem();
	else
		rc = scan(r, buf.p, buf.len, false);
	tf_bytes_free(&buf);
	return rc;
}

int tf_reply_finish(tf_reply *r)
{
	tf_bytes buf = r->hold;
	int rc;

	r->hold = (tf_bytes){ 0 };
	rc = scan(r, buf.p ? buf.p : "", buf.len, true);
	tf_bytes_free(&buf);
	if (!rc && r->state == CALL) {  /* never closed: it was text */
		if (!(rc = emit_open(r)))
			rc = emit_text(r, TF_REPLY_ANSWER, r->call.p, r->call.len);
		r->call.len = 0;
		r->state = ANSWER;
	}
	return rc;
}

/* ---- the reply as a message ---- */

int tf_reply_tool_call(const tf_reply_event *ev, tf_val **call)
{
	tf_val *fn = tf_val_dict();

	*call = tf_val_dict();
	if (!*call || tf_val_dict_set(*call, "type", 4, tf_val_cstr("function")) ||
	    tf_val_dict_set(*call, "function", 8, tf_val_ref(fn)) ||
	    tf_val_dict_set(fn, "name", 4, tf_val_str(ev->name, ev->name_len)) ||
	    tf_val_dict_set(fn, "arguments", 9, tf_val_str(ev->arguments, ev->args_len))) {
		tf_val_unref(fn);
		tf_val_unref(*call);
		*call = NULL;
		return nomem();
	}
	tf_val_unref(fn);
	return TF_OK;
}

int tf_reply_message(const tf_bytes *reasoning, const tf_bytes *answer, tf_val *calls,
		     tf_val **msg)
{
	*msg = tf_val_dict();
	if (!*msg || tf_val_dict_set(*msg, "role", 4, tf_val_cstr("assistant")) ||
	    tf_val_dict_set(*msg, "content", 7, tf_val_str(answer->p ? answer->p : "", answer->len)) ||
	    (reasoning->len && tf_val_dict_set(*msg, "reasoning_content", 17,
					       tf_val_str(reasoning->p, reasoning->len))) ||
	    (tf_val_len(calls) && tf_val_dict_set(*msg, "tool_calls", 10, tf_val_ref(calls)))) {
		tf_val_unref(*msg);
		*msg = NULL;
		return nomem();
	}
	return TF_OK;
}

typedef struct msg_parts {
	tf_bytes reasoning, answer;
	tf_val *calls;
} msg_parts;

static int collect(void *ctx, const tf_reply_event *ev)
{
	msg_parts *m = ctx;
	tf_val *call;
	int rc;

	if (ev->part != TF_REPLY_TOOL_CALL)
		return tf_bytes_append(ev->part == TF_REPLY_REASONING ? &m->reasoning : &m->answer,
				       ev->text, ev->len) ? nomem() : TF_OK;
	if ((rc = tf_reply_tool_call(ev, &call)))
		return rc;
	return tf_val_list_push(m->calls, call) ? nomem() : TF_OK;
}

int tf_reply_parse(const char *text, size_t len, bool thinking, tf_val **msg)
{
	msg_parts m = { .calls = tf_val_list() };
	tf_reply r;
	int rc;

	*msg = NULL;
	if (!m.calls)
		return nomem();
	tf_reply_init(&r, thinking, collect, &m);
	if (!(rc = tf_reply_push(&r, text, len)) && !(rc = tf_reply_finish(&r)))
		rc = tf_reply_message(&m.reasoning, &m.answer, m.calls, msg);
	tf_reply_free(&r);
	tf_bytes_free(&m.reasoning);
	tf_bytes_free(&m.answer);
	tf_val_unref(m.calls);
	return rc;
}
