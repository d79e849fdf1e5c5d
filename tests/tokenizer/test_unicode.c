/* test_unicode.c - UTF-8 scanning, lossy decoding (Rust's rules), the
 * byte-level alphabet and NFC against Python's unicodedata. */
#include <criterion/criterion.h>
#include <string.h>

#include "unicode/unicode.h"

static void expect_lossy_n(const char *in, size_t n, const char *want, size_t wn)
{
	tf_bytes out = { 0 };

	cr_assert_eq(tf_utf8_lossy(in, n, &out), 0);
	cr_expect_eq(out.len, wn, "lossy length %zu, want %zu", out.len, wn);
	cr_expect_arr_eq(out.p, want, wn);
	tf_bytes_free(&out);
}

/* String literals, so their lengths count any NUL inside. */
#define expect_lossy(in, want) expect_lossy_n(in, sizeof(in) - 1, want, sizeof(want) - 1)

#define R TF_UTF8_REPLACEMENT

Test(unicode, lossy_replaces_maximal_subparts)
{
	expect_lossy("a\x80z", "a" R "z");
	expect_lossy("\xe2\x82", R);                    /* cut short at the end */
	expect_lossy("\xf0\x9f\x98x", R "x");           /* one subpart, one U+FFFD */
	expect_lossy("\xed\xa0\x80", R R R);            /* a surrogate */
	expect_lossy("\xf4\x90\x80\x80", R R R R);      /* above U+10FFFF */
	expect_lossy("\xc0\xaf", R R);                  /* overlong */
	expect_lossy("ok \xe4\xb8\xad\xf0\x9f\x98\x80", "ok \xe4\xb8\xad\xf0\x9f\x98\x80");
	expect_lossy("\0a", "\0a");
}

Test(unicode, next_reports_unfinished_and_invalid)
{
	uint32_t cp = 0;

	cr_expect_eq(tf_utf8_next((const uint8_t *)"\xf0\x9f\x98\x80", 4, &cp), 4);
	cr_expect_eq(cp, 0x1F600);
	cr_expect_eq(tf_utf8_next((const uint8_t *)"\xf0\x9f\x98", 3, &cp), 0);
	cr_expect_eq(tf_utf8_next((const uint8_t *)"\xf0\x9f\x41", 3, &cp), -2);
	cr_expect_eq(tf_utf8_next((const uint8_t *)"\xff", 1, &cp), -1);
	cr_expect_eq(tf_utf8_next((const uint8_t *)"\xf4\x8f\xbf\xbf", 4, &cp), 4);
	cr_expect_eq(cp, 0x10FFFF);
}

Test(unicode, bytelevel_is_a_bijection)
{
	bool used[0x144] = { false };
	int b;

	for (b = 0; b < 256; b++) {
		uint32_t cp = tf_bytelevel_cp[b];

		cr_assert_lt(cp, 0x144);
		cr_expect(!used[cp], "byte %d shares code point %#x", b, cp);
		used[cp] = true;
		cr_expect_eq(tf_bytelevel_byte(cp), b);
	}
	cr_expect_eq(tf_bytelevel_cp[' '], 0x120);         /* Ġ */
	cr_expect_eq(tf_bytelevel_cp['\n'], 0x10A);        /* Ċ */
	cr_expect_eq(tf_bytelevel_cp['a'], 'a');
	cr_expect_eq(tf_bytelevel_byte(0x4E2D), -1);
	cr_expect_eq(tf_bytelevel_byte(' '), -1);
}

/* Expected values from Python 3.11 unicodedata.normalize("NFC", ...). */
static const struct { const char *in, *nfc; } nfc_cases[] = {
	{ "\x65\xcc\x81", "\xc3\xa9" },                         /* e + acute */
	{ "\x41\xcc\x8a", "\xc3\x85" },
	{ "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81" }, /* Hangul L V T */
	{ "\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81" },         /* Hangul LV + T */
	{ "\x61\xcc\xa3\xcc\x81", "\xe1\xba\xa1\xcc\x81" },      /* marks in order */
	{ "\x61\xcc\x81\xcc\xa3", "\xe1\xba\xa1\xcc\x81" },      /* ... and reordered */
	{ "\xe2\x84\xab", "\xc3\x85" },                          /* Angstrom sign */
	{ "\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc" },          /* composition exclusion */
	{ "\xe1\xb8\x8a\xcc\xa3", "\xe1\xb8\x8c\xcc\x87" },
	{ "\x71\xcc\x87\xcc\xa3", "\x71\xcc\xa3\xcc\x87" },      /* no composite: reorder only */
	{ "\xcc\x81\x78", "\xcc\x81\x78" },                      /* a leading mark */
	{ "\x63\x61\x66\xc3\xa9\x20\x6f\x6b", "\x63\x61\x66\xc3\xa9\x20\x6f\x6b" },
};

Test(unicode, nfc_matches_python)
{
	size_t i;

	for (i = 0; i < sizeof(nfc_cases) / sizeof(*nfc_cases); i++) {
		tf_bytes out = { 0 }, again = { 0 };
		const char *in = nfc_cases[i].in, *want = nfc_cases[i].nfc;

		cr_assert_eq(tf_nfc(in, strlen(in), &out), 0);
		cr_expect_eq(out.len, strlen(want), "case %zu: length %zu", i, out.len);
		cr_expect_arr_eq(out.p, want, strlen(want), "case %zu", i);
		/* NFC is idempotent */
		cr_assert_eq(tf_nfc(out.p, out.len, &again), 0);
		cr_expect_eq(again.len, out.len);
		cr_expect_arr_eq(again.p, out.p, out.len, "case %zu again", i);
		tf_bytes_free(&out);
		tf_bytes_free(&again);
	}
}

Test(unicode, white_space)
{
	cr_expect(tf_unicode_is_space(' '));
	cr_expect(tf_unicode_is_space('\t'));
	cr_expect(tf_unicode_is_space(0x3000));
	cr_expect(tf_unicode_is_space(0x85));
	cr_expect(!tf_unicode_is_space(0xFEFF));
	cr_expect(!tf_unicode_is_space('a'));
}
