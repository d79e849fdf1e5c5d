/*
 * lookup.h - prompt-lookup drafting: the continuation of the sequence's
 * latest earlier n-gram match.
 *
 * The sequence is its tokens followed by the token about to be fed.  Its
 * last n tokens (n from max_n down to min_n, the longest that matches
 * first) are looked for earlier in it, latest occurrence first; what
 * followed that occurrence, up to max tokens (and never past the end of
 * the sequence), is the proposal.  A sequence that repeats itself (code,
 * an edited passage, a list) gets its repetition proposed; one that does
 * not gets nothing, and its step is a plain one.  O(length x n) per call.
 */
#ifndef TF_NGRAM_LOOKUP_H
#define TF_NGRAM_LOOKUP_H

#include <stdint.h>

/* tokens [n_tokens] then next; up to max drafts into draft, the count
 * returned (0: no match). */
int tf_ngram_lookup(const int32_t *tokens, int64_t n_tokens, int32_t next, int min_n,
		    int max_n, int max, int32_t *draft);

#endif /* TF_NGRAM_LOOKUP_H */
