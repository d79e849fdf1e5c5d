/*
 * grammar_walk - random documents of JSON Schemas, for schema_check.py.
 *
 *   grammar_walk TOKENIZER [-n DOCS] [-s SEED] [--gbnf]
 *
 * Reads one JSON Schema per line on stdin (null: no schema); for each
 * writes one JSON line: {"docs": [...]} with DOCS documents, each made by a
 * random walk over the tokens tf_grammar_apply allows, or {"gbnf": "..."}
 * with --gbnf, or {"status": N, "error": "..."} when the schema is refused
 * or a walk fails.  A walk picks uniformly among the allowed tokens, the
 * end (when allowed) with probability 1/4; after 48 tokens it steers to an
 * end: the end when allowed, else the one-byte token that leaves the
 * fewest bytes to a complete document (a shortest completion, computed from
 * the program and the stacks in grammar_int.h).  Exit status: 0 when every line
 * succeeded, 1 otherwise, 2 on bad usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "tf/diag.h"
#include "tf/grammar.h"
#include "tf/text.h"
#include "tf/tokenizer.h"
#include "tf/value.h"

#define STEER_AFTER 48

static uint64_t rng;

static uint64_t next_rand(void)
{
	uint64_t z = (rng += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/*
 * How many bytes a state is from a complete document, from the program
 * (grammar_int.h): the shortest text each rule makes (a fixed point), then
 * for a stack, what is left of each alternative on it.
 */
typedef struct dist {
	const tf_grammar *g;
	int64_t *rule_min;
} dist;

#define FAR ((int64_t)1 << 40)

/* The shortest text from pos to the end of its alternative. */
static int64_t rest_min(const dist *d, int32_t pos)
{
	const g_prog *p = &d->g->prog;
	int64_t n = 0;

	for (; !g_is_end(p, pos) && n < FAR; pos++)
		n += p->elems[pos].op == G_BYTE ? 1 : d->rule_min[p->elems[pos].arg];
	return n < FAR ? n : FAR;
}

static void dist_init(dist *d, const tf_grammar *g)
{
	const g_prog *p = &g->prog;
	bool changed = true;

	d->g = g;
	d->rule_min = malloc((size_t)p->n_rules * sizeof(*d->rule_min));
	for (int32_t r = 0; r < p->n_rules; r++)
		d->rule_min[r] = FAR;
	while (changed) {
		changed = false;
		for (int32_t r = 0; r < p->n_rules; r++)
			for (int32_t a = p->alt_first[r]; a < p->alt_first[r + 1]; a++) {
				int64_t n = rest_min(d, p->alts[a]);
				if (n < d->rule_min[r])
					d->rule_min[r] = n, changed = true;
			}
	}
}

static int64_t distance(const dist *d, const tf_grammar_state *st)
{
	int64_t best = FAR;

	for (int32_t i = 0; i < st->set.n; i++) {
		int64_t n = 0;
		for (int32_t s = st->set.v[i]; s != 0 && n < FAR; s = d->g->match.nodes[s].parent)
			n += rest_min(d, d->g->match.nodes[s].pos);
		best = n < best ? n : best;
	}
	return best;
}

/* The one-byte token that brings st closest to a complete document. */
static int32_t closest(const dist *d, const tf_grammar_state *st, const int32_t byte_tok[256])
{
	int64_t best = FAR;
	int32_t pick = -1;

	for (int b = 0; b < 256; b++) {
		tf_grammar_state *c;
		char by = (char)b;

		if (byte_tok[b] < 0)
			continue;
		tf_grammar_state_clone(st, &c);
		if (tf_grammar_accept_bytes(c, &by, 1) == 0 && distance(d, c) < best)
			best = distance(d, c), pick = byte_tok[b];
		tf_grammar_state_free(c);
	}
	return pick;
}

/* One document into *doc. */
static int walk(tf_grammar *g, const dist *d, const tf_tokenizer *tok, int n_vocab, int32_t end,
		const int32_t byte_tok[256], float *logits, int32_t *allowed, tf_bytes *doc)
{
	tf_grammar_state *st;
	int rc = tf_grammar_state_new(g, &st);

	doc->len = 0;
	for (int step = 0; rc == 0; step++) {
		int n = 0;
		int32_t pick = -1;

		memset(logits, 0, (size_t)n_vocab * sizeof(*logits));
		if ((rc = tf_grammar_apply(st, logits)) < 0)
			break;
		for (int32_t i = 0; i < n_vocab; i++)
			if (isfinite(logits[i]) && i != end)
				allowed[n++] = i;
		bool can_end = isfinite(logits[end]);
		if (can_end && (step >= STEER_AFTER || n == 0 || next_rand() % 4 == 0))
			pick = end;
		if (pick < 0 && step >= STEER_AFTER)
			pick = closest(d, st, byte_tok);
		if (pick < 0 && n == 0) {
			rc = tf_diag_set(TF_ERR_INTERNAL, "no token allowed and the document is not complete");
			break;
		}
		if (pick < 0)
			pick = allowed[next_rand() % (uint64_t)n];
		if ((rc = tf_grammar_accept(st, pick)) < 0 || pick == end)
			break;
		size_t len;
		const char *p = tf_tok_piece(tok, pick, &len);
		if (tf_bytes_append(doc, p, len) < 0)
			rc = TF_ERR_NOMEM;
	}
	tf_grammar_state_free(st);
	return rc;
}

