/*
 * test_grammar.c - constrained decoding: GBNF errors, the byte recognizer
 * (hand cases and random regular grammars against POSIX regexec), the
 * token masks against a brute force that tries every token on a copy of
 * the state (ling-nano's tokenizer and synthetic ones), the mask cache,
 * end tokens, and JSON Schema to GBNF (hand cases, integer ranges checked
 * exhaustively, refusals).  schema_check.py checks random schemas'
 * documents with Python's jsonschema.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tf/diag.h"
#include "tf/grammar.h"
#include "tf/value.h"
#include "unicode/unicode.h"

#define NANO TF_SOURCE_DIR "/models/ling-nano/tokenizer.json"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static tf_grammar *compile(const char *gbnf, const tf_tokenizer *tok, int n_vocab, const int32_t *ends,
			   int n_ends)
{
	tf_grammar *g = NULL;
	int rc = tf_grammar_compile(gbnf, strlen(gbnf), tok, n_vocab, ends, n_ends, &g);

	cr_assert_eq(rc, 0, "compile: %s\n%s", tf_diag_msg(), gbnf);
	return g;
}

/* 1: s is a complete document; 0: a prefix of one; -1: neither. */
static int match(tf_grammar *g, const char *s, size_t n)
{
	tf_grammar_state *st;
	int rc;

	cr_assert_eq(tf_grammar_state_new(g, &st), 0);
	rc = tf_grammar_accept_bytes(st, s, n);
	rc = rc < 0 ? -1 : tf_grammar_complete(st);
	tf_grammar_state_free(st);
	return rc;
}

/* ---- GBNF errors ---- */

Test(gbnf, errors_name_line_and_column)
{
	static const struct {
		const char *gbnf;
		int code;
		const char *msg;
	} cases[] = {
		{ "root ::= \"a", TF_ERR_FORMAT, "line 1 column 10: unterminated literal" },
		{ "root ::= [a-", TF_ERR_FORMAT, "line 1 column 10: unterminated character class" },
		{ "root ::= [z-a]", TF_ERR_FORMAT, "line 1 column 11: range end before its start" },
		{ "root ::= \"\\q\"", TF_ERR_FORMAT, "line 1 column 11: unknown escape '\\q'" },
		{ "root ::= \"\\x4\"", TF_ERR_FORMAT, "line 1 column 11: escape wants 2 hex digits" },
		{ "root ::= \"\\uD800\"", TF_ERR_FORMAT, "line 1 column 11: escape U+D800 is not a character" },
		{ "root ::= \"\xC3(\"", TF_ERR_FORMAT, "line 1 column 11: invalid UTF-8" },
		{ "root ::=\n  ( \"a\"", TF_ERR_FORMAT, "line 2 column 3: '(' without its ')'" },
		{ "root ::= \"a\" |\n  * \"b\"", TF_ERR_FORMAT, "line 2 column 3: '*' has nothing to repeat" },
		{ "root ::= \"\"+", TF_ERR_FORMAT, "line 1 column 12: '+' has nothing to repeat" },
		{ "root ::= \"a\"{3,2}", TF_ERR_FORMAT, "line 1 column 13: repetition {3,2}: maximum below minimum" },
		{ "root ::= \"a\"{}", TF_ERR_FORMAT, "line 1 column 13: expected a count after '{'" },
		{ "root ::= \"a\"{2", TF_ERR_FORMAT, "line 1 column 13: expected '}'" },
		{ "root ::= \"a\"{10001}", TF_ERR_FORMAT, "line 1 column 18: repetition count above 10000" },
		{ "root ::= \"a\" )", TF_ERR_FORMAT, "line 1 column 14: unexpected ')'" },
		{ "# c\nroot = \"a\"", TF_ERR_FORMAT, "line 2 column 6: expected '::=' after 'root'" },
		{ "::= \"a\"", TF_ERR_FORMAT, "line 1 column 1: expected a rule name" },
		{ "root ::= x", TF_ERR_INVALID, "line 1 column 10: undefined rule 'x'" },
		{ "a ::= \"x\"", TF_ERR_INVALID, "grammar: no rule 'root'" },
		{ "root ::= \"a\"\nroot ::= \"b\"", TF_ERR_INVALID, "line 2 column 1: rule 'root' is defined twice" },
		{ "root ::= a\na ::= a \"x\" | \"y\"", TF_ERR_INVALID, "line 2 column 1: rule 'a' is left-recursive" },
		{ "root ::= b\nb ::= c? b \"x\"\nc ::= \"c\"", TF_ERR_INVALID, "line 2 column 1: rule 'b' is left-recursive" },
		{ "root ::= x \"b\"\nx ::= \"a\"? root", TF_ERR_INVALID, "line 1 column 1: rule 'root' is left-recursive" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tf_grammar *g = NULL;
		int rc = tf_grammar_compile(cases[i].gbnf, strlen(cases[i].gbnf), NULL, 0, NULL, 0, &g);

		cr_expect_eq(rc, cases[i].code, "%s: rc %d, want %d (%s)", cases[i].gbnf, rc, cases[i].code,
			     tf_diag_msg());
		cr_expect(strstr(tf_diag_msg(), cases[i].msg), "%s: '%s' lacks '%s'", cases[i].gbnf,
			  tf_diag_msg(), cases[i].msg);
		cr_expect_null(g);
	}
}

Test(gbnf, bad_arguments)
{
	tf_grammar *g = NULL;
	int32_t end = 5;

	cr_expect_eq(tf_grammar_compile("root ::= \"a\"", 12, NULL, 4, &end, 1, &g), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "end id 5 is outside the vocabulary (4)"), "%s", tf_diag_msg());
	cr_expect_eq(tf_grammar_compile("root ::= \"a\"", 12, NULL, -1, NULL, 0, &g), TF_ERR_INVALID);
	g = compile("root ::= \"a\"", NULL, 0, NULL, 0);
	tf_grammar_state *st;
	float logit = 0;
	cr_assert_eq(tf_grammar_state_new(g, &st), 0);
	cr_expect_eq(tf_grammar_apply(st, &logit), TF_ERR_INVALID);
	cr_expect_eq(tf_grammar_accept(st, 0), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "without a tokenizer"), "%s", tf_diag_msg());
	tf_grammar_state_free(st);
	tf_grammar_free(g);
}

/* ---- the byte recognizer ---- */

typedef struct {
	const char *s;
	int want;               /* 1 complete, 0 prefix, -1 rejected */
} probe;

static void check_probes(const char *gbnf, const probe *p, size_t n)
{
	tf_grammar *g = compile(gbnf, NULL, 0, NULL, 0);

	for (size_t i = 0; i < n; i++) {
		int got = match(g, p[i].s, strlen(p[i].s));
		cr_expect_eq(got, p[i].want, "%s\n  on \"%s\": %d, want %d", gbnf, p[i].s, got, p[i].want);
	}
	tf_grammar_free(g);
}

#define PROBES(gbnf, ...) do { \
	static const probe p_[] = { __VA_ARGS__ }; \
	check_probes(gbnf, p_, sizeof(p_) / sizeof(p_[0])); \
} while (0)

