/*
 * tftoktrain - trains a small byte-level BPE tokenizer and writes it as a
 * Hugging Face tokenizer.json.
 *
 *   tftoktrain -o tokenizer.json -n 2041 -s '<|endoftext|>' ... CORPUS...
 *
 * The corpus is split exactly as the runtime's tokenizer will split it (the
 * same pre-tokenizer code, GPT-2's ByteLevel regex); then the most frequent
 * adjacent pair is merged until the vocabulary (256 bytes + merges) holds -n
 * tokens.  Ties go to the lowest pair of ids, so a corpus always gives the
 * same file.  -s adds a special token, -a an ordinary added token, with ids
 * after the vocabulary in the order given.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer/pretok.h"
#include "strmap.h"
#include "tf/diag.h"
#include "tf/text.h"
#include "tf/utf8.h"
#include "tf/tokenizer.h"
#include "unicode/unicode.h"

#define MAX_ADDED 64

typedef struct word {
	int32_t *sym;           /* token ids, in order */
	int n;
	int32_t freq;
} word;

typedef struct trainer {
	tf_strmap pieces;       /* pre-token -> frequency */
	word *words;
	size_t n_words;
	tf_bytes *tok;          /* token id -> raw bytes */
	tf_strmap tok_ids;      /* raw bytes -> token id */
	int n_tok, max_tok;
	tf_strmap pairs;        /* (a, b) as 8 bytes -> count */
	int32_t (*merges)[2];
	int n_merges;
} trainer;

static int count_piece(void *ctx, const char *piece, size_t len)
{
	int32_t *f = tf_strmap_slot(&((trainer *)ctx)->pieces, piece, len, 0, NULL);

	if (!f)
		return TF_ERR_NOMEM;
	(*f)++;
	return TF_OK;
}

static int read_corpus(trainer *t, const tf_pretok *pre, const char *path)
{
	tf_bytes text = { 0 };
	size_t bad;
	int rc = tf_text_read_stream(path, &text);

	if (!rc && !tf_utf8_valid(text.p, text.len, &bad))
		rc = tf_diag_set(TF_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu", path, bad);
	if (!rc)
		rc = tf_pretok_split(pre, text.p, text.len, count_piece, t);
	tf_bytes_free(&text);
	return rc;
}

static int add_token(trainer *t, const char *p, size_t len, int32_t *id)
{
	int added;
	int32_t *slot = tf_strmap_slot(&t->tok_ids, p, len, t->n_tok, &added);

	if (!slot)
		return TF_ERR_NOMEM;
	*id = *slot;
	if (!added)
		return TF_OK;
	t->tok[t->n_tok] = (tf_bytes){ 0 };
	if (tf_bytes_append(&t->tok[t->n_tok], p, len))
		return TF_ERR_NOMEM;
	t->n_tok++;
	return TF_OK;
}

/* Adds freq * (each adjacent pair of w) to the pair counts. */
static int count_pairs(trainer *t, const word *w, int32_t sign)
{
	int i;

	for (i = 0; i + 1 < w->n; i++) {
		int32_t key[2] = { w->sym[i], w->sym[i + 1] };
		int32_t *c = tf_strmap_slot(&t->pairs, key, sizeof(key), 0, NULL);

		if (!c)
			return TF_ERR_NOMEM;
		*c += sign * w->freq;
	}
	return TF_OK;
}

static int build_words(trainer *t)
{
	size_t i, j;
	int rc;

	t->n_words = t->pieces.n;
	t->words = calloc(t->n_words, sizeof(*t->words));
	if (!t->words)
		return TF_ERR_NOMEM;
	for (i = 0; i < t->n_words; i++) {
		const tf_strmap_entry *e = &t->pieces.entries[i];
		const uint8_t *k = (const uint8_t *)tf_strmap_key(&t->pieces, i);
		word *w = &t->words[i];

		w->sym = malloc(e->len * sizeof(*w->sym));
		if (!w->sym)
			return TF_ERR_NOMEM;
		for (j = 0; j < e->len; j++)
			w->sym[j] = k[j];       /* byte b is token b */
		w->n = (int)e->len;
		w->freq = e->val;
		if ((rc = count_pairs(t, w, 1)))
			return rc;
	}
	return TF_OK;
}

/* The most frequent pair (lowest ids on ties); false when none occurs twice. */
static bool best_pair(const trainer *t, int32_t out[2])
{
	int32_t best = 1;
	size_t i;

	for (i = 0; i < t->pairs.n; i++) {
		int32_t c = t->pairs.entries[i].val, k[2];

		memcpy(k, tf_strmap_key(&t->pairs, i), sizeof(k));
		if (c > best || (c == best && best > 1 &&
				 (k[0] < out[0] || (k[0] == out[0] && k[1] < out[1])))) {
			best = c;
			out[0] = k[0];
			out[1] = k[1];
		}
	}
	return best > 1;
}

static int merge_once(trainer *t, const int32_t pair[2])
{
	tf_bytes cat = { 0 };
	int32_t id;
	size_t i;
	int rc, j, k;

	if ((rc = tf_bytes_append(&cat, t->tok[pair[0]].p, t->tok[pair[0]].len)) ||
	    (rc = tf_bytes_append(&cat, t->tok[pair[1]].p, t->tok[pair[1]].len)) ||
	    (rc = add_token(t, cat.p, cat.len, &id)))
		goto out;
	memcpy(t->merges[t->n_merges++], pair, sizeof(t->merges[0]));
	for (i = 0; i < t->n_words; i++) {
		word *w = &t->words[i];

		for (j = 0; j + 1 < w->n; j++)
			if (w->sym[j] == pair[0] && w->sym[j + 1] == pair[1])
				break;
		if (j + 1 >= w->n)
			continue;
		/* Recount the whole word: simple, and words are short. */
		if ((rc = count_pairs(t, w, -1)))
			goto out;
		for (j = 0, k = 0; j < w->n; j++, k++) {
			if (j + 1 < w->n && w->sym[j] == pair[0] && w->sym[j + 1] == pair[1]) {
				w->sym[k] = id;
				j++;
			} else {
				w->sym[k] = w->sym[j];
			}
		}
		w->n = k;
		if ((rc = count_pairs(t, w, 1)))
			goto out;
	}
out:
	tf_bytes_free(&cat);
	return rc;
}

/* The byte-level spelling of token id, as a new C string. */
static char *spell(const trainer *t, int32_t id)
{
	tf_bytes b = { 0 };

	if (tf_bytelevel_encode(t->tok[id].p, t->tok[id].len, &b) ||
	    tf_bytes_append(&b, "", 1)) {
		tf_bytes_free(&b);
		return NULL;
	}
	return b.p;
}

static cJSON *json_pretok(void)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "type", "ByteLevel");
	cJSON_AddBoolToObject(o, "add_prefix_space", 0);
	cJSON_AddBoolToObject(o, "trim_offsets", 1);
	cJSON_AddBoolToObject(o, "use_regex", 1);
	return o;
}

