/*
 * mask.c - token masks: a walk over the vocabulary's trie, cached.
 *
 * Each stack set the walk meets is interned as a DFA state whose 256
 * successors are computed once, all at once: each stack's continuation is
 * expanded once, and bytes that the same stacks take share one successor.
 * The walk then costs a table lookup per trie node, pruning a subtree at the
 * first byte that kills every stack.  A state's mask is kept with it, so a
 * parser state met again costs a bitset copy.  When the cache and the
 * interned stacks (match.c) outgrow the limit, the cache is emptied and the
 * stacks are rebuilt from those the live states hold.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "tf/diag.h"

#define CACHE_LIMIT_DEFAULT (64u << 20)

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "grammar: out of memory");
}

/* ---- the vocabulary's trie ---- */

typedef struct piece {
	uint64_t key;           /* the first 8 bytes, big-endian, zero-padded */
	const uint8_t *p;
	size_t len;
	int32_t id;
} piece;

static int cmp_piece(const void *a, const void *b)
{
	const piece *x = a, *y = b;
	int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/*
 * Sorts pieces by their bytes (then length, then id): a least significant
 * digit radix sort on the 8-byte keys, skipping the digits all share, then
 * the runs of equal keys by cmp_piece.  The trie of 150k tokens builds in
 * about 10 ms so, where qsort made it 35.
 */
static int sort_pieces(piece *pc, size_t n)
{
	piece *tmp = malloc((n ? n : 1) * sizeof(*tmp));
	size_t count[256];

	if (!tmp)
		return nomem();
	for (int shift = 0; shift < 64; shift += 8) {
		memset(count, 0, sizeof(count));
		for (size_t i = 0; i < n; i++)
			count[pc[i].key >> shift & 255]++;
		if (n && count[pc[0].key >> shift & 255] == n)
			continue;
		for (size_t b = 0, sum = 0; b < 256; b++) {
			size_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[pc[i].key >> shift & 255]++] = pc[i];
		memcpy(pc, tmp, n * sizeof(*pc));
	}
	free(tmp);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && pc[j].key == pc[i].key; j++)
			;
		if (j - i > 1)
			qsort(pc + i, j - i, sizeof(*pc), cmp_piece);
	}
	return TF_OK;
}

static bool has_bit(const uint64_t *bits, int32_t i)
{
	return bits[i >> 6] >> (i & 63) & 1;
}

static void trie_free(g_trie *t)
{
	free(t->nodes);
	free(t->ids);
	memset(t, 0, sizeof(*t));
}

/*
 * Sorted pieces laid out in preorder: a piece sharing its first k bytes
 * with the one before it adds nodes from depth k + 1 on.  A node's first
 * token is the first piece at or under it, so the tokens ending at node i
 * are ids[nodes[i].tok .. nodes[i + 1].tok) (nodes[n] is a sentinel).
 */
static int trie_build(g_trie *t, const tf_tokenizer *tok, int n_vocab, const uint64_t *ends)
{
	int32_t n = tf_tok_vocab_size(tok) < n_vocab ? tf_tok_vocab_size(tok) : n_vocab;
	int32_t k = 0, depth = 0, *path = NULL;
	piece *pc = malloc((size_t)(n ? n : 1) * sizeof(*pc));
	size_t total = 0, max_len = 0;
	int rc = TF_OK;

	memset(t, 0, sizeof(*t));
	if (!pc)
		return nomem();
	for (int32_t id = 0; id < n; id++) {
		size_t len;
		const char *p = tf_tok_piece(tok, id, &len);

		if (p && len && !tf_tok_is_special(tok, id) && !has_bit(ends, id)) {
			uint64_t key = 0;
			for (size_t i = 0; i < 8; i++)
				key = key << 8 | (i < len ? (uint8_t)p[i] : 0);
			pc[k++] = (piece){ key, (const uint8_t *)p, len, id };
			total += len;
			max_len = len > max_len ? len : max_len;
		}
	}
	if (total >= INT32_MAX) {       /* node ids are int32 */
		rc = tf_diag_set(TF_ERR_RANGE, "grammar: the vocabulary's tokens hold over 2 GiB");
		goto out;
	}
	if ((rc = sort_pieces(pc, (size_t)k)) < 0)
		goto out;
	t->nodes = malloc((total + 1) * sizeof(*t->nodes));
	t->ids = malloc((size_t)(k ? k : 1) * sizeof(*t->ids));
	path = malloc((max_len + 1) * sizeof(*path));
	if (!t->nodes || !t->ids || !path) {
		rc = nomem();
		goto out;
	}
	for (int32_t i = 0; i < k; i++) {
		size_t lcp = 0;

		if (i)
			while (lcp < pc[i].len && lcp < pc[i - 1].len && pc[i].p[lcp] == pc[i - 1].p[lcp])
				lcp++;
		for (; (size_t)depth > lcp; depth--)
			t->nodes[path[depth]].skip = t->n;
		for (; (size_t)depth < pc[i].len; depth++) {
			t->nodes[t->n] = (g_trie_node){ .tok = i, .depth = depth + 1, .byte = pc[i].p[depth] };
			path[depth + 1] = t->n++;
		}
		t->ids[i] = pc[i].id;
	}
	for (; depth > 0; depth--)
		t->nodes[path[depth]].skip = t->n;
	t->nodes[t->n] = (g_trie_node){ .tok = k };
	t->max_depth = (int)max_len;
	g_trie_node *fit = realloc(t->nodes, ((size_t)t->n + 1) * sizeof(*fit));
	t->nodes = fit ? fit : t->nodes;
out:
	free(pc);
	free(path);
	if (rc)
		trie_free(t);
	return rc;
}

