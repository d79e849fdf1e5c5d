/* match.c - the byte recognizer: sets of interned stacks advanced a byte at a time. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "tf/diag.h"

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "grammar: out of memory");
}

int g_ids_push(g_ids *l, int32_t id)
{
	if (l->n == l->cap) {
		int32_t cap = l->cap ? 2 * l->cap : 16;
		int32_t *grown = realloc(l->v, (size_t)cap * sizeof(*grown));

		if (!grown)
			return nomem();
		l->v = grown;
		l->cap = cap;
	}
	l->v[l->n++] = id;
	return TF_OK;
}

static int cmp_id(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

void g_ids_sort_unique(g_ids *l)
{
	int32_t n = 0;

	if (l->n < 2)
		return;
	qsort(l->v, (size_t)l->n, sizeof(*l->v), cmp_id);
	for (int32_t i = 0; i < l->n; i++)
		if (!n || l->v[i] != l->v[n - 1])
			l->v[n++] = l->v[i];
	l->n = n;
}

static uint32_t hash_pair(int32_t a, int32_t b)
{
	uint64_t z = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return (uint32_t)(z ^ (z >> 31));
}

int g_match_init(g_match *m)
{
	memset(m, 0, sizeof(*m));
	m->cap_nodes = 1024;
	m->node_mask = 2047;
	m->seen_mask = 255;
	m->nodes = malloc((size_t)m->cap_nodes * sizeof(*m->nodes));
	m->node_index = malloc((m->node_mask + 1) * sizeof(*m->node_index));
	m->seen = malloc((m->seen_mask + 1) * sizeof(*m->seen));
	m->seen_gen = calloc(m->seen_mask + 1, sizeof(*m->seen_gen));
	if (!m->nodes || !m->node_index || !m->seen || !m->seen_gen) {
		g_match_free(m);
		return nomem();
	}
	memset(m->node_index, -1, (m->node_mask + 1) * sizeof(*m->node_index));
	m->nodes[0] = (g_node){ -1, -1 };       /* the empty stack */
	m->n_nodes = 1;
	return TF_OK;
}

void g_match_free(g_match *m)
{
	free(m->nodes);
	free(m->node_index);
	free(m->work.v);
	free(m->seen);
	free(m->seen_gen);
	memset(m, 0, sizeof(*m));
}

/* The node (pos, parent), made on first sight; < 0 when out of memory. */
static int32_t intern_node(g_match *m, int32_t pos, int32_t parent)
{
	uint32_t i = hash_pair(pos, parent) & m->node_mask;

	for (; m->node_index[i] >= 0; i = (i + 1) & m->node_mask) {
		const g_node *n = &m->nodes[m->node_index[i]];
		if (n->pos == pos && n->parent == parent)
			return m->node_index[i];
	}
	if (m->n_nodes == m->cap_nodes) {
		g_node *grown = realloc(m->nodes, 2 * (size_t)m->cap_nodes * sizeof(*grown));
		if (!grown)
			return nomem();
		m->nodes = grown;
		m->cap_nodes *= 2;
	}
	if (2 * (uint32_t)m->n_nodes >= m->node_mask) {   /* grow the index, then insert */
		uint32_t mask = 2 * m->node_mask + 1;
		int32_t *index = malloc((mask + 1) * sizeof(*index));

		if (!index)
			return nomem();
		memset(index, -1, (mask + 1) * sizeof(*index));
		for (int32_t k = 1; k < m->n_nodes; k++) {
			uint32_t j = hash_pair(m->nodes[k].pos, m->nodes[k].parent) & mask;
			while (index[j] >= 0)
				j = (j + 1) & mask;
			index[j] = k;
		}
		free(m->node_index);
		m->node_index = index;
		m->node_mask = mask;
		for (i = hash_pair(pos, parent) & mask; index[i] >= 0; i = (i + 1) & mask)
			;
	}
	m->nodes[m->n_nodes] = (g_node){ pos, parent };
	m->node_index[i] = m->n_nodes;
	return m->n_nodes++;
}

/* 1 when (pos, parent) is new to this expansion, 0 when seen; < 0 no memory. */
static int first_sight(g_match *m, int32_t pos, int32_t parent)
{
	uint64_t key = (uint64_t)(uint32_t)pos << 32 | (uint32_t)parent;
	uint32_t i = hash_pair(pos, parent) & m->seen_mask;

	for (; m->seen_gen[i] == m->gen; i = (i + 1) & m->seen_mask)
		if (m->seen[i] == key)
			return 0;
	if (2 * ++m->seen_n > m->seen_mask) {
		uint32_t mask = 2 * m->seen_mask + 1;
		uint64_t *seen = malloc((mask + 1) * sizeof(*seen));
		uint32_t *gen = calloc(mask + 1, sizeof(*gen));

		if (!seen || !gen) {
			free(seen);
			free(gen);
			return nomem();
		}
		for (uint32_t k = 0; k <= m->seen_mask; k++) {
			if (m->seen_gen[k] != m->gen)
				continue;
			uint32_t j = hash_pair((int32_t)(m->seen[k] >> 32), (int32_t)m->seen[k]) & mask;
			while (gen[j] == m->gen)
				j = (j + 1) & mask;
			seen[j] = m->seen[k], gen[j] = m->gen;
		}
		free(m->seen);
		free(m->seen_gen);
		m->seen = seen;
		m->seen_gen = gen;
		m->seen_mask = mask;
		for (i = hash_pair(pos, parent) & mask; gen[i] == m->gen; i = (i + 1) & mask)
			;
	}
	m->seen[i] = key;
	m->seen_gen[i] = m->gen;
	return 1;
}

