/* render_cmd.c - see render_cmd.h. */
#include "render_cmd.h"

#include <stdio.h>
#include <stdlib.h>

#include "tf/chat.h"
#include "tf/conf.h"
#include "tf/diag.h"
#include "tf/text.h"
#include "tf/tokenizer.h"
#include "util.h"

static int load_tokenizer(const tf_conf *conf, tf_tokenizer **tok)
{
	char path[4200];
	int rc = tf_cli_model_file(conf, "tokenizer.json", path, sizeof(path));

	return rc ? rc : tf_tok_load(path, tok);
}

static int print_json(const tf_chat_prompt *p, const tf_tokens *ids)
{
	tf_bytes out = { 0 };
	tf_val *text = tf_val_str(p->text.p ? p->text.p : "", p->text.len);
	int rc = text && !tf_val_dump_json(text, &out) ? TF_OK :
		 tf_diag_set(TF_ERR_NOMEM, "out of memory");

	if (!rc) {
		printf("{\"prompt\": %.*s, \"tokens\": [", (int)out.len, out.p);
		for (size_t i = 0; i < ids->n; i++)
			printf(i ? ", %d" : "%d", ids->ids[i]);
		printf("]}\n");
	}
	tf_bytes_free(&out);
	tf_val_unref(text);
	return rc;
}

int tf_cli_render_chat(const tf_options *o)
{
	tf_conf *conf = NULL;
	tf_chat_template *t = NULL;
	tf_tokenizer *tok = NULL;
	tf_bytes body = { 0 };
	tf_val *req = NULL;
	tf_chat_prompt p = { 0 };
	tf_tokens ids = { 0 };
	const char *what = o->ini;
	int rc;

	if (!o->ini)
		rc = tf_chat_template_init(NULL, NULL, &t);
	/* The INI with the keys its plugins declare ([toy] mode): the plugins
	 * are scanned for them, never probed or started. */
	else if (!(rc = tf_conf_open_checked(o->ini, (const char *const *)o->overrides,
					     o->n_overrides, &conf)))
		rc = tf_chat_template_from_conf(conf, &t);
	if (!rc && o->json)
		rc = o->ini ? load_tokenizer(conf, &tok) :
			tf_diag_set(TF_ERR_INVALID, "--render-chat --json needs MODEL.ini (the "
				    "token ids come from its tokenizer)");
	if (rc)
		goto cleanup;
	what = NULL;                    /* the read names the file itself */
	if ((rc = tf_text_read_stream(o->render_request, &body)))
		goto cleanup;
	what = o->render_request;
	if ((rc = tf_chat_request_parse(body.p ? body.p : "", body.len, &req)) ||
	    (rc = tf_chat_render(t, req, &p)))
		goto cleanup;
	if (tok && (rc = tf_chat_prompt_encode(&p, tok, 0, &ids)))
		goto cleanup;
	if (o->json)
		rc = print_json(&p, &ids);
	else if (p.text.len && fwrite(p.text.p, 1, p.text.len, stdout) != p.text.len)
		rc = tf_diag_set(TF_ERR_IO, "stdout: write failed");
cleanup:
	if (rc)
		fprintf(stderr, "tfrun: %s%s%s\n", what ? what : "", what ? ": " : "", tf_diag_msg());
	tf_tokens_free(&ids);
	tf_chat_prompt_free(&p);
	tf_val_unref(req);
	tf_bytes_free(&body);
	tf_tok_free(tok);
	tf_chat_template_free(t);
	tf_conf_free(conf);
	return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
