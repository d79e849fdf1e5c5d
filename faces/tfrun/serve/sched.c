/*
 * sched.c - the thread that owns the engine: continuous batching.
 *
 * Each step runs one forward of every request's next token or prompt
 * chunk.  With a drafter, a request past its prompt (and not asking for
 * logprobs, which need each token's own logits) steps instead with the
 * other drafting requests in tf_engine_step: drafts, one verify, each
 * keeping what it keeps; the tokens are those of the plain path.  A job's
 * choices of one prompt are taken together: the first runs the prompt, the
 * others are forked from it when it is in.  An echo request scores its
 * prompt: every row of its chunks gives logits.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve.h"
#include "tf/diag.h"
#include "util.h"

/* The prompt tokens an echo request runs per step: each gives a row of
 * logits. */
#define SERVE_ECHO_CHUNK 64

/* What the scheduler holds across steps. */
struct sched {
	serve *s;
	serve_req **active;             /* [slots] */
	int n;
	int32_t *tok;                   /* one step's batch */
	tf_seq_id *seq;
	uint8_t *out;
	float *logits;                  /* [cap_rows, vocab] */
	int64_t cap_rows;
	int vocab;
	int64_t chunk;                  /* prompt tokens a request adds per step */
	serve_prefix pc;
	int depth;                      /* the drafter's most drafts; 0: no drafter */
	tf_spec_step *spec;             /* [slots]: a drafting step's requests */
	int *spec_at;                   /* [slots]: their places in active */
	int32_t *spec_tok;              /* [slots, depth + 1] */
};

