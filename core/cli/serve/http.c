/* http.c - libmicrohttpd glue: routes, the API key, bodies, responses. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <microhttpd.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* One connection's request: its body as it arrives. */
struct conn {
	tf_bytes body;
	bool too_big;
};

static enum MHD_Result reply(struct MHD_Connection *c, int status, const char *type,
			     char *text)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (!text)
		return MHD_NO;          /* out of memory: drop the connection */
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result reply_err(struct MHD_Connection *c, const serve_err *err)
{
	return reply(c, err->status, "application/json", serve_err_json(err));
}

/* The Bearer token against the key, in time that does not depend on
 * where they differ. */
static bool authorized(const serve *s, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *key = s->conf.api_key;

	if (!key)
		return true;
	if (!h || strncasecmp(h, "Bearer ", 7))
		return false;
	h += 7;
	size_t hl = strlen(h), kl = strlen(key);
	unsigned char diff = hl != kl;
	for (size_t i = 0; i < kl; i++)
		diff |= (unsigned char)key[i] ^ (unsigned char)h[i < hl ? i : 0];
	return !diff;
}

/* A streamed response's bytes as the scheduler writes them. */
static ssize_t read_out(void *cls, uint64_t pos, char *buf, size_t max)
{
	serve_req *r = cls;
	serve *s = r->srv;
	ssize_t n;

	pthread_mutex_lock(&s->lock);
	while (!r->out.len && !r->done)
		pthread_cond_wait(&s->progress, &s->lock);
	if (r->out.len) {
		n = (ssize_t)(r->out.len < max ? r->out.len : max);
		memcpy(buf, r->out.p, (size_t)n);
		memmove(r->out.p, r->out.p + n, r->out.len - (size_t)n);
		r->out.len -= (size_t)n;
	} else {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* The stream ended or its client left: the scheduler may stop decoding. */
static void let_go(void *cls)
{
	serve_req *r = cls;
	serve *s = r->srv;

	pthread_mutex_lock(&s->lock);
	r->gone = true;
	pthread_cond_signal(&s->wake);
	serve_req_unref(r);
	pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result stream(struct MHD_Connection *c, serve_req *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	r->refs++;                      /* let_go's */
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_out, r, let_go);
	if (!resp) {
		let_go(r);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The whole reply, once the scheduler is done with it. */
static enum MHD_Result wait_whole(struct MHD_Connection *c, serve_req *r)
{
	serve *s = r->srv;
	serve_err err;
	char *text = NULL;

	pthread_mutex_lock(&s->lock);
	while (!r->done)
		pthread_cond_wait(&s->progress, &s->lock);
	if (r->out.len && (text = malloc(r->out.len + 1))) {
		memcpy(text, r->out.p, r->out.len);
		text[r->out.len] = 0;
	}
	int status = r->failed ? r->failed : 200;
	pthread_mutex_unlock(&s->lock);
	if (text)
		return reply(c, status, "application/json", text);
	serve_fail(&err, 500, NULL, "the reply failed (see the server's log)");
	return reply_err(c, &err);
}

static enum MHD_Result generate(serve *s, struct MHD_Connection *c, serve_kind kind,
				const struct conn *k)
{
	serve_err err;
	serve_req *r = serve_req_new(kind);
	enum MHD_Result ret;
	const char *body = k->body.p ? k->body.p : "";

	if (!r)
		return MHD_NO;
	r->srv = s;
	if ((kind == SERVE_CHAT ? serve_parse_chat : serve_parse_completion)(s, body,
									     k->body.len, r, &err) ||
	    serve_submit(s, r, &err))
		ret = reply_err(c, &err);
	else
		ret = r->stream ? stream(c, r) : wait_whole(c, r);
	pthread_mutex_lock(&s->lock);
	serve_req_unref(r);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static enum MHD_Result route(serve *s, struct MHD_Connection *c, const char *url,
			     const char *method, const struct conn *k)
{
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	serve_err err;
	bool ready;

	pthread_mutex_lock(&s->lock);
	ready = s->ready;
	pthread_mutex_unlock(&s->lock);
	if (!strcmp(url, "/health") && get)
		return ready ? reply(c, 200, "application/json", strdup("{\"status\":\"ok\"}")) :
		       reply(c, 503, "application/json", strdup("{\"status\":\"loading\"}"));
	if (!authorized(s, c)) {
		serve_fail(&err, 401, NULL, "a valid API key is needed: Authorization: Bearer KEY");
		return reply_err(c, &err);
	}
	if (k->too_big) {
		serve_fail(&err, 413, NULL, "the body is larger than %llu bytes "
			   "([server] max_body)", (unsigned long long)s->conf.max_body);
		return reply_err(c, &err);
	}
	if (!strcmp(url, "/metrics") && get) {
		pthread_mutex_lock(&s->lock);
		char *text = serve_metrics_text(s);
		pthread_mutex_unlock(&s->lock);
		return reply(c, 200, "text/plain; version=0.0.4", text);
	}
	if (!ready) {
		serve_fail(&err, 503, NULL, "the model is loading");
		return reply_err(c, &err);
	}
	if (!strcmp(url, "/v1/models") && get)
		return reply(c, 200, "application/json", serve_models_json(s));
	if (!strcmp(url, "/v1/chat/completions") && post)
		return generate(s, c, SERVE_CHAT, k);
	if (!strcmp(url, "/v1/completions") && post)
		return generate(s, c, SERVE_COMPLETION, k);
	serve_fail(&err, 404, NULL, "no route %s %s", method, url);
	return reply_err(c, &err);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **ctx)
{
	serve *s = cls;
	struct conn *k = *ctx;

	if (!k) {                       /* the headers: the body comes next */
		if (!(*ctx = calloc(1, sizeof(*k))))
			return MHD_NO;
		pthread_mutex_lock(&s->lock);
		s->n_open++;
		pthread_mutex_unlock(&s->lock);
		return MHD_YES;
	}
	if (*upload_size) {
		/* Past the cap the rest is read and dropped, then refused. */
		if (k->body.len + *upload_size > s->conf.max_body) {
			k->too_big = true;
			tf_bytes_free(&k->body);
		} else if (!k->too_big && tf_bytes_append(&k->body, upload, *upload_size)) {
			return MHD_NO;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	return route(s, c, url, method, k);
}

static void completed(void *cls, struct MHD_Connection *c, void **ctx,
		      enum MHD_RequestTerminationCode why)
{
	serve *s = cls;
	struct conn *k = *ctx;

	if (!k)
		return;
	tf_bytes_free(&k->body);
	free(k);
	*ctx = NULL;
	pthread_mutex_lock(&s->lock);
	s->n_open--;
	pthread_cond_broadcast(&s->progress);
	pthread_mutex_unlock(&s->lock);
}

struct MHD_Daemon *serve_http_start(serve *s)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_ITC | MHD_USE_ERROR_LOG;

	if (inet_pton(AF_INET, s->conf.host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)s->conf.port);
	} else if (inet_pton(AF_INET6, s->conf.host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)s->conf.port);
		flags |= MHD_USE_IPv6;
	} else {
		return NULL;
	}
	return MHD_start_daemon(flags, (uint16_t)s->conf.port, NULL, NULL, handle, s,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_NOTIFY_COMPLETED, completed, s,
				MHD_OPTION_CONNECTION_TIMEOUT, 600u,
				MHD_OPTION_END);
}
