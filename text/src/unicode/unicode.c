/* unicode.c - UTF-8 scanning, GPT-2's byte-level alphabet and NFC. */
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"
#include "unicode/unicode.h"
#include "unicode/unicode_data.h"

/* ---- UTF-8 ---- */

int tf_utf8_next(const uint8_t *s, size_t len, uint32_t *cp)
{
	uint8_t c = s[0], lo = 0x80, hi = 0xBF;
	int need, i;
	uint32_t v;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c < 0xC2 || c > 0xF4)
		return -1;
	if (c < 0xE0) {
		need = 1;
		v = c & 0x1F;
	} else if (c < 0xF0) {
		need = 2;
		v = c & 0x0F;
		if (c == 0xE0)
			lo = 0xA0;      /* overlong */
		else if (c == 0xED)
			hi = 0x9F;      /* surrogates */
	} else {
		need = 3;
		v = c & 0x07;
		if (c == 0xF0)
			lo = 0x90;      /* overlong */
		else if (c == 0xF4)
			hi = 0x8F;      /* above U+10FFFF */
	}
	/* Only the second byte has a narrowed range. */
	for (i = 1; i <= need; i++) {
		if ((size_t)i >= len)
			return 0;
		if (s[i] < lo || s[i] > hi)
			return -i;
		v = v << 6 | (s[i] & 0x3F);
		lo = 0x80;
		hi = 0xBF;
	}
	*cp = v;
	return need + 1;
}

int tf_utf8_put(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

bool tf_utf8_valid(const char *s, size_t len, size_t *bad)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t i = 0;
	uint32_t cp;
	int n;

	while (i < len) {
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		n = tf_utf8_next(u + i, len - i, &cp);
		if (n <= 0) {
			if (bad)
				*bad = i;
			return false;
		}
		i += (size_t)n;
	}
	return true;
}

int tf_utf8_lossy(const char *s, size_t len, tf_bytes *out)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t i = 0, run = 0;
	uint32_t cp;
	int n, rc;

	while (i < len) {
		n = tf_utf8_next(u + i, len - i, &cp);
		if (n > 0) {
			i += (size_t)n;
			continue;
		}
		/* An unfinished tail is one invalid subpart too. */
		if ((rc = tf_bytes_append(out, s + run, i - run)) ||
		    (rc = tf_bytes_append(out, TF_UTF8_REPLACEMENT, 3)))
			return rc;
		i += n ? (size_t)-n : len - i;
		run = i;
	}
	return tf_bytes_append(out, s + run, i - run);
}

