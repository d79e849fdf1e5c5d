/* chat.c - chat templates, stop tokens, thinking/answer splitting. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat.h"
#include "diag.h"
#include "textfile.h"

/* A generation_config.json is a few hundred bytes. */
#define GENCFG_MAX_FILE (1u << 20)

static const tf_chat_template templates[] = {
	{
		.name = "ling3",
		.open = {
			[TF_ROLE_SYSTEM] = "<role>SYSTEM</role>",
			[TF_ROLE_USER] = "<role>HUMAN</role>",
			[TF_ROLE_ASSISTANT] = "<role>ASSISTANT</role>",
		},
		.close = "<|role_end|>",
		.reply = "<role>ASSISTANT</role>",
		.reply_think = "<role>ASSISTANT</role><think>\n",
		.stops = { "<|role_end|>", "<|endoftext|>" },
	},
	{
		.name = "raw",
		.open = { "", "", "" },
		.close = "",
		.reply = "",
		.reply_think = "",
		.stops = { "<|endoftext|>" },
	},
};

const tf_chat_template *tf_chat_template_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(templates) / sizeof(*templates); i++)
		if (!strcmp(templates[i].name, name))
			return &templates[i];
	return NULL;
}

/* The prompt as a run of pieces, each markup or message text. */
typedef int (*piece_fn)(void *ctx, const char *s, size_t len, bool text);

static int chat_pieces(const tf_chat_template *t, const tf_chat_msg *m, size_t n,
		       bool think, piece_fn fn, void *ctx)
{
	const char *reply = think ? t->reply_think : t->reply;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		if ((unsigned)m[i].role >= TF_ROLE_COUNT)
			return tf_diag_set(TF_ERR_INVALID, "chat message %zu: bad role %d", i,
					   (int)m[i].role);
		if ((rc = fn(ctx, t->open[m[i].role], strlen(t->open[m[i].role]), false)) ||
		    (rc = fn(ctx, m[i].text, m[i].len, true)) ||
		    (rc = fn(ctx, t->close, strlen(t->close), false)))
			return rc;
	}
	return fn(ctx, reply, strlen(reply), false);
}

static int render_piece(void *ctx, const char *s, size_t len, bool text)
{
	return tf_bytes_append(ctx, s, len) ? tf_diag_set(TF_ERR_NOMEM, "chat: out of memory") : TF_OK;
}

int tf_chat_render(const tf_chat_template *t, const tf_chat_msg *m, size_t n,
		   bool think, tf_bytes *out)
{
	return chat_pieces(t, m, n, think, render_piece, out);
}

/* Pieces of one kind are joined before encoding, so "raw" encodes its
 * messages as one text, exactly as the rendered prompt would be. */
typedef struct enc_state {
	const tf_tokenizer *tok;
	tf_tokens *out;
	tf_bytes run;
	bool run_text;
} enc_state;

static int flush_run(enc_state *e)
{
	int rc = tf_tok_encode(e->tok, e->run.p ? e->run.p : "", e->run.len,
			       e->run_text ? TF_TOK_SPECIAL_AS_TEXT : 0, e->out);

	e->run.len = 0;
	return rc;
}

static int encode_piece(void *ctx, const char *s, size_t len, bool text)
{
	enc_state *e = ctx;
	int rc;

	if (!len)
		return TF_OK;
	if (text != e->run_text && e->run.len && (rc = flush_run(e)))
		return rc;
	e->run_text = text;
	return tf_bytes_append(&e->run, s, len) ? tf_diag_set(TF_ERR_NOMEM, "chat: out of memory") : TF_OK;
}

int tf_chat_encode(const tf_chat_template *t, const tf_tokenizer *tok,
		   const tf_chat_msg *m, size_t n, bool think, tf_tokens *out)
{
	enc_state e = { .tok = tok, .out = out };
	int rc = chat_pieces(t, m, n, think, encode_piece, &e);

	if (!rc && e.run.len)
		rc = flush_run(&e);
	tf_bytes_free(&e.run);
	return rc;
}

/* ---- stop tokens ---- */

int tf_stop_add(tf_stopset *s, int32_t id)
{
	if (tf_stop_has(s, id))
		return TF_OK;
	if (s->n == TF_STOP_MAX)
		return tf_diag_set(TF_ERR_RANGE, "more than %d stop tokens", TF_STOP_MAX);
	s->ids[s->n++] = id;
	return TF_OK;
}

bool tf_stop_has(const tf_stopset *s, int32_t id)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (s->ids[i] == id)
			return true;
	return false;
}

int tf_stop_add_template(tf_stopset *s, const tf_chat_template *t, const tf_tokenizer *tok)
{
	int i, rc;

	for (i = 0; i < TF_CHAT_MAX_STOPS && t->stops[i]; i++) {
		int32_t id = tf_tok_find(tok, t->stops[i]);

		if (id >= 0 && (rc = tf_stop_add(s, id)))
			return rc;
	}
	return TF_OK;
}

