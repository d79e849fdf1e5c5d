/* generate_cmd.c - see generate_cmd.h. */
#include "generate_cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fail.h"
#include "tf/chat.h"
#include "tf/detok.h"
#include "tf/diag.h"
#include "tf/progress.h"
#include "tf/reply.h"
#include "tf/grammar.h"
#include "tf/stopstr.h"
#include "tf/text.h"
#include "tf/tokenizer.h"
#include "util.h"

/* Everything one run holds; released in gen_free(). */
struct gen {
	const tf_options *o;
	tf_engine *e;
	tf_seq_id sid;                  /* the one sequence: prompt, reply, turns */
	const tf_conf *conf;
	tf_tokenizer *tok;              /* NULL: ids in, no text out */
	tf_chat_template *tmpl;
	bool think;
	const char *system;
	tf_val *history;                /* the conversation's messages so far */
	bool in_step;                   /* the sequence holds history as rendered */
	bool opened;                    /* the prompt opened the reasoning */
	tf_stopset stops;
	tf_stopstr stopstr;             /* --stop strings over the reply text */
	tf_grammar *gram;               /* --json-schema or --grammar, or NULL */
	tf_grammar_state *gst;          /* where the reply stands in it */
	float *logits;                  /* [prefill_chunk, vocab] */
	uint8_t *every;                 /* [prefill_chunk] ones: --dump-logits asks every row */
	int vocab;
	int64_t chunk;
	int64_t max_tokens;

	/* One reply: streamed text and its counts. */
	tf_bytes answer, thinking;
	tf_val *calls;                  /* the reply's tool calls, as OpenAI's */
	int64_t n_prompt, n_gen;
	const char *finish;             /* eos, length, context or stop */
	double t_prefill, t_decode;
	double t_load;                  /* INI to a ready engine */

	/* A drafter: speculative steps and, per reply, what came of them. */
	int depth;                      /* the drafter's max_depth, 0: serial */
	int32_t *spec;                  /* [depth + 1]: one step's tokens */
	struct {
		int64_t forwards;       /* main-model passes: decode or verify */
		int64_t replays;        /* steps undoing drafts (attention only) */
		int64_t steps, drafted, accepted;
		int64_t tried_at[16], kept_at[16];      /* by draft position */
	} sp;
};

static void gen_free(struct gen *g)
{
	tf_tok_free(g->tok);
	tf_chat_template_free(g->tmpl);
	tf_val_unref(g->history);
	tf_val_unref(g->calls);
	tf_stopstr_free(&g->stopstr);
	tf_grammar_state_free(g->gst);
	tf_grammar_free(g->gram);
	tf_bytes_free(&g->answer);
	tf_bytes_free(&g->thinking);
	free(g->logits);
	free(g->every);
	free(g->spec);
	tf_engine_close(g->e);
}

static int read_sampling(struct gen *g)
{
	tf_sampler_params sp;
	int rc = tf_cli_sampling(g->conf, &sp, &g->max_tokens);
	if (rc != TF_OK)
		return rc;
	/* Ling pads its vocabulary past the tokenizer's ids: never sample a
	 * padding row, which could not be decoded. */
	int n = g->vocab;
	if (g->tok && tf_tok_vocab_size(g->tok) < n)
		n = tf_tok_vocab_size(g->tok);
	return tf_seq_set_sampling(g->e, g->sid, &sp, n);
}

/* Tokenizer, chat template and stop ids from the checkpoint folder. */
static int read_chat(struct gen *g)
{
	char dir[4096], path[4200];
	const char *d;
	int rc = tf_conf_get_path(g->conf, "model", "path", dir, sizeof(dir), &d);
	if (rc != TF_OK)
		return rc;

	snprintf(path, sizeof(path), "%s/tokenizer.json", d);
	if (g->o->input == TF_INPUT_TOKENS && access(path, F_OK) != 0)
		g->tok = NULL;          /* ids in and out: no tokenizer needed */
	else if ((rc = tf_tok_load(path, &g->tok)) != TF_OK)
		return rc;

	if ((rc = tf_chat_template_from_conf(g->conf, &g->tmpl)) != TF_OK)
		return rc;
	if (!(g->calls = tf_val_list()))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	if ((rc = tf_conf_get_bool(g->conf, "chat", "think", true, &g->think)) != TF_OK)
		return rc;
	g->system = tf_conf_get(g->conf, "chat", "system");

	if ((rc = tf_cli_stop_ids(g->conf, tf_engine_model(g->e), &g->stops)) != TF_OK)
		return rc;
	if (g->tok && (rc = tf_stop_add_tokens(&g->stops, tf_chat_template_stops(g->tmpl),
					       g->tok)) != TF_OK)
		return rc;
	if (g->o->n_stops && !g->tok)
		return tf_diag_set(TF_ERR_NOT_FOUND, "--stop needs text: %s has no tokenizer.json", d);
	for (int i = 0; i < g->o->n_stops; i++)
		if ((rc = tf_stopstr_add(&g->stopstr, g->o->stops[i], strlen(g->o->stops[i]))))
			return rc;
	return TF_OK;
}

