/* tokenizer.c - tokenizer.json loading, the encode pipeline and decoding.
 * The pre-tokenizer lives in pretok.c, the BPE model in bpe.c. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer/bpe.h"
#include "tokenizer/pretok.h"
#include "tf/diag.h"
#include "tf/text.h"
#include "tf/utf8.h"
#include "tokenizer/tokenizer.h"
#include "unicode/unicode.h"

typedef enum normalizer { NORM_NONE, NORM_NFC } normalizer;

typedef struct added_tok {
	char *content;
	size_t len;
	int32_t id;
	bool special, lstrip, rstrip, single_word, normalized;
} added_tok;

/* A byte trie over added-token contents for leftmost-longest matching. */
typedef struct trie_node {
	int32_t child, sibling; /* -1: none */
	int32_t tok;            /* index into added[], -1: no token ends here */
	uint8_t byte;
} trie_node;

typedef struct trie {
	trie_node *node;
	size_t n, cap;
	bool first[256];        /* bytes some token starts with */
} trie;

/* What an id decodes to: bytes at pieces + off. */
typedef struct id_info {
	uint32_t off, len;
	bool present, special;
} id_info;

struct tf_tokenizer {
	char *name;
	normalizer norm;
	tf_pretok *pretok;
	tf_bpe bpe;
	added_tok *added;
	size_t n_added;
	trie raw, normed;       /* tokens matched before / after normalizing */
	pcre2_code *word_char;  /* for single_word tokens; NULL when none */
	tf_tokens prefix, suffix; /* TF_TOK_ADD_SPECIAL template */
	id_info *ids;
	int32_t n_ids;
	tf_bytes pieces;
};

/* DeepSeek-V3 has 818; a limit keeps a hostile file from growing the trie. */
#define TOK_MAX_ADDED 100000

int tf_tokens_push(tf_tokens *t, int32_t id)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		int32_t *p = realloc(t->ids, cap * sizeof(*p));

		if (!p)
			return tf_diag_set(TF_ERR_NOMEM, "tokenizer: out of memory");
		t->ids = p;
		t->cap = cap;
	}
	t->ids[t->n++] = id;
	return TF_OK;
}

void tf_tokens_free(tf_tokens *t)
{
	free(t->ids);
	memset(t, 0, sizeof(*t));
}

/* ---- added-token trie ---- */

static int trie_new_node(trie *t, uint8_t byte, int32_t *idx)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		trie_node *p = realloc(t->node, cap * sizeof(*p));

		if (!p)
			return TF_ERR_NOMEM;
		t->node = p;
		t->cap = cap;
	}
	t->node[t->n] = (trie_node){ .child = -1, .sibling = -1, .tok = -1, .byte = byte };
	*idx = (int32_t)t->n++;
	return TF_OK;
}

static int trie_insert(trie *t, const char *s, size_t len, int32_t tok)
{
	int32_t cur, k, nk;
	size_t i;
	int rc;

	if (!t->n && (rc = trie_new_node(t, 0, &k)))
		return rc;
	t->first[(uint8_t)s[0]] = true;
	for (cur = 0, i = 0; i < len; i++, cur = k) {
		for (k = t->node[cur].child; k >= 0 && t->node[k].byte != (uint8_t)s[i];
		     k = t->node[k].sibling)
			;
		if (k >= 0)
			continue;
		if ((rc = trie_new_node(t, (uint8_t)s[i], &nk)))
			return rc;
		t->node[nk].sibling = t->node[cur].child;
		t->node[cur].child = nk;
		k = nk;
	}
	/* A later duplicate content wins, as it does in HF's token map. */
	t->node[cur].tok = tok;
	return TF_OK;
}

/* The longest token starting at s[0], or -1. */
static int32_t trie_longest(const trie *t, const char *s, size_t len)
{
	int32_t cur = 0, k, best = -1;
	size_t i;

	for (i = 0; i < len; i++, cur = k) {
		for (k = t->node[cur].child; k >= 0 && t->node[k].byte != (uint8_t)s[i];
		     k = t->node[k].sibling)
			;
		if (k < 0)
			break;
		if (t->node[k].tok >= 0)
			best = t->node[k].tok;
	}
	return best;
}

/* ---- loading ---- */