/*
 * From position pos over stack parent, follows rule references down to
 * their first elements and ended alternatives up to where their callers go
 * on, until each path stands on a byte: that stack is appended to out.  A
 * reference that ends its alternative pushes nothing (a tail call), so a
 * right-recursive rule keeps a flat stack.  No left recursion (gbnf.c
 * refuses it) and the pairs seen once are not followed twice, so it ends.
 */
int g_expand(g_match *m, const g_prog *p, int32_t pos, int32_t parent, g_ids *out)
{
	int rc;

	if (++m->gen == 0) {
		memset(m->seen_gen, 0, (m->seen_mask + 1) * sizeof(*m->seen_gen));
		m->gen = 1;
	}
	m->seen_n = 0;
	m->work.n = 0;
	if ((rc = g_ids_push(&m->work, pos)) < 0 || (rc = g_ids_push(&m->work, parent)) < 0)
		return rc;
	while (m->work.n) {
		parent = m->work.v[--m->work.n];
		pos = m->work.v[--m->work.n];
		if ((rc = first_sight(m, pos, parent)) <= 0) {
			if (rc < 0)
				return rc;
			continue;
		}
		const g_elem e = p->elems[pos];
		int32_t id;

		switch (e.op) {
		case G_END:
		case G_ALT:
			if (parent == 0) {
				rc = g_ids_push(out, 0);
			} else {
				g_node up = m->nodes[parent];
				if ((rc = g_ids_push(&m->work, up.pos)) == 0)
					rc = g_ids_push(&m->work, up.parent);
			}
			break;
		case G_BYTE:
			id = intern_node(m, pos, parent);
			rc = id < 0 ? id : g_ids_push(out, id);
			break;
		default:        /* G_REF */
			id = g_is_end(p, pos + 1) ? parent : intern_node(m, pos + 1, parent);
			if ((rc = id < 0 ? id : 0) < 0)
				break;
			for (int32_t a = p->alt_first[e.arg + 1]; a-- > p->alt_first[e.arg] && !rc;)
				if ((rc = g_ids_push(&m->work, p->alts[a])) == 0)
					rc = g_ids_push(&m->work, id);
		}
		if (rc < 0)
			return rc;
	}
	return TF_OK;
}

size_t g_match_bytes(const g_match *m)
{
	return (size_t)m->cap_nodes * sizeof(*m->nodes) + (m->node_mask + 1) * sizeof(*m->node_index);
}

/* Stack id in g's old table (to[]: its new id, or -1) into the new one, m. */
static int32_t move_stack(g_match *m, const g_match *old, int32_t *to, g_ids *chain, int32_t id)
{
	int32_t top = id;

	chain->n = 0;
	for (; id != 0 && to[id] < 0; id = old->nodes[id].parent)
		if (g_ids_push(chain, id) < 0)
			return TF_ERR_NOMEM;
	int32_t up = id ? to[id] : 0;
	while (chain->n) {
		int32_t k = chain->v[--chain->n];
		if ((up = to[k] = intern_node(m, old->nodes[k].pos, up)) < 0)
			return up;
	}
	return top ? to[top] : 0;
}

static int move_set(g_match *m, const g_match *old, int32_t *to, g_ids *chain, g_ids *set)
{
	for (int32_t i = 0; i < set->n; i++)
		if ((set->v[i] = move_stack(m, old, to, chain, set->v[i])) < 0)
			return set->v[i];
	g_ids_sort_unique(set);
	return TF_OK;
}

int g_match_compact(tf_grammar *g)
{
	g_match m;
	g_ids chain = { 0 };
	int32_t *to = malloc((size_t)g->match.n_nodes * sizeof(*to));
	int rc = to ? g_match_init(&m) : nomem();

	if (rc < 0) {
		free(to);
		return rc;
	}
	memset(to, -1, (size_t)g->match.n_nodes * sizeof(*to));
	rc = move_set(&m, &g->match, to, &chain, &g->init);
	for (tf_grammar_state *st = g->states; st && !rc; st = st->next)
		rc = move_set(&m, &g->match, to, &chain, &st->set);
	free(to);
	free(chain.v);
	if (rc < 0) {           /* half moved: the sets hold ids of neither table */
		g_match_free(&m);
		return tf_diag_set(TF_ERR_NOMEM, "grammar: out of memory (its states are lost)");
	}
	g_match_free(&g->match);
	g->match = m;
	return TF_OK;
}

