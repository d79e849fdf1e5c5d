/* test_template.c - the checkpoint's own template: where its source is found,
 * the variables it is given, its failures, and the goldens through it
 * (tests/chat/ling3.jinja, the Ling-3 template written from the rules). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "goldens.h"
#include "tf/chat.h"
#include "tf/diag.h"
#include "tf/text.h"

static char dir[] = "/tmp/tf_test_chat_template_XXXXXX";

static void put(const char *name, const char *text, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert(f = fopen(path, "wb"), "%s", path);
	cr_assert_eq(fwrite(text, 1, len, f), len);
	fclose(f);
}

static void put_str(const char *name, const char *text)
{
	put(name, text, strlen(text));
}

static void drop(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	remove(path);
}

static void setup(void)
{
	cr_assert(mkdtemp(dir), "mkdtemp");
}

static void teardown(void)
{
	drop("chat_template.jinja");
	drop("tokenizer_config.json");
	rmdir(dir);
}

TestSuite(template, .init = setup, .fini = teardown);

/* The prompt `name` makes of a request body, or the failure's status. */
static int render(const char *name, const char *json, tf_chat_prompt *p, tf_chat_kind *kind)
{
	tf_chat_template *t;
	tf_val *req = NULL;
	int rc = tf_chat_template_init(name, dir, &t);

	if (rc)
		return rc;
	*kind = tf_chat_template_kind(t);
	if (!(rc = tf_chat_request_parse(json, strlen(json), &req)))
		rc = tf_chat_render(t, req, p);
	tf_val_unref(req);
	tf_chat_template_free(t);
	return rc;
}

static void expect(const char *name, const char *json, tf_chat_kind kind, const char *want)
{
	tf_chat_prompt p = { 0 };
	tf_chat_kind got;

	cr_assert_eq(render(name, json, &p, &got), 0, "%s", tf_diag_msg());
	cr_expect_eq(got, kind);
	cr_expect(p.text.len == strlen(want) && !memcmp(p.text.p, want, p.text.len),
		  "got '%.*s', want '%s'", (int)p.text.len, p.text.p, want);
	tf_chat_prompt_free(&p);
}

static const char hi[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";

Test(template, source_and_variables)
{
	tf_chat_template *t;

	/* no template: auto is the built-in, jinja is refused */
	expect("auto", hi, TF_CHAT_LING3, "<role>SYSTEM</role>detailed thinking on<|role_end|>"
	       "<role>HUMAN</role>hi<|role_end|><role>ASSISTANT</role>\n<think>");
	cr_expect_eq(tf_chat_template_init("jinja", dir, &t), TF_ERR_NOT_FOUND);
	cr_expect(strstr(tf_diag_msg(), "has no chat template"), "%s", tf_diag_msg());

	/* tokenizer_config.json: a string; the special tokens as HF passes them */
	put_str("tokenizer_config.json", "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": "
		"\"</s>\", \"special\": true}, \"chat_template\": \"{{ bos_token }}{% for m in "
		"messages %}{{ m.role }}:{{ m.content }};{% endfor %}{% if add_generation_prompt %}"
		">{% endif %}{{ eos_token }}\"}");
	expect(NULL, hi, TF_CHAT_JINJA, "<s>user:hi;></s>");
	cr_assert_eq(tf_chat_template_init("jinja", dir, &t), 0);
	cr_expect_str_eq(tf_chat_template_stops(t)[0], "</s>");
	cr_expect_null(tf_chat_template_stops(t)[1]);
	tf_chat_template_free(t);
	/* ling3 and raw ignore it */
	expect("raw", hi, TF_CHAT_RAW, "hi");

	/* a list of named templates: "default" */
	put_str("tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", "
		"\"template\": \"T\"}, {\"name\": \"default\", \"template\": \"D{{ x }}\"}]}");
	expect("jinja", "{\"messages\": [{\"role\": \"user\", \"content\": \"\"}], "
	       "\"chat_template_kwargs\": {\"x\": 7}}", TF_CHAT_JINJA, "D7");
	put_str("tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", "
		"\"template\": \"T\"}]}");
	cr_expect_eq(tf_chat_template_init("auto", dir, &t), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "tokenizer_config.json: chat_template: expected"), "%s",
		  tf_diag_msg());

	/* chat_template.jinja comes first; arguments sent as JSON text are objects */
	put_str("chat_template.jinja", "{{ messages[0].tool_calls[0].function.arguments.a + 1 }}"
		"{{ tools is none }}{{ documents is none }}");
	expect("auto", "{\"messages\": [{\"role\": \"assistant\", \"content\": null, "
	       "\"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 5}\"}}]}]}",
	       TF_CHAT_JINJA, "6TrueTrue");
}

Test(template, failures_are_named)
{
	tf_chat_template *t;
	tf_chat_prompt p = { 0 };
	tf_chat_kind kind;

	put_str("chat_template.jinja", "ok\n{% for m in messages %}{{ m.content }\n");
	cr_expect_eq(tf_chat_template_init("auto", dir, &t), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "chat_template.jinja:2:"), "%s", tf_diag_msg());

	put_str("chat_template.jinja", "{{ messages[0].nothing.here }}");
	cr_expect_eq(render("jinja", hi, &p, &kind), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "chat_template.jinja:1:"), "%s", tf_diag_msg());
	tf_chat_prompt_free(&p);

	drop("chat_template.jinja");
	put_str("tokenizer_config.json", "{\"chat_template\": ");
	cr_expect_eq(tf_chat_template_init("auto", dir, &t), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "tokenizer_config.json"), "%s", tf_diag_msg());
	put_str("tokenizer_config.json", "{\"chat_template\": 3}");
	cr_expect_eq(tf_chat_template_init("auto", dir, &t), TF_ERR_FORMAT);
	cr_expect_eq(tf_chat_template_init("chatml", dir, &t), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "unknown chat template 'chatml'"), "%s", tf_diag_msg());
}

/* Every golden through tests/chat/ling3.jinja as the checkpoint's template,
 * with arguments as objects and as JSON strings. */
Test(template, goldens_through_jinja)
{
	tf_chat_template *t;
	char *src;
	size_t len, same;

	cr_assert_eq(tf_text_read(TF_SOURCE_DIR "/tests/chat/ling3.jinja", 1 << 20, &src, &len), 0,
		     "%s", tf_diag_msg());
	put("chat_template.jinja", src, len);
	free(src);
	cr_assert_eq(tf_chat_template_init("auto", dir, &t), 0, "%s", tf_diag_msg());
	cr_assert_eq(tf_chat_template_kind(t), TF_CHAT_JINJA);
	same = goldens_render_all(t, false) + goldens_render_all(t, true);
	cr_expect_eq(same, 240, "%zu of 240 renderings match", same);
	tf_chat_template_free(t);
}
