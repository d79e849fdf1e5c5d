/*
 * bpe.h - the BPE model of a tokenizer.json: vocabulary, merge ranks and the
 * merge loop for one pre-tokenized piece.
 *
 * Pieces arrive as raw bytes; byte b starts as the token spelled by its
 * byte-level code point (unicode.h), so no text is re-spelled on the hot path.
 */
#ifndef TF_BPE_H
#define TF_BPE_H

#include <cjson/cJSON.h>

#include "strmap.h"
#include "tokenizer/tokenizer.h"

typedef struct tf_bpe_merge {
	uint64_t pair;          /* left id << 32 | right id; UINT64_MAX: empty */
	int32_t rank, id;       /* rank = line in merges; id = merged token */
} tf_bpe_merge;

typedef struct tf_bpe {
	tf_strmap vocab;        /* byte-level spelling -> id */
	tf_bpe_merge *merges;   /* open-addressed on pair */
	size_t merge_mask;
	int32_t byte_id[256];   /* the token of each lone byte, -1 if none */
	int32_t unk;            /* unk_token id, -1 when none */
	int32_t max_id;
	bool ignore_merges;     /* a piece that is a whole token stays whole */
} tf_bpe;

/* Per-call scratch for the merge loop; zero-initialise, tf_bpe_scratch_free(). */
typedef struct tf_bpe_scratch {
	struct bpe_sym *sym;
	struct bpe_item *heap;
	size_t sym_cap, heap_cap;
	tf_bytes spell;
} tf_bpe_scratch;

/* Reads model (type BPE) of the file `where`. */
int tf_bpe_init(tf_bpe *b, const cJSON *model, const char *where);
void tf_bpe_free(tf_bpe *b);
void tf_bpe_scratch_free(tf_bpe_scratch *s);

/* The merge of (left, right), or NULL. */
const tf_bpe_merge *tf_bpe_find_merge(const tf_bpe *b, int32_t left, int32_t right);

/* Appends the ids of one piece: a priority queue of candidate merges,
 * O(n log n) in the piece length. */
int tf_bpe_encode(const tf_bpe *b, const char *piece, size_t len,
		  tf_bpe_scratch *s, tf_tokens *out);
/* The plain reference: rescans for the lowest-ranked pair after every merge,
 * O(n^2).  Same result; tests compare the two. */
int tf_bpe_encode_ref(const tf_bpe *b, const char *piece, size_t len, tf_tokens *out);

#endif /* TF_BPE_H */
