/* test_tok_golden.c - every golden id list of the shared test data, exactly,
 * and decode(encode(text)) == text (NFC(text) for qwen3). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer/bpe.h"
#include "tf/diag.h"
#include "tok_fixture.h"
#include "unicode/unicode.h"

static const char *const names[] = { "qwen3", "deepseek_v3", "gpt2" };
#define N_TOK (sizeof(names) / sizeof(*names))
static tf_tokenizer *toks[N_TOK];

static void load_all(void)
{
	size_t i;

	for (i = 0; i < N_TOK; i++) {
		toks[i] = tok_fixture_load(names[i]);
		cr_assert(toks[i], "load %s: %s", names[i], tf_diag_msg());
	}
}

static void free_all(void)
{
	size_t i;

	for (i = 0; i < N_TOK; i++)
		tf_tok_free(toks[i]);
}

static tf_tokenizer *by_name(const char *name)
{
	size_t i;

	for (i = 0; i < N_TOK; i++)
		if (!strcmp(names[i], name))
			return toks[i];
	return NULL;
}

/*
 * The "text" of a golden line with its length: cJSON stops C strings at
 * U+0000 (case d38 has one), so unescape the raw JSON here.
 */
static size_t golden_text(const char *line, tf_bytes *out)
{
	const char *p = strstr(line, "\"text\":\"");
	char u8[4];

	cr_assert(p, "no text in %s", line);
	for (p += 8; *p != '"'; p++) {
		uint32_t cp, lo;

		if (*p != '\\') {
			tf_bytes_append(out, p, 1);
			continue;
		}
		switch (*++p) {
		case 'n': tf_bytes_append(out, "\n", 1); break;
		case 'r': tf_bytes_append(out, "\r", 1); break;
		case 't': tf_bytes_append(out, "\t", 1); break;
		case 'b': tf_bytes_append(out, "\b", 1); break;
		case 'f': tf_bytes_append(out, "\f", 1); break;
		case 'u':
			cp = (uint32_t)strtoul((char[5]){ p[1], p[2], p[3], p[4], 0 }, NULL, 16);
			p += 4;
			if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u') {
				lo = (uint32_t)strtoul((char[5]){ p[3], p[4], p[5], p[6], 0 }, NULL, 16);
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				p += 6;
			}
			tf_bytes_append(out, u8, (size_t)tf_utf8_put(cp, u8));
			break;
		default: tf_bytes_append(out, p, 1); break;   /* \" \\ \/ */
		}
	}
	return out->len;
}

TestSuite(tok_golden, .init = load_all, .fini = free_all, .timeout = 60);

Test(tok_golden, all_dev_lines_exact_and_round_trip)
{
	char *data = tok_fixture_read(TOK_DATA "/golden-dev.jsonl", NULL);
	char *line, *save = NULL;
	int lines = 0, bad = 0;

	cr_assert(data, "golden-dev.jsonl missing");
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cJSON *g = cJSON_Parse(line), *id;
		const char *name = cJSON_GetObjectItem(g, "tokenizer")->valuestring;
		const char *cs = cJSON_GetObjectItem(g, "case")->valuestring;
		tf_tokenizer *tok = by_name(name);
		tf_tokens ids = { 0 };
		tf_bytes text = { 0 }, back = { 0 }, want = { 0 };
		size_t k = 0, len = golden_text(line, &text);

		cr_assert(tok, "unknown tokenizer %s", name);
		lines++;
		cr_assert_eq(tf_tok_encode(tok, text.p, len, 0, &ids), 0, "%s", tf_diag_msg());
		cJSON_ArrayForEach(id, cJSON_GetObjectItem(g, "ids")) {
			if (k >= ids.n || ids.ids[k] != id->valueint)
				break;
			k++;
		}
		if (k != ids.n || k != (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(g, "ids"))) {
			cr_log_error("%s %s: ids differ at %zu (got %zu ids)", name, cs, k, ids.n);
			bad++;
		}
		cr_assert_eq(tf_tok_decode(tok, ids.ids, ids.n, 0, &back), 0);
		if (!strcmp(name, "qwen3"))
			tf_nfc(text.p, len, &want);
		else
			tf_bytes_append(&want, text.p, len);
		if (back.len != want.len || (want.len && memcmp(back.p, want.p, want.len))) {
			cr_log_error("%s %s: round trip differs", name, cs);
			bad++;
		}
		tf_bytes_free(&text);
		tf_bytes_free(&back);
		tf_bytes_free(&want);
		tf_tokens_free(&ids);
		cJSON_Delete(g);
	}
	free(data);
	cr_expect_eq(lines, 126);
	cr_expect_eq(bad, 0, "%d golden failures", bad);
}
