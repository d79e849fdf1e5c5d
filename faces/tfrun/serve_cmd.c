/* serve_cmd.c - see serve_cmd.h: configuration, start, SIGTERM. */
#define _GNU_SOURCE
#include "serve_cmd.h"

#include <inttypes.h>
#include <libgen.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fail.h"
#include "serve/serve.h"
#include "tf/diag.h"
#include "util.h"

/* [sampling] as the defaults a request's fields override. */
/* Tokenizer, template and stop ids from the checkpoint folder. */
static int read_chat(serve *s, const tf_conf *c)
{
	char path[4200];
	const tf_model_config *cfg = tf_engine_model(s->e);
	int rc;

	if ((rc = tf_cli_model_file(c, "tokenizer.json", path, sizeof(path))) ||
	    (rc = tf_tok_load(path, &s->tok)) ||
	    (rc = tf_chat_template_from_conf(c, &s->tmpl)) ||
	    (rc = tf_conf_get_bool(c, "chat", "think", true, &s->think)))
		return rc;
	if ((rc = tf_cli_stop_ids(c, cfg, &s->stops)))
		return rc;
	s->n_vocab = tf_engine_vocab(s->e);
	if (tf_tok_vocab_size(s->tok) < s->n_vocab)
		s->n_vocab = tf_tok_vocab_size(s->tok);
	return tf_stop_add_tokens(&s->stops, tf_chat_template_stops(s->tmpl), s->tok);
}

/* What the HTTP side needs from [server], with the command line's --host,
 * --port and --api-key over it: read into *c (kept, the strings are its)
 * before the engine opens, so the server listens, answering 503 loading,
 * while the weights page in; and [tp] rank, for a rank other than 0
 * follows rank 0 and listens on nothing.  The engine reads the file again
 * and checks the keys plugins declare. */
static int read_listen(serve *s, const tf_options *o, tf_conf **c, int64_t *rank)
{
	serve_conf *sc = &s->conf;
	int64_t port;
	int rc = tf_conf_open(o->ini, (const char *const *)o->overrides, o->n_overrides, c);

	if (rc)
		return rc;
	sc->host = o->host ? o->host : tf_conf_get(*c, "server", "host");
	sc->host = sc->host ? sc->host : "127.0.0.1";
	sc->api_key = o->api_key ? o->api_key : tf_conf_get(*c, "server", "api_key");
	sc->cors = tf_conf_get(*c, "server", "cors");
	if ((rc = tf_conf_get_int(*c, "server", "port", 8080, &port)) ||
	    (rc = tf_conf_get_size(*c, "server", "max_body", 1 << 20, &sc->max_body)) ||
	    (rc = tf_conf_get_int(*c, "tp", "rank", 0, rank)))
		return rc;
	sc->port = o->port ? o->port : (int)port;
	return TF_OK;
}

/* The rest of [server], whose defaults the open engine gives. */
static int read_server(serve *s, const tf_conf *c)
{
	serve_conf *sc = &s->conf;
	int64_t slots, queue, cache, max_n, ctx = tf_engine_context(s->e);
	int seqs = tf_engine_max_seqs(s->e);
	int rc;

	if ((rc = tf_conf_get_int(c, "server", "slots", seqs, &slots)) ||
	    (rc = tf_conf_get_int(c, "server", "queue", 64, &queue)) ||
	    (rc = tf_conf_get_int(c, "server", "max_tokens", ctx, &sc->max_tokens)) ||
	    (rc = tf_conf_get_int(c, "server", "max_messages", 256, &sc->max_messages)) ||
	    (rc = tf_conf_get_int(c, "server", "max_prompt", ctx, &sc->max_prompt)) ||
	    (rc = tf_conf_get_float(c, "server", "grace", 10, &sc->grace)) ||
	    (rc = tf_conf_get_int(c, "server", "prefix_cache", seqs, &cache)) ||
	    (rc = tf_conf_get_int(c, "server", "max_n", slots, &max_n)))
		return rc;
	sc->slots = (int)slots;
	sc->max_n = (int)max_n;
	sc->queue = (int)queue;
	sc->prefix_cache = (int)cache;
	if (slots > seqs)
		return tf_diag_set(TF_ERR_INVALID, "[server] slots = %" PRId64 " needs as many "
				   "sequences: set [runtime] sequences = %" PRId64 " (now %d)",
				   slots, slots, seqs);
	if (max_n > slots)
		return tf_diag_set(TF_ERR_INVALID, "[server] max_n = %" PRId64 ": a request's "
				   "choices are decoded together, in at most [server] slots = %"
				   PRId64, max_n, slots);
	/* Kept sequences are idle ones of the same table: no more than it holds. */
	if (cache > seqs)
		return tf_diag_set(TF_ERR_INVALID, "[server] prefix_cache = %" PRId64 " keeps "
				   "more sequences than [runtime] sequences = %d allows", cache, seqs);
	return TF_OK;
}

