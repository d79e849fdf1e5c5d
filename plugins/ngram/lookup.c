/* lookup.c - see lookup.h. */
#include "lookup.h"

/* Token i of tokens followed by next. */
static inline int32_t at(const int32_t *tokens, int64_t n_tokens, int32_t next, int64_t i)
{
	return i < n_tokens ? tokens[i] : next;
}

int tf_ngram_lookup(const int32_t *tokens, int64_t n_tokens, int32_t next, int min_n,
		    int max_n, int max, int32_t *draft)
{
	int64_t len = n_tokens + 1;
	for (int n = max_n; n >= min_n; n--) {
		if (len <= n)
			continue;
		int64_t tail = len - n;         /* the suffix starts here */
		/* An occurrence at s < tail, followed by at least one token. */
		for (int64_t s = tail - 1; s >= 0; s--) {
			int k = 0;
			while (k < n && at(tokens, n_tokens, next, s + k) ==
						at(tokens, n_tokens, next, tail + k))
				k++;
			if (k < n)
				continue;
			int got = 0;
			for (int64_t i = s + n; i < len && got < max; i++)
				draft[got++] = at(tokens, n_tokens, next, i);
			return got;
		}
	}
	return 0;
}