Test(match, literals_and_escapes)
{
	PROBES("root ::= \"a\\n\\t\\r\\\\\\\"\\[\\]\\x41\\u00e9\\U0001F600\"",
	       { "a\n\t\r\\\"[]A\xC3\xA9\xF0\x9F\x98\x80", 1 }, { "a\n\t\r\\\"[]A\xC3", 0 },
	       { "a\n\t\r\\\"[]A\xC3\xA8", -1 }, { "a\n\t\r\\\"[]A\xC3\xA9\xF0\x9F\x98", 0 }, { "b", -1 });
	PROBES("root ::= \"\"", { "", 1 }, { "a", -1 });
	PROBES("root ::= \"ab\" \"cd\" | \"x\"", { "abcd", 1 }, { "x", 1 }, { "abx", -1 }, { "ab", 0 },
	       { "xcd", -1 });
	/* comments, rules over several lines, names with - and _ */
	PROBES("# a comment\nroot ::= # here too\n  a-b\n  | c_d # and here\n"
	       "a-b ::= \"1\"\n  \"2\"\nc_d ::= \"3\"\n", { "12", 1 }, { "3", 1 }, { "1", 0 }, { "13", -1 });
}

Test(match, classes_utf8)
{
	PROBES("root ::= [a-c0-9_]+", { "a0_c9", 1 }, { "", 0 }, { "d", -1 }, { "a-", -1 });
	PROBES("root ::= [^a-c]", { "d", 1 }, { "a", -1 }, { "\xC3\xA9", 1 }, { "\xC3", 0 },
	       { "\xF0\x9F\x98\x80", 1 }, { "\n", 1 }, { "\xC0\x80", -1 }, { "\xED\xA0\x80", -1 },
	       { "\xF4\x90\x80\x80", -1 }, { "\x80", -1 }, { "\xFF", -1 });
	PROBES("root ::= [α-ω]*", { "αβω", 1 }, { "αa", -1 }, { "\xCE", 0 }, { "\xCE\xB0", -1 },
	       { "\xCF\x89", 1 });
	PROBES("root ::= . . .", { "a\xE2\x82\xAC\xF0\x90\x80\x80", 1 }, { "\n\t ", 1 }, { "ab", 0 },
	       { "abcd", -1 });
	/* ranges crossing the UTF-8 length boundaries */
	PROBES("root ::= [\\x7E-\\u0801]", { "~", 1 }, { "\x7F", 1 }, { "\xC2\x80", 1 },
	       { "\xDF\xBF", 1 }, { "\xE0\xA0\x80", 1 }, { "\xE0\xA0\x81", 1 }, { "\xE0\xA0\x82", -1 },
	       { "}", -1 });
	PROBES("root ::= [^\\x00-\\U0010FFFE]", { "\xF4\x8F\xBF\xBF", 1 }, { "\xF4\x8F\xBF\xBE", -1 });
	PROBES("root ::= [\\]\\[\\-^]+", { "][-^", 1 }, { "a", -1 });
	PROBES("root ::= [-a]+ [b-]", { "-a-", 1 }, { "ab", 1 }, { "c", -1 });
}

Test(match, repetition)
{
	PROBES("root ::= \"ab\"{2}", { "abab", 1 }, { "ab", 0 }, { "ababa", -1 });
	PROBES("root ::= \"a\"{2,}", { "a", 0 }, { "aa", 1 }, { "aaaaaaa", 1 }, { "aab", -1 });
	PROBES("root ::= \"a\"{,2} \"b\"", { "b", 1 }, { "aab", 1 }, { "aaab", -1 });
	PROBES("root ::= \"a\"{ 1 , 3 }", { "", 0 }, { "a", 1 }, { "aaa", 1 }, { "aaaa", -1 });
	PROBES("root ::= (\"x\" | \"yz\")? \"!\"", { "!", 1 }, { "x!", 1 }, { "yz!", 1 }, { "y!", -1 },
	       { "xx!", -1 });
	PROBES("root ::= ([0-9] \",\")* [0-9]", { "1", 1 }, { "1,2,3", 1 }, { "1,", 0 }, { "1,,", -1 });
	PROBES("root ::= ( \"a\" ( \"b\" \"c\"* )+ )+", { "ab", 1 }, { "abcbcc", 1 }, { "abab", 1 },
	       { "aa", -1 }, { "a", 0 });
	/* repeating what may be empty: a loop of tail calls, not left recursion */
	PROBES("root ::= (\"a\"?)* \"b\"", { "b", 1 }, { "aaab", 1 }, { "", 0 }, { "ba", -1 });
	PROBES("root ::= x*\nx ::= y*\ny ::= \"ab\"+ | \"\"", { "", 1 }, { "abab", 1 }, { "aba", 0 },
	       { "abb", -1 });
}

Test(match, recursion)
{
	PROBES("root ::= \"(\" root \")\" | \"\"", { "", 1 }, { "((()))", 1 }, { "(()", 0 }, { "())", -1 });
	PROBES("root ::= expr\nexpr ::= term ([-+] term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
	       { "1+(2-3)+45", 1 }, { "1+(2-3", 0 }, { "1+-2", -1 }, { "(((1)))", 1 });
	/* a right-recursive rule keeps a flat stack: a long input stays cheap */
	tf_grammar *g = compile("root ::= item root | \"\"\nitem ::= \"ab\" | \"c\"", NULL, 0, NULL, 0);
	char *s = malloc(200001);
	for (int i = 0; i < 100000; i++)
		memcpy(s + 2 * i, i % 2 ? "ab" : "cc", 2);
	cr_expect_eq(match(g, s, 200000), 1);
	s[199999] = 'x';
	cr_expect_eq(match(g, s, 200000), -1);
	free(s);
	tf_grammar_free(g);
}

Test(match, accept_bytes_failure_leaves_state)
{
	tf_grammar *g = compile("root ::= \"abc\" | \"abd\"", NULL, 0, NULL, 0);
	tf_grammar_state *st;

	cr_assert_eq(tf_grammar_state_new(g, &st), 0);
	cr_expect_eq(tf_grammar_accept_bytes(st, "ab", 2), 0);
	cr_expect_eq(tf_grammar_accept_bytes(st, "ce", 2), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "byte 0x65 at offset 1 cannot come next"), "%s", tf_diag_msg());
	cr_expect_eq(tf_grammar_accept_bytes(st, "d", 1), 0, "the failed call changed nothing");
	cr_expect(tf_grammar_complete(st));
	tf_grammar_state_free(st);
	tf_grammar_free(g);
}

/*
 * Random regular expressions over {a, b, c}, written both as GBNF (some of
 * their parts as rules of their own) and as POSIX EREs, on random strings:
 * a complete match must be regexec's full match.
 */
static void cat(tf_bytes *b, const char *s)
{
	cr_assert_eq(tf_bytes_append(b, s, strlen(s) + 1), 0);
	b->len--;               /* NUL-terminated, the NUL not counted */
}

