/*
 * serve.h - `tfrun serve`: an OpenAI-compatible HTTP server.
 *
 * libmicrohttpd runs one thread per connection; each parses and renders
 * its request (serve_parse_*) into a job of one request per choice, queues
 * it and waits.  One scheduler thread owns the engine: each step every
 * active request contributes its next token (a new one its prompt, a chunk
 * at a time) to one batched forward.  What a request produces is written
 * (serve_emit_*) into its job's `out` buffer under the server lock, which
 * the connection's thread drains to the client.  A job is freed by
 * whichever side lets go of it last.
 */
#ifndef TF_CLI_SERVE_H
#define TF_CLI_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tf/chat.h"
#include "tf/conf.h"
#include "tf/detok.h"
#include "tf/drafter.h"
#include "tf/engine.h"
#include "tf/grammar.h"
#include "tf/reply.h"
#include "tf/stopstr.h"
#include "tf/tokenizer.h"

/* [server] keys, with --host, --port and --api-key over them. */
typedef struct serve_conf {
	const char *host;
	int port;
	const char *api_key;            /* NULL: no key asked */
	int slots;                      /* requests decoded together */
	int queue;                      /* requests waiting beyond the slots */
	uint64_t max_body;              /* bytes */
	int64_t max_tokens, max_messages, max_prompt;
	double grace;                   /* seconds SIGTERM waits for replies */
	int prefix_cache;               /* finished sequences kept for reuse */
	int max_n;                      /* choices per prompt */
	const char *cors;               /* origins allowed, comma-separated; NULL: off */
} serve_conf;

typedef struct serve_grammar serve_grammar;

typedef enum serve_kind { SERVE_CHAT, SERVE_COMPLETION, SERVE_RESPONSES } serve_kind;

struct serve_req;

/*
 * One HTTP exchange: its requests, one per choice (n for each prompt),
 * answered together in one body or one stream.  The connection's thread
 * holds a reference, a stream's reader another, and the scheduler one per
 * request it has queued or active; the last to let go frees the requests.
 */
typedef struct serve_job {
	serve_kind kind;
	bool stream, include_usage;
	char id[48];
	int64_t created;
	double t_arrive;
	struct serve *srv;
	struct serve_req **req;         /* [n]: prompt p's choice c at p * n_choices + c */
	int n, n_prompts, n_choices;
	int64_t prompt_tokens;          /* each prompt's once, however many choices */
	serve_grammar *grammar;         /* response_format's or a forced tool call's, or NULL */
	struct cJSON *echo;             /* /v1/responses: request fields its object repeats */
	char notice[512];               /* what was clipped: X-TensorFold-Notice */
	char ignored[256];              /* unknown fields: X-TensorFold-Ignored */
	int fd;                         /* a stream's connection, watched for a hang-up */

	/* Under the server lock. */
	tf_bytes out;                   /* for the client, not yet sent */
	int n_done;                     /* requests ended */
	bool done;                      /* out holds the last of it */
	bool gone;                      /* the client left or a choice failed: stop */
	int failed;                     /* an error's HTTP status: out holds its body */
	int refs;
	int admitted;                   /* prompts whose choices the scheduler took */
	int n_ended;                    /* choices whose end was written (the scheduler's) */
	struct serve_job *next_queued;
} serve_job;

/* One choice: one sequence decoded. */
typedef struct serve_req {
	/* Set by the connection's thread before the job is queued. */
	serve_job *job;
	int index;                      /* the choice's index */
	bool logprobs;                  /* each token's logprob ... */
	int top_logprobs;               /* ... and its likeliest alternatives */
	bool echo;                      /* the prompt's tokens first, scored */
	tf_sampler_params sp;
	tf_logit_bias *bias;            /* sp's logit_bias, owned */
	int64_t max_tokens;             /* 0: the prompt scored alone (echo) */
	tf_tokens prompt;
	bool opened;                    /* the prompt opened <think> */
	tf_stopstr stopstr;

	/* The scheduler's alone. */
	tf_seq_id sid;
	struct serve_req *fork_of;      /* a sibling choice: forked from it, not fed */
	int row;                        /* its (last) logits row this step, or -1 */
	int rows;                       /* echo: the rows it has this step */
	int64_t fed;                    /* prompt tokens run so far */
	int64_t cached;                 /* of them, taken from a kept sequence */
	int64_t mark;                   /* where sid's snapshot stands, or -1 */
	int32_t next;                   /* sampled, to be run next step */
	/* Drafting (the INI's drafter; not with logprobs): past its prompt it
	 * steps with tf_engine_step from its last token's logits. */
	bool drafting;
	bool ready;                     /* logits hold its last token's */
	float *logits;                  /* [vocab] */
	tf_detok dt;
	tf_reply rp;
	int64_t n_gen;
	int64_t n_chars;                /* characters the detokenizer gave */
	int64_t n_chunks;               /* SSE chunks written */
	int64_t *echo_at;               /* echo: each prompt token's character offset */
	tf_bytes echoed;                /* echo: the prompt's text */
	double t_first;                 /* the first token sampled */
	tf_bytes answer, reasoning;     /* non-streaming: the whole reply */
	tf_val *calls;
	tf_grammar_state *gram;         /* where its reply stands in the job's grammar */
	struct cJSON *lp;               /* logprob entries no chunk took yet */
	struct cJSON *choice;           /* non-streaming: the finished choice */
	const char *finish;             /* stop, length, tool_calls */
	/* /v1/responses: its output items, the open one's text from item_from. */
	int n_items, item_open;
	size_t item_from;
	int64_t n_reasoning;            /* tokens up to the reasoning's end */
} serve_req;

