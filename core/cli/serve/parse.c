/* parse.c - request bodies into requests: fields checked, prompt encoded. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"
#include "tf/chat.h"
#include "tf/diag.h"
#include "util.h"

int serve_fail(serve_err *err, int status, const char *param, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	err->status = status;
	err->param = param;
	return -1;
}

serve_req *serve_req_new(serve_kind kind)
{
	static uint64_t counter;
	serve_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->kind = kind;
	r->refs = 1;
	r->sid = -1;
	r->created = (int64_t)time(NULL);
	r->t_arrive = tf_cli_now_s();
	snprintf(r->id, sizeof(r->id), "%s-%" PRIx64 "%06" PRIx64,
		 kind == SERVE_CHAT ? "chatcmpl" : "cmpl", (uint64_t)r->created,
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	return r;
}

void serve_req_unref(serve_req *r)
{
	if (!r || --r->refs)
		return;
	tf_tokens_free(&r->prompt);
	tf_stopstr_free(&r->stopstr);
	tf_bytes_free(&r->answer);
	tf_bytes_free(&r->reasoning);
	tf_bytes_free(&r->out);
	tf_val_unref(r->calls);
	cJSON_Delete(r->lp);
	free(r);
}

/* A number field in [lo, hi] into *out; absent leaves *out. */
static int get_num(const tf_val *body, const char *key, double lo, double hi, double *out,
		   serve_err *err)
{
	const tf_val *v = tf_val_dict_get(body, key);
	tf_val_kind k = tf_val_kind_of(v);

	if (!v || k == TF_VAL_NONE)
		return 0;
	if (k != TF_VAL_INT && k != TF_VAL_FLOAT)
		return serve_fail(err, 400, key, "'%s' must be a number", key);
	double d = tf_val_as_float(v);
	if (!(d >= lo && d <= hi))
		return serve_fail(err, 400, key, "'%s' must be in [%g, %g]", key, lo, hi);
	*out = d;
	return 0;
}

static int get_int(const tf_val *body, const char *key, double lo, double hi, int64_t *out,
		   serve_err *err)
{
	const tf_val *v = tf_val_dict_get(body, key);

	if (!v || tf_val_kind_of(v) == TF_VAL_NONE)
		return 0;
	if (tf_val_kind_of(v) != TF_VAL_INT)
		return serve_fail(err, 400, key, "'%s' must be an integer", key);
	double d = (double)tf_val_as_int(v);
	if (!(d >= lo && d <= hi))
		return serve_fail(err, 400, key, "'%s' must be in [%.0f, %.0f]", key, lo, hi);
	*out = tf_val_as_int(v);
	return 0;
}

static int get_bool(const tf_val *v, const char *key, bool *out, serve_err *err)
{
	if (!v || tf_val_kind_of(v) == TF_VAL_NONE)
		return 0;
	if (tf_val_kind_of(v) != TF_VAL_BOOL)
		return serve_fail(err, 400, key, "'%s' must be a boolean", key);
	*out = tf_val_as_bool(v);
	return 0;
}

static int add_stop(serve_req *r, const tf_val *v, serve_err *err)
{
	size_t len;
	const char *s = tf_val_as_str(v, &len);

	if (!s || !len)
		return serve_fail(err, 400, "stop", "'stop' must be a non-empty string or an "
				  "array of them");
	if (tf_stopstr_add(&r->stopstr, s, len))
		return serve_fail(err, 500, NULL, "%s", tf_diag_msg());
	return 0;
}