/* SIGTERM: no new connections, the replies under way get `grace` seconds
 * to be generated and sent, then the rest is cancelled. */
static void drain(serve *s, struct MHD_Daemon *d, pthread_t sched)
{
	struct timespec until;

	MHD_quiesce_daemon(d);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)s->conf.grace;
	pthread_mutex_lock(&s->lock);
	s->draining = true;
	while (s->n_open &&
	       !pthread_cond_timedwait(&s->progress, &s->lock, &until))
		;
	s->stop = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(sched, NULL);
	MHD_stop_daemon(d);
}

int tf_cli_serve(const tf_options *o)
{
	serve s = {
		.prep = PTHREAD_MUTEX_INITIALIZER,
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.wake = PTHREAD_COND_INITIALIZER,
		.progress = PTHREAD_COND_INITIALIZER,
		.t_start = tf_cli_now_s(),
		.created = (int64_t)time(NULL),
	};
	struct MHD_Daemon *d = NULL;
	tf_conf *pre = NULL;
	int64_t rank;
	pthread_t sched;
	sigset_t sigs;
	int sig, rc = EXIT_FAILURE;
	char name[256];

	/* Every thread started from here on leaves these to sigwait(). */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);       /* a client gone mid-write */

	snprintf(name, sizeof(name), "%s", o->ini);
	snprintf(s.model_name, sizeof(s.model_name), "%s", basename(name));
	char *dot = strrchr(s.model_name, '.');
	if (dot && !strcmp(dot, ".ini"))
		*dot = 0;
	if (read_listen(&s, o, &pre, &rank)) {
		tf_cli_fail(o->ini);
		goto out;
	}
	if (!rank && !(d = serve_http_start(&s))) {
		fprintf(stderr, "tfrun: serve: cannot listen on %s port %d\n", s.conf.host,
			s.conf.port);
		goto out;
	}
	/* A signal while the engine opens is taken once it is open. */
	if (!rank)
		fprintf(stderr, "tfrun serve: listening on http://%s:%d/v1, loading %s\n",
			s.conf.host, s.conf.port, s.model_name);
	if (tf_engine_open(o->ini, (const char *const *)o->overrides, o->n_overrides, &s.e)) {
		tf_cli_fail(o->ini);
		goto out;
	}
	if ((rc = tf_cli_follow(s.e, o->ini)) >= 0)
		goto out;
	rc = EXIT_FAILURE;
	const tf_conf *c = tf_engine_conf(s.e);
	if (tf_cli_sampling(c, &s.sp, &s.max_tokens) || read_chat(&s, c) ||
	    read_server(&s, c)) {
		tf_cli_fail(o->ini);
		goto out;
	}
	if (serve_sched_start(&s, &sched)) {
		tf_cli_fail("serve");
		goto out;
	}
	pthread_mutex_lock(&s.lock);
	s.ready = true;
	pthread_mutex_unlock(&s.lock);
	fprintf(stderr, "tfrun serve: %s ready, %d slots\n", s.model_name, s.conf.slots);
	sigwait(&sigs, &sig);
	fprintf(stderr, "tfrun serve: %s: finishing the replies under way\n", strsignal(sig));
	drain(&s, d, sched);
	d = NULL;
	rc = s.peer_lost ? EXIT_FAILURE : EXIT_SUCCESS;
out:
	if (d)
		MHD_stop_daemon(d);
	tf_conf_free(pre);
	serve_grammars_free(&s);
	tf_tok_free(s.tok);
	tf_chat_template_free(s.tmpl);
	tf_engine_close(s.e);
	return rc;
}