static bool json_flag(const cJSON *o, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int parse_normalizer(tf_tokenizer *tok, const cJSON *n, int depth)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(n, "type"), *it;
	int rc;

	if (!n || cJSON_IsNull(n))
		return TF_OK;
	if (!cJSON_IsString(type))
		return tf_diag_set(TF_ERR_FORMAT, "%s: normalizer needs a type", tok->name);
	if (!strcmp(type->valuestring, "NFC")) {
		tok->norm = NORM_NFC;
		return TF_OK;
	}
	if (!strcmp(type->valuestring, "Sequence") && depth < 4) {
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
			if ((rc = parse_normalizer(tok, it, depth + 1)))
				return rc;
		return TF_OK;
	}
	return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: normalizer \"%s\" is not supported",
			   tok->name, type->valuestring);
}

/* The ids a TemplateProcessing special token stands for. */
static int template_ids(tf_tokenizer *tok, const cJSON *specials, const cJSON *ref,
			tf_tokens *dst)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(ref, "id");
	const cJSON *sp, *id;
	int rc;

	if (!cJSON_IsString(name))
		return tf_diag_set(TF_ERR_FORMAT, "%s: post_processor: SpecialToken without id",
				   tok->name);
	sp = cJSON_GetObjectItemCaseSensitive(specials, name->valuestring);
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(sp, "ids")))
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: post_processor: special token \"%s\" has no ids",
				   tok->name, name->valuestring);
	cJSON_ArrayForEach(id, cJSON_GetObjectItemCaseSensitive(sp, "ids")) {
		if (!cJSON_IsNumber(id) || !tf_tok_id_ok(id->valuedouble))
			return tf_diag_set(TF_ERR_FORMAT, "%s: post_processor: bad id for \"%s\"",
					   tok->name, name->valuestring);
		if ((rc = tf_tokens_push(dst, (int32_t)id->valuedouble)))
			return rc;
	}
	return TF_OK;
}

static int parse_post(tf_tokenizer *tok, const cJSON *p, int depth)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type"), *it;
	const cJSON *specials;
	tf_tokens *dst = &tok->prefix;
	int rc;

	if (!p || cJSON_IsNull(p))
		return TF_OK;
	if (!cJSON_IsString(type))
		return tf_diag_set(TF_ERR_FORMAT, "%s: post_processor needs a type", tok->name);
	if (!strcmp(type->valuestring, "ByteLevel"))
		return TF_OK;   /* it only adjusts offsets */
	if (!strcmp(type->valuestring, "Sequence") && depth < 4) {
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(p, "processors"))
			if ((rc = parse_post(tok, it, depth + 1)))
				return rc;
		return TF_OK;
	}
	if (strcmp(type->valuestring, "TemplateProcessing"))
		return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: post_processor \"%s\" is not supported",
				   tok->name, type->valuestring);
	specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(p, "single")) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");

		if (cJSON_GetObjectItemCaseSensitive(it, "Sequence"))
			dst = &tok->suffix;
		else if (st && (rc = template_ids(tok, specials, st, dst)))
			return rc;
	}
	return TF_OK;
}

static int parse_decoder(tf_tokenizer *tok, const cJSON *d)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(d, "type");

	if (cJSON_IsString(type) && !strcmp(type->valuestring, "ByteLevel"))
		return TF_OK;
	return tf_diag_set(TF_ERR_UNSUPPORTED,
			   "%s: decoder \"%s\" is not supported (only ByteLevel)", tok->name,
			   cJSON_IsString(type) ? type->valuestring : "null");
}

