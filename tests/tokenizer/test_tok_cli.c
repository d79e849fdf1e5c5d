/* test_tok_cli.c - `tfrun --tokenizer`: output format, exit codes, errors. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "support/tmpfile.h"
#include "tok_fixture.h"
#include "tokenize_cmd.h"

#define QWEN TOK_DATA "/qwen3/tokenizer.json"
#define TINY TF_SOURCE_DIR "/conf/tokenizers/ling-tiny/tokenizer.json"  /* loads fast */

static int run(char **argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	return tf_cli_tokenizer(argc, argv);
}

#define RUN(...) run((char *[]){ "tfrun", __VA_ARGS__, NULL })

static void redirect(void)
{
	cr_redirect_stdout();
	cr_redirect_stderr();
}

TestSuite(tok_cli, .init = redirect, .timeout = 30);

Test(tok_cli, encode_prints_a_json_array)
{
	cr_assert_eq(RUN("--tokenizer", QWEN, "--encode", "Hello world"), 0);
	fflush(stdout);
	cr_assert_stdout_eq_str("[9707,1879]\n");
}

Test(tok_cli, encode_special_text_and_folder)
{
	/* a folder holding tokenizer.json; special tokens in text are matched */
	cr_assert_eq(RUN("--tokenizer", TOK_DATA "/qwen3", "--add-special", "--encode",
			 "<|im_start|>"), 0);
	fflush(stdout);
	cr_assert_stdout_eq_str("[151644]\n");
}

Test(tok_cli, decode_prints_the_text)
{
	cr_assert_eq(RUN("--tokenizer", QWEN, "--decode", "[9707, 1879,151644]"), 0);
	fflush(stdout);
	cr_assert_stdout_eq_str("Hello world<|im_start|>");
}

Test(tok_cli, decode_skip_special)
{
	cr_assert_eq(RUN("--tokenizer", QWEN, "--skip-special", "--decode", "151644,9707"), 0);
	fflush(stdout);
	cr_assert_stdout_eq_str("Hello");
}

Test(tok_cli, encode_file)
{
	char path[] = "/tmp/tf_test_prompt_XXXXXX";

	tf_test_tmpfile(path, 0, "Hello world", 11);
	cr_assert_eq(RUN("--tokenizer", QWEN, "--encode-file", path), 0);
	remove(path);
	fflush(stdout);
	cr_assert_stdout_eq_str("[9707,1879]\n");
}

Test(tok_cli, errors_exit_non_zero)
{
	char path[] = "/tmp/tf_test_badutf8_XXXXXX";

	tf_test_tmpfile(path, 0, "ok \xff no", 7);
	cr_expect_eq(RUN("--tokenizer", TINY, "--encode-file", path), 1);
	remove(path);
	cr_expect_eq(RUN("--tokenizer", TINY, "--encode-file", "/nonexistent/prompt.txt"), 1);
	cr_expect_eq(RUN("--tokenizer", "/nonexistent/tokenizer.json", "--encode", "x"), 1);
	cr_expect_eq(RUN("--tokenizer", TINY, "--decode", "1,x"), 1);
	cr_expect_eq(RUN("--tokenizer", TINY, "--decode", "2048"), 1);     /* one past the vocabulary */
	cr_expect_eq(RUN("--tokenizer", TINY), 2);
	cr_expect_eq(RUN("--tokenizer", TINY, "--encode", "a", "--decode", "1"), 2);
	cr_expect_eq(RUN("--tokenizer", TINY, "--frobnicate"), 2);
	cr_expect_eq(RUN("--tokenizer", TINY, "--encode"), 2);
	fflush(stderr);
	cr_expect_stderr_neq_str("");
}