/*
 * --json-schema's or --grammar's grammar over the tokenizer, ending at the
 * stop ids.  The reply is the document from its first token, so the
 * prompt does not open the reasoning.
 */
static int read_grammar(struct gen *g)
{
	const char *file = g->o->json_schema ? g->o->json_schema : g->o->grammar;
	char *text = NULL, *gbnf = NULL;
	tf_val *schema = NULL;
	size_t len;
	int rc;

	if (!file)
		return TF_OK;
	if (!g->tok)
		return tf_diag_set(TF_ERR_NOT_FOUND, "%s needs text: the model has no "
				   "tokenizer.json", g->o->json_schema ? "--json-schema" : "--grammar");
	if ((rc = tf_text_read(file, 1 << 24, &text, &len)) != TF_OK)
		return rc;
	if (g->o->json_schema) {
		rc = tf_val_parse_json(text, len, &schema);
		if (rc == TF_OK)
			rc = tf_grammar_schema_gbnf(schema, &gbnf);
		tf_val_unref(schema);
	}
	if (rc == TF_OK) {
		const char *src = gbnf ? gbnf : text;
		int vocab = tf_tok_vocab_size(g->tok) < g->vocab ? tf_tok_vocab_size(g->tok) : g->vocab;
		rc = tf_grammar_compile(src, strlen(src), g->tok, vocab, g->stops.ids, g->stops.n,
					&g->gram);
	}
	free(text);
	free(gbnf);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "%s", file);
	g->think = false;
	return TF_OK;
}

/* Appends {"role": role, "content": text} to the list msgs. */
static int push_message(tf_val *msgs, const char *role, const char *text, size_t len)
{
	tf_val *m = tf_val_dict();

	if (tf_val_list_push(msgs, m) || tf_val_dict_set(m, "role", 4, tf_val_cstr(role)) ||
	    tf_val_dict_set(m, "content", 7, tf_val_str(text, len)))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	return TF_OK;
}

/* The prompt for the messages msgs, through the template. */
static int render(struct gen *g, const tf_val *msgs, bool gen_prompt, tf_chat_prompt *p)
{
	tf_val *body = tf_val_dict(), *kwargs = tf_val_dict(), *req = NULL;
	int rc = TF_OK;

	if (tf_val_dict_set(body, "messages", 8, tf_val_ref((tf_val *)msgs)) ||
	    tf_val_dict_set(body, "add_generation_prompt", 21, tf_val_bool(gen_prompt)) ||
	    tf_val_dict_set(kwargs, "enable_thinking", 15, tf_val_bool(g->think)) ||
	    tf_val_dict_set(body, "chat_template_kwargs", 20, tf_val_ref(kwargs)))
		rc = tf_diag_set(TF_ERR_NOMEM, "out of memory");
	if (!rc && !(rc = tf_chat_request_check(body, &req)))
		rc = tf_chat_render(g->tmpl, req, p);
	tf_val_unref(req);
	tf_val_unref(kwargs);
	tf_val_unref(body);
	return rc;
}

/*
 * One user turn after the messages base (NULL: a new conversation, which
 * the system message opens).  *msgs gets the conversation with the turn;
 * ids the ids of its render after base's render (already fed), or all of
 * them with *whole.  A template that rewrites earlier turns sets *whole.
 * base is left as it was.
 */