static int parse_added(tf_tokenizer *tok, const cJSON *list)
{
	const cJSON *it;
	size_t n = (size_t)cJSON_GetArraySize(list);
	int rc;

	if (list && !cJSON_IsNull(list) && !cJSON_IsArray(list))
		return tf_diag_set(TF_ERR_FORMAT, "%s: added_tokens must be an array", tok->name);
	if (n > TOK_MAX_ADDED)
		return tf_diag_set(TF_ERR_RANGE, "%s: %zu added tokens", tok->name, n);
	tok->added = calloc(n + 1, sizeof(*tok->added));
	if (!tok->added)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", tok->name);
	cJSON_ArrayForEach(it, list) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
		added_tok *a = &tok->added[tok->n_added];
		size_t i = tok->n_added;
		tf_bytes norm = { 0 };

		if (!cJSON_IsNumber(id) || !tf_tok_id_ok(id->valuedouble) || !cJSON_IsString(content))
			return tf_diag_set(TF_ERR_FORMAT, "%s: added_tokens[%zu]: needs id and content",
					   tok->name, i);
		a->id = (int32_t)id->valuedouble;
		a->special = json_flag(it, "special");
		a->lstrip = json_flag(it, "lstrip");
		a->rstrip = json_flag(it, "rstrip");
		a->single_word = json_flag(it, "single_word");
		a->normalized = json_flag(it, "normalized");
		a->len = strlen(content->valuestring);
		if (!tf_utf8_valid(content->valuestring, a->len, NULL))
			return tf_diag_set(TF_ERR_FORMAT, "%s: added_tokens[%zu]: invalid UTF-8",
					   tok->name, i);
		/* A normalized token is looked for in normalized text. */
		if (a->normalized && tok->norm == NORM_NFC) {
			if ((rc = tf_nfc(content->valuestring, a->len, &norm)) ||
			    (rc = tf_bytes_append(&norm, "", 1))) {
				tf_bytes_free(&norm);
				return tf_diag_set(rc, "%s: out of memory", tok->name);
			}
			a->content = norm.p;
			a->len = norm.len - 1;
		} else {
			a->content = strdup(content->valuestring);
		}
		if (!a->content)
			return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", tok->name);
		tok->n_added++;
		if (!a->len)
			continue;
		rc = trie_insert(a->normalized ? &tok->normed : &tok->raw, a->content, a->len,
				 (int32_t)i);
		if (rc)
			return tf_diag_set(rc, "%s: out of memory", tok->name);
	}
	return TF_OK;
}

/* HF's ByteLevel decoder: a token whose every character is in the byte-level
 * alphabet becomes those bytes; any other token stays as its UTF-8. */
static int add_piece(tf_tokenizer *tok, int32_t id, const char *s, size_t len, bool special)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t start = tok->pieces.len, i;
	uint32_t cp;
	int w, b, rc;

	for (i = 0; i < len; i += (size_t)w) {
		w = tf_utf8_next(u + i, len - i, &cp);
		if (w <= 0 || (b = tf_bytelevel_byte(cp)) < 0)
			break;
		if ((rc = tf_bytes_append(&tok->pieces, &(char){ (char)b }, 1)))
			return rc;
	}
	if (i < len) {
		tok->pieces.len = start;
		if ((rc = tf_bytes_append(&tok->pieces, s, len)))
			return rc;
	}
	if (tok->pieces.len > UINT32_MAX)
		return TF_ERR_RANGE;
	tok->ids[id] = (id_info){ .off = (uint32_t)start, .len = (uint32_t)(tok->pieces.len - start),
				  .present = true, .special = special };
	return TF_OK;
}

static int build_id_table(tf_tokenizer *tok)
{
	const tf_strmap *v = &tok->bpe.vocab;
	int32_t max = tok->bpe.max_id;
	size_t i;
	int rc = TF_OK;

	for (i = 0; i < tok->n_added; i++)
		if (tok->added[i].id > max)
			max = tok->added[i].id;
	tok->n_ids = max + 1;
	tok->ids = calloc((size_t)tok->n_ids + 1, sizeof(*tok->ids));
	if (!tok->ids)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", tok->name);
	for (i = 0; i < v->n && !rc; i++)
		rc = add_piece(tok, v->entries[i].val, tf_strmap_key(v, i), v->entries[i].len, false);
	/* Added tokens decode from their content, over any vocab entry. */
	for (i = 0; i < tok->n_added && !rc; i++)
		rc = add_piece(tok, tok->added[i].id, tok->added[i].content, tok->added[i].len,
			       tok->added[i].special);
	return rc ? tf_diag_set(rc, "%s: out of memory", tok->name) : TF_OK;
}

/* Template ids become embedding rows: each must name a real token. */
static int check_template(const tf_tokenizer *tok)
{
	const tf_tokens *lists[] = { &tok->prefix, &tok->suffix };
	size_t i, k;

	for (k = 0; k < 2; k++)
		for (i = 0; i < lists[k]->n; i++) {
			int32_t id = lists[k]->ids[i];

			if (id >= tok->n_ids || !tok->ids[id].present)
				return tf_diag_set(TF_ERR_FORMAT,
						   "%s: post_processor: id %d is not in the vocabulary",
						   tok->name, id);
		}
	return TF_OK;
}

