/*
 * tf/grammar.h - constrained decoding: mask every token that cannot continue
 * a document of a grammar.
 *
 * A grammar is GBNF text (llama.cpp's format), written by hand or made from
 * a JSON Schema by tf_grammar_schema_gbnf().  Compiled against a tokenizer,
 * it gives, at each decoding step, the tokens whose bytes can come next:
 *
 *     char *gbnf;
 *     tf_grammar *g;
 *     tf_grammar_state *st;
 *     tf_grammar_schema_gbnf(schema, &gbnf);          schema: a tf_val, or NULL
 *     tf_grammar_compile(gbnf, strlen(gbnf), tok, n_vocab, &eos, 1, &g);
 *     tf_grammar_state_new(g, &st);
 *     for (;;) {
 *             ... logits ...
 *             tf_grammar_apply(st, logits);          disallowed tokens: -INFINITY
 *             id = sample(logits);
 *             tf_grammar_accept(st, id);
 *             if (id == eos) break;
 *     }
 *
 * GBNF: rules `name ::= alternatives`, the root rule named `root`.  Names are
 * letters, digits, '-' and '_'.  Elements: "literals" (escapes \n \r \t \\
 * \" \[ \] \xHH \uHHHH \UHHHHHHHH), [character classes] with ranges a-z and
 * ^ for negation, `.` (any character), rule names, ( groups ), and after any
 * of them *, +, ?, {m}, {m,}, {m,n} or {,n}; `|` separates alternatives and
 * `#` starts a comment.  A rule may span lines: it ends where the next
 * `name ::=` begins.  Characters are Unicode code points matched as UTF-8
 * (never a surrogate), so a token may end inside one.  Left recursion is
 * refused where it would grow the parser's stack (`a ::= a "x"`); a rule
 * that comes back to itself as its last element (`("a"?)*`) is fine.
 *
 * Masks are computed by walking a trie of the vocabulary's bytes and are
 * cached in the grammar, keyed by the exact parser state, so the states a
 * JSON document comes back to (inside a string, after a comma) cost a copy.
 * A grammar and its states belong to one thread at a time (apply and
 * accept change the grammar's cache); requests may share a grammar, its
 * cache then serving them all.
 */
#ifndef TF_GRAMMAR_H
#define TF_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/tokenizer.h"
#include "tf/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_grammar tf_grammar;             /* compiled; only its cache changes */
typedef struct tf_grammar_state tf_grammar_state; /* a position in a document */

/*
 * Compiles GBNF text.  Tokens are ids below n_vocab with a non-empty piece
 * (tf_tok_piece) that are not special (tf_tok_is_special); the `ends` ids
 * (end of document, e.g. EOS) are allowed once the document is complete.
 * tok may be NULL: then only tf_grammar_accept_bytes() works.  Errors
 * name "line L column C" in the diag: TF_ERR_FORMAT for syntax,
 * TF_ERR_INVALID for an undefined or twice-defined rule or left recursion
 * (and a missing root), TF_ERR_RANGE past 4M elements (repetitions copy
 * literals).  Compiling builds the vocabulary's trie: about 10 ms for 150k
 * tokens (bench/grammar).
 */
int tf_grammar_compile(const char *gbnf, size_t len, const tf_tokenizer *tok, int n_vocab,
		       const int32_t *ends, int n_ends, tf_grammar **out);
void tf_grammar_free(tf_grammar *g);
/* Bounds the cache's memory (default 64 MiB; the parser's stacks count
 * too); past it, the cache is emptied.  0: every mask is computed afresh. */
void tf_grammar_cache_limit(tf_grammar *g, size_t bytes);

/* What the cache did, since the compile. */
typedef struct tf_grammar_stats {
	uint64_t masks;         /* masks tf_grammar_apply asked for */
	uint64_t walks;         /* of them, computed by a trie walk (the rest: from the cache) */
	uint64_t clears;        /* times the cache was emptied */
	size_t cache_bytes;     /* its memory now */
} tf_grammar_stats;

void tf_grammar_stats_get(const tf_grammar *g, tf_grammar_stats *out);