bool tf_unicode_is_space(uint32_t cp)
{
	if (cp <= 0x20)
		return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
	if (cp < 0x85)
		return false;
	return cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
	       cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---- byte level ---- */

/* GPT-2 bytes_to_unicode(): the printable bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF stand for themselves; the other 68 take U+0100.. in byte order. */
const uint16_t tf_bytelevel_cp[256] = {
	0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107,
	0x108, 0x109, 0x10A, 0x10B, 0x10C, 0x10D, 0x10E, 0x10F,
	0x110, 0x111, 0x112, 0x113, 0x114, 0x115, 0x116, 0x117,
	0x118, 0x119, 0x11A, 0x11B, 0x11C, 0x11D, 0x11E, 0x11F,
	0x120, 0x021, 0x022, 0x023, 0x024, 0x025, 0x026, 0x027,
	0x028, 0x029, 0x02A, 0x02B, 0x02C, 0x02D, 0x02E, 0x02F,
	0x030, 0x031, 0x032, 0x033, 0x034, 0x035, 0x036, 0x037,
	0x038, 0x039, 0x03A, 0x03B, 0x03C, 0x03D, 0x03E, 0x03F,
	0x040, 0x041, 0x042, 0x043, 0x044, 0x045, 0x046, 0x047,
	0x048, 0x049, 0x04A, 0x04B, 0x04C, 0x04D, 0x04E, 0x04F,
	0x050, 0x051, 0x052, 0x053, 0x054, 0x055, 0x056, 0x057,
	0x058, 0x059, 0x05A, 0x05B, 0x05C, 0x05D, 0x05E, 0x05F,
	0x060, 0x061, 0x062, 0x063, 0x064, 0x065, 0x066, 0x067,
	0x068, 0x069, 0x06A, 0x06B, 0x06C, 0x06D, 0x06E, 0x06F,
	0x070, 0x071, 0x072, 0x073, 0x074, 0x075, 0x076, 0x077,
	0x078, 0x079, 0x07A, 0x07B, 0x07C, 0x07D, 0x07E, 0x121,
	0x122, 0x123, 0x124, 0x125, 0x126, 0x127, 0x128, 0x129,
	0x12A, 0x12B, 0x12C, 0x12D, 0x12E, 0x12F, 0x130, 0x131,
	0x132, 0x133, 0x134, 0x135, 0x136, 0x137, 0x138, 0x139,
	0x13A, 0x13B, 0x13C, 0x13D, 0x13E, 0x13F, 0x140, 0x141,
	0x142, 0x0A1, 0x0A2, 0x0A3, 0x0A4, 0x0A5, 0x0A6, 0x0A7,
	0x0A8, 0x0A9, 0x0AA, 0x0AB, 0x0AC, 0x143, 0x0AE, 0x0AF,
	0x0B0, 0x0B1, 0x0B2, 0x0B3, 0x0B4, 0x0B5, 0x0B6, 0x0B7,
	0x0B8, 0x0B9, 0x0BA, 0x0BB, 0x0BC, 0x0BD, 0x0BE, 0x0BF,
	0x0C0, 0x0C1, 0x0C2, 0x0C3, 0x0C4, 0x0C5, 0x0C6, 0x0C7,
	0x0C8, 0x0C9, 0x0CA, 0x0CB, 0x0CC, 0x0CD, 0x0CE, 0x0CF,
	0x0D0, 0x0D1, 0x0D2, 0x0D3, 0x0D4, 0x0D5, 0x0D6, 0x0D7,
	0x0D8, 0x0D9, 0x0DA, 0x0DB, 0x0DC, 0x0DD, 0x0DE, 0x0DF,
	0x0E0, 0x0E1, 0x0E2, 0x0E3, 0x0E4, 0x0E5, 0x0E6, 0x0E7,
	0x0E8, 0x0E9, 0x0EA, 0x0EB, 0x0EC, 0x0ED, 0x0EE, 0x0EF,
	0x0F0, 0x0F1, 0x0F2, 0x0F3, 0x0F4, 0x0F5, 0x0F6, 0x0F7,
	0x0F8, 0x0F9, 0x0FA, 0x0FB, 0x0FC, 0x0FD, 0x0FE, 0x0FF,
};

int tf_bytelevel_byte(uint32_t cp)
{
	if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) ||
	    (cp >= 0xAE && cp <= 0xFF))
		return (int)cp;
	if (cp >= 0x100 && cp <= 0x120)
		return (int)(cp - 0x100);               /* 0x00..0x20 */
	if (cp >= 0x121 && cp <= 0x142)
		return (int)(cp - 0x121 + 0x7F);        /* 0x7F..0xA0 */
	return cp == 0x143 ? 0xAD : -1;
}

int tf_bytelevel_encode(const char *s, size_t len, tf_bytes *out)
{
	size_t i;
	int rc = tf_bytes_reserve(out, 2 * len);

	if (rc)
		return rc;
	for (i = 0; i < len; i++)
		out->len += (size_t)tf_utf8_put(tf_bytelevel_cp[(uint8_t)s[i]],
						out->p + out->len);
	return TF_OK;
}

/* ---- NFC ---- */

/* Hangul syllables: S = SBASE + (L * VCOUNT + V) * TCOUNT + T. */
enum {
	SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
	LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT,
	SCOUNT = LCOUNT * NCOUNT,
};

/* Above every combining class (they stop at 254): a text that opens with a
 * mark has no starter, and nothing may compose with it. */
#define CCC_BLOCKED 256

/*
 * The index of the run holding cp in a sorted table of n runs, or -1.  Run
 * i's bounds lie i * stride bytes after lo_0 and hi_0, so one search serves
 * every table of {lo, hi, ...} records.
 */
static long range_find(uint32_t cp, const uint32_t *lo_0, const uint32_t *hi_0,
		       size_t stride, unsigned n)
{
	unsigned lo = 0, hi = n;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		size_t off = (size_t)mid * stride;

		if (cp > *(const uint32_t *)((const char *)hi_0 + off))
			lo = mid + 1;
		else if (cp < *(const uint32_t *)((const char *)lo_0 + off))
			hi = mid;
		else
			return (long)mid;
	}
	return -1;
}

#define RANGE_FIND(cp, table, n) \
	range_find(cp, &(table)[0].lo, &(table)[0].hi, sizeof((table)[0]), n)

/* Both tables start at U+0300: every character below it is of class 0 and
 * unchanged by NFC, which keeps ASCII and Latin-1 text off the search. */