static int compile_word_char(tf_tokenizer *tok)
{
	PCRE2_SIZE at;
	size_t i;
	int err;

	for (i = 0; i < tok->n_added && !tok->added[i].single_word; i++)
		;
	if (i == tok->n_added)
		return TF_OK;
	/* Rust's char::is_alphanumeric. */
	tok->word_char = pcre2_compile((PCRE2_SPTR) "[\\p{Alphabetic}\\p{N}]", PCRE2_ZERO_TERMINATED,
				       PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &at, NULL);
	if (!tok->word_char)
		return tf_diag_set(TF_ERR_INTERNAL,
				   "tokenizer: the word-character regex does not compile (PCRE2 error %d)",
				   err);
	return TF_OK;
}

static int load_root(tf_tokenizer *tok, const cJSON *root)
{
	char where[512];
	int rc;

	snprintf(where, sizeof(where), "%s: pre_tokenizer", tok->name);
	if (!cJSON_IsObject(root))
		return tf_diag_set(TF_ERR_FORMAT, "%s: not a JSON object", tok->name);
	if ((rc = tf_bpe_init(&tok->bpe, cJSON_GetObjectItemCaseSensitive(root, "model"),
			      tok->name)) ||
	    (rc = parse_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), 0)) ||
	    (rc = tf_pretok_init(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
				 where, &tok->pretok)) ||
	    (rc = parse_post(tok, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), 0)) ||
	    (rc = parse_decoder(tok, cJSON_GetObjectItemCaseSensitive(root, "decoder"))) ||
	    (rc = parse_added(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"))) ||
	    (rc = build_id_table(tok)) ||
	    (rc = check_template(tok)) ||
	    (rc = compile_word_char(tok)))
		return rc;
	if (!tf_pretok_bytelevel(tok->pretok))
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "%s: pre_tokenizer has no ByteLevel stage: only byte-level BPE is supported",
				   tok->name);
	return TF_OK;
}

int tf_tok_load_json(const char *json, size_t len, const char *name, tf_tokenizer **out)
{
	tf_tokenizer *tok;
	cJSON *root;
	int rc;

	*out = NULL;
	tok = calloc(1, sizeof(*tok));
	if (!tok || !(tok->name = strdup(name))) {
		free(tok);
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", name);
	}
	root = cJSON_ParseWithLength(json, len);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		rc = tf_diag_set(TF_ERR_FORMAT, "%s: JSON syntax error at byte %zu", name,
				 at && at >= json && at <= json + len ? (size_t)(at - json) : len);
	} else {
		rc = load_root(tok, root);
		cJSON_Delete(root);
	}
	if (rc) {
		tf_tok_free(tok);
		return rc;
	}
	*out = tok;
	return TF_OK;
}

int tf_tok_load(const char *path, tf_tokenizer **out)
{
	tf_bytes text = { 0 };
	int rc;

	*out = NULL;
	rc = tf_text_read_stream(path, &text);
	if (!rc)
		rc = tf_tok_load_json(text.p ? text.p : "", text.len, path, out);
	tf_bytes_free(&text);
	return rc;
}

void tf_tok_free(tf_tokenizer *tok)
{
	size_t i;

	if (!tok)
		return;
	for (i = 0; i < tok->n_added; i++)
		free(tok->added[i].content);
	free(tok->added);
	free(tok->raw.node);
	free(tok->normed.node);
	pcre2_code_free(tok->word_char);
	tf_tokens_free(&tok->prefix);
	tf_tokens_free(&tok->suffix);
	tf_pretok_free(tok->pretok);
	tf_bpe_free(&tok->bpe);
	free(tok->ids);
	tf_bytes_free(&tok->pieces);
	free(tok->name);
	free(tok);
}

/* ---- encoding ---- */

/*
 * Text repeats its words, and a piece's ids depend on nothing but the piece,
 * so each encode call memoises short pieces: on long texts most pieces are
 * found here and never merged.
 */
#define CACHE_MAX_PIECE 32
#define CACHE_MAX_ENTRIES 65536

