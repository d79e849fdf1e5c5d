/* test_reply.c - the reply parser: reasoning, answer and tool calls, streamed
 * in pieces of every size and at random cuts, and read back from prompts the
 * template wrote (round trip over the goldens). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "goldens.h"
#include "tf/chat.h"
#include "tf/diag.h"
#include "tf/reply.h"

/* Events joined per part; calls as "name args;" */
typedef struct joined {
	tf_bytes reasoning, answer, calls;
} joined;

static int join(void *ctx, const tf_reply_event *ev)
{
	joined *j = ctx;

	if (ev->part == TF_REPLY_TOOL_CALL) {
		cr_assert(!tf_bytes_append(&j->calls, ev->name, ev->name_len));
		cr_assert(!tf_bytes_append(&j->calls, " ", 1));
		cr_assert(!tf_bytes_append(&j->calls, ev->arguments, ev->args_len));
		cr_assert(!tf_bytes_append(&j->calls, ";", 1));
		return 0;
	}
	cr_assert_gt(ev->len, 0, "no empty pieces");
	cr_assert(!tf_bytes_append(ev->part == TF_REPLY_REASONING ? &j->reasoning : &j->answer,
				   ev->text, ev->len));
	return 0;
}

static void joined_free(joined *j)
{
	tf_bytes_free(&j->reasoning);
	tf_bytes_free(&j->answer);
	tf_bytes_free(&j->calls);
}

static bool is(const tf_bytes *b, const char *s)
{
	return b->len == strlen(s) && (!b->len || !memcmp(b->p, s, b->len));
}

/* Feeds text cut at the given offsets (sorted, ending at len). */
static void feed(const char *text, const size_t *cuts, size_t n_cuts, bool thinking, joined *j)
{
	tf_reply r;
	size_t at = 0, i;

	tf_reply_init(&r, thinking, join, j);
	for (i = 0; i < n_cuts; i++) {
		cr_assert_eq(tf_reply_push(&r, text + at, cuts[i] - at), 0, "%s", tf_diag_msg());
		at = cuts[i];
	}
	cr_assert_eq(tf_reply_finish(&r), 0);
	tf_reply_free(&r);
}

/* Every chunk size from 1 to the whole text gives the same events. */
static void expect_split(bool thinking, const char *text, const char *reasoning,
			 const char *answer, const char *calls)
{
	size_t len = strlen(text), chunk, n, cuts[1024];

	cr_assert_lt(len, 1024);
	for (chunk = 1; chunk <= len; chunk++) {
		joined j = { 0 };

		for (n = 0; n * chunk < len; n++)
			cuts[n] = (n + 1) * chunk < len ? (n + 1) * chunk : len;
		feed(text, cuts, n, thinking, &j);
		cr_expect(is(&j.reasoning, reasoning), "chunk %zu: reasoning '%.*s'", chunk,
			  (int)j.reasoning.len, j.reasoning.p);
		cr_expect(is(&j.answer, answer), "chunk %zu: answer '%.*s'", chunk,
			  (int)j.answer.len, j.answer.p);
		cr_expect(is(&j.calls, calls), "chunk %zu: calls '%.*s'", chunk, (int)j.calls.len,
			  j.calls.p);
		joined_free(&j);
	}
}

