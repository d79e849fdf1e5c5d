/* generate_cmd.c - see generate_cmd.h. */
#include "generate_cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diag.h"
#include "pipeline.h"
#include "runtime.h"
#include "tf/backend.h"
#include "textfile.h"
#include "tokenizer.h"

/* Everything one run holds; released in gen_free(). */
struct gen {
	const tf_options *o;
	tf_runtime *rt;
	tf_pipeline *pipe;
	tf_tokenizer *tok;
	tf_tokens prompt;
	float *logits;
	int vocab;
	int64_t max_tokens;
	int32_t stop[TF_MAX_EOS + 2];
	int n_stop;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int report(const char *what)
{
	fprintf(stderr, "tfrun: %s: %s\n", what, tf_diag_msg());
	return EXIT_FAILURE;
}

static void gen_free(struct gen *g)
{
	tf_pipeline_free(g->pipe);
	tf_tok_free(g->tok);
	tf_tokens_free(&g->prompt);
	free(g->logits);
	tf_runtime_close(g->rt);
}

/* The checkpoint's tokenizer.json: needed for text in or out. */
static int load_tokenizer(struct gen *g)
{
	char dir[4096], path[4200];
	const char *d;
	int rc = tf_conf_get_path(tf_runtime_conf(g->rt), "model", "path", dir,
				  sizeof(dir), &d);
	if (rc != TF_OK)
		return rc;
	snprintf(path, sizeof(path), "%s/tokenizer.json", d);
	return tf_tok_load(path, &g->tok);
}

/* The ids that end generation: config.json's eos ids and the chat
 * terminators the tokenizer knows. */
static void collect_stops(struct gen *g)
{
	const tf_model_config *cfg = tf_runtime_model(g->rt);
	static const char *const names[] = { "<|role_end|>", "<|endoftext|>" };
	for (int i = 0; i < cfg->n_eos; i++)
		g->stop[g->n_stop++] = cfg->eos_token_id[i];
	for (size_t i = 0; g->tok && i < sizeof(names) / sizeof(names[0]); i++) {
		int32_t id = tf_tok_find(g->tok, names[i]);
		if (id >= 0)
			g->stop[g->n_stop++] = id;
	}
}

static int is_stop(const struct gen *g, int32_t id)
{
	for (int i = 0; i < g->n_stop; i++)
		if (g->stop[i] == id)
			return 1;
	return 0;
}

static int read_stdin(char **text, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, stdin);
		if (n < cap)
			break;
		char *grown = realloc(buf, cap * 2);
		if (!grown) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = grown;
		cap *= 2;
	}
	if (!buf)
		return tf_diag_set(TF_ERR_NOMEM, "<stdin>: out of memory");
	if (ferror(stdin)) {
		free(buf);
		return tf_diag_set(TF_ERR_IO, "<stdin>: read error");
	}
	*text = buf;
	*len = n;
	return TF_OK;
}

static int read_prompt_text(const tf_options *o, char **text, size_t *len)
{
	switch (o->input) {
	case TF_INPUT_TEXT:
		*len = strlen(o->prompt);
		*text = strdup(o->prompt);
		return *text ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "out of memory");
	case TF_INPUT_FILE:
		return tf_text_read(o->prompt_file, (size_t)1 << 30, text, len);
	case TF_INPUT_STDIN:
		return read_stdin(text, len);
	default:
		return tf_diag_set(TF_ERR_INVALID, "no prompt given (-p, -f or --tokens)");
	}
}

static int build_prompt(struct gen *g)
{
	const tf_options *o = g->o;
	if (o->input == TF_INPUT_TOKENS) {
		for (int i = 0; i < o->n_tokens; i++)
			if (tf_tokens_push(&g->prompt, o->tokens[i]) != TF_OK)
				return tf_diag_set(TF_ERR_NOMEM, "out of memory");
		return TF_OK;
	}
	char *text = NULL;
	size_t len = 0;
	int rc = read_prompt_text(o, &text, &len);
	if (rc == TF_OK)
		rc = tf_tok_encode(g->tok, text, len, TF_TOK_SPECIAL_AS_TEXT, &g->prompt);
	free(text);
	if (rc == TF_OK && g->prompt.n == 0)
		rc = tf_diag_set(TF_ERR_INVALID, "the prompt is empty");
	return rc;
}

static int dump_logits(const struct gen *g, const float *logits, int64_t rows)
{
	FILE *f = fopen(g->o->dump_logits, "wb");
	if (!f)
		return tf_diag_set(TF_ERR_IO, "%s: %s", g->o->dump_logits, strerror(errno));
	size_t n = (size_t)rows * (size_t)g->vocab;
	int ok = fwrite(logits, sizeof(float), n, f) == n;
	ok &= fclose(f) == 0;
	return ok ? TF_OK : tf_diag_set(TF_ERR_IO, "%s: write failed", g->o->dump_logits);
}

