/* bpe.c - BPE vocabulary, merge table and the merge loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tf/diag.h"
#include "unicode/unicode.h"

#define NO_PAIR UINT64_MAX

/* ---- merge table ---- */

static size_t pair_slot(uint64_t pair, size_t mask)
{
	pair *= 0x9E3779B97F4A7C15ull;
	return (size_t)(pair >> 32) & mask;
}

const tf_bpe_merge *tf_bpe_find_merge(const tf_bpe *b, int32_t left, int32_t right)
{
	uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
	size_t j;

	for (j = pair_slot(pair, b->merge_mask); b->merges[j].pair != NO_PAIR;
	     j = (j + 1) & b->merge_mask)
		if (b->merges[j].pair == pair)
			return &b->merges[j];
	return NULL;
}

/* A repeated pair keeps its last rank, as HF's HashMap collect does. */
static void add_merge(tf_bpe *b, int32_t left, int32_t right, int32_t rank, int32_t id)
{
	uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
	size_t j;

	for (j = pair_slot(pair, b->merge_mask); b->merges[j].pair != NO_PAIR &&
	     b->merges[j].pair != pair; j = (j + 1) & b->merge_mask)
		;
	b->merges[j] = (tf_bpe_merge){ .pair = pair, .rank = rank, .id = id };
}

/* ---- loading ---- */

static int vocab_id(const tf_bpe *b, const char *s, size_t len, const char *where,
		    int rank, int32_t *id)
{
	*id = tf_strmap_get(&b->vocab, s, len);
	if (*id < 0)
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: model.merges[%d]: token \"%.*s\" is not in the vocab",
				   where, rank, (int)len, s);
	return TF_OK;
}

static int parse_vocab(tf_bpe *b, const cJSON *vocab, const char *where)
{
	const cJSON *it;
	int rc;

	if (!cJSON_IsObject(vocab))
		return tf_diag_set(TF_ERR_FORMAT, "%s: model.vocab must be an object", where);
	if ((rc = tf_strmap_init(&b->vocab, (size_t)cJSON_GetArraySize(vocab))))
		return tf_diag_set(rc, "%s: out of memory", where);
	cJSON_ArrayForEach(it, vocab) {
		double v = it->valuedouble;
		int32_t *slot;
		int added;

		if (!cJSON_IsNumber(it) || !tf_tok_id_ok(v))
			return tf_diag_set(TF_ERR_FORMAT, "%s: model.vocab[\"%s\"]: bad id",
					   where, it->string);
		slot = tf_strmap_slot(&b->vocab, it->string, strlen(it->string), (int32_t)v, &added);
		if (!slot)
			return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", where);
		if (!added)
			return tf_diag_set(TF_ERR_FORMAT, "%s: model.vocab: \"%s\" appears twice",
					   where, it->string);
		if ((int32_t)v > b->max_id)
			b->max_id = (int32_t)v;
	}
	return TF_OK;
}

/* Splits one merge, "a b" (the older format) or ["a", "b"]. */
static int merge_parts(const cJSON *m, const char *where, int rank,
		       const char **a, size_t *alen, const char **c, size_t *clen)
{
	if (cJSON_IsString(m)) {
		const char *s = m->valuestring, *sp = strchr(s, ' ');

		if (!sp || strchr(sp + 1, ' ') || sp == s || !sp[1])
			return tf_diag_set(TF_ERR_FORMAT,
					   "%s: model.merges[%d]: \"%s\" is not two tokens split by one space",
					   where, rank, s);
		*a = s;
		*alen = (size_t)(sp - s);
		*c = sp + 1;
		*clen = strlen(sp + 1);
		return TF_OK;
	}
	if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
	    cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
		*a = m->child->valuestring;
		*alen = strlen(*a);
		*c = m->child->next->valuestring;
		*clen = strlen(*c);
		return TF_OK;
	}
	return tf_diag_set(TF_ERR_FORMAT,
			   "%s: model.merges[%d]: expected \"a b\" or [\"a\", \"b\"]", where, rank);
}

static int parse_merges(tf_bpe *b, const cJSON *merges, const char *where)
{
	size_t n = (size_t)cJSON_GetArraySize(merges), size = 16;
	tf_bytes cat = { 0 };
	const cJSON *m;
	int rank = 0, rc = TF_OK;

	if (!cJSON_IsArray(merges))
		return tf_diag_set(TF_ERR_FORMAT, "%s: model.merges must be an array", where);
	while (size < 2 * n)
		size *= 2;
	b->merges = malloc(size * sizeof(*b->merges));
	if (!b->merges)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", where);
	memset(b->merges, 0xff, size * sizeof(*b->merges));
	b->merge_mask = size - 1;
	cJSON_ArrayForEach(m, merges) {
		const char *l = NULL, *r = NULL;
		size_t ll = 0, rl = 0;
		int32_t lid, rid, id;

		if ((rc = merge_parts(m, where, rank, &l, &ll, &r, &rl)) ||
		    (rc = vocab_id(b, l, ll, where, rank, &lid)) ||
		    (rc = vocab_id(b, r, rl, where, rank, &rid)))
			break;
		cat.len = 0;
		if ((rc = tf_bytes_append(&cat, l, ll)) || (rc = tf_bytes_append(&cat, r, rl))) {
			tf_diag_set(rc, "%s: out of memory", where);
			break;
		}
		if ((rc = vocab_id(b, cat.p, cat.len, where, rank, &id)))
			break;
		add_merge(b, lid, rid, rank++, id);
	}
	tf_bytes_free(&cat);
	return rc;
}