Test(reply, parts_in_pieces_of_every_size)
{
	expect_split(true, "Two and two.</think>\n\nFour.", "Two and two.", "\n\nFour.", "");
	expect_split(false, "<think>b</think>c", "b", "c", "");
	expect_split(false, "a<think>b</think>c", "", "a<think>b</think>c", "");
	expect_split(false, "<thin", "", "<thin", "");
	expect_split(true, "not a </thi", "not a </thi", "", "");
	expect_split(false, "no thinking < here\n", "", "no thinking < here\n", "");
	expect_split(true, "plan<tool_call>f\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n"
		     "</tool_call>", "plan", "", "f {\"x\": 1};");
	expect_split(true, "r</think>Sure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
		     "<arg_value>東京</arg_value><arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
		     "</tool_call>\n<tool_call>ping\n\n</tool_call>",
		     "r", "Sure.", "get_weather {\"city\": \"東京\", \"days\": 3};ping {};");
	/* typed values: JSON that parses is kept, anything else is a string */
	expect_split(false, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>{\"k\": [1, 2.5]}"
		     "</arg_value><arg_key>b</arg_key>\n<arg_value>true</arg_value><arg_key>c"
		     "</arg_key>\n<arg_value>hello world</arg_value><arg_key>d</arg_key>\n"
		     "<arg_value>\"q\"</arg_value>\n</tool_call>", "", "",
		     "f {\"a\": {\"k\": [1, 2.5]}, \"b\": true, \"c\": \"hello world\", \"d\": \"q\"};");
	/* JSON cannot write NaN or infinity: such a value stays the text */
	expect_split(false, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1e999</arg_value>"
		     "<arg_key>b</arg_key>\n<arg_value>NaN</arg_value><arg_key>c</arg_key>\n"
		     "<arg_value>[1, {\"k\": -Infinity}]</arg_value><arg_key>d</arg_key>\n"
		     "<arg_value>1e300</arg_value>\n</tool_call>", "", "",
		     "f {\"a\": \"1e999\", \"b\": \"NaN\", \"c\": \"[1, {\\\"k\\\": -Infinity}]\", "
		     "\"d\": 1e+300};");
	/* a block that is not a call, or never closes, stays text */
	expect_split(false, "x<tool_call>\n</tool_call>y", "", "x<tool_call>\n</tool_call>y", "");
	expect_split(false, "x\n<tool_call>f\n<arg_key>a</arg_key>oops</tool_call>", "",
		     "x\n<tool_call>f\n<arg_key>a</arg_key>oops</tool_call>", "");
	expect_split(false, "x\n<tool_call>f\n<arg_key>a", "", "x\n<tool_call>f\n<arg_key>a", "");
	expect_split(false, "x\n<tool_call></tool_call>", "", "x\n<tool_call></tool_call>", "");
	expect_split(false, "x\n<tool_call>f\n</tool_call>\n<tool_call>", "", "x\n<tool_call>",
		     "f {};");
	expect_split(false, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>\x86</arg_value>\n"
		     "</tool_call>", "", "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>\x86"
		     "</arg_value>\n</tool_call>", "");
	/* only the one "\n" before a call is the template's */
	expect_split(false, "a\n\n\n<tool_call>f\n</tool_call>\nb\n", "", "a\n\n\nb\n", "f {};");
}

/* Streaming: each push reports what it made known, before the reply ends;
 * only a tail that may start a marker waits for the next piece. */
Test(reply, events_come_before_the_end)
{
	static const struct { const char *piece, *reasoning, *answer, *calls; } steps[] = {
		{ "Let me", "Let me", "", "" },
		{ " think </th", "Let me think ", "", "" },             /* "</th" waits */
		{ "ink>The answer", "Let me think ", "The answer", "" },
		{ " is 4.\n", "Let me think ", "The answer is 4.", "" },  /* "\n" waits */
		{ "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n",
		  "Let me think ", "The answer is 4.", "" },             /* not closed yet */
		{ "</tool_call>", "Let me think ", "The answer is 4.", "f {\"a\": 1};" },
	};
	joined j = { 0 };
	tf_reply r;

	tf_reply_init(&r, true, join, &j);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		cr_assert_eq(tf_reply_push(&r, steps[i].piece, strlen(steps[i].piece)), 0, "%s",
			     tf_diag_msg());
		cr_expect(is(&j.reasoning, steps[i].reasoning), "step %zu: reasoning '%.*s'", i,
			  (int)j.reasoning.len, j.reasoning.p);
		cr_expect(is(&j.answer, steps[i].answer), "step %zu: answer '%.*s'", i,
			  (int)j.answer.len, j.answer.p);
		cr_expect(is(&j.calls, steps[i].calls), "step %zu: calls '%.*s'", i,
			  (int)j.calls.len, j.calls.p);
	}
	cr_assert_eq(tf_reply_finish(&r), 0);
	cr_expect(is(&j.answer, "The answer is 4."), "finish: answer '%.*s'", (int)j.answer.len,
		  j.answer.p);
	tf_reply_free(&r);
	joined_free(&j);
}