/* An expression as GBNF (into g, with rules of its own into rules) and as an ERE. */
static void rx_gen(tf_bytes *g, tf_bytes *e, tf_bytes *rules, int *n_rules, int depth)
{
	static const char *const atoms[][2] = {
		{ "\"a\"", "a" }, { "\"b\"", "b" }, { "\"ab\"", "ab" }, { "[ab]", "[ab]" },
		{ "[^a]", "[^a]" }, { "[a-c]", "[a-c]" }, { "\"\"", "()" },
	};
	static const char *const quants[] = { "", "*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}" };
	int kind = depth > 3 ? 0 : (int)(rnd() % 4);

	if (kind == 0) {
		int a = (int)(rnd() % 7);
		cat(g, atoms[a][0]);
		cat(e, atoms[a][1]);
	} else if (kind == 3) {         /* a group made a rule, repeated */
		tf_bytes g1 = { 0 };
		char name[16];
		int q = (int)(rnd() % 8);

		cat(e, "(");
		rx_gen(&g1, e, rules, n_rules, depth + 1);
		cat(e, ")");
		if (!strcmp(g1.p, "\"\"") && q != 0 && q != 4)
			q = 0;          /* an empty repeated forever is left-recursive */
		snprintf(name, sizeof(name), "r%d", ++*n_rules);
		cat(rules, name);
		cat(rules, " ::= ");
		cat(rules, g1.p);
		cat(rules, "\n");
		cat(g, name);
		cat(g, quants[q]);
		cat(e, quants[q]);
		tf_bytes_free(&g1);
	} else {
		cat(g, "( ");
		cat(e, "(");
		rx_gen(g, e, rules, n_rules, depth + 1);
		cat(g, kind == 1 ? " " : " | ");
		cat(e, kind == 1 ? "" : "|");
		rx_gen(g, e, rules, n_rules, depth + 1);
		cat(g, " )");
		cat(e, ")");
	}
}

Test(match, random_regular_against_regexec)
{
	rng_state = 7;
	for (int t = 0; t < 300; t++) {
		tf_bytes g = { 0 }, e = { 0 }, rules = { 0 };
		int n_rules = 0;
		regex_t re;

		cat(&g, "root ::= ");
		cat(&e, "^(");
		cat(&rules, "");
		rx_gen(&g, &e, &rules, &n_rules, 0);
		cat(&g, "\n");
		cat(&g, rules.p);
		cat(&e, ")$");
		cr_assert_eq(regcomp(&re, e.p, REG_EXTENDED | REG_NOSUB), 0, "%s", e.p);
		tf_grammar *gr = compile(g.p, NULL, 0, NULL, 0);
		for (int k = 0; k < 200; k++) {
			char s[16];
			int n = (int)(rnd() % 9);
			for (int i = 0; i < n; i++)
				s[i] = "abc"[rnd() % 3];
			s[n] = 0;
			bool want = regexec(&re, s, 0, NULL, 0) == 0;
			bool got = match(gr, s, (size_t)n) == 1;
			cr_expect_eq(got, want, "\"%s\" on %s (ERE %s): %d, want %d", s, g.p, e.p, got, want);
		}
		tf_grammar_free(gr);
		regfree(&re);
		tf_bytes_free(&g);
		tf_bytes_free(&e);
		tf_bytes_free(&rules);
	}
}

/* ---- token masks against the brute force ---- */

/* The reference: an end id is allowed when the document is complete; a
 * token with bytes, when its bytes are accepted by a copy of the state. */
static void mask_ref(const tf_grammar_state *st, const tf_tokenizer *tok, int n_vocab,
		     const int32_t *ends, int n_ends, bool *ok)
{
	for (int i = 0; i < n_vocab; i++) {
		tf_grammar_state *c;
		size_t len = 0;
		const char *p = tf_tok_piece(tok, i, &len);
		bool end = false;

		for (int e = 0; e < n_ends; e++)
			end |= ends[e] == i;
		if (end) {
			ok[i] = tf_grammar_complete(st);
			continue;
		}
		ok[i] = false;
		if (!p || !len || tf_tok_is_special(tok, i))
			continue;
		cr_assert_eq(tf_grammar_state_clone(st, &c), 0);
		ok[i] = tf_grammar_accept_bytes(c, p, len) == 0;
		tf_grammar_state_free(c);
	}
}

/* The fast mask on random logits: allowed ids keep theirs, others are -inf. */
static void mask_fast(tf_grammar_state *st, int n_vocab, bool *ok, float *logits)
{
	for (int i = 0; i < n_vocab; i++)
		logits[i] = (float)(rnd() % 2001) / 100.0f - 10.0f;
	float *copy = malloc((size_t)(n_vocab + 1) * sizeof(*copy));
	memcpy(copy, logits, (size_t)n_vocab * sizeof(*copy));
	logits[n_vocab] = 12345.0f;     /* the apply must not write past n_vocab */
	cr_assert_eq(tf_grammar_apply(st, logits), 0, "%s", tf_diag_msg());
	cr_assert_eq(logits[n_vocab], 12345.0f);
	for (int i = 0; i < n_vocab; i++) {
		ok[i] = isfinite(logits[i]);
		cr_assert(!ok[i] || logits[i] == copy[i], "id %d: logit %g changed to %g", i, copy[i], logits[i]);
		cr_assert(ok[i] || (isinf(logits[i]) && logits[i] < 0));
	}
	free(copy);
}

typedef struct {
	int steps, allowed_total, completes, max_allowed, min_allowed;
} walk_stats;

/*
 * Random walks of `steps` tokens (an end chosen, when allowed, one time in
 * eight), comparing the fast mask with the reference at each step; accept()
 * of a few random ids must agree with the mask too.
 */