/* ---- the DFA over stack sets ---- */

static uint32_t hash_set(const int32_t *v, int32_t n)
{
	uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;

	for (int32_t i = 0; i < n; i++) {
		h = (h ^ (uint32_t)v[i]) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 29;
	}
	return (uint32_t)(h ^ (h >> 32));
}

static int index_alloc(g_dfa *d, uint32_t mask)
{
	int32_t *index = malloc((mask + 1) * sizeof(*index));

	if (!index)
		return nomem();
	memset(index, -1, (mask + 1) * sizeof(*index));
	free(d->index);
	d->index = index;
	d->index_mask = mask;
	for (int32_t s = 0; s < d->n; s++) {
		uint32_t j = d->v[s].hash & mask;
		while (index[j] >= 0)
			j = (j + 1) & mask;
		index[j] = s;
	}
	return TF_OK;
}

/* Forgets every state but the dead one (0, the empty set). */
static int dfa_clear(g_dfa *d)
{
	for (int32_t s = 0; s < d->n; s++) {
		free(d->v[s].next);
		free(d->v[s].mask);
	}
	d->v[0] = (g_dstate){ .hash = hash_set(NULL, 0) };
	d->n = 1;
	d->ids.n = 0;
	d->bytes = 0;
	d->epoch++;
	return index_alloc(d, 1023);
}

static int dfa_init(g_dfa *d)
{
	memset(d, 0, sizeof(*d));
	d->limit = CACHE_LIMIT_DEFAULT;
	d->cap = 64;
	if (!(d->v = malloc((size_t)d->cap * sizeof(*d->v))))
		return nomem();
	return dfa_clear(d);
}

static void dfa_free(g_dfa *d)
{
	for (int32_t s = 0; s < d->n; s++) {
		free(d->v[s].next);
		free(d->v[s].mask);
	}
	free(d->v);
	free(d->ids.v);
	free(d->index);
	memset(d, 0, sizeof(*d));
}

/* The state of the sorted set v[0..n), made on first sight; < 0 no memory. */
static int32_t dfa_state(g_dfa *d, const int32_t *v, int32_t n)
{
	uint32_t h = hash_set(v, n), i;
	int rc;

	for (i = h & d->index_mask; d->index[i] >= 0; i = (i + 1) & d->index_mask) {
		const g_dstate *s = &d->v[d->index[i]];
		if (s->hash == h && s->n == n && !memcmp(d->ids.v + s->off, v, (size_t)n * sizeof(*v)))
			return d->index[i];
	}
	if (d->n == d->cap) {
		g_dstate *grown = realloc(d->v, 2 * (size_t)d->cap * sizeof(*grown));
		if (!grown)
			return nomem();
		d->v = grown;
		d->cap *= 2;
	}
	int32_t off = d->ids.n;
	for (int32_t k = 0; k < n; k++)
		if ((rc = g_ids_push(&d->ids, v[k])) < 0)
			return rc;
	d->v[d->n] = (g_dstate){ .hash = h, .off = off, .n = n };
	d->bytes += sizeof(g_dstate) + (size_t)n * sizeof(*v);
	if (2 * (uint32_t)++d->n > d->index_mask)
		return (rc = index_alloc(d, 2 * d->index_mask + 1)) < 0 ? rc : d->n - 1;
	d->index[i] = d->n - 1;
	return d->n - 1;
}