/* The same text cut at random points gives the same events. */
Test(reply, random_cuts)
{
	static const char text[] =
		"Let me think.\nThe user wants <b>weather</b> < 5 days.</think>\n\nI'll check."
		"\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>"
		"<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>"
		"search\n<arg_key>q</arg_key>\n<arg_value>KDA </tool_call attention</arg_value>\n"
		"</tool_call>\nDone </think> here.";
	size_t len = strlen(text), cuts[64], n, i, k;
	joined whole = { 0 };

	cuts[0] = len;
	feed(text, cuts, 1, true, &whole);
	cr_expect(is(&whole.reasoning, "Let me think.\nThe user wants <b>weather</b> < 5 days."));
	cr_expect(is(&whole.answer, "\n\nI'll check.\nDone </think> here."), "%.*s",
		  (int)whole.answer.len, whole.answer.p);
	cr_expect(is(&whole.calls, "get_weather {\"city\": \"Paris\", \"days\": 3};"
		     "search {\"q\": \"KDA </tool_call attention\"};"), "%.*s", (int)whole.calls.len,
		  whole.calls.p);
	srand(19);
	for (k = 0; k < 500; k++) {
		joined j = { 0 };

		n = 1 + (size_t)rand() % 40;
		for (i = 0; i + 1 < n; i++)
			cuts[i] = (size_t)rand() % (len + 1);
		cuts[n - 1] = len;
		for (i = 1; i < n; i++)         /* sort: insertion */
			for (size_t m = i; m > 0 && cuts[m - 1] > cuts[m]; m--) {
				size_t t = cuts[m];
				cuts[m] = cuts[m - 1];
				cuts[m - 1] = t;
			}
		feed(text, cuts, n, true, &j);
		cr_assert(j.reasoning.len == whole.reasoning.len &&
			  !memcmp(j.reasoning.p, whole.reasoning.p, j.reasoning.len), "run %zu", k);
		cr_assert(j.answer.len == whole.answer.len &&
			  !memcmp(j.answer.p, whole.answer.p, j.answer.len), "run %zu", k);
		cr_assert(j.calls.len == whole.calls.len &&
			  !memcmp(j.calls.p, whole.calls.p, j.calls.len), "run %zu", k);
		joined_free(&j);
	}
	joined_free(&whole);
}

Test(reply, whole_reply_as_a_message)
{
	static const char text[] = "hmm</think>Sure.\n<tool_call>f\n<arg_key>a</arg_key>\n"
				   "<arg_value>1</arg_value>\n</tool_call>";
	tf_bytes json = { 0 };
	tf_val *m;
	static const char want[] = "{\"role\": \"assistant\", \"content\": \"Sure.\", "
		"\"reasoning_content\": \"hmm\", \"tool_calls\": [{\"type\": \"function\", "
		"\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}}]}";

	cr_assert_eq(tf_reply_parse(text, strlen(text), true, &m), 0);
	cr_assert_eq(tf_val_dump_json(m, &json), 0);
	cr_expect(json.len == strlen(want) && !memcmp(json.p, want, json.len), "%.*s",
		  (int)json.len, json.p);
	tf_bytes_free(&json);
	tf_val_unref(m);
	cr_assert_eq(tf_reply_parse("plain", 5, false, &m), 0);
	cr_assert_eq(tf_val_dump_json(m, &json), 0);
	cr_expect(!strncmp(json.p, "{\"role\": \"assistant\", \"content\": \"plain\"}", json.len));
	tf_bytes_free(&json);
	tf_val_unref(m);
}

/* A request for msgs[0..n) (plus extra, when given) with the golden's options. */
static tf_val *request_for(const tf_val *body, size_t n, tf_val *extra, bool gen_prompt)
{
	const tf_val *msgs = tf_val_dict_get(body, "messages");
	tf_val *b = tf_val_dict(), *list = tf_val_list(), *req;
	size_t i, klen;

	for (i = 0; i < tf_val_len(body); i++) {
		const char *k = tf_val_as_str(tf_val_key_at(body, i), &klen);
		cr_assert_eq(tf_val_dict_set(b, k, klen, tf_val_ref(tf_val_at(body, i))), 0);
	}
	for (i = 0; i < n; i++)
		cr_assert_eq(tf_val_list_push(list, tf_val_ref(tf_val_at(msgs, i))), 0);
	if (extra)
		cr_assert_eq(tf_val_list_push(list, tf_val_ref(extra)), 0);
	cr_assert_eq(tf_val_dict_set(b, "messages", 8, list), 0);
	cr_assert_eq(tf_val_dict_set(b, "add_generation_prompt", 21, tf_val_bool(gen_prompt)), 0);
	cr_assert_eq(tf_chat_request_check(b, &req), 0, "%s", tf_diag_msg());
	tf_val_unref(b);
	return req;
}

static void render(const tf_chat_template *t, tf_val *req, tf_chat_prompt *p)
{
	cr_assert_eq(tf_chat_render(t, req, p), 0, "%s", tf_diag_msg());
	tf_val_unref(req);
}

/*
 * Round trip: each assistant message of each golden is rendered, the part
 * the model generates after "<role>ASSISTANT</role>\n<think>" is parsed
 * back, and the parsed message, put in its place, renders the same bytes.
 * What the template normalises is normalised here too: newlines around the
 * reasoning, a <think> block split from the content, and argument strings
 * that parse as JSON (none in the goldens).
 */