static walk_stats walk_compare(tf_grammar *g, const tf_tokenizer *tok, int n_vocab, const int32_t *ends,
			       int n_ends, int walks, int steps)
{
	bool *fast = malloc((size_t)n_vocab), *ref = malloc((size_t)n_vocab);
	float *logits = malloc((size_t)(n_vocab + 1) * sizeof(*logits));
	int32_t *allowed = malloc((size_t)n_vocab * sizeof(*allowed));
	walk_stats ws = { .min_allowed = n_vocab };

	for (int w = 0; w < walks; w++) {
		tf_grammar_state *st;
		cr_assert_eq(tf_grammar_state_new(g, &st), 0);
		for (int s = 0; s < steps; s++) {
			int n = 0, n_end = 0;

			mask_fast(st, n_vocab, fast, logits);
			mask_ref(st, tok, n_vocab, ends, n_ends, ref);
			for (int i = 0; i < n_vocab; i++) {
				cr_assert_eq(fast[i], ref[i], "walk %d step %d: id %d fast %d, reference %d",
					     w, s, i, fast[i], ref[i]);
				if (fast[i]) {
					bool end = false;
					for (int e = 0; e < n_ends; e++)
						end |= ends[e] == i;
					if (end)
						n_end++;
					else
						allowed[n++] = i;
				}
			}
			cr_assert_eq(n_end, tf_grammar_complete(st) ? n_ends : 0, "ends allowed only when complete");
			for (int k = 0; k < 8; k++) {
				int32_t id = (int32_t)(rnd() % (uint64_t)n_vocab);
				tf_grammar_state *c;
				cr_assert_eq(tf_grammar_state_clone(st, &c), 0);
				cr_expect_eq(tf_grammar_accept(c, id) == 0, fast[id], "accept(%d)", id);
				tf_grammar_state_free(c);
			}
			ws.steps++;
			ws.allowed_total += n;
			ws.completes += n_end > 0;
			ws.max_allowed = n > ws.max_allowed ? n : ws.max_allowed;
			ws.min_allowed = n < ws.min_allowed ? n : ws.min_allowed;
			if (n_end && (n == 0 || rnd() % 8 == 0)) {
				cr_assert_eq(tf_grammar_accept(st, ends[rnd() % (uint64_t)n_ends]), 0);
				cr_expect(tf_grammar_complete(st));
				mask_fast(st, n_vocab, fast, logits);
				for (int i = 0; i < n_vocab; i++)
					cr_assert(!fast[i], "id %d allowed after the end", i);
				cr_expect_eq(tf_grammar_accept(st, ends[0]), TF_ERR_INVALID);
				break;
			}
			cr_assert_gt(n, 0, "walk %d step %d: nothing allowed, not complete", w, s);
			cr_assert_eq(tf_grammar_accept(st, allowed[rnd() % (uint64_t)n]), 0, "%s", tf_diag_msg());
		}
		tf_grammar_state_free(st);
	}
	free(fast);
	free(ref);
	free(logits);
	free(allowed);
	return ws;
}

static char *schema_gbnf(const char *json)
{
	tf_val *v = NULL;
	char *gbnf = NULL;

	cr_assert_eq(tf_val_parse_json(json, strlen(json), &v), 0, "%s", tf_diag_msg());
	cr_assert_eq(tf_grammar_schema_gbnf(v, &gbnf), 0, "%s: %s", json, tf_diag_msg());
	tf_val_unref(v);
	return gbnf;
}

static const char *const PERSON_SCHEMA =
	"{\"type\": \"object\", \"properties\": {"
	"\"name\": {\"type\": \"string\", \"maxLength\": 12},"
	"\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150},"
	"\"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"bé\", 3, null]}, \"maxItems\": 3},"
	"\"born\": {\"type\": \"string\", \"format\": \"date\"},"
	"\"code\": {\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-\\\\d+$\"},"
	"\"note\": {\"type\": [\"string\", \"null\"]},"
	"\"ok\": {\"type\": \"boolean\"}},"
	"\"required\": [\"name\", \"age\"]}";

/* Grammars that exercise the walk: nesting, multi-byte classes, ambiguity, ends. */
static char *mask_grammar(int i)
{
	static const char *const hand[] = {
		"root ::= ( [α-ωА-я] | \"é\" | [^\\x00-\\xFF] | \" \" )+ \"!\"",
		"root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
		"root ::= ( \"the\" | \"then\" | \"there\" | \" the\" | \"a\" [ \\t\\n]{0,3} )+",
		"root ::= [a-z ]*",
		"root ::= \"yes\" | \"no\" | \"y\" [^\\n]{3,5}",
	};

	if (i == 0)
		return schema_gbnf("true");
	if (i == 1)
		return schema_gbnf(PERSON_SCHEMA);
	return strdup(hand[i - 2]);
}

Test(mask, ling_nano_against_brute_force, .timeout = 600)
{
	tf_tokenizer *tok;
	int32_t end;

	cr_assert_eq(tf_tok_load(NANO, &tok), 0, "%s", tf_diag_msg());
	end = tf_tok_find(tok, "<|endoftext|>");
	cr_assert_geq(end, 0);
	int widest = 0, narrowest = 1 << 30;

	rng_state = 11;
	for (int i = 0; i < 7; i++) {
		char *gbnf = mask_grammar(i);
		tf_grammar *g = compile(gbnf, tok, tf_tok_vocab_size(tok), &end, 1);
		walk_stats ws = walk_compare(g, tok, tf_tok_vocab_size(tok), &end, 1, 6, 60);

		cr_expect_gt(ws.steps, 8, "grammar %d: %d steps", i, ws.steps);
		widest = ws.max_allowed > widest ? ws.max_allowed : widest;
		narrowest = ws.min_allowed < narrowest ? ws.min_allowed : narrowest;
		tf_grammar_free(g);
		free(gbnf);
	}
	/* the walks met both wide masks and narrow ones */
	cr_expect_gt(widest, 3000, "widest mask %d", widest);
	cr_expect_leq(narrowest, 1, "narrowest mask %d", narrowest);
	tf_tok_free(tok);
}

/* A tokenizer.json of the given pieces (raw bytes, spelled byte-level) with
 * added tokens after them. */
static tf_tokenizer *synthetic(char **pieces, int n, const char *added_json)
{
	cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model"),
	      *vocab, *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
	tf_tokenizer *tok = NULL;
	char *text;

	cJSON_AddStringToObject(pre, "type", "ByteLevel");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "decoder"), "type", "ByteLevel");
	cJSON_AddStringToObject(model, "type", "BPE");
	vocab = cJSON_AddObjectToObject(model, "vocab");
	cJSON_AddArrayToObject(model, "merges");
	for (int i = 0; i < n; i++) {
		tf_bytes key = { 0 };
		cr_assert_eq(tf_bytelevel_encode(pieces[i], strlen(pieces[i]), &key), 0);
		cr_assert_eq(tf_bytes_append(&key, "", 1), 0);
		cJSON_AddNumberToObject(vocab, key.p, i);
		tf_bytes_free(&key);
	}
	cJSON_AddItemToObject(root, "added_tokens", cJSON_Parse(added_json));
	text = cJSON_PrintUnformatted(root);
	cr_assert_eq(tf_tok_load_json(text, strlen(text), "synthetic.json", &tok), 0, "%s", tf_diag_msg());
	free(text);
	cJSON_Delete(root);
	return tok;
}

