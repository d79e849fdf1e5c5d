/* emit.c - responses as OpenAI writes them: JSON bodies and SSE chunks. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "tf/diag.h"

static const char *err_type(int status)
{
	switch (status) {
	case 401: return "authentication_error";
	case 404: return "not_found_error";
	case 429: return "rate_limit_error";
	case 503: return "service_unavailable";
	default: return status >= 500 ? "server_error" : "invalid_request_error";
	}
}

/* error.code where the failure does not name its own. */
static const char *err_code(int status)
{
	switch (status) {
	case 400: return "invalid_request";
	case 401: return "invalid_api_key";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 413: return "request_too_large";
	case 429: return "rate_limit_exceeded";
	case 503: return "service_unavailable";
	default: return "server_error";
	}
}

char *serve_err_json(const serve_err *err)
{
	cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
	char *s = NULL;

	if (e && cJSON_AddStringToObject(e, "message", err->msg) &&
	    cJSON_AddStringToObject(e, "type", err_type(err->status)) &&
	    (err->param ? cJSON_AddStringToObject(e, "param", err->param) :
			  cJSON_AddNullToObject(e, "param")) &&
	    cJSON_AddStringToObject(e, "code", err->code ? err->code : err_code(err->status)))
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/* {"id", "object", "created", "model"}: every response starts so. */
static cJSON *head(const serve *s, const serve_job *j, const char *object)
{
	cJSON *o = cJSON_CreateObject();

	if (o && cJSON_AddStringToObject(o, "id", j->id) &&
	    cJSON_AddStringToObject(o, "object", object) &&
	    cJSON_AddNumberToObject(o, "created", (double)j->created) &&
	    cJSON_AddStringToObject(o, "model", s->model_name))
		return o;
	cJSON_Delete(o);
	return NULL;
}

/* r's choice, with its finish_reason (NULL: null). */
static cJSON *choice(const serve_req *r, const char *finish)
{
	cJSON *c = cJSON_CreateObject();

	if (c && cJSON_AddNumberToObject(c, "index", r->index) &&
	    cJSON_AddNullToObject(c, "logprobs") &&
	    (finish ? cJSON_AddStringToObject(c, "finish_reason", finish) :
		      cJSON_AddNullToObject(c, "finish_reason")))
		return c;
	cJSON_Delete(c);
	return NULL;
}

/* With prompt_tokens_details.cached_tokens: the prompt tokens kept
 * sequences spared, as OpenAI counts its own prompt caching. */
static bool add_usage(cJSON *o, const serve_job *j)
{
	cJSON *u = cJSON_AddObjectToObject(o, "usage"), *d;
	int64_t gen = 0, cached = 0;

	for (int i = 0; i < j->n; i++) {
		gen += j->req[i]->n_gen;
		cached += j->req[i]->fork_of ? 0 : j->req[i]->cached;
	}
	return u && cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->prompt_tokens) &&
	       cJSON_AddNumberToObject(u, "completion_tokens", (double)gen) &&
	       cJSON_AddNumberToObject(u, "total_tokens", (double)(j->prompt_tokens + gen)) &&
	       (d = cJSON_AddObjectToObject(u, "prompt_tokens_details")) &&
	       cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
}