/* The fields /v1/chat/completions and /v1/completions share. */
static int parse_common(serve *s, const tf_val *body, serve_req *r, serve_err *err)
{
	const serve_conf *c = &s->conf;
	double temp = s->sp.temperature, top_p = s->sp.top_p, min_p = s->sp.min_p;
	int64_t top_k = s->sp.top_k, seed = (int64_t)s->sp.seed, n = 1;
	const tf_val *stop = tf_val_dict_get(body, "stop");
	const tf_val *so = tf_val_dict_get(body, "stream_options");

	r->sp = s->sp;
	r->max_tokens = s->max_tokens < c->max_tokens ? s->max_tokens : c->max_tokens;
	if (get_int(body, "max_tokens", 1, (double)c->max_tokens, &r->max_tokens, err) ||
	    get_int(body, "max_completion_tokens", 1, (double)c->max_tokens, &r->max_tokens,
		    err) ||
	    get_num(body, "temperature", 0, 2, &temp, err) ||
	    get_num(body, "top_p", 0, 1, &top_p, err) ||
	    get_num(body, "min_p", 0, 1, &min_p, err) ||
	    get_int(body, "top_k", -1, 1 << 24, &top_k, err) ||
	    get_int(body, "seed", (double)INT64_MIN, (double)INT64_MAX, &seed, err) ||
	    get_int(body, "n", 1, 1, &n, err) ||
	    get_bool(tf_val_dict_get(body, "stream"), "stream", &r->stream, err))
		return -1;
	r->sp.temperature = (float)temp;
	r->sp.top_p = (float)top_p;
	r->sp.min_p = (float)min_p;
	r->sp.top_k = top_k < 0 ? 0 : (int)top_k;   /* vLLM's -1: off */
	r->sp.seed = (uint64_t)seed;
	if (so && tf_val_kind_of(so) != TF_VAL_NONE) {
		if (tf_val_kind_of(so) != TF_VAL_DICT)
			return serve_fail(err, 400, "stream_options",
					  "'stream_options' must be an object");
		if (get_bool(tf_val_dict_get(so, "include_usage"), "stream_options.include_usage",
			     &r->include_usage, err))
			return -1;
	}
	switch (tf_val_kind_of(stop)) {
	case TF_VAL_NONE:
		break;
	case TF_VAL_STR:
		return add_stop(r, stop, err);
	case TF_VAL_LIST:
		if (tf_val_len(stop) > 16)
			return serve_fail(err, 400, "stop", "at most 16 stop strings");
		for (size_t i = 0; i < tf_val_len(stop); i++)
			if (add_stop(r, tf_val_at(stop, i), err))
				return -1;
		break;
	default:
		return add_stop(r, stop, err);
	}
	return 0;
}

/* Chat's logprobs and top_logprobs; the second asks for the first, as
 * OpenAI's does. */
static int parse_logprobs(const tf_val *body, serve_req *r, serve_err *err)
{
	int64_t top = -1;

	if (get_bool(tf_val_dict_get(body, "logprobs"), "logprobs", &r->logprobs, err) ||
	    get_int(body, "top_logprobs", 0, 20, &top, err))
		return -1;
	if (top >= 0 && !r->logprobs)
		return serve_fail(err, 400, "top_logprobs",
				  "'top_logprobs' needs 'logprobs': true");
	r->top_logprobs = top < 0 ? 0 : (int)top;
	return 0;
}

/* Completions' logprobs: how many alternatives each token lists, its own
 * logprob given from 0 on. */
static int parse_legacy_logprobs(const tf_val *body, serve_req *r, serve_err *err)
{
	int64_t n = -1;

	if (get_int(body, "logprobs", 0, 20, &n, err))
		return -1;
	r->logprobs = n >= 0;
	r->top_logprobs = n < 0 ? 0 : (int)n;
	return 0;
}

/* The body as a JSON object. */
static int parse_body(const char *body, size_t len, tf_val **out, serve_err *err)
{
	if (tf_val_parse_json(body, len, out))
		return serve_fail(err, 400, NULL, "the body is not valid JSON: %s", tf_diag_msg());
	if (tf_val_kind_of(*out) != TF_VAL_DICT)
		return serve_fail(err, 400, NULL, "the body must be a JSON object");
	return 0;
}

static int check_prompt(const serve *s, const serve_req *r, serve_err *err)
{
	int64_t n = (int64_t)r->prompt.n, ctx = tf_engine_context(s->e);

	if (!n)
		return serve_fail(err, 400, NULL, "the prompt is empty");
	if (n > s->conf.max_prompt)
		return serve_fail(err, 400, NULL, "the prompt has %" PRId64 " tokens, more than "
				  "the %" PRId64 " allowed ([server] max_prompt)", n,
				  s->conf.max_prompt);
	if (n >= ctx)
		return serve_fail(err, 400, NULL, "the prompt has %" PRId64 " tokens: the "
				  "context holds %" PRId64 " with the reply", n, ctx);
	return 0;
}