static int encode_turn(struct gen *g, const tf_val *base, const char *text, size_t len,
		       bool *whole, tf_val **msgs, tf_tokens *ids)
{
	tf_chat_prompt before = { 0 }, now = { 0 };
	size_t n = tf_val_len(base);
	tf_val *m = tf_val_list();
	int rc = m ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "out of memory");

	for (size_t i = 0; !rc && i < n; i++)
		if (tf_val_list_push(m, tf_val_ref(tf_val_at(base, i))))
			rc = tf_diag_set(TF_ERR_NOMEM, "out of memory");
	if (!rc && !n && g->system)
		rc = push_message(m, "system", g->system, strlen(g->system));
	if (!rc && n && !*whole)
		rc = render(g, base, false, &before);
	if (!rc)
		rc = push_message(m, "user", text, len);
	if (!rc)
		rc = render(g, m, true, &now);
	if (!rc && before.text.len && (before.text.len > now.text.len ||
				       memcmp(before.text.p, now.text.p, before.text.len)))
		*whole = true;
	if (!rc)
		rc = tf_chat_prompt_encode(&now, g->tok, *whole ? 0 : before.text.len, ids);
	if (!rc) {
		g->opened = tf_chat_prompt_thinking(&now);
		*msgs = m;
		m = NULL;
	}
	tf_val_unref(m);
	tf_chat_prompt_free(&before);
	tf_chat_prompt_free(&now);
	return rc;
}

/* The ids of a one-turn conversation. */
static int encode_alone(struct gen *g, const char *text, size_t len, tf_tokens *ids)
{
	bool whole = true;
	tf_val *msgs = NULL;
	int rc = encode_turn(g, NULL, text, len, &whole, &msgs, ids);
	tf_val_unref(msgs);
	return rc;
}

static int prompt_ids(struct gen *g, tf_tokens *ids)
{
	const tf_options *o = g->o;
	tf_bytes text = { 0 };
	int rc;

	switch (o->input) {
	case TF_INPUT_TOKENS:
		for (int i = 0; i < o->n_tokens; i++)
			if (tf_tokens_push(ids, o->tokens[i]) != TF_OK)
				return tf_diag_set(TF_ERR_NOMEM, "out of memory");
		return TF_OK;
	case TF_INPUT_TEXT:
		rc = encode_alone(g, o->prompt, strlen(o->prompt), ids);
		break;
	case TF_INPUT_FILE:
	case TF_INPUT_STDIN:
		/* A stream read, so that -f takes pipes and /dev/stdin too. */
		rc = tf_text_read_stream(o->input == TF_INPUT_FILE ? o->prompt_file
								   : "/dev/stdin", &text);
		if (rc == TF_OK)
			rc = encode_alone(g, text.p ? text.p : "", text.len, ids);
		break;
	default:
		rc = tf_diag_set(TF_ERR_INVALID, "no prompt given (-p, -f or --tokens)");
	}
	tf_bytes_free(&text);
	return rc;
}

/*
 * Run ids[0..n) after everything fed so far, chunk by chunk with a progress
 * bar.  The last token's logits land in g->logits row 0, or, with
 * `dump`, every row is written there.  With `mtp` the prompt goes one
 * token a step, each followed by the MTP layer's teacher-forced logits
 * for the token after the next one, written there.
 */
static int feed(struct gen *g, const int32_t *ids, int64_t n, FILE *dump, FILE *mtp)
{
	tf_progress bar;
	int64_t ctx = tf_engine_context(g->e), held = tf_seq_len(g->e, g->sid);
	int64_t chunk = mtp ? 1 : g->chunk;
	float *row = NULL;
	int rc = TF_OK;
	if (held + n > ctx)
		return tf_diag_set(TF_ERR_RANGE, "the prompt needs %" PRId64 " tokens after %"
				   PRId64 " already held, more than the context of %" PRId64
				   " tokens ([runtime] context)", n, held, ctx);
	if (mtp && !(row = malloc((size_t)g->vocab * sizeof(*row))))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory for MTP logits");
	tf_progress_init(&bar, "prefill", (uint64_t)n, TF_PROGRESS_TOKENS);
	for (int64_t done = 0; done < n;) {
		int64_t m = n - done < chunk ? n - done : chunk;
		const tf_batch b = { .n = m, .token = ids + done, .one_seq = g->sid,
				     .out = dump ? g->every : NULL };
		if ((rc = tf_engine_forward(g->e, &b, g->logits, NULL)) != TF_OK)
			goto out;
		if (dump) {
			size_t k = (size_t)m * (size_t)g->vocab;
			if (fwrite(g->logits, sizeof(float), k, dump) != k) {
				rc = tf_diag_set(TF_ERR_IO, "%s: write failed", g->o->dump_logits);
				goto out;
			}
		}
		done += m;
		if (mtp && done < n) {
			int32_t draft;
			if ((rc = tf_seq_draft(g->e, g->sid, ids[done], 1, &draft, row)) != TF_OK)
				goto out;
			if (fwrite(row, sizeof(float), (size_t)g->vocab, mtp) != (size_t)g->vocab) {
				rc = tf_diag_set(TF_ERR_IO, "%s: write failed", g->o->dump_mtp);
				goto out;
			}
		}
		tf_progress_update(&bar, (uint64_t)done);
	}
	tf_progress_finish(&bar);
	if (dump)                       /* the last row is the one sampled from */
		memmove(g->logits, g->logits + ((n - 1) % chunk) * g->vocab,
			(size_t)g->vocab * sizeof(float));
out:
	free(row);
	return rc;
}