typedef struct serve_metrics {
	uint64_t requests, rejected, prompt_tokens, gen_tokens;
	uint64_t cancelled;             /* choices ended unanswered: client gone, shutdown */
	uint64_t cached_tokens;         /* prompt tokens not run again */
	int cached_seqs;                /* sequences the prefix cache keeps */
	uint64_t ttft_count;
	double ttft_sum, step_seconds;
	uint64_t step_tokens;           /* decoded in step_seconds */
	uint64_t steps;
	uint64_t device_samples;        /* tokens the backend's sampler picked */
	tf_graph_stats graphs;          /* steps run as device graphs */
	/* Drafting: requests' steps that drafted, drafts made and kept, and
	 * by draft position how many were made and kept there. */
	uint64_t draft_steps, drafted, accepted;
	uint64_t tried_at[TF_DRAFT_MAX_DEPTH], kept_at[TF_DRAFT_MAX_DEPTH];
} serve_metrics;

typedef struct serve serve;

/* Compiled grammars kept for later requests with the same one. */
#define SERVE_GRAMMARS 16

struct serve {
	serve_conf conf;
	char model_name[256];
	/* Set once before the server is ready, read-only after. */
	tf_engine *e;
	tf_tokenizer *tok;
	tf_chat_template *tmpl;
	tf_stopset stops;
	bool think;
	tf_sampler_params sp;           /* [sampling] defaults */
	int64_t max_tokens;
	int n_vocab;                    /* sampled ids: below the tokenizer's */

	pthread_mutex_t prep;           /* the tokenizer and template: one user */
	pthread_mutex_t lock;           /* what follows, and every req's shared part */
	pthread_cond_t wake;            /* the scheduler: work or stop */
	pthread_cond_t progress;        /* connections: some out grew or ended */
	bool ready;                     /* the engine is open */
	bool draining;                  /* SIGTERM: no new requests */
	bool stop;                      /* the scheduler cancels all and ends */
	bool peer_lost;                 /* a tensor-parallel rank is gone: exit non-zero */
	serve_job *queued, *queued_tail;   /* each waits for all its prompt's choices' slots */
	int n_queued, n_active;
	int n_open;                     /* HTTP requests not yet fully answered */
	serve_metrics m;
	serve_grammar *grammars[SERVE_GRAMMARS];   /* the latest compiled (the lock) */
	uint64_t grammar_clock;
	char logged[32][64];            /* unknown fields the log named (prep lock) */
	int n_logged;
	double t_start;                 /* monotonic, for uptime */
	int64_t created;                /* wall clock, for /v1/models */
};

/* An error as OpenAI sends it: the HTTP status and {"error": {...}}. */
typedef struct serve_err {
	int status;
	char msg[512];
	const char *param;
	const char *code;               /* NULL: the status's */
} serve_err;

