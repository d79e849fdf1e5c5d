/* template.c - see template.h. */
#include "chat/template.h"

#include <stdlib.h>
#include <string.h>

#include "chat/ling3.h"
#include "diag.h"

struct tf_chat_template {
	tf_chat_kind kind;
};

int tf_chat_template_init(const char *name, tf_chat_template **out)
{
	tf_chat_kind kind;

	*out = NULL;
	if (!name || !strcmp(name, "ling3"))
		kind = TF_CHAT_LING3;
	else if (!strcmp(name, "raw"))
		kind = TF_CHAT_RAW;
	else
		return tf_diag_set(TF_ERR_INVALID, "unknown chat template '%s'", name);
	if (!(*out = calloc(1, sizeof(**out))))
		return tf_diag_set(TF_ERR_NOMEM, "chat template: out of memory");
	(*out)->kind = kind;
	return TF_OK;
}

int tf_chat_template_from_conf(const tf_conf *c, tf_chat_template **out)
{
	const char *name = tf_conf_get(c, "chat", "template");
	int rc = tf_chat_template_init(name, out);

	return rc ? tf_conf_fail(c, rc, "chat", "template", "%s", tf_diag_msg()) : TF_OK;
}

void tf_chat_template_free(tf_chat_template *t)
{
	free(t);
}

tf_chat_kind tf_chat_template_kind(const tf_chat_template *t)
{
	return t->kind;
}

const char *const *tf_chat_template_stops(const tf_chat_template *t)
{
	static const char *const ling3[] = { "<|role_end|>", "<|endoftext|>", NULL },
			  *const raw[] = { "<|endoftext|>", NULL };

	return t->kind == TF_CHAT_LING3 ? ling3 : raw;
}

/* The messages' contents as plain text, one after another. */
static int render_raw(const tf_val *req, tf_chat_prompt *out)
{
	const tf_val *msgs = tf_val_dict_get(req, "messages");
	size_t i, n;
	const char *s;
	int rc;

	for (i = 0; i < tf_val_len(msgs); i++)
		if ((s = tf_val_as_str(tf_val_dict_get(tf_val_at(msgs, i), "content"), &n)) &&
		    (rc = tf_chat_prompt_text(out, s, n)))
			return rc;
	out->marked = true;
	return TF_OK;
}

int tf_chat_render(const tf_chat_template *t, const tf_val *req, tf_chat_prompt *out)
{
	switch (t->kind) {
	case TF_CHAT_LING3:
		return tf_ling3_render(req, out);
	case TF_CHAT_RAW:
		return render_raw(req, out);
	}
	return tf_diag_set(TF_ERR_INTERNAL, "chat template: bad kind %d", (int)t->kind);
}
