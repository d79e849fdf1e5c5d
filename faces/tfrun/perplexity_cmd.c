/* perplexity_cmd.c - see perplexity_cmd.h. */
#include "perplexity_cmd.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "tf/diag.h"
#include "tf/progress.h"
#include "tf/text.h"
#include "tf/utf8.h"
#include "tf/tokenizer.h"
#include "tf/value.h"
#include "util.h"

/* A text file larger than this is not a perplexity test set. */
#define PPL_MAX_FILE (1u << 30)

struct ppl {
	tf_engine *e;
	tf_seq_id seq;                  /* each window in turn */
	uint8_t *every;                 /* [chunk] ones: every row's logits */
	tf_tokenizer *tok;
	tf_tokens ids;
	float *logits;                  /* [chunk, vocab] */
	int vocab;
	int64_t window, chunk, n_windows;
	double nll;                     /* summed over the scored tokens */
	int64_t scored;
};

/* The text's ids; empty, non-UTF-8 or too short text is an error. */
static int read_ids(struct ppl *p, const char *ini, const char *file)
{
	char path[4200];
	char *text = NULL;
	size_t len, bad;
	int rc;

	if ((rc = tf_cli_model_file(tf_engine_conf(p->e), "tokenizer.json", path,
				    sizeof(path))) != TF_OK)
		return rc;
	if ((rc = tf_tok_load(path, &p->tok)) != TF_OK)
		return rc;
	if ((rc = tf_text_read(file, PPL_MAX_FILE, &text, &len)) != TF_OK)
		return rc;
	if (len == 0)
		rc = tf_diag_set(TF_ERR_INVALID, "%s: empty file, nothing to score", file);
	else if (!tf_utf8_valid(text, len, &bad))
		rc = tf_diag_set(TF_ERR_INVALID, "%s: not UTF-8 text (invalid byte at offset %zu)",
				 file, bad);
	else
		rc = tf_tok_encode(p->tok, text, len, TF_TOK_SPECIAL_AS_TEXT, &p->ids);
	free(text);
	if (rc)
		return rc;
	p->n_windows = (int64_t)p->ids.n / p->window;
	if (p->n_windows == 0)
		return tf_diag_set(TF_ERR_INVALID, "%s: %zu tokens, shorter than one window of "
				   "%" PRId64 " ([runtime] context in %s; set a smaller one with "
				   "--set runtime.context=N)", file, p->ids.n, p->window, ini);
	if (p->window < 2)
		return tf_diag_set(TF_ERR_INVALID, "[runtime] context %" PRId64 ": a window needs "
				   "at least 2 tokens", p->window);
	return TF_OK;
}

/* -log softmax(row)[target], in double. */
static double nll_of(const float *row, int vocab, int32_t target)
{
	float mx = row[0];
	for (int i = 1; i < vocab; i++)
		mx = row[i] > mx ? row[i] : mx;
	double sum = 0.0;
	for (int i = 0; i < vocab; i++)
		sum += exp((double)row[i] - mx);
	return log(sum) + mx - row[target];
}

/* Scores window w: every position but the last predicts the next id. */
static int score_window(struct ppl *p, int64_t w)
{
	const int32_t *ids = p->ids.ids + w * p->window;
	int rc = tf_seq_truncate(p->e, p->seq, 0);
	if (rc)
		return rc;
	for (int64_t done = 0; done < p->window; ) {
		int64_t m = p->window - done < p->chunk ? p->window - done : p->chunk;
		const tf_batch b = { .n = m, .token = ids + done, .one_seq = p->seq,
				     .out = p->every };
		if ((rc = tf_engine_forward(p->e, &b, p->logits, NULL)))
			return rc;
		for (int64_t r = 0; r < m && done + r + 1 < p->window; r++) {
			int32_t next = ids[done + r + 1];
			if (next < 0 || next >= p->vocab)
				return tf_diag_set(TF_ERR_RANGE, "token id %d outside the model's "
						   "vocab of %d", next, p->vocab);
			p->nll += nll_of(p->logits + r * p->vocab, p->vocab, next);
			p->scored++;
		}
		done += m;
	}
	return TF_OK;
}

static int print_result(const struct ppl *p, const char *file, double secs, bool json)
{
	double ppl = exp(p->nll / (double)p->scored);
	if (!json) {
		printf("perplexity: %.4f  (%s: %zu tokens, %" PRId64 " windows of %" PRId64
		       ", %" PRId64 " scored, mean nll %.5f, %.1f s)\n", ppl, file, p->ids.n,
		       p->n_windows, p->window, p->scored, p->nll / (double)p->scored, secs);
		return TF_OK;
	}
	/* A file name need not be UTF-8; JSON text must be. */
	tf_bytes name = { 0 }, quoted = { 0 };
	tf_val *v = NULL;
	int rc = tf_utf8_lossy(file, strlen(file), &name) ||
		 !(v = tf_val_str(name.p ? name.p : "", name.len)) ||
		 tf_val_dump_json(v, &quoted) ? tf_diag_set(TF_ERR_NOMEM, "out of memory") : TF_OK;
	if (!rc)
		printf("{\"file\": %.*s, \"tokens\": %zu, \"window\": %" PRId64 ", \"windows\": %"
		       PRId64 ", \"scored\": %" PRId64 ", \"nll\": %.6f, \"perplexity\": %.6f, "
		       "\"seconds\": %.3f}\n", (int)quoted.len, quoted.p, p->ids.n, p->window,
		       p->n_windows, p->scored, p->nll / (double)p->scored, ppl, secs);
	tf_val_unref(v);
	tf_bytes_free(&name);
	tf_bytes_free(&quoted);
	return rc;
}

int tf_cli_perplexity(const tf_options *o)
{
	struct ppl p = { 0 };
	int rc = EXIT_FAILURE;
	const double t0 = tf_cli_now_s();

	if (tf_engine_open(o->ini, (const char *const *)o->overrides, o->n_overrides, &p.e))
		goto fail;
	if ((rc = tf_cli_follow(p.e, o->ini)) >= 0)
		goto out;
	rc = EXIT_FAILURE;
	p.window = tf_engine_context(p.e);
	p.chunk = tf_engine_prefill_chunk(p.e);
	if (read_ids(&p, o->ini, o->perplexity) || tf_seq_new(p.e, &p.seq))
		goto fail;
	p.vocab = tf_engine_vocab(p.e);
	p.logits = malloc((size_t)p.chunk * (size_t)p.vocab * sizeof(float));
	p.every = malloc((size_t)p.chunk);
	if (p.every)
		memset(p.every, 1, (size_t)p.chunk);
	if (!p.logits || !p.every) {
		tf_diag_set(TF_ERR_NOMEM, "out of memory for %" PRId64 " logit rows", p.chunk);
		goto fail;
	}
	tf_progress bar;
	tf_progress_init(&bar, "perplexity", (uint64_t)(p.n_windows * p.window),
			 TF_PROGRESS_TOKENS);
	for (int64_t w = 0; w < p.n_windows; w++) {
		if (score_window(&p, w))
			goto fail;
		tf_progress_update(&bar, (uint64_t)((w + 1) * p.window));
	}
	tf_progress_finish(&bar);
	if (print_result(&p, o->perplexity, tf_cli_now_s() - t0, o->json))
		goto fail;
	rc = 0;
	goto out;
fail:
	tf_cli_fail("--perplexity");
out:
	free(p.logits);
	free(p.every);
	tf_tokens_free(&p.ids);
	tf_tok_free(p.tok);
	tf_engine_close(p.e);
	return rc;
}