/* Fills state s's successor table (see the top of the file). */
static int dfa_fill(tf_grammar *g, int32_t s)
{
	g_dfa *d = &g->dfa;
	const g_prog *p = &g->prog;
	g_ids *set = &g->scratch, *exp = &g->scratch2, uni = { 0 };
	int32_t n = d->v[s].n, words, n_sig = 0, res[256];
	int32_t *exp_off = malloc((size_t)(n + 1) * sizeof(*exp_off));
	int32_t *top_set = malloc((size_t)(n ? n : 1) * sizeof(*top_set));
	int32_t *next = malloc(256 * sizeof(*next));
	uint64_t *sig;
	int rc = TF_OK;

	words = (n + 63) / 64;
	sig = calloc(257 * (size_t)(words ? words : 1), sizeof(*sig));
	set->n = exp->n = 0;
	if (!exp_off || !top_set || !next || !sig) {
		rc = nomem();
		goto out;
	}
	for (int32_t i = 0; i < n && !rc; i++)    /* a copy: interning moves the arena */
		rc = g_ids_push(set, d->ids.v[d->v[s].off + i]);
	for (int32_t i = 0; i < n && !rc; i++) {
		exp_off[i] = exp->n;
		top_set[i] = -1;
		if (set->v[i] == 0)
			continue;
		g_node top = g->match.nodes[set->v[i]];
		top_set[i] = p->elems[top.pos].arg;
		rc = g_expand(&g->match, p, top.pos + 1, top.parent, exp);
	}
	exp_off[n] = exp->n;
	for (unsigned b = 0; b < 256 && !rc; b++) {
		uint64_t *cur = sig + (size_t)n_sig * (size_t)words;
		bool any = false;
		int32_t j;

		memset(cur, 0, (size_t)words * sizeof(*cur));
		for (int32_t i = 0; i < n; i++)
			if (top_set[i] >= 0 && g_set_has(p, top_set[i], b))
				cur[i >> 6] |= 1ull << (i & 63), any = true;
		if (!any) {
			next[b] = 0;
			continue;
		}
		for (j = 0; j < n_sig; j++)
			if (!memcmp(sig + (size_t)j * (size_t)words, cur, (size_t)words * sizeof(*cur)))
				break;
		if (j == n_sig) {
			uni.n = 0;
			for (int32_t i = 0; i < n && !rc; i++)
				for (int32_t e = exp_off[i]; cur[i >> 6] >> (i & 63) & 1 && e < exp_off[i + 1] && !rc; e++)
					rc = g_ids_push(&uni, exp->v[e]);
			if (rc)
				break;
			g_ids_sort_unique(&uni);
			if ((res[n_sig++] = dfa_state(d, uni.v, uni.n)) < 0)
				rc = res[n_sig - 1];
		}
		next[b] = res[j];
	}
	if (!rc) {
		d->v[s].next = next;
		d->bytes += 256 * sizeof(*next);
		next = NULL;
	}
out:
	free(exp_off);
	free(top_set);
	free(next);
	free(sig);
	free(uni.v);
	return rc;
}

static bool dstate_complete(const g_dfa *d, int32_t s)
{
	return d->v[s].n && d->ids.v[d->v[s].off] == 0;
}

/* State s's mask: the tokens the trie walk reaches alive, and the ends if complete. */
static int mask_build(tf_grammar *g, int32_t s, uint64_t *bits)
{
	const g_trie *t = &g->trie;
	g_dfa *d = &g->dfa;
	int32_t *at = malloc((size_t)(t->max_depth + 1) * sizeof(*at));
	int32_t words = (g->n_vocab + 63) / 64;
	int rc = TF_OK;

	if (!at)
		return nomem();
	memset(bits, 0, (size_t)words * sizeof(*bits));
	at[0] = s;
	for (int32_t i = 0; i < t->n;) {
		const g_trie_node *nd = &t->nodes[i];
		int32_t from = at[nd->depth - 1];

		if (!d->v[from].next && (rc = dfa_fill(g, from)) < 0)
			break;
		int32_t to = d->v[from].next[nd->byte];
		if (!to) {
			i = nd->skip;
			continue;
		}
		for (int32_t k = nd->tok; k < nd[1].tok; k++)
			bits[t->ids[k] >> 6] |= 1ull << (t->ids[k] & 63);
		at[nd->depth] = to;
		i++;
	}
	if (dstate_complete(d, s))
		for (int32_t w = 0; w < words; w++)
			bits[w] |= g->ends[w];
	free(at);
	return rc;
}

/* The allowed-token bitset for st, from the cache or a walk. */
static int mask_get(tf_grammar_state *st, const uint64_t **bits)
{
	tf_grammar *g = st->g;
	g_dfa *d = &g->dfa;
	size_t size = (size_t)(g->n_vocab + 63) / 64 * sizeof(uint64_t);
	int rc;

	if (d->bytes + g_match_bytes(&g->match) > d->limit &&
	    ((rc = dfa_clear(d)) < 0 || (rc = g_match_compact(g)) < 0))
		return rc;
	d->masks++;
	if (st->dstate < 0 || st->epoch != d->epoch) {
		if ((st->dstate = dfa_state(d, st->set.v, st->set.n)) < 0)
			return st->dstate;
		st->epoch = d->epoch;
	}
	if (!d->v[st->dstate].mask) {
		uint64_t *m = malloc(size ? size : 1);
		if (!m)
			return nomem();
		if ((rc = mask_build(g, st->dstate, m)) < 0) {
			free(m);
			return rc;
		}
		d->walks++;
		d->v[st->dstate].mask = m;
		d->bytes += size;
	}
	*bits = d->v[st->dstate].mask;
	return TF_OK;
}