/* Options of the BPE model that change results and that we do not do. */
static int check_options(const cJSON *model, const char *where)
{
	static const char *const empty_ok[] = { "continuing_subword_prefix", "end_of_word_suffix" };
	const cJSON *v;
	size_t i;

	v = cJSON_GetObjectItemCaseSensitive(model, "dropout");
	if (cJSON_IsNumber(v) && v->valuedouble > 0)
		return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: model.dropout is not supported", where);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "%s: model.byte_fallback (SentencePiece-style BPE) is not supported",
				   where);
	for (i = 0; i < sizeof(empty_ok) / sizeof(*empty_ok); i++) {
		v = cJSON_GetObjectItemCaseSensitive(model, empty_ok[i]);
		if (cJSON_IsString(v) && v->valuestring[0])
			return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: model.%s is not supported",
					   where, empty_ok[i]);
	}
	return TF_OK;
}

int tf_bpe_init(tf_bpe *b, const cJSON *model, const char *where)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
	const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
	tf_bytes spell = { 0 };
	int rc, i;

	memset(b, 0, sizeof(*b));
	b->unk = -1;
	b->max_id = -1;
	if (!cJSON_IsObject(model))
		return tf_diag_set(TF_ERR_FORMAT, "%s: no \"model\" object", where);
	if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "%s: model.type \"%s\" is not supported (only BPE)", where,
				   cJSON_IsString(type) ? type->valuestring : "?");
	if ((rc = check_options(model, where)) ||
	    (rc = parse_vocab(b, cJSON_GetObjectItemCaseSensitive(model, "vocab"), where)) ||
	    (rc = parse_merges(b, cJSON_GetObjectItemCaseSensitive(model, "merges"), where)))
		return rc;
	b->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
	if (cJSON_IsString(unk)) {
		b->unk = tf_strmap_get(&b->vocab, unk->valuestring, strlen(unk->valuestring));
		if (b->unk < 0)
			return tf_diag_set(TF_ERR_FORMAT, "%s: model.unk_token \"%s\" is not in the vocab",
					   where, unk->valuestring);
	}
	for (i = 0; i < 256; i++) {
		char c = (char)i;

		spell.len = 0;
		if ((rc = tf_bytelevel_encode(&c, 1, &spell)))
			break;
		b->byte_id[i] = tf_strmap_get(&b->vocab, spell.p, spell.len);
	}
	tf_bytes_free(&spell);
	return rc ? tf_diag_set(rc, "%s: out of memory", where) : TF_OK;
}

void tf_bpe_free(tf_bpe *b)
{
	tf_strmap_free(&b->vocab);
	free(b->merges);
	memset(b, 0, sizeof(*b));
}

/* ---- encoding ---- */

struct bpe_sym {
	int32_t id;
	int32_t prev, next;     /* -1 at the ends */
	uint32_t len;           /* bytes covered; 0 once merged into its left */
};

struct bpe_item {
	int32_t rank, pos, id;
};

void tf_bpe_scratch_free(tf_bpe_scratch *s)
{
	free(s->sym);
	free(s->heap);
	tf_bytes_free(&s->spell);
	memset(s, 0, sizeof(*s));
}

static bool item_less(const struct bpe_item *a, const struct bpe_item *c)
{
	return a->rank < c->rank || (a->rank == c->rank && a->pos < c->pos);
}