static cJSON *json_added(const char *content, int id, bool special)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "id", id);
	cJSON_AddStringToObject(o, "content", content);
	cJSON_AddBoolToObject(o, "single_word", 0);
	cJSON_AddBoolToObject(o, "lstrip", 0);
	cJSON_AddBoolToObject(o, "rstrip", 0);
	cJSON_AddBoolToObject(o, "normalized", 0);
	cJSON_AddBoolToObject(o, "special", special);
	return o;
}

static int write_json(const trainer *t, const char *path, char **added, bool *special, int n_added)
{
	cJSON *root = cJSON_CreateObject(), *model, *vocab, *merges, *list;
	char *text = NULL;
	FILE *f = NULL;
	int i, rc = TF_ERR_NOMEM;

	cJSON_AddStringToObject(root, "version", "1.0");
	cJSON_AddNullToObject(root, "truncation");
	cJSON_AddNullToObject(root, "padding");
	list = cJSON_AddArrayToObject(root, "added_tokens");
	for (i = 0; i < n_added; i++)
		cJSON_AddItemToArray(list, json_added(added[i], t->n_tok + i, special[i]));
	cJSON_AddNullToObject(root, "normalizer");
	cJSON_AddItemToObject(root, "pre_tokenizer", json_pretok());
	cJSON_AddItemToObject(root, "post_processor", json_pretok());
	cJSON_AddItemToObject(root, "decoder", json_pretok());
	model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON_AddNullToObject(model, "dropout");
	cJSON_AddNullToObject(model, "unk_token");
	cJSON_AddNullToObject(model, "continuing_subword_prefix");
	cJSON_AddNullToObject(model, "end_of_word_suffix");
	cJSON_AddBoolToObject(model, "fuse_unk", 0);
	cJSON_AddBoolToObject(model, "byte_fallback", 0);
	cJSON_AddBoolToObject(model, "ignore_merges", 0);
	vocab = cJSON_AddObjectToObject(model, "vocab");
	merges = cJSON_AddArrayToObject(model, "merges");
	if (!vocab || !merges)
		goto out;
	for (i = 0; i < t->n_tok; i++) {
		char *s = spell(t, i);

		if (!s)
			goto out;
		cJSON_AddNumberToObject(vocab, s, i);
		free(s);
	}
	for (i = 0; i < t->n_merges; i++) {
		char *a = spell(t, t->merges[i][0]), *b = spell(t, t->merges[i][1]);
		const char *ab[2] = { a, b };

		if (a && b)
			cJSON_AddItemToArray(merges, cJSON_CreateStringArray(ab, 2));
		free(a);
		free(b);
		if (!a || !b)
			goto out;
	}
	text = cJSON_Print(root);
	if (!text)
		goto out;
	rc = tf_diag_set(TF_ERR_IO, "%s: cannot write", path);
	f = fopen(path, "wb");
	if (f && fputs(text, f) >= 0 && fputc('\n', f) != EOF && !fclose(f))
		rc = TF_OK;
	else if (f)
		fclose(f);
out:
	free(text);
	cJSON_Delete(root);
	return rc;
}

