/* test_stops.c - stop tokens from the template, generation_config.json and
 * the set's limit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "support/tmpfile.h"
#include "tf/chat.h"
#include "tf/diag.h"

#define TINY TF_SOURCE_DIR "/conf/tokenizers/ling-tiny"

Test(stops, template_config_and_limit)
{
	tf_tokenizer *tok;
	tf_chat_template *t;
	tf_stopset s = { .n = 0 };
	char bad[] = "/tmp/tf_test_genconfig_XXXXXX";
	static const char bad_json[] = "{\"eos_token_id\": [1, \"two\"]}";
	int i;

	cr_assert_eq(tf_tok_load(TINY "/tokenizer.json", &tok), 0, "%s", tf_diag_msg());
	cr_assert_eq(tf_chat_template_init("ling3", NULL, &t), 0);
	cr_assert_eq(tf_stop_add_tokens(&s, tf_chat_template_stops(t), tok), 0);
	cr_expect_eq(s.n, 2);
	cr_expect(tf_stop_has(&s, tf_tok_find(tok, "<|role_end|>")));
	cr_expect(tf_stop_has(&s, tf_tok_find(tok, "<|endoftext|>")));
	cr_expect(!tf_stop_has(&s, tf_tok_find(tok, "</think>")));
	cr_assert_eq(tf_stop_add_generation_config(&s, TINY "/generation_config.json"), 0);
	cr_expect_eq(s.n, 2, "the same ids are not added twice");
	cr_expect_eq(tf_stop_add_generation_config(&s, "/nonexistent/generation_config.json"), 0);
	for (i = 0; i < 20; i++)
		tf_stop_add(&s, 1000 + i);
	cr_expect_eq(s.n, TF_STOP_MAX);
	cr_expect_eq(tf_stop_add(&s, 5000), TF_ERR_RANGE);

	tf_test_tmpfile(bad, 0, bad_json, sizeof(bad_json) - 1);
	s.n = 0;
	cr_expect_eq(tf_stop_add_generation_config(&s, bad), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), bad));
	remove(bad);
	tf_chat_template_free(t);
	tf_tok_free(tok);
}
