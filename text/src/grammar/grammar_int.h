/*
 * grammar_int.h - the compiled grammar the grammar modules share.
 *
 * gbnf.c turns GBNF text into a program over bytes: each rule is a run of
 * elements per alternative, each element a byte set (a character class is a
 * rule of UTF-8 byte sequences) or a reference to a rule.  match.c runs it
 * as llama.cpp does: a parser state is a set of stacks of positions, each
 * stack's top a byte-set element, advanced one byte at a time.  mask.c
 * caches the sets as states of a lazily built DFA and masks tokens by a
 * walk over the vocabulary's trie.  A grammar and its states are used by
 * one thread at a time: the stacks and the DFA grow as they are met.
 */
#ifndef TF_GRAMMAR_INT_H
#define TF_GRAMMAR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/grammar.h"
#include "tf/text.h"

enum g_op {
	G_END,          /* the rule's last alternative ends */
	G_ALT,          /* an alternative ends; another starts after it */
	G_BYTE,         /* one byte of the set prog.sets[arg] */
	G_REF,          /* the rule arg */
};

typedef struct g_elem {
	int32_t op, arg;
} g_elem;

typedef struct g_prog {
	g_elem *elems;
	int32_t n_elems;
	uint64_t (*sets)[4];    /* 256-bit byte sets */
	int32_t n_sets;
	int32_t *alt_first;     /* rule r's alternatives: alts[alt_first[r] .. alt_first[r + 1]) */
	int32_t *alts;          /* each the position of its first element */
	int32_t n_rules;
	int32_t root;
} g_prog;

static inline bool g_is_end(const g_prog *p, int32_t pos)
{
	return p->elems[pos].op == G_END || p->elems[pos].op == G_ALT;
}

static inline bool g_set_has(const g_prog *p, int32_t set, unsigned b)
{
	return p->sets[set][b >> 6] >> (b & 63) & 1;
}

/* The most ranges a character class may list. */
#define G_CLASS_MAX 256

/*
 * Code point ranges (n lo/hi pairs in rg, with room for n + 2) sorted,
 * merged, complemented when neg, less the surrogates: into out (room for
 * n + 2 pairs); returns how many.  rg is clobbered.
 */
int32_t g_ranges(uint32_t *rg, int32_t n, bool neg, uint32_t *out);

/* GBNF text to a program; errors as tf_grammar_compile's. */
int g_parse(const char *src, size_t len, g_prog *out);
void g_prog_free(g_prog *p);

/* Appends a GBNF literal ("...") spelling the bytes s[0..n) (schema.c). */
int g_put_literal(tf_bytes *out, const char *s, size_t n);

/*
 * Appends a GBNF expression for the JSON spellings (the text between the
 * quotes) of the strings that a regular expression matches as Python's
 * re.search does (regex.c).  `any_char` names the rule for one JSON string
 * character, for an end without its anchor.  What it cannot express is
 * TF_ERR_UNSUPPORTED with the reason in why[] and no diag.
 */
int g_regex_gbnf(const char *re, size_t len, const char *any_char, tf_bytes *out, char *why,
		 size_t why_len);

/* A growable id list. */
typedef struct g_ids {
	int32_t *v;
	int32_t n, cap;
} g_ids;

int g_ids_push(g_ids *l, int32_t id);
/* Sorts and drops duplicates. */
void g_ids_sort_unique(g_ids *l);

/*
 * Stacks are interned as linked nodes (pos, parent), so a stack is one id
 * and equal stacks have equal ids.  Node 0 is the empty stack: the document
 * may end there.  A stack's top node sits on a G_BYTE element; the nodes
 * below hold where to go on when the rule above ends.
 */
typedef struct g_node {
	int32_t pos, parent;
} g_node;

typedef struct g_match {
	g_node *nodes;
	int32_t n_nodes, cap_nodes;
	int32_t *node_index;    /* open addressing: -1 or a node id */
	uint32_t node_mask;
	/* scratch of one expansion: work list and the (pos, parent) pairs seen */
	g_ids work;
	uint64_t *seen;
	uint32_t *seen_gen;
	uint32_t seen_mask, seen_n, gen;
} g_match;

int g_match_init(g_match *m);
void g_match_free(g_match *m);
/* Appends the stacks that continue at pos over stack `parent`, each topped
 * by a G_BYTE element (0 when the document may end). */
int g_expand(g_match *m, const g_prog *p, int32_t pos, int32_t parent, g_ids *out);
/* The stacks of set[0..n) that take byte b, advanced past it; out sorted. */
int g_advance(g_match *m, const g_prog *p, const int32_t *set, int32_t n, unsigned b,
	      g_ids *out);
/* The memory of m's stacks. */
size_t g_match_bytes(const g_match *m);
/*
 * Rebuilds g's stacks from those the live states and g->init hold, all
 * others forgotten (the stacks of walks past, of states freed), their ids
 * renumbered: only while nothing else holds one (the DFA is emptied first).
 */
int g_match_compact(tf_grammar *g);

/* mask.c's cache: one DFA state per stack set seen. */
typedef struct g_dstate {
	uint32_t hash;
	int32_t off, n;         /* the set: stack ids at g_dfa.ids[off .. off + n) */
	int32_t *next;          /* the state after each byte (0: dead), or NULL until needed */
	uint64_t *mask;         /* the tokens allowed here, or NULL until needed */
} g_dstate;

typedef struct g_dfa {
	g_dstate *v;
	int32_t n, cap;         /* state 0: the empty set, dead */
	g_ids ids;
	int32_t *index;         /* open addressing: -1 or a state */
	uint32_t index_mask;
	size_t bytes, limit;    /* memory of the tables and masks; past limit: clear */
	uint32_t epoch;         /* bumped by each clear */
	uint64_t masks, walks;  /* for tf_grammar_stats */
} g_dfa;

/* The vocabulary's byte strings as a trie in preorder (mask.c). */
typedef struct g_trie_node {
	int32_t skip;           /* the node after this one's subtree */
	int32_t tok;            /* the first token at or under it, in ids[] */
	int32_t depth;          /* 1: a child of the (implicit) root */
	uint8_t byte;
} g_trie_node;

typedef struct g_trie {
	g_trie_node *nodes;     /* n of them, and a sentinel */
	int32_t n;
	int32_t *ids;           /* token ids in the order of their bytes */
	int max_depth;
} g_trie;

struct tf_grammar {
	g_prog prog;
	g_match match;
	g_ids init;             /* the stacks at the start of a document */
	const tf_tokenizer *tok;
	int n_vocab;
	uint64_t *ends;         /* bit i: id i is an end id */
	g_trie trie;
	g_dfa dfa;
	g_ids scratch, scratch2;        /* for accept_bytes and the DFA's fill */
	tf_grammar_state *states;       /* the live ones, for g_match_compact */
};

struct tf_grammar_state {
	tf_grammar *g;                  /* NULL once the grammar was freed */
	tf_grammar_state *prev, *next;
	g_ids set;              /* sorted stack ids; empty after an end id */
	bool finished;
	int32_t dstate;         /* the set's DFA state in epoch `epoch`, or -1 */
	uint32_t epoch;
};

#endif /* TF_GRAMMAR_INT_H */
