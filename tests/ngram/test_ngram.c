/*
 * Prompt lookup (plugins/ngram/lookup.c): hand cases, then random
 * sequences over small alphabets (so matches of every length occur)
 * against the definition written out plainly on the sequence with next
 * appended: the longest n in [min_n, max_n] whose suffix occurs earlier,
 * its latest occurrence, and up to max of what followed it.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "lookup.h"

enum { MAXLEN = 96, MAXD = 16 };

static int lookup(const int32_t *t, int64_t n, int32_t next, int lo, int hi, int max,
		  int32_t *draft)
{
	for (int i = 0; i < MAXD; i++)
		draft[i] = -7;          /* poison */
	return tf_ngram_lookup(t, n, next, lo, hi, max, draft);
}

Test(ngram, hand_cases)
{
	int32_t d[MAXD];
	/* a b c a b + c: "a b c" occurred at 0, followed by a b c. */
	const int32_t t1[] = { 1, 2, 3, 1, 2 };
	cr_assert_eq(lookup(t1, 5, 3, 2, 4, 8, d), 3);
	cr_assert(d[0] == 1 && d[1] == 2 && d[2] == 3 && d[3] == -7);
	/* max cuts the continuation. */
	cr_assert_eq(lookup(t1, 5, 3, 2, 4, 2, d), 2);
	cr_assert(d[0] == 1 && d[1] == 2 && d[2] == -7);
	/* 9 never came before: nothing, even at min_n 1. */
	cr_assert_eq(lookup(t1, 5, 9, 1, 4, 8, d), 0);
	cr_assert_eq(d[0], -7);
	/* The latest occurrence wins: "5 6" at 0 (then 7) and at 3 (then 8). */
	const int32_t t2[] = { 5, 6, 7, 5, 6, 8, 5 };
	cr_assert_eq(lookup(t2, 7, 6, 2, 2, 1, d), 1);
	cr_assert_eq(d[0], 8);
	/* The longest suffix first: "4 5 6" at 0 is followed by 1; the later
	 * "5 6" at 4 by 2.  max_n 3 finds the first, max_n 2 the second. */
	const int32_t t3[] = { 4, 5, 6, 1, 5, 6, 2, 4, 5 };
	cr_assert_eq(lookup(t3, 9, 6, 2, 3, 1, d), 1);
	cr_assert_eq(d[0], 1);
	cr_assert_eq(lookup(t3, 9, 6, 2, 2, 1, d), 1);
	cr_assert_eq(d[0], 2);
	/* Too short to hold a suffix and something after it. */
	cr_assert_eq(lookup(t3, 0, 6, 1, 3, 4, d), 0);
	cr_assert_eq(lookup(t3, 1, 4, 1, 3, 4, d), 1);       /* "4" then "4": 4 */
	cr_assert_eq(d[0], 4);
	/* A run: the latest "9 9" is one back, and the continuation stops
	 * at the sequence's end. */
	const int32_t t4[] = { 9, 9, 9 };
	cr_assert_eq(lookup(t4, 3, 9, 2, 2, 8, d), 1);
	cr_assert(d[0] == 9 && d[1] == -7);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next_u32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* The definition, on the whole sequence a [len]. */
static int reference(const int32_t *a, int len, int lo, int hi, int max, int32_t *draft)
{
	for (int n = hi; n >= lo; n--) {
		int best = -1;
		for (int s = 0; s + n < len; s++)
			if (!memcmp(a + s, a + len - n, (size_t)n * sizeof(*a)))
				best = s;
		if (best < 0)
			continue;
		int got = 0;
		for (int i = best + n; i < len && got < max; i++)
			draft[got++] = a[i];
		return got;
	}
	return 0;
}

Test(ngram, random_sequences_match_the_definition)
{
	int32_t a[MAXLEN + 1], want[MAXD], got[MAXD];
	for (int c = 0; c < 20000; c++) {
		int len = 1 + (int)(next_u32() % MAXLEN), alpha = 2 + (int)(next_u32() % 6);
		int lo = 1 + (int)(next_u32() % 4), hi = lo + (int)(next_u32() % 4);
		int max = 1 + (int)(next_u32() % MAXD);
		for (int i = 0; i < len; i++)
			a[i] = (int32_t)(next_u32() % (uint32_t)alpha);
		int n = lookup(a, len - 1, a[len - 1], lo, hi, max, got);
		int m = reference(a, len, lo, hi, max, want);
		cr_assert_eq(n, m, "case %d: %d drafts, the definition %d", c, n, m);
		for (int i = 0; i < MAXD; i++)
			cr_assert_eq(got[i], i < n ? want[i] : -7, "case %d, draft %d", c, i);
	}
}