static void print_stats(const struct gen *g, int64_t n_prompt, double t_prefill,
			int64_t n_gen, double t_decode)
{
	double pp = t_prefill > 0 ? (double)n_prompt / t_prefill : 0;
	double tg = t_decode > 0 && n_gen > 0 ? (double)n_gen / t_decode : 0;
	if (g->o->json) {
		printf("{\"prompt_tokens\": %" PRId64 ", \"prefill_tps\": %.2f, "
		       "\"generated_tokens\": %" PRId64 ", \"decode_tps\": %.2f, "
		       "\"prefill_s\": %.4f, \"decode_s\": %.4f, \"stages_s\": {",
		       n_prompt, pp, n_gen, tg, t_prefill, t_decode);
		for (int s = 0; s < TF_STAGE_COUNT; s++)
			printf("%s\"%s\": %.4f", s ? ", " : "", tf_stage_name((tf_stage)s),
			       tf_pipeline_stage_seconds(g->pipe, (tf_stage)s));
		printf("}}\n");
		return;
	}
	fprintf(stderr, "\nprompt tokens: %" PRId64 ", prefill: %.2f tok/s, "
		"generated tokens: %" PRId64 ", decode: %.2f tok/s\n",
		n_prompt, pp, n_gen, tg);
}

int tf_cli_generate(const tf_options *o)
{
	struct gen g = { .o = o };
	int rc = EXIT_FAILURE;
	int64_t max_tokens;

	if (tf_runtime_open(o->ini, (const char *const *)o->overrides, o->n_overrides, &g.rt))
		return report(o->ini);
	if (tf_conf_get_int(tf_runtime_conf(g.rt), "sampling", "max_tokens", 128,
			    &max_tokens) != TF_OK) {
		report(o->ini);
		goto out;
	}
	if (o->input != TF_INPUT_TOKENS || !o->json) {
		if (load_tokenizer(&g) != TF_OK) {
			report(o->ini);
			goto out;
		}
	}
	collect_stops(&g);
	if (build_prompt(&g) != TF_OK) {
		report("prompt");
		goto out;
	}
	if (tf_pipeline_init(g.rt, &g.pipe) != TF_OK) {
		report(o->ini);
		goto out;
	}
	g.vocab = tf_pipeline_vocab(g.pipe);
	int64_t n_prompt = (int64_t)g.prompt.n;
	if (n_prompt > tf_pipeline_context(g.pipe)) {
		tf_diag_set(TF_ERR_RANGE, "the prompt has %" PRId64 " tokens, more than the "
			    "context of %" PRId64 " ([runtime] context)", n_prompt,
			    tf_pipeline_context(g.pipe));
		report("prompt");
		goto out;
	}
	int64_t rows = o->dump_logits ? n_prompt : 1;
	g.logits = malloc((size_t)rows * (size_t)g.vocab * sizeof(float));
	if (!g.logits) {
		tf_diag_set(TF_ERR_NOMEM, "out of memory for %" PRId64 " logit rows", rows);
		report("prompt");
		goto out;
	}

	double t0 = now_s();
	if (tf_pipeline_forward(g.pipe, g.prompt.ids, n_prompt, g.logits,
				o->dump_logits != NULL) != TF_OK) {
		report("prefill");
		goto out;
	}
	double t_prefill = now_s() - t0;
	if (o->dump_logits && dump_logits(&g, g.logits, n_prompt) != TF_OK) {
		report("--dump-logits");
		goto out;
	}

	const float *last = g.logits + (rows - 1) * g.vocab;
	const tf_backend *be = tf_runtime_host(g.rt)->backend;
	void *bctx = tf_runtime_host(g.rt)->backend_ctx;
	int64_t n_gen = 0;
	double t1 = now_s();
	while (n_gen < max_tokens && tf_pipeline_pos(g.pipe) < tf_pipeline_context(g.pipe)) {
		int32_t next;
		be->argmax(bctx, &next, last, 1, g.vocab);
		n_gen++;
		if (is_stop(&g, next))
			break;
		if (g.tok && !o->json) {
			size_t len;
			const char *piece = tf_tok_piece(g.tok, next, &len);
			if (piece)
				fwrite(piece, 1, len, stdout);
			fflush(stdout);
		}
		if (n_gen == max_tokens)
			break;
		if (tf_pipeline_forward(g.pipe, &next, 1, g.logits, 0) != TF_OK) {
			report("decode");
			goto out;
		}
		last = g.logits;
	}
	double t_decode = now_s() - t1;
	print_stats(&g, n_prompt, t_prefill, n_gen, t_decode);
	rc = EXIT_SUCCESS;
out:
	gen_free(&g);
	return rc;
}