Test(mask, synthetic_vocabularies_against_brute_force, .timeout = 600)
{
	static const char *const extra[] = {
		"ab", "abc", "abd", "\"a", "\",\"", "{\"", "\"}", "\xC3\xA9", "\xF0\x9F\x98\x80", "\xF0\x9F",
		"\x98\x80", "  ", "\n  ", "123", "-1", "true", "null", "e+", "ab\xC3", "\xA9!", " the", "the",
		"then", "\t\n", "[\"", "\"]", "\\\"", "\\u00", "[[", "]]", "}}", "\":",
	};
	char *pieces[512];
	int n = 0;

	for (int b = 1; b < 256; b++) {         /* every byte but NUL */
		pieces[n] = malloc(2);
		pieces[n][0] = (char)b, pieces[n][1] = 0;
		n++;
	}
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		pieces[n++] = strdup(extra[i]);
	rng_state = 5;
	for (int i = 0; i < 120; i++) {         /* random pieces of JSON-ish bytes */
		static const char alpha[] = "ab\"{}[]:, 0-9e.\\\xC3\xA9";
		int len = 2 + (int)(rnd() % 5);
		pieces[n] = malloc((size_t)len + 1);
		for (int k = 0; k < len; k++)
			pieces[n][k] = alpha[rnd() % (sizeof(alpha) - 1)];
		pieces[n][len] = 0;
		n++;
	}
	/* ids n, n+1: special; n+2: plain text equal to "ab"; n+3..n+5: no piece; n+6: special end */
	char added[512];
	snprintf(added, sizeof(added),
		 "[{\"id\":%d,\"content\":\"<|end|>\",\"special\":true},"
		 "{\"id\":%d,\"content\":\"<|x|>\",\"special\":true},"
		 "{\"id\":%d,\"content\":\"ab\",\"special\":false},"
		 "{\"id\":%d,\"content\":\"<|eot|>\",\"special\":true}]", n, n + 1, n + 2, n + 6);
	tf_tokenizer *tok = synthetic(pieces, n, added);
	int32_t ends[2] = { n, n + 6 };
	int n_vocab = n + 10;           /* past the tokenizer: ids without pieces */

	cr_expect_eq(tf_tok_vocab_size(tok), n + 7);
	rng_state = 3;
	for (int i = 0; i < 7; i++) {
		char *gbnf = mask_grammar(i);
		tf_grammar *g = compile(gbnf, tok, n_vocab, ends, 2);
		walk_stats ws = walk_compare(g, tok, n_vocab, ends, 2, 6, 60);

		cr_expect_gt(ws.steps, 10, "grammar %d", i);
		tf_grammar_free(g);
		free(gbnf);
	}
	/* a vocabulary cut short of the tokenizer: the ids past n_vocab are not there */
	char *gbnf = mask_grammar(0);
	int32_t end0 = n;
	tf_grammar *g = compile(gbnf, tok, n + 1, &end0, 1);
	walk_compare(g, tok, n + 1, &end0, 1, 3, 30);
	tf_grammar_free(g);
	free(gbnf);
	for (int i = 0; i < n; i++)
		free(pieces[i]);
	tf_tok_free(tok);
}

/* ---- the cache, the ends ---- */

/* Walks with the same seed on a default grammar and on ones whose cache is
 * off (limit 0) or small: every mask is the same. */
Test(mask, cache_hits_equal_misses, .timeout = 300)
{
	tf_tokenizer *tok;
	int32_t end;
	cr_assert_eq(tf_tok_load(NANO, &tok), 0, "%s", tf_diag_msg());
	int nv = tf_tok_vocab_size(tok);
	end = tf_tok_find(tok, "<|endoftext|>");
	char *gbnf = mask_grammar(1);
	tf_grammar *g[3];
	tf_grammar_state *st[3];
	float *lg[3];
	bool *ref = malloc((size_t)nv);
	int docs = 0;

	for (int k = 0; k < 3; k++) {
		g[k] = compile(gbnf, tok, nv, &end, 1);
		cr_assert_eq(tf_grammar_state_new(g[k], &st[k]), 0);
		lg[k] = malloc((size_t)nv * sizeof(float));
	}
	tf_grammar_cache_limit(g[1], 0);
	tf_grammar_cache_limit(g[2], 20000);
	rng_state = 99;
	for (int s = 0; s < 200; s++) {
		int32_t pick = -1;
		int n = 0;
		for (int k = 0; k < 3; k++) {
			for (int i = 0; i < nv; i++)
				lg[k][i] = 1.0f + (float)i;
			cr_assert_eq(tf_grammar_apply(st[k], lg[k]), 0);
			if (k == 0) {   /* a hit on the same state gives the same mask */
				float *again = malloc((size_t)nv * sizeof(float));
				for (int i = 0; i < nv; i++)
					again[i] = 1.0f + (float)i;
				cr_assert_eq(tf_grammar_apply(st[0], again), 0);
				cr_assert_eq(memcmp(again, lg[0], (size_t)nv * sizeof(float)), 0, "step %d", s);
				free(again);
			}
		}
		cr_assert_eq(memcmp(lg[0], lg[1], (size_t)nv * sizeof(float)), 0, "step %d: cache off differs", s);
		cr_assert_eq(memcmp(lg[0], lg[2], (size_t)nv * sizeof(float)), 0, "step %d: small cache differs", s);
		if (s % 20 == 0) {
			mask_ref(st[0], tok, nv, &end, 1, ref);
			for (int i = 0; i < nv; i++)
				cr_assert_eq(isfinite(lg[0][i]), ref[i], "step %d id %d", s, i);
		}
		for (int i = 0; i < nv; i++)
			n += isfinite(lg[0][i]) && i != end;
		if (isfinite(lg[0][end]) && (n == 0 || rnd() % 3 == 0)) {
			for (int k = 0; k < 3; k++) {   /* a new document on the warm grammars */
				tf_grammar_state_free(st[k]);
				cr_assert_eq(tf_grammar_state_new(g[k], &st[k]), 0);
			}
			docs++;
			continue;
		}
		n = (int)(rnd() % (uint64_t)n);
		for (int i = 0; i < nv && pick < 0; i++)
			if (isfinite(lg[0][i]) && i != end && n-- == 0)
				pick = i;
		for (int k = 0; k < 3; k++)
			cr_assert_eq(tf_grammar_accept(st[k], pick), 0);
	}
	cr_expect_gt(docs, 1, "several documents were finished");
	tf_grammar_stats st0, st1, st2;
	tf_grammar_stats_get(g[0], &st0);
	tf_grammar_stats_get(g[1], &st1);
	tf_grammar_stats_get(g[2], &st2);
	cr_expect_lt(st0.walks, st0.masks / 2, "the default cache gave most masks: %llu walks for %llu",
		     (unsigned long long)st0.walks, (unsigned long long)st0.masks);
	cr_expect_eq(st0.clears, 0);
	cr_expect_eq(st1.walks, st1.masks, "no cache: every mask walked");
	cr_expect_gt(st2.clears, 0, "the small cache was emptied");
	cr_expect_gt(st0.cache_bytes, 0);
	for (int k = 0; k < 3; k++) {
		tf_grammar_state_free(st[k]);
		tf_grammar_free(g[k]);
		free(lg[k]);
	}
	free(ref);
	free(gbnf);
	tf_tok_free(tok);
}

/* With no cache every apply rebuilds the stacks from the live states: the
 * states kept aside (clones) must come through it unchanged. */
