/* parse.c - request bodies into jobs: fields checked, prompts encoded. */
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

/* The most prompts one /v1/completions request may carry. */
#define SERVE_MAX_PROMPTS 4096

int serve_fail(serve_err *err, int status, const char *param, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	err->status = status;
	err->param = param;
	err->code = NULL;
	return -1;
}

serve_job *serve_job_new(serve *s, serve_kind kind)
{
	static uint64_t counter;
	serve_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->kind = kind;
	j->srv = s;
	j->refs = 1;
	j->created = (int64_t)time(NULL);
	j->t_arrive = tf_cli_now_s();
	snprintf(j->id, sizeof(j->id), "%s%" PRIx64 "%06" PRIx64,
		 kind == SERVE_CHAT ? "chatcmpl-" : kind == SERVE_RESPONSES ? "resp_" : "cmpl-",
		 (uint64_t)j->created,
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	return j;
}

static void req_free(serve_req *r)
{
	if (!r)
		return;
	tf_tokens_free(&r->prompt);
	tf_stopstr_free(&r->stopstr);
	tf_bytes_free(&r->answer);
	tf_bytes_free(&r->reasoning);
	tf_bytes_free(&r->echoed);
	free(r->bias);
	tf_val_unref(r->calls);
	tf_grammar_state_free(r->gram);
	cJSON_Delete(r->lp);
	cJSON_Delete(r->choice);
	free(r->echo_at);
	free(r);
}

void serve_job_unref(serve_job *j)
{
	if (!j || --j->refs)
		return;
	for (int i = 0; i < j->n; i++)
		req_free(j->req[i]);
	free(j->req);
	if (j->grammar)
		serve_grammar_put(j->grammar);
	cJSON_Delete(j->echo);
	tf_bytes_free(&j->out);
	free(j);
}

/* ---- fields ---- */

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

/*
 * The fields an endpoint knows.  Those that would change the reply in a
 * way not supported are refused by name; any other field is ignored, and
 * named in the reply's X-TensorFold-Ignored header and once in the log.
 */
static const char *const known_common[] = {
	"model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "min_p",
	"top_k", "seed", "n", "stream", "stream_options", "stop", "logprobs",
	"presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
	"user", "metadata", "store", "best_of", "suffix", "echo", NULL,
};
static const char *const known_chat[] = {
	"messages", "top_logprobs", "response_format", "tools", "tool_choice",
	"parallel_tool_calls", "chat_template_kwargs", "functions", "function_call",
	"prediction", "audio", "modalities", NULL,
};
static const char *const known_completion[] = { "prompt", NULL };

static bool listed(const char *const *list, const char *key)
{
	for (; *list; list++)
		if (!strcmp(*list, key))
			return true;
	return false;
}

/* Whether the log named field k already (the table's first 32), noting
 * it (the prep lock held). */
static bool logged(serve *s, const char *k)
{
	for (int i = 0; i < s->n_logged; i++)
		if (!strncmp(s->logged[i], k, sizeof(s->logged[i]) - 1))
			return true;
	if (s->n_logged < (int)(sizeof(s->logged) / sizeof(*s->logged)))
		snprintf(s->logged[s->n_logged++], sizeof(s->logged[0]), "%s", k);
	return false;
}

void serve_note_unknown(serve *s, const tf_val *body, const char *const *known,
			const char *const *more, serve_job *j)
{
	size_t at = 0;

	for (size_t i = 0; i < tf_val_len(body); i++) {
		const char *k = tf_val_as_str(tf_val_key_at(body, i), NULL);
		if (!k || listed(known, k) || (more && listed(more, k)))
			continue;
		int w = snprintf(j->ignored + at, sizeof(j->ignored) - at, "%s%s", at ? ", " : "", k);
		if (w > 0 && (size_t)w < sizeof(j->ignored) - at)
			at += (size_t)w;
		pthread_mutex_lock(&s->prep);
		if (!logged(s, k))
			fprintf(stderr, "tfrun serve: ignoring the unknown request field '%s'\n", k);
		pthread_mutex_unlock(&s->prep);
	}
}

/* A field that is not null, or NULL. */
static const tf_val *field(const tf_val *body, const char *key)
{
	const tf_val *v = tf_val_dict_get(body, key);

	return tf_val_kind_of(v) == TF_VAL_NONE ? NULL : v;
}

/* Fields that would change the reply in ways not supported. */
static int refuse_unsupported(const tf_val *body, serve_err *err)
{
	static const char *const refused[] = {
		"suffix", "functions", "function_call", "prediction", "audio", NULL,
	};
	const tf_val *v;

	for (const char *const *k = refused; *k; k++)
		if (field(body, *k))
			return serve_fail(err, 400, *k, "'%s' is not supported", *k);
	if ((v = field(body, "modalities"))) {
		for (size_t i = 0; i < tf_val_len(v); i++) {
			const char *m = tf_val_as_str(tf_val_at(v, i), NULL);
			if (!m || strcmp(m, "text"))
				return serve_fail(err, 400, "modalities", "'modalities': only "
						  "\"text\" is supported");
		}
	}
	return 0;
}

/* logit_bias: {"token id": bias}, into r->sp (its array r's). */
static int parse_bias(const serve *s, const tf_val *body, serve_req *r, serve_err *err)
{
	const tf_val *b = field(body, "logit_bias");

	if (!b)
		return 0;
	if (tf_val_kind_of(b) != TF_VAL_DICT)
		return serve_fail(err, 400, "logit_bias", "'logit_bias' must be an object of "
				  "token ids to numbers");
	size_t n = tf_val_len(b);
	if (n > 1024)
		return serve_fail(err, 400, "logit_bias", "at most 1024 entries in 'logit_bias'");
	if (!n)
		return 0;
	tf_logit_bias *lb = calloc(n, sizeof(*lb));
	if (!lb)
		return serve_fail(err, 500, NULL, "out of memory");
	r->bias = lb;
	for (size_t i = 0; i < n; i++) {
		const char *k = tf_val_as_str(tf_val_key_at(b, i), NULL);
		const tf_val *v = tf_val_at(b, i);
		char *end;
		long id = strtol(k, &end, 10);
		if (!*k || *end || id < 0 || id >= s->n_vocab)
			return serve_fail(err, 400, "logit_bias", "logit_bias: '%s' is not a token id "
					  "(0..%d)", k, s->n_vocab - 1);
		double d = tf_val_as_float(v);
		if ((tf_val_kind_of(v) != TF_VAL_INT && tf_val_kind_of(v) != TF_VAL_FLOAT) ||
		    !(d >= -100 && d <= 100))
			return serve_fail(err, 400, "logit_bias", "logit_bias[\"%s\"] must be a "
					  "number in [-100, 100]", k);
		lb[i] = (tf_logit_bias){ .id = (int32_t)id, .bias = (float)d };
	}
	r->sp.logit_bias = lb;
	r->sp.n_logit_bias = (int)n;
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

static int parse_stop(const tf_val *body, serve_req *r, serve_err *err)
{
	const tf_val *stop = field(body, "stop");

	if (!stop)
		return 0;
	if (tf_val_kind_of(stop) != TF_VAL_LIST)
		return add_stop(r, stop, err);
	if (tf_val_len(stop) > 16)
		return serve_fail(err, 400, "stop", "at most 16 stop strings");
	for (size_t i = 0; i < tf_val_len(stop); i++)
		if (add_stop(r, tf_val_at(stop, i), err))
			return -1;
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

/* The fields every choice shares into the template t; the job's into j. */
static int parse_common(serve *s, const tf_val *body, serve_job *j, serve_req *t,
			serve_err *err)
{
	const serve_conf *c = &s->conf;
	double temp = s->sp.temperature, top_p = s->sp.top_p, min_p = s->sp.min_p;
	double pres = s->sp.presence_penalty, freq = s->sp.frequency_penalty;
	double rep = s->sp.repeat_penalty;
	int64_t top_k = s->sp.top_k, seed = (int64_t)s->sp.seed, n = 1, best_of = 1;
	const tf_val *so = field(body, "stream_options");

	t->sp = s->sp;
	t->max_tokens = -1;
	if (refuse_unsupported(body, err) ||
	    get_int(body, "max_tokens", 0, (double)c->max_tokens, &t->max_tokens, err) ||
	    get_int(body, "max_completion_tokens", 0, (double)c->max_tokens, &t->max_tokens,
		    err) ||
	    get_num(body, "temperature", 0, 2, &temp, err) ||
	    get_num(body, "top_p", 0, 1, &top_p, err) ||
	    get_num(body, "min_p", 0, 1, &min_p, err) ||
	    get_int(body, "top_k", -1, 1 << 24, &top_k, err) ||
	    get_int(body, "seed", (double)INT64_MIN, (double)INT64_MAX, &seed, err) ||
	    get_int(body, "n", 1, c->max_n, &n, err) ||
	    get_int(body, "best_of", 1, 4096, &best_of, err) ||
	    get_num(body, "presence_penalty", -2, 2, &pres, err) ||
	    get_num(body, "frequency_penalty", -2, 2, &freq, err) ||
	    get_num(body, "repetition_penalty", 0.01, 100, &rep, err) ||
	    get_bool(tf_val_dict_get(body, "stream"), "stream", &j->stream, err) ||
	    get_bool(tf_val_dict_get(body, "echo"), "echo", &t->echo, err) ||
	    parse_bias(s, body, t, err) || parse_stop(body, t, err))
		return -1;
	/* best_of = n is n; more would pick among choices by likelihood. */
	if (best_of != 1 && best_of != n)
		return serve_fail(err, 400, "best_of", "'best_of' other than 'n' is not supported");
	/* top_p 0 keeps the likeliest token alone: greedy, as vLLM has it. */
	if (top_p == 0) {
		temp = 0;
		top_p = 1;
	}
	t->sp.temperature = (float)temp;
	t->sp.top_p = (float)top_p;
	t->sp.min_p = (float)min_p;
	t->sp.top_k = top_k < 0 ? 0 : (int)top_k;   /* vLLM's -1: off */
	t->sp.seed = (uint64_t)seed;
	t->sp.presence_penalty = (float)pres;
	t->sp.frequency_penalty = (float)freq;
	t->sp.repeat_penalty = (float)rep;
	j->n_choices = (int)n;
	if (so) {
		if (tf_val_kind_of(so) != TF_VAL_DICT)
			return serve_fail(err, 400, "stream_options",
					  "'stream_options' must be an object");
		if (get_bool(tf_val_dict_get(so, "include_usage"), "stream_options.include_usage",
			     &j->include_usage, err))
			return -1;
	}
	if (t->echo && j->kind != SERVE_COMPLETION)
		return serve_fail(err, 400, "echo", "'echo' is for /v1/completions");
	if (!t->max_tokens && !t->echo)
		return serve_fail(err, 400, "max_tokens", "'max_tokens' 0 asks for nothing: it is "
				  "for scoring a prompt with 'echo'");
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

/* The prompt against the limits; max_tokens defaulted, and clipped to
 * the context the prompt leaves (said in j->notice). */
static int check_prompt(serve *s, serve_job *j, serve_req *r, int p, serve_err *err)
{
	int64_t n = (int64_t)r->prompt.n, ctx = tf_engine_context(s->e);
	int64_t room = ctx - n, dflt = s->max_tokens < s->conf.max_tokens ? s->max_tokens :
				    s->conf.max_tokens;
	char at[32] = "";

	if (j->n_prompts > 1)
		snprintf(at, sizeof(at), " %d", p);
	if (!n)
		return serve_fail(err, 400, "prompt", "the prompt%s is empty", at);
	if (room < 1) {
		serve_fail(err, 400, "prompt", "the prompt%s has %" PRId64 " tokens: the context "
			   "holds %" PRId64 " with the reply", at, n, ctx);
		err->code = "context_length_exceeded";
		return -1;
	}
	if (n > s->conf.max_prompt)
		return serve_fail(err, 400, "prompt", "the prompt%s has %" PRId64 " tokens, more "
				  "than the %" PRId64 " allowed ([server] max_prompt)", at, n,
				  s->conf.max_prompt);
	if (r->max_tokens < 0) {
		r->max_tokens = dflt < room ? dflt : room;
	} else if (r->max_tokens > room) {
		snprintf(j->notice, sizeof(j->notice), "max_tokens %" PRId64 " clipped to %"
			 PRId64 ": the context holds %" PRId64 " tokens, the prompt%s %" PRId64,
			 r->max_tokens, room, ctx, at, n);
		r->max_tokens = room;
	}
	return 0;
}

/* The GBNF of response_format (NULL in *gbnf when it asks for text). */
static int format_gbnf(const tf_val *body, char **gbnf, serve_err *err)
{
	const tf_val *rf = field(body, "response_format"), *js, *schema;
	const char *type = tf_val_as_str(tf_val_dict_get(rf, "type"), NULL);
	tf_val *obj = NULL;
	int rc;

	*gbnf = NULL;
	if (!rf || (type && !strcmp(type, "text")))
		return 0;
	if (!type || (strcmp(type, "json_object") && strcmp(type, "json_schema")))
		return serve_fail(err, 400, "response_format", "'response_format' must be "
				  "{\"type\": \"text\"}, {\"type\": \"json_object\"} or "
				  "{\"type\": \"json_schema\", \"json_schema\": {...}}");
	if (!strcmp(type, "json_object")) {
		/* Any JSON object. */
		if (!(obj = tf_val_dict()) || tf_val_dict_set(obj, "type", 4, tf_val_cstr("object"))) {
			tf_val_unref(obj);
			return serve_fail(err, 500, NULL, "out of memory");
		}
		schema = obj;
	} else {
		js = tf_val_dict_get(rf, "json_schema");
		schema = tf_val_dict_get(js, "schema");
		if (tf_val_kind_of(js) != TF_VAL_DICT || (tf_val_kind_of(schema) != TF_VAL_DICT &&
							 tf_val_kind_of(schema) != TF_VAL_BOOL))
			return serve_fail(err, 400, "response_format", "'response_format.json_schema' "
					  "must be an object with a 'schema'");
	}
	rc = tf_grammar_schema_gbnf(schema, gbnf);
	tf_val_unref(obj);
	if (rc)
		return serve_fail(err, rc == TF_ERR_NOMEM ? 500 : 400, "response_format", "%s",
				  tf_diag_msg());
	return 0;
}

/* The name of the one function tool_choice forces, "" for any ("required"),
 * or NULL when it forces none. */
static int forced_tool(const tf_val *body, const char **name, serve_err *err)
{
	const tf_val *tc = field(body, "tool_choice"), *tools = field(body, "tools");
	const char *str = tf_val_as_str(tc, NULL);

	*name = NULL;
	if (!tc || (str && (!strcmp(str, "auto") || !strcmp(str, "none"))))
		return 0;
	if (str && !strcmp(str, "required"))
		*name = "";
	else if (!(*name = tf_val_as_str(tf_val_dict_get(tf_val_dict_get(tc, "function"), "name"),
					 NULL)))
		return serve_fail(err, 400, "tool_choice", "'tool_choice' must be \"auto\", "
				  "\"none\", \"required\" or {\"type\": \"function\", "
				  "\"function\": {\"name\": ...}}");
	if (!tf_val_len(tools))
		return serve_fail(err, 400, "tool_choice", "'tool_choice' forces a tool call, but "
				  "no 'tools' are given");
	return 0;
}

/*
 * response_format, or a tool call that tool_choice forces, as the job's
 * grammar.  A constrained reply does not think unless asked to
 * (chat_template_kwargs.enable_thinking): the grammar starts at the reply.
 */
static int parse_constraint(serve *s, tf_val *body, serve_job *j, serve_err *err)
{
	const char *tool;
	char *gbnf = NULL;
	int rc;

	if (format_gbnf(body, &gbnf, err) || forced_tool(body, &tool, err)) {
		free(gbnf);
		return -1;
	}
	if (gbnf && tool) {
		free(gbnf);
		return serve_fail(err, 400, "tool_choice", "'response_format' and a forced tool "
				  "call together: one grammar or the other");
	}
	/* Several calls where parallel_tool_calls allows them (by default). */
	bool several = true;
	if (get_bool(tf_val_dict_get(body, "parallel_tool_calls"), "parallel_tool_calls",
		     &several, err))
		return -1;
	if (tool && tf_chat_tool_gbnf(field(body, "tools"), *tool ? tool : NULL, several, &gbnf))
		return serve_fail(err, 400, "tools", "%s", tf_diag_msg());
	if (!gbnf)
		return 0;
	tf_val *kw = tf_val_dict_get(body, "chat_template_kwargs");
	if (!kw || tf_val_kind_of(kw) == TF_VAL_NONE) {
		kw = tf_val_dict();
		if (!kw || tf_val_dict_set(body, "chat_template_kwargs", 20, kw))
			kw = NULL;
	}
	if (!kw || (tf_val_kind_of(kw) == TF_VAL_DICT && !tf_val_dict_get(kw, "enable_thinking") &&
		    tf_val_dict_set(kw, "enable_thinking", 15, tf_val_bool(false))))
		rc = serve_fail(err, 500, NULL, "out of memory");
	else
		rc = serve_grammar_get(s, gbnf, &j->grammar, err);
	free(gbnf);
	return rc;
}

/* The template's rendering of the checked request, encoded into t. */
static int render(serve *s, tf_val *body, serve_req *t, serve_err *err)
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
	if (tf_chat_render(s->tmpl, req, &p) || tf_chat_prompt_encode(&p, s->tok, 0, &t->prompt))
		rc = serve_fail(err, 400, "messages", "%s", tf_diag_msg());
	pthread_mutex_unlock(&s->prep);
	t->opened = tf_chat_prompt_thinking(&p);
	tf_chat_prompt_free(&p);
	tf_val_unref(req);
	return rc;
}

/* One prompt of /v1/completions into *ids: a string (encoded) or token
 * ids (checked against the vocabulary). */
static int read_prompt(serve *s, const tf_val *v, int p, tf_tokens *ids, serve_err *err)
{
	size_t len;
	const char *str = tf_val_as_str(v, &len);
	int rc = 0;

	if (str) {
		pthread_mutex_lock(&s->prep);
		if (tf_tok_encode(s->tok, str, len, TF_TOK_ADD_SPECIAL, ids))
			rc = serve_fail(err, 400, "prompt", "prompt %d: %s", p, tf_diag_msg());
		pthread_mutex_unlock(&s->prep);
		return rc;
	}
	if (tf_val_kind_of(v) != TF_VAL_LIST)
		return serve_fail(err, 400, "prompt", "'prompt' must be a string, an array of "
				  "strings, an array of token ids or an array of such arrays");
	for (size_t i = 0; i < tf_val_len(v); i++) {
		const tf_val *t = tf_val_at(v, i);
		int64_t id = tf_val_as_int(t);
		if (tf_val_kind_of(t) != TF_VAL_INT || id < 0 || id >= s->n_vocab)
			return serve_fail(err, 400, "prompt", "prompt %d, token %zu: not a token id "
					  "(0..%d)", p, i, s->n_vocab - 1);
		if (tf_tokens_push(ids, (int32_t)id))
			return serve_fail(err, 500, NULL, "out of memory");
	}
	return 0;
}

/* /v1/completions' prompt field: one prompt or a list of them. */
static const tf_val *prompt_at(const tf_val *prompt, int p, bool many)
{
	return many ? tf_val_at(prompt, (size_t)p) : prompt;
}

static bool many_prompts(const tf_val *prompt)
{
	if (tf_val_kind_of(prompt) != TF_VAL_LIST || !tf_val_len(prompt))
		return false;
	tf_val_kind k = tf_val_kind_of(tf_val_at(prompt, 0));
	return k == TF_VAL_STR || k == TF_VAL_LIST;
}

/* r, choice c of a prompt, from the template t. */
static int fill(serve_req *r, const serve_req *t, int c, serve_err *err)
{
	r->logprobs = t->logprobs;
	r->top_logprobs = t->top_logprobs;
	r->echo = t->echo;
	r->sp = t->sp;
	r->sp.seed = t->sp.seed + (uint64_t)c;  /* choices differ, choice 0 as n = 1 */
	r->sp.penalty_from = (int64_t)r->prompt.n;     /* the reply's tokens alone */
	r->max_tokens = t->max_tokens;
	r->opened = t->opened;
	r->sid = -1;
	r->mark = -1;
	if (t->bias) {
		size_t sz = (size_t)t->sp.n_logit_bias * sizeof(*t->bias);
		if (!(r->bias = malloc(sz)))
			return serve_fail(err, 500, NULL, "out of memory");
		memcpy(r->bias, t->bias, sz);
		r->sp.logit_bias = r->bias;
	}
	for (int i = 0; i < t->stopstr.n; i++)
		if (tf_stopstr_add(&r->stopstr, t->stopstr.stops[i].p, t->stopstr.stops[i].len))
			return serve_fail(err, 500, NULL, "%s", tf_diag_msg());
	return 0;
}

/* j's requests: n_choices for each prompt, prompt p's from prompts[p]
 * (NULL: t's own prompt). */
static int make_reqs(serve *s, serve_job *j, serve_req *t, const tf_val *prompts, bool many,
		     serve_err *err)
{
	int64_t total = (int64_t)j->n_prompts * j->n_choices;

	if (total > (int64_t)s->conf.slots + s->conf.queue)
		return serve_fail(err, 400, "n", "%" PRId64 " choices in one request: more than "
				  "[server] slots + queue = %d", total, s->conf.slots + s->conf.queue);
	if (!(j->req = calloc((size_t)total, sizeof(*j->req))))
		return serve_fail(err, 500, NULL, "out of memory");
	for (int p = 0; p < j->n_prompts; p++) {
		tf_tokens ids = { 0 };
		serve_req *first = NULL;
		if (prompts && read_prompt(s, prompt_at(prompts, p, many), p, &ids, err)) {
			tf_tokens_free(&ids);
			return -1;
		}
		for (int c = 0; c < j->n_choices; c++) {
			serve_req *r = calloc(1, sizeof(*r));
			if (!r) {
				tf_tokens_free(&ids);
				return serve_fail(err, 500, NULL, "out of memory");
			}
			j->req[j->n++] = r;
			r->job = j;
			r->index = p * j->n_choices + c;
			/* A scored prompt's choices each run it: each scores it. */
			r->fork_of = t->echo ? NULL : first;
			first = first ? first : r;
			const tf_tokens *src = prompts ? &ids : &t->prompt;
			for (size_t i = 0; i < src->n; i++)
				if (tf_tokens_push(&r->prompt, src->ids[i])) {
					tf_tokens_free(&ids);
					return serve_fail(err, 500, NULL, "out of memory");
				}
			if (fill(r, t, c, err) || check_prompt(s, j, r, p, err)) {
				tf_tokens_free(&ids);
				return -1;
			}
		}
		j->prompt_tokens += (int64_t)first->prompt.n;
		tf_tokens_free(&ids);
	}
	return 0;
}

static void template_free(serve_req *t)
{
	tf_tokens_free(&t->prompt);
	tf_stopstr_free(&t->stopstr);
	free(t->bias);
}

int serve_parse_chat_val(serve *s, tf_val *body, serve_job *j, serve_err *err)
{
	const tf_val *msgs = tf_val_dict_get(body, "messages");
	serve_req t = { 0 };
	int rc = 0;

	if (tf_val_kind_of(msgs) != TF_VAL_LIST || !tf_val_len(msgs))
		rc = serve_fail(err, 400, "messages", "'messages' must be a non-empty array");
	else if ((int64_t)tf_val_len(msgs) > s->conf.max_messages)
		rc = serve_fail(err, 400, "messages", "more than %" PRId64 " messages "
				"([server] max_messages)", s->conf.max_messages);
	if (!rc)
		rc = parse_common(s, body, j, &t, err);
	if (!rc)
		rc = parse_logprobs(body, &t, err);
	if (!rc)
		rc = parse_constraint(s, body, j, err);
	if (!rc)
		rc = render(s, body, &t, err);
	if (!rc) {
		j->n_prompts = 1;
		rc = make_reqs(s, j, &t, NULL, false, err);
	}
	template_free(&t);
	return rc;
}

int serve_parse_chat(serve *s, const char *text, size_t len, serve_job *j, serve_err *err)
{
	tf_val *body = NULL;
	int rc = parse_body(text, len, &body, err);

	if (!rc) {
		serve_note_unknown(s, body, known_common, known_chat, j);
		rc = serve_parse_chat_val(s, body, j, err);
	}
	tf_val_unref(body);
	return rc;
}

int serve_parse_completion(serve *s, const char *text, size_t len, serve_job *j,
			   serve_err *err)
{
	tf_val *body = NULL;
	serve_req t = { 0 };
	int rc = parse_body(text, len, &body, err);
	const tf_val *prompt = rc ? NULL : tf_val_dict_get(body, "prompt");
	bool many = many_prompts(prompt);

	if (!rc)
		rc = parse_common(s, body, j, &t, err);
	if (!rc)
		rc = parse_legacy_logprobs(body, &t, err);
	if (!rc && (!prompt || (tf_val_kind_of(prompt) == TF_VAL_LIST && !tf_val_len(prompt))))
		rc = serve_fail(err, 400, "prompt", "'prompt' is missing or empty");
	if (!rc && many && tf_val_len(prompt) > SERVE_MAX_PROMPTS)
		rc = serve_fail(err, 400, "prompt", "more than %d prompts", SERVE_MAX_PROMPTS);
	if (!rc) {
		serve_note_unknown(s, body, known_common, known_completion, j);
		j->n_prompts = many ? (int)tf_val_len(prompt) : 1;
		rc = make_reqs(s, j, &t, prompt, many, err);
	}
	template_free(&t);
	tf_val_unref(body);
	return rc;
}