/* Streamed reply: reasoning to stderr, the answer and each tool call (a
 * JSON line) to stdout; collected instead with --json. */
static int on_reply(void *ctx, const tf_reply_event *ev)
{
	struct gen *g = ctx;

	if (ev->part == TF_REPLY_TOOL_CALL) {
		tf_val *call;
		int rc = tf_reply_tool_call(ev, &call);
		if (rc != TF_OK)
			return rc;
		if (tf_val_list_push(g->calls, call) != TF_OK)
			return tf_diag_set(TF_ERR_NOMEM, "out of memory");
		if (!g->o->json) {
			tf_bytes line = { 0 };
			rc = tf_val_dump_json(call, &line);
			if (rc == TF_OK)
				printf("\n%.*s\n", (int)line.len, line.p);
			tf_bytes_free(&line);
			if (rc != TF_OK)
				return tf_diag_set(TF_ERR_NOMEM, "out of memory");
		}
		return TF_OK;
	}
	tf_bytes *b = ev->part == TF_REPLY_REASONING ? &g->thinking : &g->answer;
	if (tf_bytes_append(b, ev->text, ev->len) != TF_OK)
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	if (!g->o->json) {
		FILE *f = ev->part == TF_REPLY_REASONING ? stderr : stdout;
		fwrite(ev->text, 1, ev->len, f);
		fflush(f);
	}
	return TF_OK;
}

/* The reply joins the conversation, for the next turn's prompt. */
static int remember_reply(struct gen *g)
{
	tf_val *m;
	int rc = tf_reply_message(&g->thinking, &g->answer, g->calls, &m);
	if (rc != TF_OK)
		return rc;
	if (tf_val_list_push(g->history, m))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory");
	return TF_OK;
}

/* Reply text through the --stop strings, then the reply parser. */
static int pass_text(struct gen *g, tf_reply *rp, const char *text, size_t len)
{
	const char *out;
	size_t n;
	int rc = tf_stopstr_push(&g->stopstr, text, len, &out, &n);
	if (rc == TF_OK && g->stopstr.stopped)
		g->finish = "stop";
	return rc != TF_OK ? rc : tf_reply_push(rp, out, n);
}

/* The text still held when the reply ends. */
static int flush_text(struct gen *g, tf_detok *dt, tf_reply *rp)
{
	const char *text;
	size_t len;
	int rc = tf_detok_flush(dt, &text, &len);
	if (rc == TF_OK)
		rc = pass_text(g, rp, text, len);
	if (rc != TF_OK)
		return rc;
	tf_stopstr_flush(&g->stopstr, &text, &len);
	if ((rc = tf_reply_push(rp, text, len)) != TF_OK)
		return rc;
	return tf_reply_finish(rp);
}

/* One token of the reply: counted, streamed, and *done when it ends the
 * reply (a stop token or a --stop string). */
static int take(struct gen *g, tf_detok *dt, tf_reply *rp, int32_t next, bool *done)
{
	const char *text;
	size_t len;
	int rc;
	g->n_gen++;
	if (g->gst && (rc = tf_grammar_accept(g->gst, next)) != TF_OK)
		return rc;
	bool eos = tf_stop_has(&g->stops, next);
	if (eos) {
		g->finish = "eos";
	} else if (g->tok) {
		if ((rc = tf_detok_push(dt, next, &text, &len)) != TF_OK ||
		    (rc = pass_text(g, rp, text, len)) != TF_OK)
			return rc;
	} else if (!g->o->json) {
		printf("%s%d", g->n_gen > 1 ? "," : "", next);
		fflush(stdout);
	}
	*done = eos || g->stopstr.stopped;
	return TF_OK;
}

/*
 * A step of up to depth drafts ([mtp] adaptive may draft fewer, or none):
 * its tokens are taken as serial decoding would have sampled them; one
 * that ends the reply cuts the sequence back to where serial decoding
 * would have stopped feeding.
 */