int g_advance(g_match *m, const g_prog *p, const int32_t *set, int32_t n, unsigned b,
	      g_ids *out)
{
	int rc;

	out->n = 0;
	for (int32_t i = 0; i < n; i++) {
		if (set[i] == 0)
			continue;
		g_node top = m->nodes[set[i]];
		if (g_set_has(p, p->elems[top.pos].arg, b) &&
		    (rc = g_expand(m, p, top.pos + 1, top.parent, out)) < 0)
			return rc;
	}
	g_ids_sort_unique(out);
	return TF_OK;
}

static int ids_copy(g_ids *to, const g_ids *from)
{
	if (to->cap < from->n) {
		int32_t *grown = realloc(to->v, (size_t)from->n * sizeof(*grown));
		if (!grown)
			return nomem();
		to->v = grown;
		to->cap = from->n;
	}
	if (from->n)
		memcpy(to->v, from->v, (size_t)from->n * sizeof(*to->v));
	to->n = from->n;
	return TF_OK;
}

static void link_state(tf_grammar_state *st)
{
	st->prev = NULL;
	st->next = st->g->states;
	if (st->next)
		st->next->prev = st;
	st->g->states = st;
}

int tf_grammar_state_new(tf_grammar *g, tf_grammar_state **out)
{
	tf_grammar_state *st = calloc(1, sizeof(*st));

	*out = NULL;
	if (!st)
		return nomem();
	st->g = g;
	st->dstate = -1;
	if (ids_copy(&st->set, &g->init) < 0) {
		free(st);
		return TF_ERR_NOMEM;
	}
	link_state(st);
	*out = st;
	return TF_OK;
}

int tf_grammar_state_clone(const tf_grammar_state *st, tf_grammar_state **out)
{
	tf_grammar_state *c = malloc(sizeof(*c));

	*out = NULL;
	if (!c)
		return nomem();
	*c = *st;
	c->set = (g_ids){ 0 };
	if (ids_copy(&c->set, &st->set) < 0) {
		free(c);
		return TF_ERR_NOMEM;
	}
	link_state(c);
	*out = c;
	return TF_OK;
}

void tf_grammar_state_free(tf_grammar_state *st)
{
	if (!st)
		return;
	if (st->next)
		st->next->prev = st->prev;
	if (st->prev)
		st->prev->next = st->next;
	else if (st->g)
		st->g->states = st->next;
	free(st->set.v);
	free(st);
}

bool tf_grammar_complete(const tf_grammar_state *st)
{
	return st->finished || (st->set.n && st->set.v[0] == 0);
}

int tf_grammar_accept_bytes(tf_grammar_state *st, const char *bytes, size_t n)
{
	tf_grammar *g = st->g;
	g_ids *cur = &g->scratch, *next = &g->scratch2;
	const int32_t *set = st->set.v;
	int32_t n_set = st->set.n;
	int rc;

	if (st->finished)
		return tf_diag_set(TF_ERR_INVALID, "grammar: the document has ended");
	if (n == 0)
		return TF_OK;
	for (size_t i = 0; i < n; i++) {
		if ((rc = g_advance(&g->match, &g->prog, set, n_set, (uint8_t)bytes[i], next)) < 0)
			return rc;
		if (next->n == 0)
			return tf_diag_set(TF_ERR_INVALID, "grammar: byte 0x%02x at offset %zu cannot come next",
					   (uint8_t)bytes[i], i);
		g_ids *t = cur;
		cur = next, next = t;
		set = cur->v, n_set = cur->n;
	}
	if ((rc = ids_copy(&st->set, cur)) < 0)
		return rc;
	st->dstate = -1;
	return TF_OK;
}

int tf_grammar_accept(tf_grammar_state *st, int32_t token)
{
	tf_grammar *g = st->g;
	const char *piece;
	size_t len = 0;

	if (!g->tok)
		return tf_diag_set(TF_ERR_INVALID, "grammar: compiled without a tokenizer");
	if (token < 0 || token >= g->n_vocab)
		return tf_diag_set(TF_ERR_INVALID, "grammar: token %d is outside the vocabulary (%d)",
				   token, g->n_vocab);
	if (st->finished)
		return tf_diag_set(TF_ERR_INVALID, "grammar: the document has ended");
	if (g->ends[token >> 6] >> (token & 63) & 1) {
		if (!tf_grammar_complete(st))
			return tf_diag_set(TF_ERR_INVALID, "grammar: end token %d before the document is complete",
					   token);
		st->finished = true;
		st->set.n = 0;
		st->dstate = -1;
		return TF_OK;
	}
	piece = tf_tok_piece(g->tok, token, &len);
	if (!piece || !len || tf_tok_is_special(g->tok, token))
		return tf_diag_set(TF_ERR_INVALID, "grammar: token %d has no text the grammar can take",
				   token);
	int rc = tf_grammar_accept_bytes(st, piece, len);
	return rc < 0 ? tf_diag_prefix(rc, "token %d", token) : rc;
}