Test(reply, round_trip_over_the_goldens)
{
	static const char open[] = "<role>ASSISTANT</role>\n<think>", end[] = "<|role_end|>";
	tf_val *cases = goldens_load();
	tf_chat_template *t;
	size_t i, k, turns = 0, calls = 0;

	cr_assert_eq(tf_chat_template_init("ling3", NULL, &t), 0);
	for (i = 0; i < tf_val_len(cases); i++) {
		const tf_val *body = tf_val_dict_get(tf_val_at(cases, i), "request");
		const tf_val *msgs = tf_val_dict_get(body, "messages");

		for (k = 0; k < tf_val_len(msgs); k++) {
			const tf_val *m = tf_val_at(msgs, k);
			tf_chat_prompt before = { 0 }, want = { 0 }, got = { 0 };
			tf_val *parsed;
			size_t from, n;

			if (strcmp(tf_val_as_str(tf_val_dict_get(m, "role"), NULL), "assistant"))
				continue;
			render(t, request_for(body, k, NULL, false), &before);
			render(t, request_for(body, k + 1, NULL, false), &want);
			from = before.text.len + strlen(open);
			cr_assert(want.text.len >= from + strlen(end) &&
				  !memcmp(want.text.p + before.text.len, open, strlen(open)));
			n = want.text.len - from - strlen(end);
			cr_assert_eq(tf_reply_parse(want.text.p + from, n, true, &parsed), 0);
			render(t, request_for(body, k, parsed, false), &got);
			cr_expect(got.text.len == want.text.len &&
				  !memcmp(got.text.p, want.text.p, got.text.len),
				  "%s message %zu: reply '%.*s' read back renders\n%.*s",
				  tf_val_as_str(tf_val_dict_get(tf_val_at(cases, i), "case"), NULL), k,
				  (int)n, want.text.p + from, (int)got.text.len, got.text.p);
			turns++;
			calls += tf_val_len(tf_val_dict_get(parsed, "tool_calls"));
			tf_val_unref(parsed);
			tf_chat_prompt_free(&before);
			tf_chat_prompt_free(&want);
			tf_chat_prompt_free(&got);
		}
	}
	cr_expect_gt(turns, 200);
	cr_expect_gt(calls, 20);
	tf_chat_template_free(t);
	tf_val_unref(cases);
}

/* Field by field, with the normalisation spelled out. */
Test(reply, round_trip_fields)
{
	static const char body[] =
		"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
		"\"content\": \"\\n\\nanswer\\n\", \"reasoning_content\": \"\\nsteps\\n\", "
		"\"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
		"\"{\\\"n\\\": 2, \\\"s\\\": \\\"two words\\\", \\\"o\\\": {\\\"x\\\": null}}\"}}]}], "
		"\"add_generation_prompt\": false}";
	static const char want[] = "{\"role\": \"assistant\", \"content\": \"answer\\n\", "
		"\"reasoning_content\": \"steps\", \"tool_calls\": [{\"type\": \"function\", "
		"\"function\": {\"name\": \"f\", \"arguments\": "
		"\"{\\\"n\\\": 2, \\\"s\\\": \\\"two words\\\", \\\"o\\\": {\\\"x\\\": null}}\"}}]}";
	static const char open[] = "<role>ASSISTANT</role>\n<think>", end[] = "<|role_end|>";
	tf_chat_template *t;
	tf_chat_prompt p = { 0 };
	tf_bytes json = { 0 };
	tf_val *req, *m;
	const char *at;

	cr_assert_eq(tf_chat_template_init("ling3", NULL, &t), 0);
	cr_assert_eq(tf_chat_request_parse(body, strlen(body), &req), 0, "%s", tf_diag_msg());
	render(t, req, &p);
	cr_assert_eq(tf_bytes_append(&p.text, "", 1), 0);       /* a C string, for strstr */
	cr_assert(at = strstr(p.text.p, open));
	at += strlen(open);
	cr_assert_eq(tf_reply_parse(at, strlen(at) - strlen(end), true, &m), 0);
	cr_assert_eq(tf_val_dump_json(m, &json), 0);
	cr_expect(json.len == strlen(want) && !memcmp(json.p, want, json.len), "%.*s",
		  (int)json.len, json.p);
	tf_bytes_free(&json);
	tf_val_unref(m);
	tf_chat_prompt_free(&p);
	tf_chat_template_free(t);
}
