/* goldens.c - see goldens.h. */
#include "goldens.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/chat.h"
#include "tf/diag.h"

tf_val *goldens_load(void)
{
	FILE *f = fopen(TF_GOLDENS, "r");
	tf_val *list = tf_val_list(), *v;
	char *line = NULL;
	size_t cap = 0, n = 0;
	ssize_t len;

	cr_assert(f, "cannot open %s", TF_GOLDENS);
	while ((len = getline(&line, &cap, f)) > 0) {
		n++;
		cr_assert_eq(tf_val_parse_json(line, (size_t)len, &v), 0, "%s:%zu: %s", TF_GOLDENS,
			     n, tf_diag_msg());
		cr_assert_eq(tf_val_list_push(list, v), 0);
	}
	free(line);
	fclose(f);
	cr_assert_gt(tf_val_len(list), 0, "%s: no cases", TF_GOLDENS);
	return list;
}

void goldens_stringify_args(tf_val *request)
{
	const tf_val *msgs = tf_val_dict_get(request, "messages");

	for (size_t i = 0; i < tf_val_len(msgs); i++) {
		const tf_val *calls = tf_val_dict_get(tf_val_at(msgs, i), "tool_calls");

		for (size_t j = 0; j < tf_val_len(calls); j++) {
			tf_val *fn = tf_val_dict_get(tf_val_at(calls, j), "function");
			tf_bytes json = { 0 };

			cr_assert_eq(tf_val_dump_json(tf_val_dict_get(fn, "arguments"), &json), 0);
			cr_assert_eq(tf_val_dict_set(fn, "arguments", 9, tf_val_str(json.p, json.len)), 0);
			tf_bytes_free(&json);
		}
	}
}

size_t goldens_render_all(const tf_chat_template *t, bool stringify)
{
	tf_val *cases = goldens_load();
	size_t i, same = 0;

	cr_expect_eq(tf_val_len(cases), 120);
	for (i = 0; i < tf_val_len(cases); i++) {
		const tf_val *c = tf_val_at(cases, i);
		tf_val *body = tf_val_dict_get(c, "request"), *req;
		tf_chat_prompt p = { 0 };
		size_t n;
		const char *want = tf_val_as_str(tf_val_dict_get(c, "prompt"), &n);
		const char *name = tf_val_as_str(tf_val_dict_get(c, "case"), NULL);

		if (stringify)
			goldens_stringify_args(body);
		cr_assert_eq(tf_chat_request_check(body, &req), 0, "%s: %s", name, tf_diag_msg());
		cr_assert_eq(tf_chat_render(t, req, &p), 0, "%s: %s", name, tf_diag_msg());
		if (p.text.len == n && !memcmp(p.text.p, want, n))
			same++;
		else
			cr_log_error("%s: got\n%.*s\nwant\n%s", name, (int)p.text.len, p.text.p, want);
		tf_chat_prompt_free(&p);
		tf_val_unref(req);
	}
	tf_val_unref(cases);
	return same;
}