/* Loads the file back and checks every corpus pre-token round-trips. */
static int verify(const trainer *t, const char *path)
{
	tf_tokenizer *tok;
	tf_tokens ids = { 0 };
	tf_bytes back = { 0 };
	size_t i;
	int rc = tf_tok_load(path, &tok);

	for (i = 0; !rc && i < t->pieces.n; i++) {
		const char *k = tf_strmap_key(&t->pieces, i);
		uint32_t len = t->pieces.entries[i].len;

		ids.n = 0;
		back.len = 0;
		rc = tf_tok_encode(tok, k, len, 0, &ids);
		if (!rc)
			rc = tf_tok_decode(tok, ids.ids, ids.n, 0, &back);
		if (!rc && (back.len != len || memcmp(back.p, k, len)))
			rc = tf_diag_set(TF_ERR_INTERNAL, "%s: round trip fails on \"%.*s\"",
					 path, (int)len, k);
	}
	if (!rc)
		fprintf(stderr, "tftoktrain: %s: %zu pieces round-trip, vocab %d\n",
			path, t->pieces.n, tf_tok_vocab_size(tok));
	tf_tokens_free(&ids);
	tf_bytes_free(&back);
	if (tok)
		tf_tok_free(tok);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: tftoktrain -o OUT.json -n VOCAB [-s SPECIAL]... [-a ADDED]... CORPUS...\n");
}

int main(int argc, char **argv)
{
	trainer t = { 0 };
	tf_pretok *pre = NULL;
	cJSON *spec = json_pretok();
	char *added[MAX_ADDED], *out = NULL;
	bool special[MAX_ADDED];
	int i, n_added = 0, rc, status;
	int32_t pair[2] = { 0, 0 };
	size_t w;

	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "-o")) {
			out = argv[i + 1];
		} else if (!strcmp(argv[i], "-n")) {
			t.max_tok = atoi(argv[i + 1]);
		} else if ((!strcmp(argv[i], "-s") || !strcmp(argv[i], "-a")) && n_added < MAX_ADDED) {
			special[n_added] = argv[i][1] == 's';
			added[n_added++] = argv[i + 1];
		} else {
			out = NULL;     /* unknown option, or too many added tokens */
			break;
		}
	}
	if (!out || t.max_tok <= 256 || i >= argc) {
		usage();
		cJSON_Delete(spec);
		return 2;
	}
	status = 1;
	rc = tf_pretok_init(spec, "ByteLevel", &pre);
	if (!rc)
		rc = tf_strmap_init(&t.pieces, 1 << 14);
	if (!rc)
		rc = tf_strmap_init(&t.tok_ids, (size_t)t.max_tok);
	if (!rc)
		rc = tf_strmap_init(&t.pairs, 1 << 16);
	if (rc)
		goto out;
	t.tok = calloc((size_t)t.max_tok, sizeof(*t.tok));
	t.merges = calloc((size_t)t.max_tok, sizeof(*t.merges));
	rc = t.tok && t.merges ? TF_OK : TF_ERR_NOMEM;
	for (; !rc && i < argc; i++)
		rc = read_corpus(&t, pre, argv[i]);
	for (w = 0; !rc && w < 256; w++) {
		char b = (char)w;
		int32_t id;

		rc = add_token(&t, &b, 1, &id);
	}
	if (!rc)
		rc = build_words(&t);
	while (!rc && t.n_tok < t.max_tok && best_pair(&t, pair))
		rc = merge_once(&t, pair);
	if (!rc && t.n_tok < t.max_tok)
		fprintf(stderr, "tftoktrain: corpus too small: %d tokens, no pair occurs twice\n",
			t.n_tok);
	if (!rc)
		rc = write_json(&t, out, added, special, n_added);
	if (!rc)
		rc = verify(&t, out);
	if (!rc)
		status = 0;
out:
	if (rc)
		fprintf(stderr, "tftoktrain: %s (%s)\n", tf_diag_msg(), tf_strerror(rc));
	for (w = 0; w < t.n_words; w++)
		free(t.words[w].sym);
	for (i = 0; i < t.n_tok; i++)
		tf_bytes_free(&t.tok[i]);
	free(t.words);
	free(t.tok);
	free(t.merges);
	tf_strmap_free(&t.pieces);
	tf_strmap_free(&t.tok_ids);
	tf_strmap_free(&t.pairs);
	tf_pretok_free(pre);
	cJSON_Delete(spec);
	return status;
}
