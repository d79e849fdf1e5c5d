/* tokenize_cmd.c - tfrun --tokenizer: encode and decode from the command line. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tf/diag.h"
#include "tf/text.h"
#include "tf/tokenizer.h"
#include "tokenize_cmd.h"

static const char usage[] =
"usage: tfrun --tokenizer FILE (--encode TEXT | --encode-file PATH | --decode IDS)\n"
"             [--add-special] [--skip-special]\n"
"  FILE             a tokenizer.json, or a folder holding one\n"
"  --encode TEXT    print the ids of TEXT as a JSON array\n"
"  --encode-file P  the same for the contents of file P\n"
"  --decode IDS     print the text of IDS (\"1,2,3\" or \"[1, 2, 3]\")\n"
"  --add-special    add the tokenizer's BOS/EOS template when encoding\n"
"  --skip-special   drop special tokens when decoding\n";

typedef struct tok_args {
	const char *file, *encode, *encode_file, *decode;
	unsigned enc_flags, dec_flags;
} tok_args;

static int parse_args(int argc, char **argv, tok_args *a)
{
	int i, n_actions = 0;

	/* Help wins wherever it stands: `tfrun --tokenizer --help` too. */
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return -1;
	for (i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char **val = NULL;

		if (!strcmp(o, "--tokenizer")) {
			val = &a->file;
		} else if (!strcmp(o, "--encode")) {
			val = &a->encode;
		} else if (!strcmp(o, "--encode-file")) {
			val = &a->encode_file;
		} else if (!strcmp(o, "--decode")) {
			val = &a->decode;
		} else if (!strcmp(o, "--add-special")) {
			a->enc_flags |= TF_TOK_ADD_SPECIAL;
		} else if (!strcmp(o, "--skip-special")) {
			a->dec_flags |= TF_TOK_SKIP_SPECIAL;
		} else {
			fprintf(stderr, "tfrun: --tokenizer: unknown option %s\n", o);
			return 2;
		}
		if (!val)
			continue;
		if (i + 1 >= argc) {
			fprintf(stderr, "tfrun: %s needs a value\n", o);
			return 2;
		}
		*val = argv[++i];
		n_actions += val != &a->file;
	}
	if (!a->file || n_actions != 1) {
		fprintf(stderr, "tfrun: --tokenizer needs a file and one of --encode, "
			"--encode-file, --decode\n%s", usage);
		return 2;
	}
	return 0;
}

/* `what` names the input in errors: "--encode" or the file. */
static int do_encode(const tf_tokenizer *tok, const char *text, size_t len, const char *what,
		     const tok_args *a)
{
	tf_tokens ids = { 0 };
	size_t i;
	int rc = tf_tok_encode(tok, text, len, a->enc_flags, &ids);

	if (rc) {
		tf_diag_prefix(rc, "%s", what);
	} else {
		putchar('[');
		for (i = 0; i < ids.n; i++)
			printf(i ? ",%d" : "%d", ids.ids[i]);
		puts("]");
	}
	tf_tokens_free(&ids);
	return rc;
}

/* "1,2,3", "[1, 2, 3]" or space-separated. */
static int parse_ids(const char *s, tf_tokens *out)
{
	const char *p = s;
	char *end;
	long v;
	int rc;

	for (;;) {
		while (*p == ' ' || *p == ',' || *p == '[' || *p == ']' || *p == '\n' || *p == '\t')
			p++;
		if (!*p)
			return TF_OK;
		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno || v < 0 || v > INT32_MAX)
			return tf_diag_set(TF_ERR_INVALID, "--decode: bad token id at \"%.16s\"", p);
		if ((rc = tf_tokens_push(out, (int32_t)v)))
			return rc;
		p = end;
	}
}

static int do_decode(const tf_tokenizer *tok, const char *list, const tok_args *a)
{
	tf_tokens ids = { 0 };
	tf_bytes text = { 0 };
	int rc = parse_ids(list, &ids);

	if (!rc)
		rc = tf_tok_decode(tok, ids.ids, ids.n, a->dec_flags, &text);
	if (!rc) {
		fwrite(text.p, 1, text.len, stdout);
		if (isatty(STDOUT_FILENO))
			putchar('\n');
	}
	tf_tokens_free(&ids);
	tf_bytes_free(&text);
	return rc;
}

static int load(const char *file, tf_tokenizer **tok)
{
	char path[PATH_MAX];
	struct stat st;

	if (stat(file, &st) == 0 && S_ISDIR(st.st_mode)) {
		if ((size_t)snprintf(path, sizeof(path), "%s/tokenizer.json", file) >= sizeof(path))
			return tf_diag_set(TF_ERR_INVALID, "%s: path too long", file);
		file = path;
	}
	return tf_tok_load(file, tok);
}

int tf_cli_tokenizer(int argc, char **argv)
{
	tok_args a = { 0 };
	tf_tokenizer *tok = NULL;
	tf_bytes text = { 0 };
	int rc = parse_args(argc, argv, &a);

	if (rc < 0) {
		fputs(usage, stdout);
		return 0;
	}
	if (rc)
		return rc;
	rc = load(a.file, &tok);
	if (!rc && a.encode)
		rc = do_encode(tok, a.encode, strlen(a.encode), "--encode", &a);
	else if (!rc && a.encode_file && !(rc = tf_text_read_stream(a.encode_file, &text)))
		rc = do_encode(tok, text.p ? text.p : "", text.len, a.encode_file, &a);
	else if (!rc && a.decode)
		rc = do_decode(tok, a.decode, &a);
	if (rc)
		fprintf(stderr, "tfrun: %s\n", tf_diag_msg());
	tf_bytes_free(&text);
	tf_tok_free(tok);
	return rc ? 1 : 0;
}