int serve_submit(serve *s, serve_job *j, serve_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->ready)
		rc = serve_fail(err, 503, NULL, "the model is loading");
	else if (s->draining)
		rc = serve_fail(err, 503, NULL, "the server is shutting down");
	else if (s->n_active + s->n_queued + j->n > s->conf.slots + s->conf.queue)
		rc = serve_fail(err, 429, NULL, "%d requests are waiting already: try again later "
				"([server] queue)", s->n_queued);
	if (!rc) {
		j->refs += j->n;
		if (s->queued_tail)
			s->queued_tail->next_queued = j;
		else
			s->queued = j;
		s->queued_tail = j;
		s->n_queued += j->n;
		s->m.requests++;
		s->m.prompt_tokens += (uint64_t)j->prompt_tokens;
		pthread_cond_signal(&s->wake);
	} else {
		s->m.rejected++;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int on_reply(void *ctx, const tf_reply_event *ev)
{
	serve_req *r = ctx;
	tf_val *call;
	int rc;

	if (ev->part != TF_REPLY_TOOL_CALL)
		return serve_emit_text(r->job->srv, r, ev->part == TF_REPLY_REASONING, ev->text,
				       ev->len);
	if ((rc = tf_reply_tool_call(ev, &call)) == TF_OK) {
		rc = serve_emit_tool_call(r->job->srv, r, call);
		tf_val_unref(call);
	}
	return rc;
}

/* Text through the stop strings, then the reply parser (chat) or out. */
static int pass_text(serve *s, serve_req *r, const char *text, size_t len)
{
	const char *out;
	size_t n;
	int rc = tf_stopstr_push(&r->stopstr, text, len, &out, &n);

	if (rc || !n)
		return rc;
	if (r->job->kind != SERVE_COMPLETION)
		return tf_reply_push(&r->rp, out, n);
	return serve_emit_text(s, r, false, out, n);
}

/* The reply ends: what is held back, then the last chunks. */
static int finish(serve *s, serve_req *r)
{
	const char *text;
	size_t len;
	int rc = tf_detok_flush(&r->dt, &text, &len);

	if (!rc)
		rc = pass_text(s, r, text, len);
	if (!rc) {
		tf_stopstr_flush(&r->stopstr, &text, &len);
		rc = r->job->kind != SERVE_COMPLETION ? tf_reply_push(&r->rp, text, len) :
		     len ? serve_emit_text(s, r, false, text, len) : TF_OK;
	}
	if (!rc && r->job->kind != SERVE_COMPLETION)
		rc = tf_reply_finish(&r->rp);
	if (!rc && tf_val_len(r->calls) && !strcmp(r->finish, "stop"))
		r->finish = "tool_calls";
	return rc ? rc : serve_emit_end(s, r);
}

/* Take r out of the active set: its sequence kept for a later prompt
 * (keep: its state is what its tokens say) or freed, its client woken
 * after the job's last. */
static void retire(struct sched *sc, int i, bool keep)
{
	serve *s = sc->s;
	serve_req *r = sc->active[i];
	serve_job *j = r->job;

	if (r->sid >= 0 && r->gram)
		tf_seq_constrain(s->e, r->sid, NULL, NULL);   /* its state goes with r */
	if (keep && r->sid >= 0)
		serve_prefix_keep(&sc->pc, r->sid, r->mark);
	else if (r->sid >= 0)
		tf_seq_free(s->e, r->sid);
	r->sid = -1;
	tf_detok_free(&r->dt);
	tf_reply_free(&r->rp);
	free(r->logits);
	r->logits = NULL;
	sc->active[i] = sc->active[--sc->n];
	pthread_mutex_lock(&s->lock);
	j->done = ++j->n_done == j->n;
	s->n_active = sc->n;
	s->m.cached_seqs = sc->pc.n;
	pthread_cond_broadcast(&s->progress);
	serve_job_unref(j);
	pthread_mutex_unlock(&s->lock);
}

/* r ends with an error (its job's reply is the error alone). */
static void fail(struct sched *sc, int i, int status, const char *msg)
{
	serve_req *r = sc->active[i];

	fprintf(stderr, "tfrun serve: %s: %s\n", r->job->id, msg);
	if (serve_emit_error(sc->s, r, status, msg))
		fprintf(stderr, "tfrun serve: %s: %s\n", r->job->id, tf_diag_msg());
	retire(sc, i, false);
}

/* With the prefix cache, a prompt stops one token short of its end for a
 * snapshot there: the state a later request that repeats the prompt, or
 * continues it otherwise than this reply, rolls back to. */
static bool wants_mark(const struct sched *sc, const serve_req *r)
{
	return sc->pc.cap && r->prompt.n > 1 && r->mark < (int64_t)r->prompt.n - 1;
}

static void mark_prompt(struct sched *sc, serve_req *r)
{
	if (!wants_mark(sc, r) || r->fed != (int64_t)r->prompt.n - 1)
		return;
	if (tf_seq_snapshot(sc->s->e, r->sid)) {
		fprintf(stderr, "tfrun serve: %s: %s\n", r->job->id, tf_engine_errmsg());
		r->mark = -1;           /* a failed snapshot drops the one before */
	} else {
		r->mark = r->fed;
	}
}

/* An echo request's prompt as the first of its text: each token's place
 * in it noted, the first token's entry (it has no logprob) given. */
static int echo_prompt(serve *s, serve_req *r)
{
	tf_detok dt;
	const char *text;
	size_t len;
	int rc = TF_OK;

	if (!(r->echo_at = malloc(r->prompt.n * sizeof(*r->echo_at))))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	tf_detok_init(&dt, s->tok, 0);
	for (size_t i = 0; !rc && i <= r->prompt.n; i++) {
		if (i < r->prompt.n) {
			r->echo_at[i] = r->n_chars;
			rc = tf_detok_push(&dt, r->prompt.ids[i], &text, &len);
		} else {
			rc = tf_detok_flush(&dt, &text, &len);
		}
		if (!rc && len)
			rc = tf_bytes_append(&r->echoed, text, len) ?
			     tf_diag_set(TF_ERR_NOMEM, "out of memory") : TF_OK;
		for (size_t k = 0; k < len; k++)
			r->n_chars += ((unsigned char)text[k] & 0xc0) != 0x80;
	}
	tf_detok_free(&dt);
	if (!rc && r->logprobs)
		rc = serve_emit_logprob(s, r, r->prompt.ids[0], NULL, 0);
	return rc;
}

/* r's sequence (a kept one it continues, or new; a sibling choice's comes
 * with the fork), sampler and stream state; false when it cannot start. */
static bool start(struct sched *sc, serve_req *r)
{
	serve *s = sc->s;
	int rc;

	tf_detok_init(&r->dt, s->tok, TF_TOK_SKIP_SPECIAL);
	tf_reply_init(&r->rp, r->opened, on_reply, r);
	/* Logprobs need each token's own logits, a grammar each token's state. */
	r->drafting = sc->depth > 0 && !r->logprobs && !r->job->grammar;
	r->ready = false;
	if (r->job->grammar &&
	    tf_grammar_state_new(serve_grammar_of(r->job->grammar), &r->gram))
		return false;
	if (!(r->calls = tf_val_list()) ||
	    (r->drafting && !(r->logits = malloc((size_t)sc->vocab * sizeof(float))))) {
		tf_diag_set(TF_ERR_NOMEM, "out of memory");
		return false;
	}
	if (r->echo && echo_prompt(s, r))
		return false;
	if (r->fork_of) {
		r->fed = (int64_t)r->prompt.n;  /* run by the first choice */
		return true;
	}
	/* A scored prompt runs whole: a kept sequence would skip its rows. */
	rc = r->echo ? serve_prefix_new(&sc->pc, -1, &r->sid) :
	     serve_prefix_seq(&sc->pc, &r->prompt, &r->sid, &r->cached, &r->mark);
	if (rc || tf_seq_set_sampling(s->e, r->sid, &r->sp, s->n_vocab) ||
	    tf_seq_constrain(s->e, r->sid, r->gram ? tf_grammar_mask : NULL, r->gram))
		return false;           /* the engine's diag says why */
	r->fed = r->cached;
	mark_prompt(sc, r);
	pthread_mutex_lock(&s->lock);
	s->m.cached_tokens += (uint64_t)r->cached;
	s->m.cached_seqs = sc->pc.n;
	pthread_mutex_unlock(&s->lock);
	return true;
}

/* The choices forked from r, whose prompt is in: their sequences, and
 * r's logits row theirs this step. */
static bool fork_siblings(struct sched *sc, serve_req *r)
{
	for (int i = 0; i < sc->n; i++) {
		serve_req *c = sc->active[i];
		if (c->fork_of != r || c->sid >= 0)
			continue;
		if (serve_prefix_new(&sc->pc, r->sid, &c->sid) ||
		    tf_seq_set_sampling(sc->s->e, c->sid, &c->sp, sc->s->n_vocab) ||
		    tf_seq_constrain(sc->s->e, c->sid, c->gram ? tf_grammar_mask : NULL, c->gram))
			return false;
		c->row = r->row;
	}
	return true;
}

/* r's next token t (row: the logits it came from, for logprobs), and
 * whether r goes on; r->finish NULL when it failed (tf_diag says why). */
static bool consume(serve *s, serve_req *r, int32_t t, const float *row)
{
	const char *text;
	size_t len;

	if (!r->n_gen++) {
		r->t_first = tf_cli_now_s();
		pthread_mutex_lock(&s->lock);
		s->m.ttft_count++;
		s->m.ttft_sum += r->t_first - r->job->t_arrive;
		pthread_mutex_unlock(&s->lock);
	}
	if (tf_stop_has(&s->stops, t)) {
		r->finish = "stop";
		r->n_gen--;             /* OpenAI does not count the end token */
		return false;
	}
	if (r->gram && tf_grammar_accept(r->gram, t))
		return false;
	/* Before its text: the chunk that carries the text carries the entry
	 * (from logits the step may have left on the device). */
	if ((r->logprobs && (tf_engine_logits_wait(s->e) ||
			     serve_emit_logprob(s, r, t, row, r->n_chars))) ||
	    tf_detok_push(&r->dt, t, &text, &len) || pass_text(s, r, text, len))
		return false;
	for (size_t i = 0; i < len; i++)        /* UTF-8: count all but continuations */
		r->n_chars += ((unsigned char)text[i] & 0xc0) != 0x80;
	if (r->stopstr.stopped) {
		r->finish = "stop";
		return false;
	}
	if (r->n_gen >= r->max_tokens || tf_seq_len(s->e, r->sid) >= tf_engine_context(s->e)) {
		r->finish = "length";
		return false;
	}
	r->next = t;
	return true;
}

/* The token r samples from its row of logits, and whether r goes on. */
static bool advance(serve *s, serve_req *r, const float *row)
{
	int32_t t;

	return !tf_seq_sample(s->e, r->sid, row, &t) && consume(s, r, t, row);
}

/* r (active at i) stops: its last words, or its error. */
static void end(struct sched *sc, int i)
{
	serve_req *r = sc->active[i];

	if (!r->finish)
		fail(sc, i, 500, tf_diag_msg());
	else if (finish(sc->s, r))
		fail(sc, i, 500, tf_diag_msg());
	else
		retire(sc, i, true);
}

/* Admit queued choices into free slots, a prompt's all together (the
 * lock held). */
static void admit(struct sched *sc)
{
	serve *s = sc->s;

	while (s->queued && sc->n + s->queued->n_choices <= s->conf.slots) {
		serve_job *j = s->queued;
		for (int c = 0; c < j->n_choices; c++)
			sc->active[sc->n++] = j->req[j->admitted * j->n_choices + c];
		s->n_queued -= j->n_choices;
		if (++j->admitted == j->n_prompts) {
			s->queued = j->next_queued;
			if (!s->queued)
				s->queued_tail = NULL;
		}
	}
	s->n_active = sc->n;
}

/* A step's forward failed; after a peer's no step can run again. */
static void step_failed(serve *s, int rc)
{
	fprintf(stderr, "tfrun serve: a step failed: %s\n", tf_engine_errmsg());
	if (rc == TF_ERR_PEER) {        /* shut down */
		pthread_mutex_lock(&s->lock);
		s->peer_lost = true;
		pthread_mutex_unlock(&s->lock);
		kill(getpid(), SIGTERM);
	}
}

/* r's drafts this step: at most the drafter's most, the tokens r may
 * still make and the room its context has. */
static int draft_depth(const struct sched *sc, const serve_req *r)
{
	int64_t d = sc->depth;
	int64_t room = tf_engine_context(sc->s->e) - tf_seq_len(sc->s->e, r->sid) - 1;
	int64_t left = r->max_tokens - r->n_gen - 1;
	d = d < room ? d : room;
	d = d < left ? d : left;
	return d > 0 ? (int)d : 0;
}

/* The drafting requests past their prompts, in one tf_engine_step: each
 * request's tokens consumed in order (those past its end are dropped);
 * *tokens: how many they gained.  False when the step's forward failed. */
static bool step_drafts(struct sched *sc, int *tokens)
{
	serve *s = sc->s;
	serve_metrics d = { 0 };
	int k = 0;
	for (int i = 0; i < sc->n; i++) {
		serve_req *r = sc->active[i];
		if (!r->drafting || !r->ready)
			continue;
		sc->spec[k] = (tf_spec_step){ .seq = r->sid, .max_depth = draft_depth(sc, r),
					      .logits = r->logits,
					      .tokens = sc->spec_tok + (size_t)k * (size_t)(sc->depth + 1) };
		sc->spec_at[k++] = i;
	}
	if (!k)
		return true;
	int rc = tf_engine_step(s->e, sc->spec, k);
	if (rc) {
		step_failed(s, rc);
		return false;
	}
	/* Downwards: retire() moves the last request into the freed place. */
	for (int j = k - 1; j >= 0; j--) {
		const tf_spec_step *st = &sc->spec[j];
		serve_req *r = sc->active[sc->spec_at[j]];
		bool go = st->status == TF_OK;
		if (!go) {              /* its step failed alone: it ends with the error */
			fail(sc, sc->spec_at[j], 500, st->error);
			continue;
		}
		for (int t = 0; go && t < st->n; t++)
			go = consume(s, r, st->tokens[t], NULL);
		*tokens += st->n;
		d.draft_steps += st->drafted > 0;
		d.drafted += (uint64_t)st->drafted;
		d.accepted += st->n ? (uint64_t)(st->n - 1) : 0;
		for (int p = 0; p < st->drafted; p++) {
			d.tried_at[p]++;
			d.kept_at[p] += p < st->n - 1;
		}
		if (!go)
			end(sc, sc->spec_at[j]);
	}
	pthread_mutex_lock(&s->lock);
	s->m.draft_steps += d.draft_steps;
	s->m.drafted += d.drafted;
	s->m.accepted += d.accepted;
	for (int p = 0; p < sc->depth; p++) {
		s->m.tried_at[p] += d.tried_at[p];
		s->m.kept_at[p] += d.kept_at[p];
	}
	pthread_mutex_unlock(&s->lock);
	return true;
}

/* Room for rows of logits. */
static bool logits_room(struct sched *sc, int64_t rows)
{
	if (rows <= sc->cap_rows)
		return true;
	float *l = realloc(sc->logits, (size_t)rows * (size_t)sc->vocab * sizeof(float));
	if (!l)
		return false;
	sc->logits = l;
	sc->cap_rows = rows;
	return true;
}

/* An echo request's rows before its prompt's last: each scores the
 * prompt's next token. */
static int score_prompt(struct sched *sc, serve_req *r)
{
	int64_t last = r->fed - 1, first = r->fed - r->rows;
	int rc = TF_OK;

	if (!r->logprobs || first >= (int64_t)r->prompt.n - 1)
		return TF_OK;
	if ((rc = tf_engine_logits_wait(sc->s->e)))
		return rc;
	for (int64_t p = first; !rc && p <= last && p + 1 < (int64_t)r->prompt.n; p++) {
		const float *row = sc->logits + (size_t)(r->row - (last - p)) * (size_t)sc->vocab;
		rc = serve_emit_logprob(sc->s, r, r->prompt.ids[p + 1], row, r->echo_at[p + 1]);
	}
	return rc;
}

/* r's prompt is in: an echo request's text first; true when r goes on
 * to sample (max_tokens 0 has it end there). */
static bool prompt_in(struct sched *sc, serve_req *r)
{
	if (r->echo && serve_emit_text(sc->s, r, false, r->echoed.p ? r->echoed.p : "",
				       r->echoed.len))
		return false;
	if (r->max_tokens)
		return true;
	r->finish = "length";
	return false;
}

/* One batched step: each request its next token or a chunk of its prompt
 * (a drafting request past its prompt: step_drafts); false when the step
 * failed (every request in it is ended). */
static bool step(struct sched *sc)
{
	serve *s = sc->s;
	int64_t n = 0, rows = 0;
	int decoding = 0, gen = 0;
	double t0 = tf_cli_now_s();

	for (int i = 0; i < sc->n; i++) {
		serve_req *r = sc->active[i];
		int64_t left = (int64_t)r->prompt.n - r->fed;
		int64_t chunk = r->echo ? SERVE_ECHO_CHUNK : sc->chunk;
		int64_t m = !left ? 1 : left < chunk ? left : chunk;
		r->row = -1;
		r->rows = 0;
		if ((!left && r->drafting) || r->sid < 0)   /* a sibling not forked yet */
			continue;
		if (m == left && left > 1 && wants_mark(sc, r))
			m--;
		for (int64_t k = 0; k < m; k++) {
			bool last = k == m - 1 && m >= left;
			sc->tok[n] = left ? r->prompt.ids[r->fed + k] : r->next;
			sc->seq[n] = r->sid;
			sc->out[n] = last || (r->echo && left);
			r->rows += sc->out[n];
			rows += sc->out[n++];
		}
		decoding += !left;
		r->row = r->rows ? (int)rows - 1 : -1;
		r->fed += left ? m : 0;
	}
	if (!logits_room(sc, rows)) {
		fprintf(stderr, "tfrun serve: out of memory for %" PRId64 " rows of logits\n", rows);
		return false;
	}
	const tf_batch b = { .n = n, .token = sc->tok, .seq = sc->seq, .out = sc->out };
	int rc = n ? tf_engine_forward(s->e, &b, sc->logits, NULL) : TF_OK;
	if (rc) {
		step_failed(s, rc);
		return false;
	}
	/* A prompt that is in gives its row to the choices forked from it. */
	for (int i = 0; i < sc->n; i++) {
		serve_req *r = sc->active[i];
		if (r->row >= 0 && r->fed == (int64_t)r->prompt.n && !r->n_gen && !r->ready &&
		    !fork_siblings(sc, r)) {
			fail(sc, i--, 500, tf_engine_errmsg());
			continue;
		}
	}
	/* Downwards: retire() moves the last request into the freed place. */
	for (int i = sc->n - 1; i >= 0; i--) {
		serve_req *r = sc->active[i];
		bool in = r->fed == (int64_t)r->prompt.n && !r->n_gen && !r->ready;
		const float *row = sc->logits + (size_t)(r->row < 0 ? 0 : r->row) * (size_t)sc->vocab;
		if (r->echo && r->rows && score_prompt(sc, r)) {
			fail(sc, i, 500, tf_diag_msg());
			continue;
		}
		if (r->row < 0 || r->fed < (int64_t)r->prompt.n) {
			mark_prompt(sc, r);
			continue;
		}
		if (in && !prompt_in(sc, r)) {
			end(sc, i);
			continue;
		}
		if (r->drafting) {      /* its prompt is in: it drafts from here */
			if ((rc = tf_engine_logits_wait(s->e)) != TF_OK) {
				step_failed(s, rc);
				return false;
			}
			memcpy(r->logits, row, (size_t)sc->vocab * sizeof(float));
			r->ready = true;
			continue;
		}
		gen++;
		if (!advance(s, r, row))
			end(sc, i);
	}
	int drafted = 0;
	if (sc->depth && !step_drafts(sc, &drafted))
		return false;
	pthread_mutex_lock(&s->lock);
	s->m.step_seconds += tf_cli_now_s() - t0;
	s->m.step_tokens += (uint64_t)(decoding + drafted);
	s->m.steps++;
	s->m.gen_tokens += (uint64_t)(gen + drafted);
	s->m.device_samples = (uint64_t)tf_engine_device_samples(s->e);
	s->m.graphs = tf_engine_graph_stats(s->e);
	pthread_mutex_unlock(&s->lock);
	return true;
}

/* Requests whose client left or whose job failed, or all of them when
 * stopping or after a failed step (their sequences are not kept then),
 * end unanswered. */
static void drop_gone(struct sched *sc, bool all)
{
	for (int i = sc->n - 1; i >= 0; i--) {
		serve_job *j = sc->active[i]->job;
		pthread_mutex_lock(&sc->s->lock);
		bool gone = all || j->gone;
		sc->s->m.cancelled += gone && !j->failed;
		pthread_mutex_unlock(&sc->s->lock);
		if (gone)
			retire(sc, i, !all);
	}
}

static void sched_free(struct sched *sc)
{
	serve_prefix_free(&sc->pc);
	free(sc->active);
	free(sc->tok);
	free(sc->seq);
	free(sc->out);
	free(sc->logits);
	free(sc->spec);
	free(sc->spec_at);
	free(sc->spec_tok);
	free(sc);
}

static void *run(void *arg)
{
	struct sched *sc = arg;
	serve *s = sc->s;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		while (!s->stop && !sc->n && !s->queued)
			pthread_cond_wait(&s->wake, &s->lock);
		bool stop = s->stop;
		int before = sc->n;
		if (!stop)
			admit(sc);
		pthread_mutex_unlock(&s->lock);
		for (int i = before; i < sc->n; i++)
			if (!start(sc, sc->active[i]))
				fail(sc, i--, 500, tf_diag_msg());
		drop_gone(sc, stop);
		if (stop)
			break;
		if (sc->n && !step(sc))
			drop_gone(sc, true);
	}
	/* Those still queued are answered by nobody: let their clients go. */
	pthread_mutex_lock(&s->lock);
	while (s->queued) {
		serve_job *j = s->queued;
		s->queued = j->next_queued;
		j->done = true;
		for (int i = j->admitted * j->n_choices; i < j->n; i++)
			serve_job_unref(j);
	}
	s->queued_tail = NULL;
	s->n_queued = 0;
	pthread_cond_broadcast(&s->progress);
	pthread_mutex_unlock(&s->lock);
	sched_free(sc);
	return NULL;
}

