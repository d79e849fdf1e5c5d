/* test_tool_grammar.c - forced tool calls' grammar (tf_chat_tool_gbnf) against
 * the Ling-3 calls the template writes and tf_reply_parse reads back, and
 * tf_grammar_gbnf_prefix, which embeds each parameter's rules. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/chat.h"
#include "tf/diag.h"
#include "tf/grammar.h"
#include "tf/reply.h"

static const char tools_json[] =
	"[{\"type\": \"function\", \"function\": {\"name\": \"get_verse\", \"parameters\": "
	"{\"type\": \"object\", \"properties\": {\"book\": {\"type\": \"string\"}, "
	"\"chapter\": {\"type\": \"integer\", \"minimum\": 1}, \"verse\": {\"type\": \"integer\"}},"
	" \"required\": [\"book\", \"chapter\"]}}},"
	" {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

static tf_grammar *compile(const char *only, bool several)
{
	tf_val *tools;
	char *gbnf;
	tf_grammar *g;

	cr_assert_eq(tf_val_parse_json(tools_json, strlen(tools_json), &tools), TF_OK);
	cr_assert_eq(tf_chat_tool_gbnf(tools, only, several, &gbnf), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_grammar_compile(gbnf, strlen(gbnf), NULL, 0, NULL, 0, &g), TF_OK,
		     "%s\n%s", tf_diag_msg(), gbnf);
	free(gbnf);
	tf_val_unref(tools);
	return g;
}

/* Whether text is a whole document of g. */
static bool whole(tf_grammar *g, const char *text)
{
	tf_grammar_state *st;
	cr_assert_eq(tf_grammar_state_new(g, &st), TF_OK);
	bool ok = tf_grammar_accept_bytes(st, text, strlen(text)) == TF_OK &&
		  tf_grammar_complete(st);
	tf_grammar_state_free(st);
	return ok;
}

static const char one[] =
	"<tool_call>get_verse\n<arg_key>book</arg_key>\n<arg_value>\"Job\"</arg_value>"
	"<arg_key>chapter</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";

Test(tool_grammar, takes_the_calls_the_template_writes)
{
	tf_grammar *g = compile(NULL, true), *only = compile("now", false);
	char two[512];

	snprintf(two, sizeof(two), "%s\n<tool_call>now\n\n</tool_call>", one);
	cr_expect(whole(g, one));
	cr_expect(whole(g, two));
	cr_expect(whole(g, "<tool_call>get_verse\n<arg_key>book</arg_key>\n<arg_value>\"a\""
		       "</arg_value><arg_key>chapter</arg_key>\n<arg_value>1</arg_value>"
		       "<arg_key>verse</arg_key>\n<arg_value>-2</arg_value>\n</tool_call>"));
	cr_expect(whole(only, "<tool_call>now\n\n</tool_call>"));
	cr_expect(!whole(only, one), "a function not named");
	cr_expect(!whole(only, "<tool_call>now\n\n</tool_call>\n<tool_call>now\n\n</tool_call>"),
		  "two calls where one is asked");
	/* A required argument missing, a wrong type, a bound broken, a raw
	 * string (it would read back as text, not JSON), an unknown tool. */
	cr_expect(!whole(g, "<tool_call>get_verse\n<arg_key>book</arg_key>\n<arg_value>\"Job\""
			 "</arg_value>\n</tool_call>"));
	cr_expect(!whole(g, "<tool_call>get_verse\n<arg_key>book</arg_key>\n<arg_value>3"
			 "</arg_value><arg_key>chapter</arg_key>\n<arg_value>3</arg_value>\n"
			 "</tool_call>"));
	cr_expect(!whole(g, "<tool_call>get_verse\n<arg_key>book</arg_key>\n<arg_value>\"J\""
			 "</arg_value><arg_key>chapter</arg_key>\n<arg_value>0</arg_value>\n"
			 "</tool_call>"));
	cr_expect(!whole(g, "<tool_call>get_verse\n<arg_key>book</arg_key>\n<arg_value>Job"
			 "</arg_value><arg_key>chapter</arg_key>\n<arg_value>3</arg_value>\n"
			 "</tool_call>"));
	cr_expect(!whole(g, "<tool_call>other\n\n</tool_call>"));
	tf_grammar_free(g);
	tf_grammar_free(only);
}

Test(tool_grammar, its_calls_read_back_typed)
{
	tf_val *msg;

	cr_assert_eq(tf_reply_parse(one, strlen(one), false, &msg), TF_OK, "%s", tf_diag_msg());
	tf_val *call = tf_val_at(tf_val_dict_get(msg, "tool_calls"), 0);
	const char *args = tf_val_as_str(tf_val_dict_get(tf_val_dict_get(call, "function"),
							 "arguments"), NULL);
	cr_assert(args);
	cr_expect_str_eq(args, "{\"book\": \"Job\", \"chapter\": 3}");
	tf_val_unref(msg);
}

Test(tool_grammar, refuses_what_it_cannot_follow)
{
	tf_val *tools;
	char *gbnf = NULL;
	const char bad[] = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\":"
			   " {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"object\","
			   " \"patternProperties\": {}}}}}}]";

	cr_assert_eq(tf_val_parse_json(bad, strlen(bad), &tools), TF_OK);
	cr_expect_eq(tf_chat_tool_gbnf(tools, NULL, true, &gbnf), TF_ERR_UNSUPPORTED);
	cr_expect(strstr(tf_diag_msg(), "patternProperties") && strstr(tf_diag_msg(), "'a'"),
		  "%s", tf_diag_msg());
	cr_expect_eq(tf_chat_tool_gbnf(tools, "g", true, &gbnf), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "'g'"), "%s", tf_diag_msg());
	tf_val_unref(tools);
}

Test(tool_grammar, prefix_renames_rules_alone)
{
	const char src[] = "root ::= item (\",\" item){0,3} # item list\n"
			   "item ::= \"root item\" | [a-z_] item-2\nitem-2 ::= \"\\\"x\"?\n";
	char *out;

	cr_assert_eq(tf_grammar_gbnf_prefix(src, "p-", &out), TF_OK);
	cr_expect_str_eq(out, "p-root ::= p-item (\",\" p-item){0,3} # item list\n"
			      "p-item ::= \"root item\" | [a-z_] p-item-2\n"
			      "p-item-2 ::= \"\\\"x\"?\n");
	free(out);
}
