/* http.c - libmicrohttpd glue: routes, the API key, bodies, responses. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <microhttpd.h>
#include <poll.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve.h"

/* How often a waiting reply looks whether its client hung up. */
#define SERVE_HANGUP_POLL_MS 50

/* Whether [server] cors lets origin call: a listed one, or any with "*". */
static bool allowed_origin(const serve *s, const char *origin)
{
	const char *p = s->conf.cors;
	size_t n = strlen(origin);

	while (p && *p) {
		p += strspn(p, " ,");
		size_t k = strcspn(p, " ,");
		if ((k == 1 && *p == '*') || (k == n && !strncmp(p, origin, n)))
			return true;
		p += k;
	}
	return false;
}

/* One connection's request: its body as it arrives. */
struct conn {
	tf_bytes body;
	bool too_big;
};

/* The headers every response may carry: CORS for an allowed Origin, the
 * job's notices, a 401's challenge, a 429's Retry-After. */
static void decorate(const serve *s, struct MHD_Connection *c, struct MHD_Response *resp,
		     int status, const serve_job *j)
{
	const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");

	if (origin && allowed_origin(s, origin)) {
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
		MHD_add_response_header(resp, "Vary", "Origin");
	}
	if (j && j->notice[0])
		MHD_add_response_header(resp, "X-TensorFold-Notice", j->notice);
	if (j && j->ignored[0])
		MHD_add_response_header(resp, "X-TensorFold-Ignored", j->ignored);
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (status == 429 || status == 503)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

/* text (taken) as the response; allow: a 405's Allow header. */
static enum MHD_Result reply_with(const serve *s, struct MHD_Connection *c, int status,
				  const char *type, char *text, const serve_job *j,
				  const char *allow)
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
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	decorate(s, c, resp, status, j);
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result reply(const serve *s, struct MHD_Connection *c, int status,
			     const char *type, char *text)
{
	return reply_with(s, c, status, type, text, NULL, NULL);
}

static enum MHD_Result reply_err(const serve *s, struct MHD_Connection *c,
				 const serve_err *err)
{
	return reply(s, c, err->status, "application/json", serve_err_json(err));
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

/* Whether the client closed its side of the connection (fd). */
static bool hung_up(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	char b;

	if (fd < 0 || poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
		return true;
	/* Readable: more bytes (a pipelined request) or the end of the stream. */
	return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Wait (the lock held) until j's out grows or j ends: false when its
 * client hung up meanwhile, which cancels j. */
static bool wait_progress(serve_job *j, int fd)
{
	serve *s = j->srv;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += SERVE_HANGUP_POLL_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&s->progress, &s->lock, &until);
	if (!hung_up(fd))
		return true;
	j->gone = true;
	pthread_cond_signal(&s->wake);
	return false;
}

/* A streamed response's bytes as the scheduler writes them. */
static ssize_t read_out(void *cls, uint64_t pos, char *buf, size_t max)
{
	serve_job *j = cls;
	serve *s = j->srv;
	ssize_t n;

	pthread_mutex_lock(&s->lock);
	while (!j->out.len && !j->done)
		if (!wait_progress(j, j->fd)) {
			pthread_mutex_unlock(&s->lock);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	if (j->out.len) {
		n = (ssize_t)(j->out.len < max ? j->out.len : max);
		memcpy(buf, j->out.p, (size_t)n);
		memmove(j->out.p, j->out.p + n, j->out.len - (size_t)n);
		j->out.len -= (size_t)n;
	} else {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* The stream ended or its client left: the scheduler may stop decoding. */
static void let_go(void *cls)
{
	serve_job *j = cls;
	serve *s = j->srv;

	pthread_mutex_lock(&s->lock);
	j->gone = true;
	pthread_cond_signal(&s->wake);
	serve_job_unref(j);
	pthread_mutex_unlock(&s->lock);
}

static int conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

static enum MHD_Result stream(serve *s, struct MHD_Connection *c, serve_job *j)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	j->refs++;                      /* let_go's */
	j->fd = conn_fd(c);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_out, j, let_go);
	if (!resp) {
		let_go(j);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	decorate(s, c, resp, 200, j);
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The whole reply, once the scheduler is done with it; a client that
 * hangs up meanwhile cancels it. */
static enum MHD_Result wait_whole(serve *s, struct MHD_Connection *c, serve_job *j)
{
	serve_err err;
	char *text = NULL;
	int fd = conn_fd(c);

	pthread_mutex_lock(&s->lock);
	while (!j->done)
		if (!wait_progress(j, fd)) {
			pthread_mutex_unlock(&s->lock);
			return MHD_NO;
		}
	if (j->out.len && (text = malloc(j->out.len + 1))) {
		memcpy(text, j->out.p, j->out.len);
		text[j->out.len] = 0;
	}
	int status = j->failed ? j->failed : 200;
	pthread_mutex_unlock(&s->lock);
	if (text)
		return reply_with(s, c, status, "application/json", text, j, NULL);
	serve_fail(&err, 500, NULL, "the reply failed (see the server's log)");
	return reply_err(s, c, &err);
}

static enum MHD_Result generate(serve *s, struct MHD_Connection *c, serve_kind kind,
				const struct conn *k)
{
	serve_err err;
	serve_job *j = serve_job_new(s, kind);
	enum MHD_Result ret;
	const char *body = k->body.p ? k->body.p : "";

	if (!j)
		return MHD_NO;
	static int (*const parse[])(serve *, const char *, size_t, serve_job *, serve_err *) = {
		[SERVE_CHAT] = serve_parse_chat,
		[SERVE_COMPLETION] = serve_parse_completion,
		[SERVE_RESPONSES] = serve_parse_responses,
	};

	if (parse[kind](s, body, k->body.len, j, &err) ||
	    serve_submit(s, j, &err))
		ret = reply_err(s, c, &err);
	else
		ret = j->stream ? stream(s, c, j) : wait_whole(s, c, j);
	pthread_mutex_lock(&s->lock);
	serve_job_unref(j);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* The routes, each with the methods it answers (HEAD wherever GET). */
enum route { R_HEALTH, R_METRICS, R_MODELS, R_MODEL, R_CHAT, R_COMPLETIONS, R_RESPONSES,
	     R_NONE };

static enum route find_route(const char *url, const char **allow)
{
	static const char get[] = "GET, HEAD, OPTIONS", post[] = "POST, OPTIONS";

	*allow = get;
	if (!strcmp(url, "/health"))
		return R_HEALTH;
	if (!strcmp(url, "/metrics"))
		return R_METRICS;
	if (!strcmp(url, "/v1/models"))
		return R_MODELS;
	if (!strncmp(url, "/v1/models/", 11) && url[11])
		return R_MODEL;
	*allow = post;
	if (!strcmp(url, "/v1/chat/completions"))
		return R_CHAT;
	if (!strcmp(url, "/v1/completions"))
		return R_COMPLETIONS;
	if (!strcmp(url, "/v1/responses"))
		return R_RESPONSES;
	*allow = NULL;
	return R_NONE;
}

/* A CORS preflight: the methods and headers a browser may use. */
static enum MHD_Result preflight(const serve *s, struct MHD_Connection *c, const char *allow)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, "",
								    MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	MHD_add_response_header(resp, "Access-Control-Allow-Methods", allow);
	MHD_add_response_header(resp, "Access-Control-Allow-Headers",
				"Authorization, Content-Type");
	MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
	decorate(s, c, resp, 204, NULL);
	ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result route(serve *s, struct MHD_Connection *c, const char *url,
			     const char *method, const struct conn *k)
{
	const char *allow;
	enum route rt = find_route(url, &allow);
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	bool post = !strcmp(method, "POST");
	serve_err err;
	bool ready;

	if (rt == R_NONE) {
		serve_fail(&err, 404, NULL, "no route %s %s", method, url);
		return reply_err(s, c, &err);
	}
	if (!strcmp(method, "OPTIONS"))
		return preflight(s, c, allow);
	if (allow[0] == 'G' ? !get : !post) {
		serve_fail(&err, 405, NULL, "%s does not take %s: it takes %s", url, method, allow);
		return reply_with(s, c, 405, "application/json", serve_err_json(&err), NULL,
				  allow);
	}
	pthread_mutex_lock(&s->lock);
	ready = s->ready;
	pthread_mutex_unlock(&s->lock);
	if (rt == R_HEALTH)
		return ready ? reply(s, c, 200, "application/json", strdup("{\"status\":\"ok\"}")) :
		       reply(s, c, 503, "application/json", strdup("{\"status\":\"loading\"}"));
	if (!authorized(s, c)) {
		serve_fail(&err, 401, NULL, "a valid API key is needed: Authorization: Bearer KEY");
		return reply_err(s, c, &err);
	}
	if (k->too_big) {
		serve_fail(&err, 413, NULL, "the body is larger than %llu bytes "
			   "([server] max_body)", (unsigned long long)s->conf.max_body);
		return reply_err(s, c, &err);
	}
	if (rt == R_METRICS) {
		pthread_mutex_lock(&s->lock);
		char *text = serve_metrics_text(s);
		pthread_mutex_unlock(&s->lock);
		return reply(s, c, 200, "text/plain; version=0.0.4", text);
	}
	if (!ready) {
		serve_fail(&err, 503, NULL, "the model is loading");
		return reply_err(s, c, &err);
	}
	switch (rt) {
	case R_MODELS:
		return reply(s, c, 200, "application/json", serve_models_json(s));
	case R_MODEL:
		if (!strcmp(url + 11, s->model_name))
			return reply(s, c, 200, "application/json", serve_model_json(s));
		serve_fail(&err, 404, "model", "no model '%s': this server has '%s'", url + 11,
			   s->model_name);
		err.code = "model_not_found";
		return reply_err(s, c, &err);
	case R_CHAT:
		return generate(s, c, SERVE_CHAT, k);
	case R_RESPONSES:
		return generate(s, c, SERVE_RESPONSES, k);
	default:
		return generate(s, c, SERVE_COMPLETION, k);
	}
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