static int speculate(struct gen *g, tf_detok *dt, tf_reply *rp, int depth, bool *done)
{
	int64_t pos = tf_seq_len(g->e, g->sid);
	int n, drafted, i = 0, rc;
	if ((rc = tf_seq_step(g->e, g->sid, depth, g->logits, g->spec, &n, &drafted)) != TF_OK)
		return rc;
	g->sp.forwards++;
	g->sp.replays += n - 1 < drafted;
	g->sp.steps += drafted > 0;
	g->sp.drafted += drafted;
	g->sp.accepted += n - 1;
	for (int j = 0; j < drafted; j++) {
		g->sp.tried_at[j]++;
		g->sp.kept_at[j] += j < n - 1;
	}
	*done = false;
	while (i < n && !*done)
		if ((rc = take(g, dt, rp, g->spec[i++], done)) != TF_OK)
			return rc;
	if (*done && i < n)
		rc = tf_seq_truncate(g->e, g->sid, pos + i);
	return rc;
}

/*
 * Sample up to max_tokens tokens after the prompt, and say why the reply
 * ended (g->finish): a stop token (eos), max_tokens (length), the context
 * full (context) or a --stop string (stop).  A stop token is fed too when
 * the context has room; only then does the sequence hold the turn as the
 * next turn's render has it (g->in_step).  With [mtp] enabled the tokens
 * come in speculative steps while two or more are left to sample and room
 * is left to feed them, the same tokens as one at a time.
 */
static int reply(struct gen *g)
{
	tf_detok dt;
	tf_reply rp;
	int rc = TF_OK;

	if (g->gram) {                  /* each reply a document of its own */
		tf_grammar_state_free(g->gst);
		g->gst = NULL;
		if ((rc = tf_grammar_state_new(g->gram, &g->gst)) != TF_OK ||
		    (rc = tf_seq_constrain(g->e, g->sid, tf_grammar_mask, g->gst)) != TF_OK)
			return rc;
	}
	tf_detok_init(&dt, g->tok, TF_TOK_SKIP_SPECIAL);
	tf_reply_init(&rp, g->opened, on_reply, g);
	tf_stopstr_reset(&g->stopstr);
	g->n_gen = 0;
	g->finish = "length";
	g->in_step = false;
	memset(&g->sp, 0, sizeof(g->sp));
	double t0 = tf_cli_now_s();
	while (g->n_gen < g->max_tokens) {
		int32_t next;
		bool done;
		int64_t pos = tf_seq_len(g->e, g->sid);
		/* The reply's last token is sampled, never fed. */
		int64_t k = g->max_tokens - g->n_gen - 2;
		if (k > tf_engine_context(g->e) - pos - 1)
			k = tf_engine_context(g->e) - pos - 1;
		if (k > g->depth)
			k = g->depth;
		if (k > 0) {
			if ((rc = speculate(g, &dt, &rp, (int)k, &done)) != TF_OK)
				break;
			if (done) {
				g->in_step = !strcmp(g->finish, "eos");
				break;
			}
			continue;
		}
		if ((rc = tf_seq_sample(g->e, g->sid, g->logits, &next)) != TF_OK ||
		    (rc = take(g, &dt, &rp, next, &done)) != TF_OK)
			break;
		if (!done && g->n_gen == g->max_tokens)
			break;
		if (pos >= tf_engine_context(g->e)) {  /* no slot for next */
			if (!done)
				g->finish = "context";
			break;
		}
		const tf_batch b = { .n = 1, .token = &next, .one_seq = g->sid };
		if ((rc = tf_engine_forward(g->e, &b, g->logits, NULL)) != TF_OK)
			break;
		g->sp.forwards++;
		if (done) {
			g->in_step = !strcmp(g->finish, "eos");
			break;
		}
	}
	g->t_decode = tf_cli_now_s() - t0;
	if (rc == TF_OK && g->tok)
		rc = flush_text(g, &dt, &rp);
	tf_reply_free(&rp);
	tf_detok_free(&dt);
	if (rc == TF_OK && !strcmp(g->finish, "context"))
		fprintf(stderr, "\ntfrun: the reply stopped after %" PRId64 " tokens: the context "
			"of %" PRId64 " tokens is full ([runtime] context)\n", g->n_gen,
			tf_engine_context(g->e));
	return rc;
}

static void json_string(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* The process's resident peak so far (Linux reports kilobytes). */
static double peak_rss_mib(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) ? 0.0 : (double)ru.ru_maxrss / 1024.0;
}