int serve_put_event(serve *s, serve_job *j, const char *type, const char *text)
{
	int rc = TF_OK;

	pthread_mutex_lock(&s->lock);
	if (!j->failed && ((type && (tf_bytes_append(&j->out, "event: ", 7) ||
				     tf_bytes_append(&j->out, type, strlen(type)) ||
				     tf_bytes_append(&j->out, "\n", 1))) ||
			   (j->stream && tf_bytes_append(&j->out, "data: ", 6)) ||
			   tf_bytes_append(&j->out, text, strlen(text)) ||
			   (j->stream && tf_bytes_append(&j->out, "\n\n", 2))))
		rc = tf_diag_set(TF_ERR_NOMEM, "out of memory");
	pthread_cond_broadcast(&s->progress);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* o (consumed) into the job's out: a "data: " line when streaming, else
 * the body. */
static int put(serve *s, serve_job *j, cJSON *o)
{
	char *text = o ? cJSON_PrintUnformatted(o) : NULL;
	int rc;

	cJSON_Delete(o);
	if (!text)
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	rc = serve_put_event(s, j, NULL, text);
	cJSON_free(text);
	return rc;
}

/* Legacy completions' logprobs: the entries (consumed) as columns, each
 * token's alternatives a {token: logprob} object, where the likelier of
 * two that decode alike keeps the key. */
static cJSON *columns(cJSON *entries)
{
	cJSON *lp = cJSON_CreateObject(), *e, *a;
	cJSON *toks = cJSON_AddArrayToObject(lp, "tokens");
	cJSON *lps = cJSON_AddArrayToObject(lp, "token_logprobs");
	cJSON *tops = cJSON_AddArrayToObject(lp, "top_logprobs");
	cJSON *offs = cJSON_AddArrayToObject(lp, "text_offset");
	bool ok = toks && lps && tops && offs;

	cJSON_ArrayForEach(e, entries) {
		bool none = !cJSON_GetObjectItem(e, "top_logprobs");
		cJSON *alts = none ? cJSON_CreateNull() : cJSON_CreateObject();
		ok = ok && cJSON_AddItemToArray(tops, alts);
		if (!ok) {
			cJSON_Delete(alts);
			break;
		}
		cJSON_ArrayForEach(a, cJSON_GetObjectItem(e, "top_logprobs")) {
			const char *t = cJSON_GetObjectItem(a, "token")->valuestring;
			if (!cJSON_GetObjectItemCaseSensitive(alts, t))
				ok = ok && cJSON_AddNumberToObject(alts, t, cJSON_GetObjectItem(
						       a, "logprob")->valuedouble);
		}
		ok = ok && cJSON_AddItemToArray(toks, cJSON_DetachItemFromObject(e, "token")) &&
		     cJSON_AddItemToArray(lps, cJSON_DetachItemFromObject(e, "logprob")) &&
		     cJSON_AddItemToArray(offs, cJSON_DetachItemFromObject(e, "text_offset"));
	}
	cJSON_Delete(entries);
	if (!ok) {
		cJSON_Delete(lp);
		return NULL;
	}
	return lp;
}

/* The logprob entries gathered so far into c's "logprobs", when asked
 * for; a chunk that carries no token keeps null, as OpenAI's does. */
static bool take_logprobs(serve_req *r, cJSON *c)
{
	cJSON *lp, *content = r->lp;

	if (!r->logprobs || (r->job->stream && !content))
		return true;
	r->lp = NULL;
	if (!content)
		content = cJSON_CreateArray();
	if (r->job->kind == SERVE_COMPLETION) {
		lp = content ? columns(content) : NULL;
		if (!lp || !cJSON_ReplaceItemInObject(c, "logprobs", lp)) {
			cJSON_Delete(lp);
			return false;
		}
		return true;
	}
	lp = cJSON_CreateObject();
	if (!content || !lp || !cJSON_AddItemToObject(lp, "content", content)) {
		cJSON_Delete(content);
		cJSON_Delete(lp);
		return false;
	}
	if (!cJSON_AddNullToObject(lp, "refusal") ||
	    !cJSON_ReplaceItemInObject(c, "logprobs", lp)) {
		cJSON_Delete(lp);
		return false;
	}
	return true;
}

/* A chunk whose one choice, r's, is filled by the caller: *c, NULL on
 * failure. */
static cJSON *chunk(const serve *s, serve_req *r, const char *finish, cJSON **c)
{
	const serve_job *j = r->job;
	cJSON *o = head(s, j, j->kind == SERVE_CHAT ? "chat.completion.chunk" :
			"text_completion");
	cJSON *list = o ? cJSON_AddArrayToObject(o, "choices") : NULL;

	*c = list ? choice(r, finish) : NULL;
	if (*c && !cJSON_AddItemToArray(list, *c)) {
		cJSON_Delete(*c);
		*c = NULL;
	}
	if (*c && !take_logprobs(r, *c))
		*c = NULL;
	/* With include_usage every chunk says "usage": null but the last. */
	if (*c && j->include_usage && !cJSON_AddNullToObject(o, "usage"))
		*c = NULL;
	return o;
}

static cJSON *add_text(cJSON *o, const char *key, const char *text, size_t len)
{
	char *t = strndup(text, len);
	cJSON *v = t ? cJSON_AddStringToObject(o, key, t) : NULL;

	free(t);
	return v;
}

/* {"token", "logprob", "bytes"} of token id; a NaN logprob is null. */
static cJSON *lp_entry(const serve *s, int32_t id, double logprob)
{
	cJSON *e = cJSON_CreateObject(), *bytes = NULL;
	tf_bytes text = { 0 };
	size_t len = 0;
	const char *p = tf_tok_piece(s->tok, id, &len);

	if (e && p && !tf_tok_decode(s->tok, &id, 1, 0, &text) &&
	    add_text(e, "token", text.p ? text.p : "", text.len) &&
	    (isnan(logprob) ? cJSON_AddNullToObject(e, "logprob") :
			      cJSON_AddNumberToObject(e, "logprob", logprob)))
		bytes = cJSON_AddArrayToObject(e, "bytes");
	tf_bytes_free(&text);
	for (size_t i = 0; bytes && i < len; i++) {
		cJSON *b = cJSON_CreateNumber((unsigned char)p[i]);
		if (!cJSON_AddItemToArray(bytes, b)) {
			cJSON_Delete(b);
			bytes = NULL;
		}
	}
	if (!bytes) {
		cJSON_Delete(e);
		return NULL;
	}
	return e;
}

int serve_emit_logprob(serve *s, serve_req *r, int32_t t, const float *row, int64_t offset)
{
	int32_t top[20];
	int k = 0, want = row ? r->top_logprobs : 0;
	float max = row ? row[0] : 0;
	double sum = 0, lse = 0;
	cJSON *e, *alts = NULL;

	for (int i = 1; row && i < s->n_vocab; i++)
		max = row[i] > max ? row[i] : max;
	for (int i = 0; row && i < s->n_vocab; i++) {
		sum += exp((double)row[i] - max);
		/* The `want` likeliest so far, best first: one pass, no sort. */
		if (want && (k < want || row[i] > row[top[k - 1]])) {
			int j = k < want ? k++ : k - 1;
			for (; j > 0 && row[top[j - 1]] < row[i]; j--)
				top[j] = top[j - 1];
			top[j] = i;
		}
	}
	/* Of the model's own distribution, before temperature and the cuts. */
	if (row)
		lse = max + log(sum);
	if (!r->lp && !(r->lp = cJSON_CreateArray()))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	e = lp_entry(s, t, row ? row[t] - lse : NAN);
	/* A completion's token stands at this character of the text. */
	if (e && r->job->kind == SERVE_COMPLETION &&
	    !cJSON_AddNumberToObject(e, "text_offset", (double)offset)) {
		cJSON_Delete(e);
		e = NULL;
	}
	if (e && row)
		alts = cJSON_AddArrayToObject(e, "top_logprobs");
	for (int i = 0; alts && i < k; i++) {
		cJSON *a = lp_entry(s, top[i], row[top[i]] - lse);
		if (!cJSON_AddItemToArray(alts, a)) {
			cJSON_Delete(a);
			alts = NULL;
		}
	}
	if (!e || (row && !alts) || !cJSON_AddItemToArray(r->lp, e)) {
		cJSON_Delete(e);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	return TF_OK;
}

int serve_emit_text(serve *s, serve_req *r, bool reasoning, const char *text, size_t len)
{
	cJSON *c, *o, *d;

	if (r->job->kind == SERVE_RESPONSES)
		return serve_resp_text(s, r, reasoning, text, len);
	if (!r->job->stream) {
		tf_bytes *b = reasoning ? &r->reasoning : &r->answer;
		return tf_bytes_append(b, text, len) ? tf_diag_set(TF_ERR_NOMEM, "out of memory")
						     : TF_OK;
	}
	o = chunk(s, r, NULL, &c);
	if (r->job->kind == SERVE_COMPLETION) {
		if (c && !add_text(c, "text", text, len))
			c = NULL;
	} else if (c) {
		d = cJSON_AddObjectToObject(c, "delta");
		/* The first delta names the role, as OpenAI's does. */
		if (!d || (!r->n_chunks && !cJSON_AddStringToObject(d, "role", "assistant")) ||
		    !add_text(d, reasoning ? "reasoning_content" : "content", text, len))
			c = NULL;
	}
	r->n_chunks++;
	if (!c) {
		cJSON_Delete(o);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	return put(s, r->job, o);
}

int serve_emit_tool_call(serve *s, serve_req *r, tf_val *call)
{
	char id[64];
	size_t k = tf_val_len(r->calls);
	tf_bytes json = { 0 };
	cJSON *o, *c, *d, *list, *item = NULL;

	snprintf(id, sizeof(id), "call_%s_%d_%zu", r->job->id, r->index, k);
	if (tf_val_dict_set(call, "id", 2, tf_val_cstr(id)) ||
	    tf_val_list_push(r->calls, tf_val_ref(call)))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	if (r->job->kind == SERVE_RESPONSES)
		return serve_resp_tool_call(s, r, call);
	if (!r->job->stream)
		return TF_OK;
	o = chunk(s, r, NULL, &c);
	if (!tf_val_dump_json(call, &json))
		item = cJSON_ParseWithLength(json.p, json.len);
	tf_bytes_free(&json);
	d = c ? cJSON_AddObjectToObject(c, "delta") : NULL;
	list = d ? cJSON_AddArrayToObject(d, "tool_calls") : NULL;
	if (!list || !item || !cJSON_AddNumberToObject(item, "index", (double)k) ||
	    (!r->n_chunks && !cJSON_AddStringToObject(d, "role", "assistant")) ||
	    !cJSON_AddItemToArray(list, item)) {
		cJSON_Delete(item);
		cJSON_Delete(o);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	r->n_chunks++;
	return put(s, r->job, o);
}

/* r's whole choice, for the non-streaming body. */
static cJSON *whole(serve_req *r)
{
	cJSON *c = choice(r, r->finish);
	bool ok = c && take_logprobs(r, c);

	if (ok && r->job->kind == SERVE_COMPLETION) {
		ok = add_text(c, "text", r->answer.p ? r->answer.p : "", r->answer.len);
	} else if (ok) {
		tf_val *msg = NULL;
		tf_bytes json = { 0 };
		cJSON *m = NULL;
		if (!tf_reply_message(&r->reasoning, &r->answer, r->calls, &msg) &&
		    !tf_val_dump_json(msg, &json))
			m = cJSON_ParseWithLength(json.p, json.len);
		ok = m && cJSON_AddItemToObject(c, "message", m);
		if (!ok)
			cJSON_Delete(m);
		tf_bytes_free(&json);
		tf_val_unref(msg);
	}
	if (!ok) {
		cJSON_Delete(c);
		return NULL;
	}
	return c;
}

/* The non-streaming body: every choice in index order, and the usage. */
static cJSON *body(const serve *s, serve_job *j)
{
	cJSON *o = head(s, j, j->kind == SERVE_CHAT ? "chat.completion" : "text_completion");
	cJSON *list = o ? cJSON_AddArrayToObject(o, "choices") : NULL;
	bool ok = list && add_usage(o, j);

	for (int i = 0; ok && i < j->n; i++) {
		ok = j->req[i]->choice && cJSON_AddItemToArray(list, j->req[i]->choice);
		if (ok)
			j->req[i]->choice = NULL;
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* The streamed reply's last chunk of r's choice. */
static int last_chunk(serve *s, serve_req *r)
{
	cJSON *o, *c = NULL, *d;

	o = chunk(s, r, r->finish, &c);
	if (r->job->kind == SERVE_COMPLETION) {
		if (c && !cJSON_AddStringToObject(c, "text", ""))
			c = NULL;
	} else if (c) {
		d = cJSON_AddObjectToObject(c, "delta");
		if (!d || (!r->n_chunks && !cJSON_AddStringToObject(d, "role", "assistant")))
			c = NULL;
	}
	if (!c) {
		cJSON_Delete(o);
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	}
	return put(s, r->job, o);
}

int serve_emit_end(serve *s, serve_req *r)
{
	serve_job *j = r->job;
	int rc;

	if (j->kind == SERVE_RESPONSES)     /* one choice: no n there */
		return serve_resp_end(s, r);
	if (j->stream)
		rc = last_chunk(s, r);
	else
		rc = (r->choice = whole(r)) ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "out of memory");
	if (rc || ++j->n_ended < j->n)
		return rc;
	if (!j->stream)
		return put(s, j, body(s, j));
	if (j->include_usage) {
		cJSON *o = head(s, j, j->kind == SERVE_CHAT ? "chat.completion.chunk" :
				"text_completion");
		if (!o || !cJSON_AddArrayToObject(o, "choices") || !add_usage(o, j)) {
			cJSON_Delete(o);
			return tf_diag_set(TF_ERR_NOMEM, "out of memory");
		}
		if ((rc = put(s, j, o)))
			return rc;
	}
	pthread_mutex_lock(&s->lock);
	if (!j->failed && tf_bytes_append(&j->out, "data: [DONE]\n\n", 14))
		rc = tf_diag_set(TF_ERR_NOMEM, "out of memory");
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int serve_emit_error(serve *s, serve_req *r, int status, const char *msg)
{
	serve_job *j = r->job;
	serve_err err;
	serve_fail(&err, status, NULL, "%s", msg);
	char *text = serve_err_json(&err);
	int rc = TF_OK;
	if (!text)
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	pthread_mutex_lock(&s->lock);
	if (!j->failed) {
		/* Chat's streams end with [DONE]; a Responses stream's events are
		 * typed, its last the "error". */
		bool responses = j->kind == SERVE_RESPONSES;
		if (!j->stream)
			j->out.len = 0;         /* the error alone */
		if ((j->stream && tf_bytes_append(&j->out, responses ? "event: error\ndata: " :
						  "data: ", responses ? 19 : 6)) ||
		    tf_bytes_append(&j->out, text, strlen(text)) ||
		    (j->stream && (responses ? tf_bytes_append(&j->out, "\n\n", 2) :
				   tf_bytes_append(&j->out, "\n\ndata: [DONE]\n\n", 16))))
			rc = tf_diag_set(TF_ERR_NOMEM, "out of memory");
		j->failed = status;
		j->gone = true;         /* its other choices stop */
	}
	pthread_cond_broadcast(&s->progress);
	pthread_mutex_unlock(&s->lock);
	free(text);
	return rc;
}

/* The model as /v1/models lists it. */
static cJSON *model(const serve *s)
{
	cJSON *m = cJSON_CreateObject();

	if (m && cJSON_AddStringToObject(m, "id", s->model_name) &&
	    cJSON_AddStringToObject(m, "object", "model") &&
	    cJSON_AddNumberToObject(m, "created", (double)s->created) &&
	    cJSON_AddStringToObject(m, "owned_by", "tensorfold") &&
	    cJSON_AddNumberToObject(m, "max_model_len", (double)tf_engine_context(s->e)))
		return m;
	cJSON_Delete(m);
	return NULL;
}

char *serve_models_json(const serve *s)
{
	cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "data");
	cJSON *m = model(s);
	char *text = NULL;

	if (list && m && cJSON_AddItemToArray(list, m)) {
		if (cJSON_AddStringToObject(o, "object", "list"))
			text = cJSON_PrintUnformatted(o);
	} else {
		cJSON_Delete(m);
	}
	cJSON_Delete(o);
	return text;
}

char *serve_model_json(const serve *s)
{
	cJSON *m = model(s);
	char *text = m ? cJSON_PrintUnformatted(m) : NULL;

	cJSON_Delete(m);
	return text;
}