Test(mask, live_states_survive_compaction)
{
	tf_tokenizer *tok;
	cr_assert_eq(tf_tok_load(NANO, &tok), 0, "%s", tf_diag_msg());
	int nv = tf_tok_vocab_size(tok);
	int32_t end = tf_tok_find(tok, "<|endoftext|>");
	char *gbnf = schema_gbnf("true");
	tf_grammar *g = compile(gbnf, tok, nv, &end, 1);
	tf_grammar_state *a, *b, *c;
	bool *fast = malloc((size_t)nv), *ref = malloc((size_t)nv);
	float *lg = malloc((size_t)(nv + 1) * sizeof(*lg));
	static const char doc[] = "[{\"a\": [1, {\"b\": \"x\"}]}, [[true]]]";

	tf_grammar_cache_limit(g, 0);
	cr_assert_eq(tf_grammar_state_new(g, &a), 0);
	rng_state = 17;
	for (size_t i = 0; i + 1 < sizeof(doc); i++) {
		cr_assert_eq(tf_grammar_state_clone(a, &b), 0);
		cr_assert_eq(tf_grammar_accept_bytes(a, doc + i, 1), 0, "at %zu", i);
		mask_fast(a, nv, fast, lg);             /* rebuilds the stacks: b is kept aside */
		mask_fast(b, nv, fast, lg);
		mask_ref(b, tok, nv, &end, 1, ref);
		for (int k = 0; k < nv; k++)
			cr_assert_eq(fast[k], ref[k], "at %zu: id %d", i, k);
		cr_assert_eq(tf_grammar_accept_bytes(b, doc + i, 1), 0);
		cr_assert_eq(tf_grammar_state_clone(b, &c), 0);
		cr_assert_eq(tf_grammar_accept_bytes(c, doc + i + 1, sizeof(doc) - 2 - i), 0);
		cr_assert(tf_grammar_complete(c));
		tf_grammar_state_free(c);
		tf_grammar_state_free(b);
	}
	cr_expect(tf_grammar_complete(a));
	tf_grammar_free(g);
	tf_grammar_state_free(a);               /* after its grammar: only freed */
	free(fast);
	free(ref);
	free(lg);
	free(gbnf);
	tf_tok_free(tok);
}

Test(mask, ends_only_when_complete)
{
	tf_tokenizer *tok;
	cr_assert_eq(tf_tok_load(NANO, &tok), 0, "%s", tf_diag_msg());
	int nv = tf_tok_vocab_size(tok);
	int32_t ends[2] = { tf_tok_find(tok, "<|endoftext|>"), tf_tok_find(tok, "<|role_end|>") };
	int32_t other = tf_tok_find(tok, "<role>");
	tf_grammar *g = compile("root ::= \"yes\" | \"ye\" \"s\"? \"!\"?", tok, nv, ends, 2);
	tf_grammar_state *st;
	float *lg = malloc((size_t)nv * sizeof(float));
	int n;

	cr_assert(tf_tok_is_special(tok, other));
	cr_assert_eq(tf_grammar_state_new(g, &st), 0);
	cr_expect_eq(tf_grammar_accept(st, ends[0]), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "before the document is complete"), "%s", tf_diag_msg());
	cr_expect_eq(tf_grammar_accept(st, other), TF_ERR_INVALID);
	cr_expect_eq(tf_grammar_accept_bytes(st, "ye", 2), 0);
	for (int i = 0; i < nv; i++)
		lg[i] = 0.5f;
	cr_assert_eq(tf_grammar_apply(st, lg), 0);
	cr_expect(isfinite(lg[ends[0]]) && isfinite(lg[ends[1]]), "\"ye\" is complete");
	cr_expect(!isfinite(lg[other]));
	cr_expect(isfinite(lg[tf_tok_find(tok, "s")]) && isfinite(lg[tf_tok_find(tok, "!")]));
	cr_expect_eq(tf_grammar_accept_bytes(st, "s!", 2), 0);
	for (int i = 0; i < nv; i++)
		lg[i] = 0.5f;
	cr_assert_eq(tf_grammar_apply(st, lg), 0);
	n = 0;
	for (int i = 0; i < nv; i++)
		n += isfinite(lg[i]);
	cr_expect_eq(n, 2, "nothing but the ends after \"yes!\": %d allowed", n);
	cr_expect(isfinite(lg[ends[0]]) && isfinite(lg[ends[1]]));
	cr_expect_eq(tf_grammar_accept(st, ends[1]), 0);
	cr_expect_eq(tf_grammar_accept(st, ends[0]), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "has ended"), "%s", tf_diag_msg());
	tf_grammar_state_free(st);
	tf_grammar_free(g);
	free(lg);
	tf_tok_free(tok);
}

/* ---- JSON Schema ---- */

typedef struct {
	const char *doc;
	bool ok;
} doc_case;

static void check_schema(const char *schema, const doc_case *d, size_t n)
{
	char *gbnf = schema_gbnf(schema);
	tf_grammar *g = compile(gbnf, NULL, 0, NULL, 0);

	for (size_t i = 0; i < n; i++) {
		int got = match(g, d[i].doc, strlen(d[i].doc));
		cr_expect_eq(got == 1, d[i].ok, "%s\n  on %s: %d, want %s\n%s", schema, d[i].doc, got,
			     d[i].ok ? "complete" : "not complete", gbnf);
	}
	tf_grammar_free(g);
	free(gbnf);
}

#define DOCS(schema, ...) do { \
	static const doc_case d_[] = { __VA_ARGS__ }; \
	check_schema(schema, d_, sizeof(d_) / sizeof(d_[0])); \
} while (0)

Test(schema, any_value_and_json_object)
{
	static const char *const any = "[1, -2.5e+3, \"x\\u00e9\\\"\", true, null, {\"a\": [{}]}]";
	DOCS("true", { any, true }, { "{\"a\":1}", true }, { "0", true }, { "01", false },
	     { "\"\\ud800\"", false }, { "\"a\nb\"", false }, { "[1,]", false }, { "nul", false },
	     { "1.", false }, { "-", false }, { "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}", true },
	     { "[1 ,2]", true }, { "[1  ,2]", false }, { "[\n                     1]", false },
	     { "[\n                    1]", true });
	DOCS("{}", { any, true });
	DOCS("{\"type\": \"object\"}", { "{\"x\": [1, {\"y\": null}]}", true }, { "{}", true }, { "[]", false },
	     { "1", false });
	tf_val *none = NULL;
	char *gbnf;
	cr_assert_eq(tf_grammar_schema_gbnf(none, &gbnf), 0);
	cr_expect(strstr(gbnf, "root ::= value\n"), "%s", gbnf);
	free(gbnf);
}

Test(schema, types_enum_const)
{
	DOCS("{\"type\": \"string\"}", { "\"a\\n\\u0041\\/\"", true }, { "\"\xF0\x9F\x98\x80\"", true },
	     { "\"\\x\"", false }, { "\"\\uDC00\"", false }, { "1", false });
	DOCS("{\"type\": \"integer\"}", { "-0", true }, { "1234567890123456", true },
	     { "12345678901234567", false }, { "1.5", false }, { "1e3", false });
	DOCS("{\"type\": \"number\"}", { "1.5", true }, { "-0.25e-10", true }, { "1E+123", true },
	     { "1e1234", false }, { ".5", false });
	DOCS("{\"type\": [\"boolean\", \"null\"]}", { "true", true }, { "false", true }, { "null", true },
	     { "0", false });
	DOCS("{\"enum\": [\"a\\\"b\", 1.5, [1, {\"k\": null}], false]}", { "\"a\\\"b\"", true },
	     { "1.5", true }, { "[1, {\"k\": null}]", true }, { "false", true }, { "true", false },
	     { "\"a\"", false });
	DOCS("{\"type\": \"string\", \"enum\": [\"x\", 1]}", { "\"x\"", true }, { "1", false });
	DOCS("{\"const\": {\"a\": \"é\"}}", { "{\"a\": \"é\"}", true }, { "{\"a\":\"é\"}", false });
}