/* The drafts of the reply: a line, or with --json an object. */
static void print_drafts(const struct gen *g, FILE *f)
{
	const bool json = g->o->json;
	double steps = g->sp.steps ? (double)g->sp.steps : 1;
	double passes = g->sp.forwards ? (double)g->sp.forwards : 1;
	fprintf(f, json ? "{\"drafter\": \"%s\", \"drafted\": %" PRId64 ", \"accepted\": %"
		PRId64 ", \"accepted_by_position\": [" : "drafter %s: drafted %" PRId64
		", accepted %" PRId64 ", by position", tf_engine_drafter(g->e), g->sp.drafted,
		g->sp.accepted);
	for (int j = 0; j < g->depth && g->sp.tried_at[j]; j++)
		fprintf(f, json ? "%s%.4f" : "%s%.2f", json && j ? ", " : " ",
			(double)g->sp.kept_at[j] / (double)g->sp.tried_at[j]);
	if (json) {
		fprintf(f, "], \"drafted_by_position\": [");
		for (int j = 0; j < g->depth && g->sp.tried_at[j]; j++)
			fprintf(f, "%s%" PRId64, j ? ", " : "", g->sp.tried_at[j]);
	}
	fprintf(f, json ? "], \"mean_accepted\": %.4f, \"steps\": %" PRId64
		", \"forwards\": %" PRId64 ", \"replays\": %" PRId64
		", \"tokens_per_forward\": %.4f}" :
		", mean accepted %.2f in %" PRId64 " drafting steps, main-model passes %" PRId64
		" (%" PRId64 " undoing drafts), tokens per pass %.2f\n",
		(double)g->sp.accepted / steps, g->sp.steps, g->sp.forwards, g->sp.replays,
		(double)g->n_gen / passes);
}

static void print_stats(const struct gen *g)
{
	double pp = g->t_prefill > 0 ? (double)g->n_prompt / g->t_prefill : 0;
	double tg = g->t_decode > 0 && g->n_gen > 0 ? (double)g->n_gen / g->t_decode : 0;
	if (!g->o->json) {
		fprintf(stderr, "\nprompt tokens: %" PRId64 ", prefill: %.2f tok/s, "
			"generated tokens: %" PRId64 ", decode: %.2f tok/s, finish: %s\n",
			g->n_prompt, pp, g->n_gen, tg, g->finish);
		if (tf_engine_device_samples(g->e))
			fprintf(stderr, "tokens sampled on the device: %" PRId64 "\n",
				tf_engine_device_samples(g->e));
		const tf_graph_stats gs = tf_engine_graph_stats(g->e);
		if (gs.steps)
			fprintf(stderr, "device graphs: %" PRIu64 " steps, %" PRIu64 " graphs run, %"
				PRIu64 " built\n", gs.steps, gs.runs, gs.built);
		if (g->depth)
			print_drafts(g, stderr);
		return;
	}
	printf("{\"prompt_tokens\": %" PRId64 ", \"prefill_tps\": %.2f, "
	       "\"generated_tokens\": %" PRId64 ", \"finish_reason\": \"%s\", \"decode_tps\": %.2f, "
	       "\"prefill_s\": %.6f, \"decode_s\": %.6f, \"load_s\": %.6f, "
	       "\"peak_rss_mib\": %.1f, \"device_samples\": %" PRId64 ", \"text\": ",
	       g->n_prompt, pp, g->n_gen, g->finish, tg, g->t_prefill, g->t_decode, g->t_load,
	       peak_rss_mib(), tf_engine_device_samples(g->e));
	json_string(g->answer.p ? g->answer.p : "", g->answer.len);
	printf(", \"thinking\": ");
	json_string(g->thinking.p ? g->thinking.p : "", g->thinking.len);
	if (tf_val_len(g->calls)) {
		tf_bytes calls = { 0 };
		if (tf_val_dump_json(g->calls, &calls) == TF_OK)
			printf(", \"tool_calls\": %.*s", (int)calls.len, calls.p);
		tf_bytes_free(&calls);
	}
	if (g->depth) {
		printf(", \"drafts\": ");
		print_drafts(g, stdout);
	}
	const tf_graph_stats gs = tf_engine_graph_stats(g->e);
	printf(", \"graph_steps\": %" PRIu64 ", \"graph_runs\": %" PRIu64 ", \"graph_built\": %"
	       PRIu64, gs.steps, gs.runs, gs.built);
	printf(", \"stages_s\": {");
	for (int s = 0; s < tf_engine_stage_count(); s++)
		printf("%s\"%s\": %.6f", s ? ", " : "", tf_engine_stage_name(s),
		       tf_engine_stage_seconds(g->e, s));
	printf("}}\n");
}

