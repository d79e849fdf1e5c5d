/*
 * test_stopstr.c - the streaming stop-string matcher against a plain
 * reference on random text: the text cut where the first stop string to
 * complete starts.
 * Random texts over a three-letter alphabet hit, nearly hit and miss
 * random stop strings; each is pushed in random pieces, and at every step
 * what has been released must be a prefix of the reference's answer.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "tf/error.h"
#include "tf/stopstr.h"

static uint32_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 32);
}

/* The reference: where the first stop string to complete starts (the
 * longer of two ending together), or len. */
static size_t ref_cut(const char *text, size_t len, char stops[][8], int n)
{
	for (size_t end = 1; end <= len; end++) {
		size_t at = len;
		for (int i = 0; i < n; i++) {
			size_t sl = strlen(stops[i]);
			if (sl <= end && !memcmp(text + end - sl, stops[i], sl) && end - sl < at)
				at = end - sl;
		}
		if (at < len)
			return at;
	}
	return len;
}

Test(stopstr, random_text_in_random_pieces)
{
	uint64_t seed = 0x9E3779B97F4A7C15ull;
	int stopped_runs = 0, clean_runs = 0;
	for (int run = 0; run < 3000; run++) {
		char stops[3][8], text[64], got[64];
		int n_stops = 1 + (int)(next(&seed) % 3);
		size_t len = next(&seed) % sizeof(text), got_len = 0;
		tf_stopstr m;
		tf_stopstr_init(&m);
		for (int i = 0; i < n_stops; i++) {
			size_t sl = 1 + next(&seed) % 4;
			for (size_t k = 0; k < sl; k++)
				stops[i][k] = (char)('a' + next(&seed) % 3);
			stops[i][sl] = 0;
			cr_assert_eq(tf_stopstr_add(&m, stops[i], sl), TF_OK);
		}
		for (size_t k = 0; k < len; k++)
			text[k] = (char)('a' + next(&seed) % 3);
		size_t want = ref_cut(text, len, stops, n_stops);

		for (size_t pos = 0; pos < len;) {
			size_t piece = 1 + next(&seed) % 5, out_len;
			const char *out;
			if (piece > len - pos)
				piece = len - pos;
			cr_assert_eq(tf_stopstr_push(&m, text + pos, piece, &out, &out_len), TF_OK);
			memcpy(got + got_len, out, out_len);
			got_len += out_len;
			pos += piece;
			/* Never more than the answer, never a byte of it wrong. */
			cr_assert_leq(got_len, want, "run %d: released %zu bytes, answer %zu",
				      run, got_len, want);
			cr_assert_eq(memcmp(got, text, got_len), 0, "run %d", run);
			/* Held back only what may still start a stop string. */
			if (!m.stopped)
				cr_assert_eq(got_len + m.hold.len, pos, "run %d", run);
		}
		if (!m.stopped) {
			const char *out;
			size_t out_len;
			tf_stopstr_flush(&m, &out, &out_len);
			memcpy(got + got_len, out, out_len);
			got_len += out_len;
		}
		cr_assert_eq(m.stopped, want < len, "run %d: stopped %d, reference cuts at %zu of %zu",
			     run, m.stopped, want, len);
		cr_assert_eq(got_len, want, "run %d", run);
		stopped_runs += want < len;
		clean_runs += want == len;
		tf_stopstr_free(&m);
	}
	/* Both outcomes were exercised many times. */
	cr_assert_gt(stopped_runs, 500);
	cr_assert_gt(clean_runs, 100);
}

Test(stopstr, holds_a_partial_stop_and_releases_it_on_a_mismatch)
{
	tf_stopstr m;
	const char *out;
	size_t n;
	tf_stopstr_init(&m);
	cr_assert_eq(tf_stopstr_add(&m, "</end>", 6), TF_OK);
	cr_assert_eq(tf_stopstr_push(&m, "hello </e", 9, &out, &n), TF_OK);
	cr_assert_eq(n, 6);
	cr_assert_eq(memcmp(out, "hello ", 6), 0);
	cr_assert_eq(tf_stopstr_push(&m, "x> more", 7, &out, &n), TF_OK);
	cr_assert_eq(n, 10);
	cr_assert_eq(memcmp(out, "</ex> more", 10), 0);
	cr_assert_eq(tf_stopstr_push(&m, "! </end> gone", 13, &out, &n), TF_OK);
	cr_assert(m.stopped);
	cr_assert_eq(n, 2);
	cr_assert_eq(memcmp(out, "! ", 2), 0);
	cr_assert_eq(tf_stopstr_push(&m, "after", 5, &out, &n), TF_OK);
	cr_assert_eq(n, 0);
	/* The next reply starts clean; the stop strings stay. */
	tf_stopstr_reset(&m);
	cr_assert_eq(tf_stopstr_push(&m, "</end>", 6, &out, &n), TF_OK);
	cr_assert(m.stopped);
	cr_assert_eq(n, 0);
	tf_stopstr_free(&m);
}

Test(stopstr, empty_stop_string_is_refused)
{
	tf_stopstr m;
	tf_stopstr_init(&m);
	cr_assert_eq(tf_stopstr_add(&m, "", 0), TF_ERR_INVALID);
	tf_stopstr_free(&m);
}

/* A reply whose first text is empty (a token that decodes to nothing) reaches
 * the matcher before it holds a byte: the sanitizer build checks that no
 * library call gets its NULL buffer. */
Test(stopstr, empty_text_before_any_byte)
{
	tf_stopstr m;
	const char *out;
	size_t n = 1;
	tf_stopstr_init(&m);
	cr_assert_eq(tf_stopstr_add(&m, "</end>", 6), TF_OK);
	cr_assert_eq(tf_stopstr_push(&m, "", 0, &out, &n), TF_OK);
	cr_assert_eq(n, 0);
	cr_assert_not(m.stopped);
	tf_stopstr_flush(&m, &out, &n);
	cr_assert_eq(n, 0);
	tf_stopstr_free(&m);
}