Test(schema, objects)
{
	/* schema order; b optional; no other keys */
	static const char *const abc = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"},"
		"\"b\": {\"type\": \"string\"}, \"c\": {\"type\": \"boolean\"}}, \"required\": [\"c\", \"a\"]}";
	DOCS(abc, { "{\"a\": 1, \"b\": \"x\", \"c\": true}", true }, { "{\"a\":1,\"c\":false}", true },
	     { "{\"c\": true, \"a\": 1}", false }, { "{\"a\": 1}", false }, { "{\"a\": 1, \"c\": true, \"d\": 1}", false },
	     { "{\"a\": 1, \"a\": 1, \"c\": true}", false }, { "{ \"a\" : 1 , \"c\" : true }", true });
	DOCS("{\"properties\": {\"x\": {}, \"y\": {}}}", { "{}", true }, { "{\"y\": 2}", true },
	     { "{\"x\": [], \"y\": 2}", true }, { "{\"y\": 2, \"x\": 1}", false }, { "{,}", false });
	/* typed extra keys after the declared ones, never one of theirs */
	DOCS("{\"properties\": {\"ab\": {\"type\": \"null\"}, \"a\": {\"type\": \"null\"}, \"q\\\"\": {}},"
	     "\"additionalProperties\": {\"type\": \"integer\"}}",
	     { "{\"ab\": null, \"zz\": 1, \"\": 2}", true }, { "{\"abc\": 1}", true }, { "{\"b\": 1, \"a\": null}", false },
	     { "{\"ab\": 1}", false }, { "{\"a\": null, \"ab\": 1}", false }, { "{\"x\": \"s\"}", false },
	     { "{\"ab\": null, \"a\": null, \"q\\\"\": 0, \"a\\u0062\": 1}", false }, { "{\"q\": 1}", true },
	     { "{\"é\": 1, \"\xF0\x9F\x98\x80\": 2}", true });
	DOCS("{\"type\": \"object\", \"additionalProperties\": false}", { "{}", true }, { "{\"a\": 1}", false });
	DOCS("{\"type\": \"object\", \"additionalProperties\": true, \"properties\": {\"k\": {\"const\": 1}}, "
	     "\"required\": [\"k\"]}", { "{\"k\": 1, \"x\": [true]}", true }, { "{\"x\": 1}", false });
}

Test(schema, arrays)
{
	DOCS("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 2, \"maxItems\": 3}",
	     { "[1, 2]", true }, { "[1,2,3]", true }, { "[1]", false }, { "[1, 2, 3, 4]", false },
	     { "[1, \"a\"]", false }, { "[ 1 , 2 ]", true });
	DOCS("{\"prefixItems\": [{\"type\": \"string\"}, {\"type\": \"null\"}], \"items\": false}",
	     { "[]", true }, { "[\"a\"]", true }, { "[\"a\", null]", true }, { "[\"a\", null, 1]", false },
	     { "[null]", false });
	DOCS("{\"prefixItems\": [{\"const\": 1}], \"minItems\": 3, \"items\": {\"type\": \"boolean\"}}",
	     { "[1, true, false]", true }, { "[1, true, false, true]", true }, { "[1, true]", false },
	     { "[true, true, true]", false });
	DOCS("{\"type\": \"array\", \"prefixItems\": [{\"const\": 1}]}", { "[1, \"any\", {}]", true },
	     { "[]", true }, { "[2]", false });
	DOCS("{\"type\": \"array\", \"maxItems\": 0}", { "[]", true }, { "[1]", false });
}

Test(schema, strings)
{
	DOCS("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}", { "\"ab\"", true },
	     { "\"\\n\\u00e9\"", true }, { "\"\xF0\x9F\x98\x80\xC3\xA9\xE2\x82\xAC\"", true }, { "\"a\"", false },
	     { "\"abcd\"", false });
	DOCS("{\"type\": \"string\", \"format\": \"date\"}", { "\"2024-02-29\"", true }, { "\"2023-02-29\"", false },
	     { "\"1900-02-29\"", false }, { "\"2000-02-29\"", true }, { "\"2023-04-31\"", false },
	     { "\"2023-12-31\"", true }, { "\"0000-01-01\"", false }, { "\"2023-13-01\"", false });
	DOCS("{\"format\": \"time\"}", { "\"23:59:59Z\"", true }, { "\"00:00:00.123+05:30\"", true },
	     { "\"24:00:00Z\"", false }, { "\"12:00:00\"", false });
	DOCS("{\"format\": \"date-time\"}", { "\"2024-01-02T03:04:05-01:00\"", true }, { "\"2024-01-02 03:04:05Z\"", false });
	DOCS("{\"format\": \"uuid\"}", { "\"123e4567-E89B-12d3-a456-426614174000\"", true },
	     { "\"123e4567e89b12d3a456426614174000\"", false });
	/* patterns: the string's JSON spelling; unanchored ends take anything */
	DOCS("{\"pattern\": \"^(ab|c)+[0-9]{2}$\"}", { "\"abcab12\"", true }, { "\"ab1\"", false },
	     { "\"xab12\"", false });
	DOCS("{\"pattern\": \"a\\\\.b\"}", { "\"xxa.byy\"", true }, { "\"a.b\"", true }, { "\"axb\"", false });
	DOCS("{\"pattern\": \"^[^a]\\\"\\\\\\\\.$\"}", { "\"\\n\\\"\\\\x\"", true }, { "\"b\\\"\\\\\\t\"", true },
	     { "\"b\\\"\\\\\\n\"", false }, { "\"a\\\"\\\\x\"", false });
	DOCS("{\"pattern\": \"^\\\\w\\\\s\\\\d?$\"}", { "\"_\\t\"", true }, { "\"Z 7\"", true }, { "\"- 7\"", false });
}