/* One prompt in, one reply out. */
static int run_once(struct gen *g)
{
	tf_tokens ids = { 0 };
	FILE *dump = NULL, *mtp = NULL;
	int rc = prompt_ids(g, &ids);
	if (rc != TF_OK) {
		tf_tokens_free(&ids);
		return tf_cli_fail("prompt");
	}
	if (ids.n == 0) {
		tf_tokens_free(&ids);
		tf_diag_set(TF_ERR_INVALID, "the prompt is empty");
		return tf_cli_fail("prompt");
	}
	if (g->o->dump_logits && !(dump = fopen(g->o->dump_logits, "wb"))) {
		tf_tokens_free(&ids);
		tf_diag_set(TF_ERR_IO, "%s: %s", g->o->dump_logits, strerror(errno));
		return tf_cli_fail("--dump-logits");
	}
	if (g->o->dump_mtp && (!tf_engine_has_mtp(g->e) || !(mtp = fopen(g->o->dump_mtp, "wb")))) {
		tf_tokens_free(&ids);
		if (dump)
			fclose(dump);
		if (!tf_engine_has_mtp(g->e))
			tf_diag_set(TF_ERR_INVALID, "the MTP layer is not open: no drafter runs it "
				    "([mtp] enabled, [plugins] drafter)");
		else
			tf_diag_set(TF_ERR_IO, "%s: %s", g->o->dump_mtp, strerror(errno));
		return tf_cli_fail("--dump-mtp-logits");
	}
	g->n_prompt = (int64_t)ids.n;
	double t0 = tf_cli_now_s();
	rc = feed(g, ids.ids, (int64_t)ids.n, dump, mtp);
	g->t_prefill = tf_cli_now_s() - t0;
	tf_tokens_free(&ids);
	if (dump && fclose(dump) != 0 && rc == TF_OK)
		rc = tf_diag_set(TF_ERR_IO, "%s: write failed", g->o->dump_logits);
	if (mtp && fclose(mtp) != 0 && rc == TF_OK)
		rc = tf_diag_set(TF_ERR_IO, "%s: write failed", g->o->dump_mtp);
	if (rc != TF_OK)
		return tf_cli_fail("prefill");
	if ((rc = reply(g)) != TF_OK)
		return tf_cli_fail("decode");
	print_stats(g);
	return EXIT_SUCCESS;
}

/* "tfrun: <what>: <diag>", and the chat goes on. */
static void warn(const char *what)
{
	fprintf(stderr, "tfrun: %s: %s\n", what, tf_diag_msg());
}

static int too_long(int64_t need, int64_t ctx)
{
	return tf_diag_set(TF_ERR_RANGE, "the turn needs %" PRId64 " tokens, more than the "
			   "context of %" PRId64 " tokens ([runtime] context)", need, ctx);
}

/*
 * The ids of one chat turn, fitted into the context, and the turn added
 * to the history.  When the sequence does not hold the history as
 * rendered, the whole conversation is fed again from an empty sequence.  A
 * turn that does not fit after the conversation so far starts a new one
 * (the system message again) if it fits alone.  On failure the history
 * and the sequence are left as they were; TF_ERR_RANGE when the turn does
 * not fit even alone.
 */
static int chat_turn(struct gen *g, const char *line, size_t n, tf_tokens *ids)
{
	int64_t ctx = tf_engine_context(g->e), held, need;
	bool whole = !g->in_step;
	tf_val *msgs = NULL, *fresh = NULL;
	tf_tokens alone = { 0 };
	int rc = encode_turn(g, g->history, line, n, &whole, &msgs, ids);
	if (rc != TF_OK)
		goto out;
	held = whole ? 0 : tf_seq_len(g->e, g->sid);
	need = (int64_t)ids->n;
	if (held + need > ctx && tf_val_len(g->history)) {
		bool w = true;
		if ((rc = encode_turn(g, NULL, line, n, &w, &fresh, &alone)) != TF_OK)
			goto out;
		if ((int64_t)alone.n > ctx) {
			rc = too_long((int64_t)alone.n, ctx);
			goto out;
		}
		fprintf(stderr, "tfrun: the conversation and this turn need %" PRId64 " tokens, "
			"more than the context of %" PRId64 " ([runtime] context): starting a "
			"new conversation\n", held + need, ctx);
		tf_val_unref(msgs);
		msgs = fresh;
		fresh = NULL;
		tf_tokens_free(ids);
		*ids = alone;
		alone = (tf_tokens){ 0 };
		whole = true;
		held = 0;
		need = (int64_t)ids->n;
	}
	if (held + need > ctx) {
		rc = too_long(need, ctx);
		goto out;
	}
	if (whole && (rc = tf_seq_truncate(g->e, g->sid, 0)) != TF_OK)
		goto out;
	tf_val_unref(g->history);
	g->history = msgs;
	msgs = NULL;
out:
	tf_tokens_free(&alone);
	tf_val_unref(fresh);
	tf_val_unref(msgs);
	return rc;
}