/* The template's rendering of the checked request, encoded. */
static int render(serve *s, tf_val *body, serve_req *r, serve_err *err)
{
	tf_val *req = NULL, *kw = tf_val_dict_get(body, "chat_template_kwargs");
	tf_chat_prompt p = { 0 };
	int rc = 0;

	if (!kw || tf_val_kind_of(kw) == TF_VAL_NONE) {
		kw = tf_val_dict();
		if (!kw || tf_val_dict_set(body, "chat_template_kwargs", 20, kw))
			return serve_fail(err, 500, NULL, "out of memory");
	}
	if (tf_val_kind_of(kw) != TF_VAL_DICT)
		return serve_fail(err, 400, "chat_template_kwargs",
				  "'chat_template_kwargs' must be an object");
	if (!tf_val_dict_get(kw, "enable_thinking") &&
	    tf_val_dict_set(kw, "enable_thinking", 15, tf_val_bool(s->think)))
		return serve_fail(err, 500, NULL, "out of memory");
	if (tf_chat_request_check(body, &req))
		return serve_fail(err, 400, "messages", "%s", tf_diag_msg());
	pthread_mutex_lock(&s->prep);
	if (tf_chat_render(s->tmpl, req, &p) || tf_chat_prompt_encode(&p, s->tok, 0, &r->prompt))
		rc = serve_fail(err, 400, "messages", "%s", tf_diag_msg());
	pthread_mutex_unlock(&s->prep);
	r->opened = tf_chat_prompt_thinking(&p);
	tf_chat_prompt_free(&p);
	tf_val_unref(req);
	return rc;
}

int serve_parse_chat(serve *s, const char *text, size_t len, serve_req *r, serve_err *err)
{
	tf_val *body = NULL;
	int rc = parse_body(text, len, &body, err);

	if (!rc) {
		const tf_val *msgs = tf_val_dict_get(body, "messages");
		if (tf_val_kind_of(msgs) != TF_VAL_LIST || !tf_val_len(msgs))
			rc = serve_fail(err, 400, "messages", "'messages' must be a non-empty array");
		else if ((int64_t)tf_val_len(msgs) > s->conf.max_messages)
			rc = serve_fail(err, 400, "messages", "more than %" PRId64 " messages "
					"([server] max_messages)", s->conf.max_messages);
	}
	if (!rc)
		rc = parse_common(s, body, r, err);
	if (!rc)
		rc = parse_logprobs(body, r, err);
	if (!rc)
		rc = render(s, body, r, err);
	if (!rc)
		rc = check_prompt(s, r, err);
	tf_val_unref(body);
	return rc;
}

int serve_parse_completion(serve *s, const char *text, size_t len, serve_req *r,
			   serve_err *err)
{
	tf_val *body = NULL;
	int rc = parse_body(text, len, &body, err);

	if (!rc)
		rc = parse_common(s, body, r, err);
	if (!rc)
		rc = parse_legacy_logprobs(body, r, err);
	if (!rc) {
		const tf_val *p = tf_val_dict_get(body, "prompt");
		if (tf_val_kind_of(p) == TF_VAL_LIST && tf_val_len(p) == 1)
			p = tf_val_at(p, 0);
		size_t n;
		const char *str = tf_val_as_str(p, &n);
		if (!str) {
			rc = serve_fail(err, 400, "prompt", "'prompt' must be a string");
		} else {
			pthread_mutex_lock(&s->prep);
			if (tf_tok_encode(s->tok, str, n, TF_TOK_ADD_SPECIAL, &r->prompt))
				rc = serve_fail(err, 400, "prompt", "%s", tf_diag_msg());
			pthread_mutex_unlock(&s->prep);
		}
	}
	if (!rc)
		rc = check_prompt(s, r, err);
	tf_val_unref(body);
	return rc;
}