int tf_grammar_apply(tf_grammar_state *st, float *logits)
{
	tf_grammar *g = st->g;
	const uint64_t *bits = NULL;
	int rc;

	if (!g->tok)
		return tf_diag_set(TF_ERR_INVALID, "grammar: compiled without a tokenizer");
	if (st->finished) {
		for (int i = 0; i < g->n_vocab; i++)
			logits[i] = -INFINITY;
		return TF_OK;
	}
	if ((rc = mask_get(st, &bits)) < 0)
		return rc;
	for (int32_t w = 0; w * 64 < g->n_vocab; w++) {
		int32_t base = w * 64, n = g->n_vocab - base < 64 ? g->n_vocab - base : 64;
		uint64_t off = ~bits[w] & (n < 64 ? (1ull << n) - 1 : ~0ull);

		if (off == (n < 64 ? (1ull << n) - 1 : ~0ull)) {       /* all masked: a loop that vectorizes */
			for (int32_t k = 0; k < n; k++)
				logits[base + k] = -INFINITY;
			continue;
		}
		for (; off; off &= off - 1)
			logits[base + __builtin_ctzll(off)] = -INFINITY;
	}
	return TF_OK;
}

void tf_grammar_cache_limit(tf_grammar *g, size_t bytes)
{
	g->dfa.limit = bytes;
}

void tf_grammar_stats_get(const tf_grammar *g, tf_grammar_stats *out)
{
	*out = (tf_grammar_stats){
		.masks = g->dfa.masks, .walks = g->dfa.walks,
		.clears = g->dfa.epoch - 1, .cache_bytes = g->dfa.bytes + g_match_bytes(&g->match),
	};
}

int tf_grammar_compile(const char *gbnf, size_t len, const tf_tokenizer *tok, int n_vocab,
		       const int32_t *ends, int n_ends, tf_grammar **out)
{
	tf_grammar *g;
	int rc;

	*out = NULL;
	if (n_vocab < 0 || (tok && n_vocab == 0) || n_ends < 0)
		return tf_diag_set(TF_ERR_INVALID, "grammar: vocabulary size %d, %d end ids", n_vocab, n_ends);
	for (int i = 0; i < n_ends; i++)
		if (ends[i] < 0 || ends[i] >= n_vocab)
			return tf_diag_set(TF_ERR_INVALID, "grammar: end id %d is outside the vocabulary (%d)",
					   ends[i], n_vocab);
	if (!(g = calloc(1, sizeof(*g))))
		return nomem();
	g->tok = tok;
	g->n_vocab = n_vocab;
	if ((rc = g_parse(gbnf, len, &g->prog)) < 0 || (rc = g_match_init(&g->match)) < 0 ||
	    (rc = dfa_init(&g->dfa)) < 0)
		goto fail;
	for (int32_t a = g->prog.alt_first[g->prog.root]; a < g->prog.alt_first[g->prog.root + 1]; a++)
		if ((rc = g_expand(&g->match, &g->prog, g->prog.alts[a], 0, &g->init)) < 0)
			goto fail;
	g_ids_sort_unique(&g->init);
	if (!(g->ends = calloc((size_t)(n_vocab + 63) / 64 + 1, sizeof(*g->ends)))) {
		rc = nomem();
		goto fail;
	}
	for (int i = 0; i < n_ends; i++)
		g->ends[ends[i] >> 6] |= 1ull << (ends[i] & 63);
	if (tok && (rc = trie_build(&g->trie, tok, n_vocab, g->ends)) < 0)
		goto fail;
	*out = g;
	return TF_OK;
fail:
	tf_grammar_free(g);
	return rc;
}

void tf_grammar_free(tf_grammar *g)
{
	if (!g)
		return;
	for (tf_grammar_state *st = g->states; st; st = st->next)
		st->g = NULL;
	g_prog_free(&g->prog);
	g_match_free(&g->match);
	dfa_free(&g->dfa);
	trie_free(&g->trie);
	free(g->init.v);
	free(g->ends);
	free(g->scratch.v);
	free(g->scratch2.v);
	free(g);
}

int tf_grammar_mask(void *st, float *logits)
{
	return tf_grammar_apply(st, logits);
}