/*
 * A read-reply loop: each line is a user turn continuing the conversation
 * (the sequence keeps its state between turns).  A turn that cannot be
 * encoded (invalid UTF-8) or is longer than the whole context is skipped
 * with a message, the conversation kept; one that overflows the context
 * left starts a new conversation.  Each reply ends with a newline.
 */
static int run_chat(struct gen *g)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = EXIT_SUCCESS;

	if (!g->tok) {
		tf_diag_set(TF_ERR_NOT_FOUND, "interactive chat needs the checkpoint's tokenizer.json");
		return tf_cli_fail(g->o->ini);
	}
	for (;;) {
		fputs("> ", stderr);
		fflush(stderr);
		if ((n = getline(&line, &cap, stdin)) < 0)
			break;
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = 0;
		if (n == 0)
			continue;
		tf_tokens ids = { 0 };
		if (chat_turn(g, line, (size_t)n, &ids) != TF_OK) {
			tf_tokens_free(&ids);
			warn("turn skipped");
			continue;
		}
		g->answer.len = g->thinking.len = 0;
		tf_val_unref(g->calls);         /* the last reply's message keeps its own */
		if (!(g->calls = tf_val_list())) {
			tf_tokens_free(&ids);
			tf_diag_set(TF_ERR_NOMEM, "out of memory");
			rc = tf_cli_fail("chat");
			break;
		}
		g->n_prompt = (int64_t)ids.n;
		double t0 = tf_cli_now_s();
		int err = feed(g, ids.ids, (int64_t)ids.n, NULL, NULL);
		g->t_prefill = tf_cli_now_s() - t0;
		tf_tokens_free(&ids);
		if (err != TF_OK || reply(g) != TF_OK || remember_reply(g) != TF_OK) {
			rc = tf_cli_fail("chat");
			break;
		}
		if (!g->o->json && (!g->answer.len || g->answer.p[g->answer.len - 1] != '\n')) {
			putchar('\n');
			fflush(stdout);
		}
		print_stats(g);
	}
	free(line);
	return rc;
}

int tf_cli_generate(const tf_options *o)
{
	struct gen g = { .o = o };
	int rc = EXIT_FAILURE;
	const double t0 = tf_cli_now_s();

	if (tf_engine_open(o->ini, (const char *const *)o->overrides, o->n_overrides, &g.e))
		return tf_cli_fail(o->ini);
	if ((rc = tf_cli_follow(g.e, o->ini)) >= 0)
		goto out;
	rc = EXIT_FAILURE;
	g.conf = tf_engine_conf(g.e);
	if (read_chat(&g) != TF_OK || tf_seq_new(g.e, &g.sid) != TF_OK) {
		tf_cli_fail(o->ini);
		goto out;
	}
	g.t_load = tf_cli_now_s() - t0;
	g.vocab = tf_engine_vocab(g.e);
	g.chunk = tf_engine_prefill_chunk(g.e);
	if (read_grammar(&g) != TF_OK) {
		tf_cli_fail(o->json_schema ? "--json-schema" : "--grammar");
		goto out;
	}
	if (read_sampling(&g) != TF_OK) {
		tf_cli_fail(o->ini);
		goto out;
	}
	/* The logits stay where the backend samples them, unless dumped. */
	tf_engine_defer_logits(g.e, !o->dump_logits && !o->dump_mtp);
	g.logits = malloc((size_t)g.chunk * (size_t)g.vocab * sizeof(float));
	g.every = malloc((size_t)g.chunk);
	if (g.every)
		memset(g.every, 1, (size_t)g.chunk);
	g.depth = g.gram ? 0 : tf_engine_draft_depth(g.e);     /* drafts pass no grammar */
	g.spec = malloc((size_t)(g.depth + 1) * sizeof(*g.spec));
	if (!g.logits || !g.every || !g.spec) {
		tf_diag_set(TF_ERR_NOMEM, "out of memory for %" PRId64 " logit rows", g.chunk);
		tf_cli_fail(o->ini);
		goto out;
	}
	rc = o->interactive ? run_chat(&g) : run_once(&g);
out:
	gen_free(&g);
	return rc;
}
