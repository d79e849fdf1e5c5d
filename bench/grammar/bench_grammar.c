/*
 * bench_grammar - what constrained decoding costs per token.
 *
 *   bench_grammar [-r RUNS] [TOKENIZER.json ...]
 *
 * For each tokenizer (default: ling-nano's, 4096 ids, and the shared Qwen3
 * one, 151,669 ids) and each of four JSON Schemas, encodes documents of the
 * schema as a model would write them and feeds them token by token:
 * tf_grammar_apply on the logits, then tf_grammar_accept, then the end id
 * (<|endoftext|>, or the first special token).
 * Prints the compile time (schema to GBNF, parse, vocabulary trie) and the
 * time per token of apply + accept: "cold" on a grammar compiled for the
 * document (one per request: its cache starts empty), with the share of
 * masks its cache gave (tf_grammar_stats), and "warm" on one that has seen
 * the same documents before; each the median of RUNS runs (default 5).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tf/diag.h"
#include "tf/grammar.h"
#include "tf/tokenizer.h"
#include "tf/value.h"

static const struct {
	const char *name, *schema, *docs[3];
} cases[] = {
	{ "json_object", "{\"type\": \"object\"}", {
		"{\"book\": \"Genesis\", \"chapter\": 1, \"verses\": [1, 2, 3], \"text\": \"In the beginning "
		"God created the heaven and the earth.\", \"notes\": {\"kjv\": true, \"year\": 1611}}",
		"{\n  \"speaker\": \"Moses\",\n  \"words\": \"Let my people go, that they may serve me in "
		"the wilderness.\",\n  \"place\": null\n}",
		"{\"a\": [{\"b\": [\"c\", 1.5e3, false]}, {}], \"d\": \"And God said, Let there be light: and "
		"there was light.\"}" } },
	{ "person", "{\"type\": \"object\", \"properties\": {"
		"\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 999},"
		"\"tribe\": {\"enum\": [\"Judah\", \"Levi\", \"Benjamin\", \"Dan\"]},"
		"\"born\": {\"type\": \"string\", \"format\": \"date\"},"
		"\"sons\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
		"\"says\": {\"type\": \"string\"}}, \"required\": [\"name\", \"age\", \"tribe\"]}", {
		"{\"name\": \"Aaron\", \"age\": 123, \"tribe\": \"Levi\", \"sons\": [\"Nadab\", \"Abihu\", "
		"\"Eleazar\", \"Ithamar\"], \"says\": \"The LORD bless thee, and keep thee.\"}",
		"{\"name\": \"David\", \"age\": 70, \"tribe\": \"Judah\", \"born\": \"1040-03-01\", \"says\": "
		"\"The LORD is my shepherd; I shall not want.\"}",
		"{\"name\": \"Samson\", \"age\": 40, \"tribe\": \"Dan\", \"sons\": []}" } },
	{ "tool_call", "{\"type\": \"object\", \"properties\": {\"name\": {\"const\": \"search\"},"
		"\"arguments\": {\"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\"},"
		"\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 100},"
		"\"books\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 8}},"
		"\"required\": [\"query\"], \"additionalProperties\": false}},"
		"\"required\": [\"name\", \"arguments\"], \"additionalProperties\": false}", {
		"{\"name\": \"search\", \"arguments\": {\"query\": \"the lost sheep of the house of Israel\", "
		"\"limit\": 10}}",
		"{\"name\": \"search\", \"arguments\": {\"query\": \"bread\", \"limit\": 3, \"books\": "
		"[\"Exodus\", \"John\"]}}",
		"{\"name\": \"search\", \"arguments\": {\"query\": \"Blessed are the meek: for they shall "
		"inherit the earth.\"}}" } },
	{ "verses", "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {"
		"\"ref\": {\"type\": \"string\", \"pattern\": \"^[A-Z][a-z]+ [0-9]+:[0-9]+$\"},"
		"\"text\": {\"type\": \"string\", \"maxLength\": 200}}, \"required\": [\"ref\", \"text\"]},"
		"\"minItems\": 1}", {
		"[{\"ref\": \"John 3:16\", \"text\": \"For God so loved the world, that he gave his only "
		"begotten Son.\"}, {\"ref\": \"Psalms 23:1\", \"text\": \"The LORD is my shepherd.\"}]",
		"[{\"ref\": \"Genesis 1:3\", \"text\": \"And God said, Let there be light: and there was "
		"light.\"}]",
		"[\n  {\"ref\": \"Exodus 20:13\", \"text\": \"Thou shalt not kill.\"},\n  {\"ref\": \"Exodus "
		"20:15\", \"text\": \"Thou shalt not steal.\"}\n]" } },
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void die(const char *what)
{
	fprintf(stderr, "bench_grammar: %s: %s\n", what, tf_diag_msg());
	exit(1);
}

/* Feeds the documents through g; returns the time (us) and counts the tokens. */
static double feed(tf_grammar *g, tf_tokens *docs, int n_docs, int32_t end, float *logits, int n_vocab,
		   long *tokens)
{
	double t = 0;

	for (int d = 0; d < n_docs; d++) {
		tf_grammar_state *st;
		if (tf_grammar_state_new(g, &st) < 0)
			die("state");
		for (size_t i = 0; i <= docs[d].n; i++) {
			int32_t id = i < docs[d].n ? docs[d].ids[i] : end;
			for (int k = 0; k < n_vocab; k++)
				logits[k] = 0.25f;
			double t0 = now_us();
			if (tf_grammar_apply(st, logits) < 0 || tf_grammar_accept(st, id) < 0)
				die("a document's token");
			t += now_us() - t0;
			if (!isfinite(logits[id]))
				die("a document's token was masked");
		}
		*tokens += (long)docs[d].n + 1;
		tf_grammar_state_free(st);
	}
	return t;
}