/*
 * JSON Schema (draft 2020-12) to GBNF: a new NUL-terminated string in *out,
 * free() it.  Every document the grammar allows validates against the
 * schema (but for oneOf, below).  NULL, {} or true: any JSON value;
 * {"type": "object"}: any JSON object (OpenAI's json_object mode).
 *
 * Supported: type (one or a list; without it, the types the keywords
 * present apply to, else any), enum and const (filtered by type), properties,
 * required, additionalProperties, items (a schema or false), prefixItems,
 * minItems, maxItems, anyOf, oneOf (as anyOf: a document matching two
 * branches is not excluded), allOf of one schema, $ref to a JSON pointer
 * into the schema ("#/$defs/x", "#/definitions/x", "#"; recursion allowed),
 * minLength and maxLength (characters; an escape is one), format (date,
 * time, date-time, uuid), pattern (below), and minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum on integers.  Ignored: title,
 * description, default, examples, $schema, $comment, readOnly, writeOnly,
 * deprecated.  Anything else is TF_ERR_UNSUPPORTED, the diag naming each
 * refused keyword and its JSON pointer ("json_schema: 'patternProperties'
 * at /properties/a is not supported"), as are constraints beside $ref,
 * anyOf, oneOf or allOf (or beside enum and const, but type), and bounds on
 * numbers that are not integers.  A malformed schema is TF_ERR_INVALID.
 *
 * pattern: Python's re.search syntax with literals, escapes, \d \w \s
 * (ASCII), classes, '.', groups, '|', the quantifiers, '^' first and '$'
 * last; without an anchor, anything may come before or after.  Lookaround,
 * backreferences, \b, flags and the like are refused.
 *
 * The documents:
 *   - objects with "properties" hold those keys in schema order, optional
 *     ones omitted or not, and no other key unless additionalProperties
 *     allows them (then after the declared ones, spelled without escapes);
 *     an object schema with neither keyword is any object;
 *   - between tokens: nothing, one space, or a newline and up to 20 spaces
 *     or tabs (compact and pretty JSON; a model cannot pad forever);
 *   - numbers: up to 16 integer digits (more only where a bound needs
 *     them), up to 16 fraction digits, up to 3 exponent digits; integers
 *     never have a fraction or an exponent;
 *   - strings: any character but controls, '"' and '\' raw, the JSON
 *     escapes, \u escapes outside the surrogates.
 */
int tf_grammar_schema_gbnf(const tf_val *schema, char **out);

/*
 * gbnf with every rule name, references included, prefixed by prefix (its
 * root becomes PREFIXroot): rules to embed in a larger grammar.  A new
 * string in *out, free() it.
 */
int tf_grammar_gbnf_prefix(const char *gbnf, const char *prefix, char **out);

/* A state at the start of a document. */
int tf_grammar_state_new(tf_grammar *g, tf_grammar_state **out);
/* A copy of st, to try tokens on or to keep for a rollback. */
int tf_grammar_state_clone(const tf_grammar_state *st, tf_grammar_state **out);
/* A state may outlive its grammar, only to be freed. */
void tf_grammar_state_free(tf_grammar_state *st);

/*
 * Sets logits[i] = -INFINITY (logits: n_vocab of them) for every id that
 * cannot come next: tokens whose bytes cannot continue the document,
 * special tokens and tokens without bytes; the end ids until the document
 * is complete.  Once nothing but the end can follow, only the end ids
 * remain; once an end id was accepted, every id is masked.  The other
 * logits are left as they are.
 */
int tf_grammar_apply(tf_grammar_state *st, float *logits);
/* tf_grammar_apply for a tf_mask_fn (tf/engine.h: tf_seq_constrain), ctx
 * the state. */
int tf_grammar_mask(void *st, float *logits);
/*
 * Advances by one token.  An end id needs a complete document and finishes
 * the state.  TF_ERR_INVALID when the token cannot come next (st unchanged).
 */
int tf_grammar_accept(tf_grammar_state *st, int32_t token);
/* Advances by raw bytes; TF_ERR_INVALID naming the first byte that cannot
 * come next (st unchanged). */
int tf_grammar_accept_bytes(tf_grammar_state *st, const char *p, size_t n);
/* Whether the text so far is a complete document (an end id may follow). */
bool tf_grammar_complete(const tf_grammar_state *st);

#ifdef __cplusplus
}
#endif
#endif /* TF_GRAMMAR_H */