int serve_sched_start(serve *s, pthread_t *thread)
{
	struct sched *sc = calloc(1, sizeof(*sc));
	int slots = s->conf.slots;

	if (!sc)
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	*sc = (struct sched){
		.s = s,
		.vocab = tf_engine_vocab(s->e),
		/* A prompt's chunk shares the step with the decoders. */
		.chunk = tf_engine_prefill_chunk(s->e),
		.depth = tf_engine_draft_depth(s->e),
	};
	if (serve_prefix_init(&sc->pc, s->e, s->conf.prefix_cache)) {
		free(sc);
		return TF_ERR_NOMEM;
	}
	/* Each request's token is picked where its logits are, when the
	 * backend can (tf_engine_defer_logits). */
	tf_engine_defer_logits(s->e, true);
	int64_t cap = (int64_t)slots * sc->chunk;
	sc->active = calloc((size_t)slots, sizeof(*sc->active));
	sc->tok = calloc((size_t)cap, sizeof(*sc->tok));
	sc->seq = calloc((size_t)cap, sizeof(*sc->seq));
	sc->out = calloc((size_t)cap, 1);
	sc->cap_rows = slots;
	sc->logits = calloc((size_t)slots * (size_t)sc->vocab, sizeof(float));
	sc->spec = calloc((size_t)slots, sizeof(*sc->spec));
	sc->spec_at = calloc((size_t)slots, sizeof(*sc->spec_at));
	sc->spec_tok = calloc((size_t)slots * (size_t)(sc->depth + 1), sizeof(*sc->spec_tok));
	if (!sc->active || !sc->tok || !sc->seq || !sc->out || !sc->logits || !sc->spec ||
	    !sc->spec_at || !sc->spec_tok ||
	    pthread_create(thread, NULL, run, sc)) {
		sched_free(sc);
		return tf_diag_set(TF_ERR_NOMEM, "cannot start the scheduler");
	}
	return TF_OK;
}