static void bench(const char *path, int runs)
{
	tf_tokenizer *tok;
	double t0;

	t0 = now_us();
	if (tf_tok_load(path, &tok) < 0)
		die(path);
	int n_vocab = tf_tok_vocab_size(tok);
	int32_t end = tf_tok_find(tok, "<|endoftext|>");
	for (int32_t id = 0; end < 0 && id < n_vocab; id++)    /* else the first special token */
		end = tf_tok_is_special(tok, id) ? id : -1;
	float *logits = malloc((size_t)n_vocab * sizeof(*logits));
	printf("\n%s: %d ids, loaded in %.0f ms\n\n", path, n_vocab, (now_us() - t0) / 1000);
	printf("| schema | tokens | compile ms | cold us/token | hit rate (cold) | warm us/token |\n");
	printf("|---|---|---|---|---|---|\n");
	for (size_t c = 0; c < N_CASES; c++) {
		tf_tokens docs[3] = { { 0 } };
		tf_val *schema;
		char *gbnf;
		tf_grammar *g;
		long tokens = 0, warm_tokens = 0;
		double *warm = malloc((size_t)runs * sizeof(*warm));

		for (int d = 0; d < 3; d++)
			if (tf_tok_encode(tok, cases[c].docs[d], strlen(cases[c].docs[d]), 0, &docs[d]) < 0)
				die("encode");
		if (tf_val_parse_json(cases[c].schema, strlen(cases[c].schema), &schema) < 0)
			die(cases[c].name);
		t0 = now_us();
		if (tf_grammar_schema_gbnf(schema, &gbnf) < 0 ||
		    tf_grammar_compile(gbnf, strlen(gbnf), tok, n_vocab, &end, 1, &g) < 0)
			die(cases[c].name);
		double compile = now_us() - t0;
		/* cold: each document on a grammar of its own, as one per request */
		double *cold = malloc((size_t)runs * sizeof(*cold));
		tf_grammar_stats cs = { 0 };
		for (int r = 0; r < runs; r++) {
			cold[r] = 0;
			tokens = 0;
			for (int d = 0; d < 3; d++) {
				tf_grammar *gd;
				tf_grammar_stats s;
				if (tf_grammar_compile(gbnf, strlen(gbnf), tok, n_vocab, &end, 1, &gd) < 0)
					die("compile");
				cold[r] += feed(gd, &docs[d], 1, end, logits, n_vocab, &tokens);
				tf_grammar_stats_get(gd, &s);
				cs.masks += s.masks, cs.walks += s.walks;
				tf_grammar_free(gd);
			}
			cold[r] /= (double)tokens;
		}
		qsort(cold, (size_t)runs, sizeof(*cold), cmp_double);
		feed(g, docs, 3, end, logits, n_vocab, &warm_tokens);
		for (int r = 0; r < runs; r++) {
			warm_tokens = 0;
			warm[r] = feed(g, docs, 3, end, logits, n_vocab, &warm_tokens) / (double)warm_tokens;
		}
		qsort(warm, (size_t)runs, sizeof(*warm), cmp_double);
		printf("| %s | %ld | %.1f | %.1f | %.0f%% | %.2f |\n", cases[c].name, tokens, compile / 1000,
		       cold[runs / 2], 100.0 * (double)(cs.masks - cs.walks) / (double)cs.masks,
		       warm[runs / 2]);
		for (int d = 0; d < 3; d++)
			tf_tokens_free(&docs[d]);
		tf_grammar_free(g);
		tf_val_unref(schema);
		free(gbnf);
		free(warm);
		free(cold);
	}
	free(logits);
	tf_tok_free(tok);
}

int main(int argc, char **argv)
{
	int runs = 5, first = 1;

	if (argc >= 3 && !strcmp(argv[1], "-r")) {
		runs = atoi(argv[2]);
		first = 3;
	}
	if (runs < 1) {
		fprintf(stderr, "usage: bench_grammar [-r RUNS] [TOKENIZER.json ...]\n");
		return 2;
	}
	if (first == argc) {
		bench(TF_SOURCE_DIR "/models/ling-nano/tokenizer.json", runs);
		bench(TF_TESTDATA "/tokenizers/qwen3/tokenizer.json", runs);
	}
	for (int i = first; i < argc; i++)
		bench(argv[i], runs);
	return 0;
}