static int add_json_id(tf_stopset *s, const cJSON *v, const char *path)
{
	if (!cJSON_IsNumber(v) || !tf_tok_id_ok(v->valuedouble))
		return tf_diag_set(TF_ERR_FORMAT, "%s: eos_token_id: expected token ids", path);
	return tf_stop_add(s, (int32_t)v->valuedouble);
}

int tf_stop_add_generation_config(tf_stopset *s, const char *path)
{
	const cJSON *eos, *it;
	cJSON *root;
	char *text;
	size_t n;
	int rc = tf_text_read(path, GENCFG_MAX_FILE, &text, &n);

	if (rc == TF_ERR_NOT_FOUND) {
		tf_diag_clear();
		return TF_OK;
	}
	if (rc)
		return rc;
	root = cJSON_ParseWithLength(text, n);
	free(text);
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return tf_diag_set(TF_ERR_FORMAT, "%s: not a JSON object", path);
	}
	eos = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
	if (cJSON_IsArray(eos))
		cJSON_ArrayForEach(it, eos) {
			if ((rc = add_json_id(s, it, path)))
				break;
		}
	else if (eos && !cJSON_IsNull(eos))
		rc = add_json_id(s, eos, path);
	cJSON_Delete(root);
	return rc;
}

/* ---- thinking / answer ---- */

static const char think_open[] = "<think>", think_close[] = "</think>",
		  tool_call[] = "<tool_call>";

void tf_think_init(tf_think_split *s, bool thinking)
{
	memset(s, 0, sizeof(*s));
	s->thinking = thinking;
}

void tf_think_free(tf_think_split *s)
{
	tf_bytes_free(&s->hold);
}

/* Where marker m first occurs in p[0..n), or n. */
static size_t find(const char *p, size_t n, const char *m)
{
	size_t k = strlen(m), i;

	for (i = 0; i + k <= n; i++)
		if (p[i] == m[0] && !memcmp(p + i, m, k))
			return i;
	return n;
}

/* Length of the longest tail of p[0..n) that begins marker m. */
static size_t partial(const char *p, size_t n, const char *m)
{
	size_t k = strlen(m), l;

	for (l = k - 1 < n ? k - 1 : n; l > 0; l--)
		if (!memcmp(p + n - l, m, l))
			return l;
	return 0;
}

static int think_scan(tf_think_split *s, const char *p, size_t n, bool final,
		      tf_think_emit emit, void *ctx)
{
	int rc;

	while (n) {
		tf_text_kind kind = s->thinking ? TF_TEXT_THINKING : TF_TEXT_ANSWER;
		size_t at, keep = 0, tc = n;
		const char *m;

		if (s->thinking) {
			at = find(p, n, think_close);
			tc = find(p, n, tool_call);
			m = tc < at ? tool_call : think_close;
			at = tc < at ? tc : at;
		} else {
			at = find(p, n, think_open);
			m = think_open;
		}
		if (at == n) {
			if (!final) {
				keep = s->thinking ? partial(p, n, think_close) : partial(p, n, think_open);
				if (s->thinking && partial(p, n, tool_call) > keep)
					keep = partial(p, n, tool_call);
			}
			if (n > keep && (rc = emit(ctx, kind, p, n - keep)))
				return rc;
			s->hold.len = 0;
			if (keep && tf_bytes_append(&s->hold, p + n - keep, keep))
				return tf_diag_set(TF_ERR_NOMEM, "chat: out of memory");
			return TF_OK;
		}
		if (at && (rc = emit(ctx, kind, p, at)))
			return rc;
		s->thinking = !s->thinking;
		p += at + strlen(m);
		n -= at + strlen(m);
		/* A tool call ends the thinking and belongs to the answer. */
		if (m == tool_call && (rc = emit(ctx, TF_TEXT_ANSWER, tool_call, strlen(tool_call))))
			return rc;
	}
	s->hold.len = 0;
	return TF_OK;
}

int tf_think_push(tf_think_split *s, const char *text, size_t len, tf_think_emit emit, void *ctx)
{
	tf_bytes buf = { 0 };
	int rc;

	if (!s->hold.len)
		return think_scan(s, text, len, false, emit, ctx);
	if (tf_bytes_append(&buf, s->hold.p, s->hold.len) || tf_bytes_append(&buf, text, len)) {
		tf_bytes_free(&buf);
		return tf_diag_set(TF_ERR_NOMEM, "chat: out of memory");
	}
	rc = think_scan(s, buf.p, buf.len, false, emit, ctx);
	tf_bytes_free(&buf);
	return rc;
}

int tf_think_flush(tf_think_split *s, tf_think_emit emit, void *ctx)
{
	tf_bytes held = s->hold;
	int rc;

	s->hold = (tf_bytes){ 0 };
	rc = think_scan(s, held.p, held.len, true, emit, ctx);
	tf_bytes_free(&held);
	return rc;
}