int serve_fail(serve_err *err, int status, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* {"error": {"message", "type", "param", "code"}}, malloc'd. */
char *serve_err_json(const serve_err *err);

/* parse.c: a request body into j's requests; -1 with *err when refused. */
int serve_parse_chat(serve *s, const char *body, size_t len, serve_job *j, serve_err *err);
int serve_parse_completion(serve *s, const char *body, size_t len, serve_job *j,
			   serve_err *err);
/* A chat request already parsed (/v1/responses' translation). */
int serve_parse_chat_val(serve *s, tf_val *body, serve_job *j, serve_err *err);
/* body's fields in neither list (more may be NULL) into j->ignored, each
 * logged the first time. */
void serve_note_unknown(serve *s, const tf_val *body, const char *const *known,
			const char *const *more, serve_job *j);
serve_job *serve_job_new(serve *s, serve_kind kind);
/* Drop one reference (the lock held); the last frees j and its requests. */
void serve_job_unref(serve_job *j);

/* emit.c: what a request says, into r->out (the lock held). */
int serve_emit_text(serve *s, serve_req *r, bool reasoning, const char *text, size_t len);
int serve_emit_tool_call(serve *s, serve_req *r, tf_val *call);
/* Token t's logprob entry from its row of logits (NULL: the prompt's
 * first token, which has none), standing at character `offset` of a
 * completion's text, for the next chunk. */
int serve_emit_logprob(serve *s, serve_req *r, int32_t t, const float *row, int64_t offset);
/* r's choice ends (r->finish); after the job's last, its usage and end. */
int serve_emit_end(serve *s, serve_req *r);
/* The reply ends with an error instead (OpenAI's shape): a non-streamed
 * one is answered with `status` and the error alone, a streamed one gets
 * it as its last event before [DONE]. */
int serve_emit_error(serve *s, serve_req *r, int status, const char *msg);
/* Text into j's out: a stream's event (type NULL: "data:" alone), or the
 * body; the connection is woken.  A failed job takes no more. */
int serve_put_event(serve *s, serve_job *j, const char *type, const char *text);

/* responses.c: /v1/responses into a chat job, its reply as output items. */
int serve_parse_responses(serve *s, const char *body, size_t len, serve_job *j,
			  serve_err *err);
int serve_resp_text(serve *s, serve_req *r, bool reasoning, const char *text, size_t len);
int serve_resp_tool_call(serve *s, serve_req *r, const tf_val *call);
int serve_resp_end(serve *s, serve_req *r);
/* A tool call as a function_call output item, `at` its place. */
struct cJSON *serve_resp_call(const serve_req *r, const tf_val *call, int at,
			      const char *status);

/* GET /v1/models's body and GET /v1/models/{id}'s, malloc'd. */
char *serve_models_json(const serve *s);
char *serve_model_json(const serve *s);

/* prefix.c: finished sequences kept idle, least recently kept first. */
typedef struct serve_cached {
	tf_seq_id sid;
	int64_t mark;                   /* its snapshot: its prompt but one token */
} serve_cached;

typedef struct serve_prefix {
	tf_engine *e;
	int cap, n;
	serve_cached *ent;              /* [cap] */
} serve_prefix;

int serve_prefix_init(serve_prefix *pc, tf_engine *e, int cap);
/* Frees the sequences it keeps. */
void serve_prefix_free(serve_prefix *pc);
/*
 * A sequence for prompt: the kept one that lets it skip the most tokens,
 * taken out and brought back to them (*reused; *mark its snapshot), or a
 * new one (*reused 0), the least recently kept freed when the table is full.
 */
int serve_prefix_seq(serve_prefix *pc, const tf_tokens *prompt, tf_seq_id *sid,
		     int64_t *reused, int64_t *mark);
/* A new sequence, or src's fork when src >= 0, the least recently kept
 * freed while the table is full. */
int serve_prefix_new(serve_prefix *pc, tf_seq_id src, tf_seq_id *sid);
/* Keep sid, now idle, for later prompts (freed when the cap is 0), the
 * least recently kept freed past the cap. */
void serve_prefix_keep(serve_prefix *pc, tf_seq_id sid, int64_t mark);

/* grammars.c: the compiled grammar of gbnf, from the table or compiled
 * (a reference for the caller; 400 when it does not compile). */
int serve_grammar_get(serve *s, const char *gbnf, serve_grammar **out, serve_err *err);
tf_grammar *serve_grammar_of(const serve_grammar *sg);
/* Let go of a reference (the lock held). */
void serve_grammar_put(serve_grammar *sg);
void serve_grammars_free(serve *s);

/* sched.c */
int serve_sched_start(serve *s, pthread_t *thread);
/* Queue j (a reference per request); 429 when the queue is full, 503
 * draining. */
int serve_submit(serve *s, serve_job *j, serve_err *err);

/* metrics.c: the Prometheus text of GET /metrics (the lock held). */
char *serve_metrics_text(const serve *s);

/* http.c */
struct MHD_Daemon *serve_http_start(serve *s);

#endif /* TF_CLI_SERVE_H */