static bool nfc_unsafe(uint32_t cp)
{
	return cp >= 0x300 && RANGE_FIND(cp, tf_ucd_nfc_unsafe, tf_ucd_nfc_unsafe_len) >= 0;
}

static int ccc_of(uint32_t cp)
{
	long i = cp < 0x300 ? -1 : RANGE_FIND(cp, tf_ucd_ccc, tf_ucd_ccc_len);

	return i < 0 ? 0 : tf_ucd_ccc[i].ccc;
}

static const tf_ucd_decomp *decomp_of(uint32_t cp)
{
	unsigned lo = 0, hi = tf_ucd_decomps_len;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (cp > tf_ucd_decomps[mid].cp)
			lo = mid + 1;
		else if (cp < tf_ucd_decomps[mid].cp)
			hi = mid;
		else
			return &tf_ucd_decomps[mid];
	}
	return NULL;
}

/* The primary composite of a + b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
	unsigned lo = 0, hi = tf_ucd_comps_len;

	if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
		return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
	if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 &&
	    b > TBASE && b < TBASE + TCOUNT)
		return a + (b - TBASE);
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		const tf_ucd_pair *p = &tf_ucd_comps[mid];

		if (a > p->first || (a == p->first && b > p->second))
			lo = mid + 1;
		else if (a < p->first || b < p->second)
			hi = mid;
		else
			return p->composite;
	}
	return 0;
}

/* Appends the canonical decomposition of cp to buf[*n..].  No character
 * decomposes into more code points than 1.5 times its UTF-8 length. */
static void decompose(uint32_t cp, uint32_t *buf, size_t *n)
{
	const tf_ucd_decomp *d;

	if (cp >= SBASE && cp < SBASE + SCOUNT) {
		uint32_t s = cp - SBASE;

		buf[(*n)++] = LBASE + s / NCOUNT;
		buf[(*n)++] = VBASE + s % NCOUNT / TCOUNT;
		if (s % TCOUNT)
			buf[(*n)++] = TBASE + s % TCOUNT;
		return;
	}
	d = cp >= 0xC0 ? decomp_of(cp) : NULL;
	if (!d) {
		buf[(*n)++] = cp;
		return;
	}
	memcpy(buf + *n, tf_ucd_decomp_cps + d->off, d->len * sizeof(*buf));
	*n += d->len;
}

int tf_nfc(const char *s, size_t len, tf_bytes *out)
{
	const uint8_t *u = (const uint8_t *)s;
	uint32_t *cps, cp, starter;
	size_t i, n = 0, k, spos;
	int w, last, cc, rc;
	bool clean = true;

	for (i = 0; i < len && clean; i += (size_t)w) {
		w = tf_utf8_next(u + i, len - i, &cp);
		if (w <= 0)
			return TF_ERR_INVALID;
		clean = !nfc_unsafe(cp);
	}
	if (clean)
		return tf_bytes_append(out, s, len);

	/* Decompose. */
	cps = malloc((2 * len + 1) * sizeof(*cps));
	if (!cps)
		return TF_ERR_NOMEM;
	for (i = 0; i < len; i += (size_t)w) {
		w = tf_utf8_next(u + i, len - i, &cp);
		decompose(cp, cps, &n);
	}
	/* Canonical order: stable insertion sort of each run of marks. */
	for (i = 1; i < n; i++) {
		uint32_t c = cps[i];

		cc = ccc_of(c);
		if (!cc)
			continue;
		for (k = i; k > 0 && ccc_of(cps[k - 1]) > cc; k--)
			cps[k] = cps[k - 1];
		cps[k] = c;
	}
	/* Compose: a mark joins the last starter unless something between
	 * them has a class of 0 or at least its own (it is "blocked"). */
	spos = 0;
	starter = cps[0];
	last = ccc_of(starter) ? CCC_BLOCKED : 0;
	for (i = 1, k = 1; i < n; i++) {
		uint32_t c = cps[i], comp;

		cc = ccc_of(c);
		comp = compose(starter, c);
		if (comp && (last < cc || last == 0)) {
			cps[spos] = starter = comp;
			continue;
		}
		if (cc == 0) {
			spos = k;
			starter = c;
		}
		last = cc;
		cps[k++] = c;
	}
	n = k;
	rc = tf_bytes_reserve(out, 4 * n);
	if (!rc)
		for (i = 0; i < n; i++)
			out->len += (size_t)tf_utf8_put(cps[i], out->p + out->len);
	free(cps);
	return rc;
}
