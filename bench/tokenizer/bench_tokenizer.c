/*
 * bench_tokenizer - encoding throughput of the byte-level BPE tokenizer.
 *
 *   bench_tokenizer [-m MB] [-r RUNS] [TOKENIZER.json ...]
 *
 * Builds MB megabytes of text (default 4): paragraphs of the bundled English
 * corpus interleaved with code, digits and Chinese, Japanese, Korean,
 * Cyrillic, Arabic and emoji lines, in a fixed pseudo-random order.  Each
 * tokenizer (default: the shared qwen3 and deepseek_v3 files and our
 * ling-tiny) encodes it RUNS times (default 5); the median run is reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tf/diag.h"
#include "tokenizer/tokenizer.h"

static const char *const lines[] = {
	"\xe4\xbb\x8a\xe5\xa4\xa9\xe7\x9a\x84\xe5\xa4\xa9\xe6\xb0\x94\xe5\xbe\x88\xe5\xa5\xbd\xef\xbc\x8c"
	"\xe6\x88\x91\xe4\xbb\xac\xe5\x8e\xbb\xe5\x85\xac\xe5\x9b\xad\xe6\x95\xa3\xe6\xad\xa5\xe5\x90\xa7\xe3\x80\x82\n",
	"\xe3\x81\x93\xe3\x82\x8c\xe3\x81\xaf\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe6\x96\x87"
	"\xe3\x81\xa7\xe3\x81\x99\xe3\x80\x82\n",
	"\xec\x95\x88\xeb\x85\x95\xed\x95\x98\xec\x84\xb8\xec\x9a\x94, \xeb\xb0\x98\xea\xb0\x91\xec\x8a\xb5"
	"\xeb\x8b\x88\xeb\x8b\xa4.\n",
	"\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xba\xd0\xb0\xd0\xba \xd0\xb4\xd0\xb5\xd0\xbb"
	"\xd0\xb0? \xd0\x92\xd1\x81\xd1\x91 \xd1\x85\xd0\xbe\xd1\x80\xd0\xbe\xd1\x88\xd0\xbe.\n",
	"\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xd8\xa8\xd8\xa7\xd9\x84\xd8\xb9\xd8\xa7\xd9\x84\xd9\x85\n",
	"Emoji: \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb done.\n",
	"    for (int i = 0; i < n; i++) { sum += x[i] * w[i]; }  // dot product\n",
	"def f(x):\n    return {\"key\": [1, 2, 3], 'value': x ** 2}\n",
	"Order #1234567890 shipped 2026-11-29 at 15:45:07, total $1,299.99 (VAT 19%).\n",
	"https://example.com/path/to/page?query=tokenizer&lang=en#section-2\n",
};

/* The bundled English corpus, split into paragraphs. */
static char *corpus(size_t *len)
{
	static const char *const files[] = {
		TF_SOURCE_DIR "/text/toktrain/corpus/lighthouse.txt",
		TF_SOURCE_DIR "/text/toktrain/corpus/almanac.txt",
	};
	tf_bytes all = { 0 };
	char buf[1 << 16];
	size_t i, n;

	for (i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "rb");

		if (!f) {
			fprintf(stderr, "bench_tokenizer: cannot open %s\n", files[i]);
			exit(1);
		}
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			tf_bytes_append(&all, buf, n);
		fclose(f);
	}
	tf_bytes_append(&all, "", 1);
	*len = all.len - 1;
	return all.p;
}

static void build_text(size_t want, tf_bytes *out)
{
	size_t clen, start, end;
	char *c = corpus(&clen);
	uint32_t rng = 12345;

	while (out->len < want) {
		rng = rng * 1103515245u + 12345u;
		if (rng >> 16 & 1) {
			const char *l = lines[(rng >> 17) % (sizeof(lines) / sizeof(*lines))];

			tf_bytes_append(out, l, strlen(l));
			continue;
		}
		/* a paragraph: from a line start to the next blank line */
		start = (rng >> 8) % clen;
		while (start > 0 && c[start - 1] != '\n')
			start--;
		end = start;
		while (end < clen && !(c[end] == '\n' && end + 1 < clen && c[end + 1] == '\n'))
			end++;
		tf_bytes_append(out, c + start, end - start);
		tf_bytes_append(out, "\n\n", 2);
	}
	free(c);
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#define MAX_RUNS 64

/* "qwen3/tokenizer.json": the file and its folder. */
static const char *short_name(const char *path)
{
	const char *p = path + strlen(path);
	int slashes = 0;

	while (p > path && !(p[-1] == '/' && ++slashes == 2))
		p--;
	return p;
}

static int bench(const char *path, const tf_bytes *text, int runs)
{
	double t[MAX_RUNS], med, t0;
	tf_tokenizer *tok;
	tf_tokens ids = { 0 };
	int r, rc;

	t0 = seconds();
	if ((rc = tf_tok_load(path, &tok))) {
		fprintf(stderr, "bench_tokenizer: %s\n", tf_diag_msg());
		return rc;
	}
	t0 = seconds() - t0;
	for (r = 0; r < runs; r++) {
		ids.n = 0;
		t[r] = seconds();
		if ((rc = tf_tok_encode(tok, text->p, text->len, 0, &ids))) {
			fprintf(stderr, "bench_tokenizer: %s\n", tf_diag_msg());
			break;
		}
		t[r] = seconds() - t[r];
	}
	if (!rc) {
		qsort(t, (size_t)runs, sizeof(*t), cmp_double);
		med = t[runs / 2];
		printf("| %-40.40s | %7.2f | %9zu | %8.3f | %9.0f | %11.0f | %6.2f |\n",
		       short_name(path), text->len / 1e6, ids.n,
		       t0, med * 1e3, (double)ids.n / med, text->len / med / 1e6);
	}
	tf_tokens_free(&ids);
	tf_tok_free(tok);
	return rc;
}

int main(int argc, char **argv)
{
	static const char *const dflt[] = {
		TF_TESTDATA "/tokenizers/qwen3/tokenizer.json",
		TF_TESTDATA "/tokenizers/deepseek_v3/tokenizer.json",
		TF_SOURCE_DIR "/conf/tokenizers/ling-tiny/tokenizer.json",
	};
	const char *const *files = dflt;
	int i = 1, n_files = 3, runs = 5, rc = 0;
	double mb = 4;
	tf_bytes text = { 0 };

	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "-m"))
			mb = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			runs = atoi(argv[i + 1]);
		else
			mb = 0;         /* unknown option: usage */
	}
	if (mb <= 0 || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "usage: bench_tokenizer [-m MB] [-r RUNS 1..%d] [TOKENIZER.json ...]\n",
			MAX_RUNS);
		return 2;
	}
	if (i < argc) {
		files = (const char *const *)argv + i;
		n_files = argc - i;
	}
	build_text((size_t)(mb * 1e6), &text);
	printf("| %-40s | %7s | %9s | %8s | %9s | %11s | %6s |\n", "tokenizer", "MB", "tokens",
	       "load s", "encode ms", "tokens/s", "MB/s");
	printf("|%.42s|%.9s|%.11s|%.10s|%.11s|%.13s|%.8s|\n", "------------------------------------------",
	       "---------", "-----------", "----------", "-----------", "-------------", "--------");
	for (i = 0; i < n_files; i++)
		rc |= bench(files[i], &text, runs);
	printf("median of %d runs, one thread\n", runs);
	tf_bytes_free(&text);
	return rc ? 1 : 0;
}