typedef struct enc_ctx {
	const tf_tokenizer *tok;
	unsigned flags;
	tf_tokens *out;
	tf_bpe_scratch bpe;
	tf_bytes norm;
	tf_strmap cache;        /* piece -> offset in cache_ids: count, ids... */
	tf_tokens cache_ids;
} enc_ctx;

static int emit_piece(void *ctx, const char *piece, size_t len)
{
	enc_ctx *e = ctx;
	size_t first = e->out->n, i;
	int32_t at, *slot;
	int rc;

	if (len > CACHE_MAX_PIECE)
		return tf_bpe_encode(&e->tok->bpe, piece, len, &e->bpe, e->out);
	if (!e->cache.index && tf_strmap_init(&e->cache, 1024))
		return tf_diag_set(TF_ERR_NOMEM, "tokenizer: out of memory");
	if ((at = tf_strmap_get(&e->cache, piece, len)) >= 0) {
		for (i = 1; i <= (size_t)e->cache_ids.ids[at]; i++)
			if ((rc = tf_tokens_push(e->out, e->cache_ids.ids[at + i])))
				return rc;
		return TF_OK;
	}
	if ((rc = tf_bpe_encode(&e->tok->bpe, piece, len, &e->bpe, e->out)))
		return rc;
	if (e->cache.n >= CACHE_MAX_ENTRIES)
		return TF_OK;
	at = (int32_t)e->cache_ids.n;
	if ((rc = tf_tokens_push(&e->cache_ids, (int32_t)(e->out->n - first))))
		return rc;
	for (i = first; i < e->out->n; i++)
		if ((rc = tf_tokens_push(&e->cache_ids, e->out->ids[i])))
			return rc;
	slot = tf_strmap_slot(&e->cache, piece, len, at, NULL);
	return slot ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "tokenizer: out of memory");
}

static int encode_plain(enc_ctx *e, const char *s, size_t len)
{
	return tf_pretok_split(e->tok->pretok, s, len, emit_piece, e);
}

typedef int (*segment_fn)(enc_ctx *e, const char *s, size_t len);

static bool is_word_char(const tf_tokenizer *tok, const char *s, size_t len)
{
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	int rc;

	if (!md)
		return false;
	rc = pcre2_match(tok->word_char, (PCRE2_SPTR)s, len, 0, PCRE2_NO_UTF_CHECK, md, NULL);
	pcre2_match_data_free(md);
	return rc > 0;
}

/* Start of the last character of s[0..len). */
static size_t last_char(const char *s, size_t len)
{
	while (len > 0 && ((uint8_t)s[len - 1] & 0xC0) == 0x80)
		len--;
	return len ? len - 1 : 0;
}

/* Whitespace run lengths for lstrip / rstrip. */
static size_t space_before(const char *s, size_t end)
{
	size_t i = end;
	uint32_t cp;

	while (i > 0) {
		size_t c = last_char(s, i);

		if (tf_utf8_next((const uint8_t *)s + c, i - c, &cp) <= 0 || !tf_unicode_is_space(cp))
			break;
		i = c;
	}
	return end - i;
}

static size_t space_after(const char *s, size_t len)
{
	size_t i = 0;
	uint32_t cp;
	int w;

	while (i < len && (w = tf_utf8_next((const uint8_t *)s + i, len - i, &cp)) > 0 &&
	       tf_unicode_is_space(cp))
		i += (size_t)w;
	return i;
}

/*
 * Cuts s at the added tokens of trie t (leftmost-longest, as HF's
 * Aho-Corasick does), pushes their ids and hands the text between to fn.
 * A match that is refused (single_word, or special with SPECIAL_AS_TEXT) is
 * skipped whole, again as in HF.
 */