/* Writes {"key": text} as one JSON line. */
static void print_str(const char *key, const char *text, size_t len)
{
	tf_val *v = tf_val_str(text, len);
	tf_bytes j = { 0 };

	tf_val_dump_json(v, &j);
	printf("{\"%s\": %.*s}\n", key, (int)j.len, j.p);
	tf_bytes_free(&j);
	tf_val_unref(v);
}

static int one_schema(const char *line, size_t len, const tf_tokenizer *tok, int n_docs,
		      bool gbnf_only, const int32_t byte_tok[256], float *logits, int32_t *allowed)
{
	int n_vocab = tf_tok_vocab_size(tok);
	int32_t end = tf_tok_find(tok, "<|endoftext|>");
	tf_val *schema = NULL;
	tf_grammar *g = NULL;
	tf_bytes doc = { 0 }, docs = { 0 };
	dist d = { 0 };
	char *gbnf = NULL;
	int rc;

	if ((rc = tf_val_parse_json(line, len, &schema)) < 0 ||
	    (rc = tf_grammar_schema_gbnf(tf_val_kind_of(schema) == TF_VAL_NONE ? NULL : schema, &gbnf)) < 0)
		goto out;
	if (gbnf_only) {
		print_str("gbnf", gbnf, strlen(gbnf));
		goto out;
	}
	if ((rc = tf_grammar_compile(gbnf, strlen(gbnf), tok, n_vocab, &end, 1, &g)) < 0)
		goto out;
	dist_init(&d, g);
	tf_bytes_append(&docs, "[", 1);
	for (int i = 0; i < n_docs && rc == 0; i++) {
		tf_val *v;
		tf_bytes j = { 0 };

		if ((rc = walk(g, &d, tok, n_vocab, end, byte_tok, logits, allowed, &doc)) < 0)
			break;
		v = tf_val_str(doc.p ? doc.p : "", doc.len);
		tf_val_dump_json(v, &j);
		tf_bytes_append(&docs, i ? ", " : "", i ? 2 : 0);
		tf_bytes_append(&docs, j.p, j.len);
		tf_bytes_free(&j);
		tf_val_unref(v);
	}
	if (rc == 0)
		printf("{\"docs\": %.*s]}\n", (int)docs.len, docs.p);
out:
	if (rc < 0) {
		tf_val *m = tf_val_cstr(tf_diag_msg());
		tf_bytes j = { 0 };
		tf_val_dump_json(m, &j);
		printf("{\"status\": %d, \"error\": %.*s}\n", rc, (int)j.len, j.p);
		fprintf(stderr, "grammar_walk: %s\n", tf_diag_msg());
		tf_bytes_free(&j);
		tf_val_unref(m);
	}
	fflush(stdout);
	tf_grammar_free(g);
	free(d.rule_min);
	free(gbnf);
	tf_val_unref(schema);
	tf_bytes_free(&doc);
	tf_bytes_free(&docs);
	return rc;
}

int main(int argc, char **argv)
{
	int n_docs = 3, failed = 0;
	bool gbnf_only = false;
	tf_tokenizer *tok;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	rng = 1;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n_docs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-s") && i + 1 < argc)
			rng = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--gbnf"))
			gbnf_only = true;
		else
			argc = 0;
	}
	if (argc < 2 || n_docs < 1) {
		fprintf(stderr, "usage: grammar_walk TOKENIZER [-n DOCS] [-s SEED] [--gbnf]\n");
		return 2;
	}
	if (tf_tok_load(argv[1], &tok) < 0) {
		fprintf(stderr, "grammar_walk: %s\n", tf_diag_msg());
		return 1;
	}
	float *logits = malloc((size_t)tf_tok_vocab_size(tok) * sizeof(*logits));
	int32_t *allowed = malloc((size_t)tf_tok_vocab_size(tok) * sizeof(*allowed));
	int32_t byte_tok[256];
	memset(byte_tok, -1, sizeof(byte_tok));
	for (int32_t id = 0; id < tf_tok_vocab_size(tok); id++) {
		size_t n;
		const char *p = tf_tok_piece(tok, id, &n);
		if (p && n == 1 && !tf_tok_is_special(tok, id))
			byte_tok[(uint8_t)p[0]] = id;
	}
	while ((len = getline(&line, &cap, stdin)) > 0)
		failed |= one_schema(line, (size_t)len, tok, n_docs, gbnf_only, byte_tok, logits,
				     allowed) < 0;
	free(line);
	free(logits);
	free(allowed);
	tf_tok_free(tok);
	return failed;
}
