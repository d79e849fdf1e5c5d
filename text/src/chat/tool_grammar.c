/*
 * tool_grammar.c - the GBNF of a reply that is Ling-3 tool calls, as the
 * template writes them and tf/reply.h reads them back:
 *
 *     <tool_call>NAME
 *     <arg_key>K</arg_key>
 *     <arg_value>V</arg_value><arg_key>...</arg_value>
 *     </tool_call>
 *
 * with "\n" between calls.  Each value is JSON valid under its parameter's
 * schema, a string quoted too: the reply parser keeps a value that parses
 * as JSON typed, so a bare 42 meant as a string would come back a number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/chat.h"
#include "tf/diag.h"
#include "tf/grammar.h"

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "tool grammar: out of memory");
}

/* s as a GBNF literal. */
static int literal(tf_bytes *b, const char *s)
{
	int rc = tf_bytes_append(b, "\"", 1);

	for (; !rc && *s; s++) {
		if (*s == '"' || *s == '\\')
			rc = tf_bytes_append(b, "\\", 1);
		else if (*s == '\n') {
			rc = tf_bytes_append(b, "\\n", 2);
			continue;
		}
		rc = rc ? rc : tf_bytes_append(b, s, 1);
	}
	return rc || tf_bytes_append(b, "\"", 1) ? nomem() : TF_OK;
}

static int put(tf_bytes *b, const char *s)
{
	return tf_bytes_append(b, s, strlen(s)) ? nomem() : TF_OK;
}

/* Tool t's rule "tool-T ::= NAME \n args", its values' rules after. */
static int tool_rules(tf_bytes *b, const tf_val *fn, size_t t)
{
	const tf_val *par = tf_val_dict_get(fn, "parameters");
	const tf_val *props = tf_val_dict_get(par, "properties");
	const tf_val *req = tf_val_dict_get(par, "required");
	const char *name = tf_val_as_str(tf_val_dict_get(fn, "name"), NULL);
	tf_bytes values = { 0 };
	char head[64];
	int rc;

	if (!name || !*name)
		return tf_diag_set(TF_ERR_INVALID, "tools[%zu]: a function needs a name", t);
	if (props && tf_val_kind_of(props) != TF_VAL_DICT)
		return tf_diag_set(TF_ERR_INVALID, "tools[%zu].function.parameters.properties: "
				   "not an object", t);
	snprintf(head, sizeof(head), "tool-%zu ::= ", t);
	if ((rc = put(b, head)) || (rc = literal(b, name)) || (rc = put(b, " \"\\n\"")))
		return rc;
	for (size_t k = 0; !rc && k < tf_val_len(props); k++) {
		const char *key = tf_val_as_str(tf_val_key_at(props, k), NULL);
		bool required = false;
		char pre[48], *gbnf = NULL, *rules = NULL;
		for (size_t i = 0; i < tf_val_len(req); i++) {
			const char *r = tf_val_as_str(tf_val_at(req, i), NULL);
			required |= r && !strcmp(r, key);
		}
		snprintf(pre, sizeof(pre), "t%zu-a%zu-", t, k);
		if ((rc = tf_grammar_schema_gbnf(tf_val_at(props, k), &gbnf)) != TF_OK) {
			rc = tf_diag_prefix(rc, "tools[%zu] parameter '%s'", t, key);
			break;
		}
		rc = tf_grammar_gbnf_prefix(gbnf, pre, &rules);
		free(gbnf);
		if (!rc && !(rc = put(b, required ? " \"<arg_key>\" " : " ( \"<arg_key>\" ")) &&
		    !(rc = literal(b, key)) &&
		    !(rc = put(b, " \"</arg_key>\\n<arg_value>\" ")) && !(rc = put(b, pre)) &&
		    !(rc = put(b, required ? "root \"</arg_value>\"" : "root \"</arg_value>\" )?")) &&
		    !(rc = put(&values, rules)))
			rc = put(&values, "\n");
		free(rules);
	}
	if (!rc)
		rc = put(b, "\n");
	if (!rc && values.len && tf_bytes_append(b, values.p, values.len))
		rc = nomem();
	tf_bytes_free(&values);
	return rc;
}

int tf_chat_tool_gbnf(const tf_val *tools, const char *only, bool several, char **out)
{
	tf_bytes b = { 0 };
	size_t n = 0;
	int rc = put(&b, several ? "root ::= call ( \"\\n\" call )*\n" : "root ::= call\n");

	rc = rc ? rc : put(&b, "call ::= \"<tool_call>\" (");
	for (size_t t = 0; !rc && t < tf_val_len(tools); t++) {
		const tf_val *fn = tf_val_dict_get(tf_val_at(tools, t), "function");
		const char *name = tf_val_as_str(tf_val_dict_get(fn, "name"), NULL);
		char ref[32];
		if (only && (!name || strcmp(name, only)))
			continue;
		snprintf(ref, sizeof(ref), "%s tool-%zu", n++ ? " |" : "", t);
		rc = put(&b, ref);
	}
	if (!rc && !n)
		rc = tf_diag_set(TF_ERR_INVALID, only ? "tool_choice names '%s', which is not "
				 "among the tools" : "no tools%s", only ? only : "");
	rc = rc ? rc : put(&b, " ) \"\\n</tool_call>\"\n");
	for (size_t t = 0; !rc && t < tf_val_len(tools); t++) {
		const tf_val *fn = tf_val_dict_get(tf_val_at(tools, t), "function");
		const char *name = tf_val_as_str(tf_val_dict_get(fn, "name"), NULL);
		if (!only || (name && !strcmp(name, only)))
			rc = tool_rules(&b, fn, t);
	}
	if (!rc && tf_bytes_append(&b, "", 1))
		rc = nomem();
	if (rc) {
		tf_bytes_free(&b);
		return rc;
	}
	*out = b.p;
	return TF_OK;
}