static int split_added(enc_ctx *e, const trie *t, const char *s, size_t len, segment_fn fn)
{
	const tf_tokenizer *tok = e->tok;
	size_t i = 0, done = 0;
	int rc;

	if (!t->n)
		return len ? fn(e, s, len) : TF_OK;
	while (i < len) {
		const added_tok *a;
		size_t start = i, end;
		int32_t k;

		if (!t->first[(uint8_t)s[i]] || (k = trie_longest(t, s + i, len - i)) < 0) {
			i++;
			continue;
		}
		a = &tok->added[k];
		end = i + a->len;
		i = end;
		if (a->special && (e->flags & TF_TOK_SPECIAL_AS_TEXT))
			continue;
		if (a->single_word &&
		    ((start > 0 && is_word_char(tok, s + last_char(s, start), start - last_char(s, start))) ||
		     (end < len && is_word_char(tok, s + end, len - end))))
			continue;
		if (a->lstrip) {
			start -= space_before(s, start);
			if (start < done)
				start = done;
		}
		if (a->rstrip)
			i = end += space_after(s + end, len - end);
		if (start > done && (rc = fn(e, s + done, start - done)))
			return rc;
		if ((rc = tf_tokens_push(e->out, a->id)))
			return rc;
		done = end;
	}
	return done < len ? fn(e, s + done, len - done) : TF_OK;
}

static int encode_normalized(enc_ctx *e, const char *s, size_t len)
{
	int rc;

	if (e->tok->norm == NORM_NFC) {
		e->norm.len = 0;
		if ((rc = tf_nfc(s, len, &e->norm)))
			return tf_diag_set(rc, rc == TF_ERR_NOMEM ? "tokenizer: out of memory for NFC"
							     : "tokenizer: NFC of invalid UTF-8");
		s = e->norm.p;
		len = e->norm.len;
	}
	return split_added(e, &e->tok->normed, s, len, encode_plain);
}

int tf_tok_encode(const tf_tokenizer *tok, const char *text, size_t len,
		  unsigned flags, tf_tokens *out)
{
	enc_ctx e = { .tok = tok, .flags = flags, .out = out };
	size_t bad, i;
	int rc = TF_OK;

	if (!tf_utf8_valid(text, len, &bad))
		return tf_diag_set(TF_ERR_INVALID, "text is not valid UTF-8 (byte %zu)", bad);
	for (i = 0; (flags & TF_TOK_ADD_SPECIAL) && i < tok->prefix.n && !rc; i++)
		rc = tf_tokens_push(out, tok->prefix.ids[i]);
	if (!rc)
		rc = split_added(&e, &tok->raw, text, len, encode_normalized);
	for (i = 0; (flags & TF_TOK_ADD_SPECIAL) && i < tok->suffix.n && !rc; i++)
		rc = tf_tokens_push(out, tok->suffix.ids[i]);
	tf_bpe_scratch_free(&e.bpe);
	tf_bytes_free(&e.norm);
	tf_strmap_free(&e.cache);
	tf_tokens_free(&e.cache_ids);
	return rc;
}

/* ---- decoding ---- */

const char *tf_tok_piece(const tf_tokenizer *tok, int32_t id, size_t *len)
{
	if (id < 0 || id >= tok->n_ids || !tok->ids[id].present)
		return NULL;
	*len = tok->ids[id].len;
	return tok->pieces.p + tok->ids[id].off;
}

int tf_tok_decode(const tf_tokenizer *tok, const int32_t *ids, size_t n,
		  unsigned flags, tf_bytes *out)
{
	tf_bytes raw = { 0 };
	size_t i, len;
	int rc = TF_OK;

	for (i = 0; i < n && !rc; i++) {
		const char *p = tf_tok_piece(tok, ids[i], &len);

		if (!p)
			rc = tf_diag_set(TF_ERR_RANGE, "token id %d is not in the vocabulary (size %d)",
					 ids[i], tok->n_ids);
		else if (!((flags & TF_TOK_SKIP_SPECIAL) && tok->ids[ids[i]].special))
			rc = tf_bytes_append(&raw, p, len);
	}
	if (!rc)
		rc = tf_utf8_lossy(raw.p ? raw.p : "", raw.len, out);
	tf_bytes_free(&raw);
	return rc;
}

int tf_tok_vocab_size(const tf_tokenizer *tok)
{
	return tok->n_ids;
}

int32_t tf_tok_find(const tf_tokenizer *tok, const char *text)
{
	size_t i, len = strlen(text);

	for (i = tok->n_added; i-- > 0;)
		if (tok->added[i].len == len && !memcmp(tok->added[i].content, text, len))
			return tok->added[i].id;
	return tf_strmap_get(&tok->bpe.vocab, text, len);
}

bool tf_tok_is_special(const tf_tokenizer *tok, int32_t id)
{
	return id >= 0 && id < tok->n_ids && tok->ids[id].special;
}