/* Every integer in [lo - 30, hi + 30] against the bounds, for many ranges. */
Test(schema, integer_ranges_exhaustive)
{
	static const long long bounds[][2] = {
		{ 0, 0 }, { 0, 9 }, { 1, 100 }, { 7, 13 }, { 95, 105 }, { -15, 15 }, { -120, -7 },
		{ 123, 4567 }, { 999, 1001 }, { -1000, 1000 }, { 10, 99 }, { 100, 199 }, { 19, 91 },
	};
	char schema[256], num[32];

	for (size_t b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++) {
		long long lo = bounds[b][0], hi = bounds[b][1];
		for (int form = 0; form < 2; form++) {
			if (form == 0)
				snprintf(schema, sizeof(schema), "{\"type\": \"integer\", \"minimum\": %lld, \"maximum\": %lld}", lo, hi);
			else
				snprintf(schema, sizeof(schema), "{\"type\": \"integer\", \"exclusiveMinimum\": %.1f, "
					 "\"exclusiveMaximum\": %lld}", (double)lo - 0.5, hi + 1);
			char *gbnf = schema_gbnf(schema);
			tf_grammar *g = compile(gbnf, NULL, 0, NULL, 0);
			for (long long v = lo - 30; v <= hi + 30; v++) {
				snprintf(num, sizeof(num), "%lld", v);
				cr_expect_eq(match(g, num, strlen(num)) == 1, v >= lo && v <= hi, "%s on %lld\n%s",
					     schema, v, gbnf);
			}
			cr_expect_neq(match(g, "-0", 2), 1, "%s on -0", schema);
			cr_expect_neq(match(g, "007", 3), 1, "%s on 007", schema);
			tf_grammar_free(g);
			free(gbnf);
		}
	}
	/* one bound: the other side is open up to 16 digits */
	DOCS("{\"type\": \"integer\", \"minimum\": -3}", { "-3", true }, { "-4", false },
	     { "9999999999999999", true }, { "99999999999999999", false });
	DOCS("{\"type\": \"integer\", \"exclusiveMaximum\": 0}", { "-1", true }, { "0", false },
	     { "-9999999999999999", true });
}

Test(schema, refs_and_combinators)
{
	static const char *const tree = "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {"
		"\"v\": {\"type\": \"integer\"}, \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}},"
		"\"required\": [\"v\"]}}, \"$ref\": \"#/$defs/node\"}";
	DOCS(tree, { "{\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": [{\"v\": 4, \"kids\": []}]}]}", true },
	     { "{\"v\": 1, \"kids\": [{}]}", false });
	DOCS("{\"definitions\": {\"a~b/c\": {\"type\": \"null\"}}, \"items\": {\"$ref\": \"#/definitions/a~0b~1c\"}}",
	     { "[null, null]", true }, { "[1]", false });
	DOCS("{\"properties\": {\"p\": {\"type\": \"integer\"}, \"q\": {\"$ref\": \"#/properties/p\"}}}",
	     { "{\"q\": 5}", true }, { "{\"q\": \"5\"}", false });
	DOCS("{\"anyOf\": [{\"type\": \"string\", \"maxLength\": 1}, {\"type\": \"integer\"}]}", { "\"a\"", true },
	     { "7", true }, { "\"ab\"", false });
	DOCS("{\"oneOf\": [{\"const\": 1}, {\"const\": \"1\"}], \"title\": \"t\", \"description\": \"d\"}",
	     { "1", true }, { "\"1\"", true }, { "2", false });
	DOCS("{\"allOf\": [{\"type\": \"boolean\"}], \"default\": true, \"examples\": [false]}", { "true", true },
	     { "1", false });
}

Test(schema, refusals_name_keyword_and_path)
{
	static const struct {
		const char *schema;
		int code;
		const char *msg[3];
	} cases[] = {
		{ "{\"properties\": {\"a\": {\"patternProperties\": {}}}}", TF_ERR_UNSUPPORTED,
		  { "json_schema: 'patternProperties' at /properties/a is not supported" } },
		{ "{\"type\": \"object\", \"minProperties\": 1, \"properties\": {\"x/y\": {\"multipleOf\": 2}}}",
		  TF_ERR_UNSUPPORTED, { "'minProperties' at the root", "'multipleOf' at /properties/x~1y" } },
		{ "{\"type\": \"number\", \"minimum\": 1}", TF_ERR_UNSUPPORTED,
		  { "'minimum' at the root is not supported on numbers" } },
		{ "{\"items\": {\"pattern\": \"(?=a)\"}}", TF_ERR_UNSUPPORTED,
		  { "'pattern' at /items is not supported: the group '(?='" } },
		{ "{\"pattern\": \"^a|b$\"}", TF_ERR_UNSUPPORTED, { "'|' outside a group" } },
		{ "{\"pattern\": \"\\\\bx\"}", TF_ERR_UNSUPPORTED, { "the escape \\b" } },
		{ "{\"pattern\": \"[^\\\\d]\"}", TF_ERR_UNSUPPORTED, { "\\d inside [^...]" } },
		{ "{\"format\": \"email\"}", TF_ERR_UNSUPPORTED, { "'format' 'email' at the root" } },
		{ "{\"allOf\": [{}, {}]}", TF_ERR_UNSUPPORTED, { "'allOf' at the root is not supported with 2 schemas" } },
		{ "{\"anyOf\": [{}], \"type\": \"string\"}", TF_ERR_UNSUPPORTED, { "'type' beside 'anyOf' at the root" } },
		{ "{\"$ref\": \"#/$defs/a\", \"minItems\": 1, \"$defs\": {\"a\": {}}}", TF_ERR_UNSUPPORTED,
		  { "'minItems' beside '$ref'" } },
		{ "{\"$ref\": \"other.json#/a\"}", TF_ERR_UNSUPPORTED, { "'$ref' 'other.json#/a' at the root" } },
		{ "{\"prefixItems\": [false]}", TF_ERR_UNSUPPORTED, { "the schema 'false' at /prefixItems/0" } },
		{ "{\"type\": \"string\", \"minLength\": 3, \"maxLength\": 2}", TF_ERR_UNSUPPORTED, { "'maxLength'" } },
		{ "{\"enum\": [1], \"type\": \"string\"}", TF_ERR_UNSUPPORTED, { "'enum' at the root is not supported: it allows no value" } },
		{ "{\"properties\": {}, \"required\": [\"z\"]}", TF_ERR_UNSUPPORTED, { "'z' is not in 'properties'" } },
		{ "{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", TF_ERR_UNSUPPORTED, { "allow no integer" } },
		{ "{\"type\": \"strng\"}", TF_ERR_INVALID, { "'type' names no JSON Schema type at the root" } },
		{ "{\"items\": {\"$ref\": \"#/$defs/none\"}}", TF_ERR_INVALID, { "'$ref' '#/$defs/none' at /items names no schema" } },
		{ "{\"minItems\": -1}", TF_ERR_INVALID, { "'minItems' is not a non-negative integer at the root" } },
		{ "{\"properties\": {\"a\": 3}}", TF_ERR_INVALID, { "not an object or a boolean at /properties/a" } },
		{ "{\"anyOf\": []}", TF_ERR_INVALID, { "not a non-empty list" } },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tf_val *v = NULL;
		char *gbnf = NULL;
		cr_assert_eq(tf_val_parse_json(cases[i].schema, strlen(cases[i].schema), &v), 0);
		int rc = tf_grammar_schema_gbnf(v, &gbnf);
		cr_expect_eq(rc, cases[i].code, "%s: %d (%s)", cases[i].schema, rc, tf_diag_msg());
		for (int k = 0; k < 3 && cases[i].msg[k]; k++)
			cr_expect(strstr(tf_diag_msg(), cases[i].msg[k]), "%s: '%s' lacks '%s'", cases[i].schema,
				  tf_diag_msg(), cases[i].msg[k]);
		cr_expect_null(gbnf);
		tf_val_unref(v);
	}
}