static void heap_push(struct bpe_item *h, size_t *n, struct bpe_item it)
{
	size_t i = (*n)++;

	while (i && item_less(&it, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = it;
}

static struct bpe_item heap_pop(struct bpe_item *h, size_t *n)
{
	struct bpe_item top = h[0], last = h[--(*n)];
	size_t i = 0, c;

	while ((c = 2 * i + 1) < *n) {
		if (c + 1 < *n && item_less(&h[c + 1], &h[c]))
			c++;
		if (!item_less(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = last;
	return top;
}

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	void *q;

	if (need <= *cap)
		return TF_OK;
	q = realloc(*p, need * elem);
	if (!q)
		return tf_diag_set(TF_ERR_NOMEM, "tokenizer: out of memory");
	*p = q;
	*cap = need;
	return TF_OK;
}

/* The whole piece as one token, when ignore_merges allows it. */
static int32_t whole_piece(const tf_bpe *b, const char *piece, size_t len, tf_bytes *spell)
{
	spell->len = 0;
	if (!b->ignore_merges || tf_bytelevel_encode(piece, len, spell))
		return -1;
	return tf_strmap_get(&b->vocab, spell->p, spell->len);
}

/* The starting token of byte c: HF drops a character it cannot map unless
 * there is an unk_token. */
static int32_t byte_token(const tf_bpe *b, uint8_t c)
{
	return b->byte_id[c] >= 0 ? b->byte_id[c] : b->unk;
}

int tf_bpe_encode(const tf_bpe *b, const char *piece, size_t len,
		  tf_bpe_scratch *s, tf_tokens *out)
{
	const tf_bpe_merge *m;
	struct bpe_sym *sym;
	size_t i, n = 0, nh = 0;
	int32_t id, k;
	int rc;

	if ((id = whole_piece(b, piece, len, &s->spell)) >= 0)
		return tf_tokens_push(out, id);
	if (len > INT32_MAX / 2)
		return tf_diag_set(TF_ERR_RANGE, "tokenizer: piece of %zu bytes", len);
	if ((rc = reserve((void **)&s->sym, &s->sym_cap, len, sizeof(*s->sym))) ||
	    (rc = reserve((void **)&s->heap, &s->heap_cap, 2 * len, sizeof(*s->heap))))
		return rc;
	sym = s->sym;
	for (i = 0; i < len; i++) {
		if ((id = byte_token(b, (uint8_t)piece[i])) < 0)
			continue;
		sym[n] = (struct bpe_sym){ id, (int32_t)n - 1, (int32_t)n + 1, 1 };
		n++;
	}
	if (!n)
		return TF_OK;
	sym[n - 1].next = -1;
	for (i = 0; i + 1 < n; i++)
		if ((m = tf_bpe_find_merge(b, sym[i].id, sym[i + 1].id)))
			heap_push(s->heap, &nh, (struct bpe_item){ m->rank, (int32_t)i, m->id });
	/* Each merge removes one symbol and queues at most two pairs, so the
	 * heap never holds more than 2 * len items. */
	while (nh) {
		struct bpe_item top = heap_pop(s->heap, &nh);
		struct bpe_sym *cur = &sym[top.pos], *right;

		if (!cur->len || cur->next < 0)
			continue;
		right = &sym[cur->next];
		/* Stale: the pair at pos changed since this item was queued. */
		m = tf_bpe_find_merge(b, cur->id, right->id);
		if (!m || m->id != top.id)
			continue;
		cur->id = top.id;
		cur->len += right->len;
		right->len = 0;
		cur->next = right->next;
		if (cur->next >= 0)
			sym[cur->next].prev = top.pos;
		if (cur->prev >= 0 && (m = tf_bpe_find_merge(b, sym[cur->prev].id, cur->id)))
			heap_push(s->heap, &nh, (struct bpe_item){ m->rank, cur->prev, m->id });
		if (cur->next >= 0 && (m = tf_bpe_find_merge(b, cur->id, sym[cur->next].id)))
			heap_push(s->heap, &nh, (struct bpe_item){ m->rank, top.pos, m->id });
	}
	for (k = 0; k >= 0; k = sym[k].next)
		if ((rc = tf_tokens_push(out, sym[k].id)))
			return rc;
	return TF_OK;
}

int tf_bpe_encode_ref(const tf_bpe *b, const char *piece, size_t len, tf_tokens *out)
{
	tf_bytes spell = { 0 };
	int32_t *ids, id;
	size_t i, n = 0, best = 0;
	int rc = TF_OK;

	id = whole_piece(b, piece, len, &spell);
	tf_bytes_free(&spell);
	if (id >= 0)
		return tf_tokens_push(out, id);
	ids = malloc((len + 1) * sizeof(*ids));
	if (!ids)
		return tf_diag_set(TF_ERR_NOMEM, "tokenizer: out of memory");
	for (i = 0; i < len; i++)
		if ((id = byte_token(b, (uint8_t)piece[i])) >= 0)
			ids[n++] = id;
	for (;;) {
		const tf_bpe_merge *m, *bm = NULL;

		for (i = 0; i + 1 < n; i++) {
			m = tf_bpe_find_merge(b, ids[i], ids[i + 1]);
			if (m && (!bm || m->rank < bm->rank)) {
				bm = m;
				best = i;
			}
		}
		if (!bm)
			break;
		ids[best] = bm->id;
		memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof(*ids));
		n--;
	}
	for (i = 0; i < n && !rc; i++)
		rc = tf_tokens_push(out, ids[i]);
	free(ids);
	return rc;
}
