/* template.c - see tf/chat.h. */
#include "tf/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "chat/ling3.h"
#include "tf/diag.h"
#include "tf/text.h"

/* tokenizer_config.json may list every added token: allow a few MiB. */
#define CONFIG_MAX_FILE (64u << 20)
#define TEMPLATE_MAX_FILE (4u << 20)

/* The special tokens HF hands a template, from tokenizer_config.json. */
static const char *const token_keys[] = {
	"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
};

struct tf_chat_template {
	tf_chat_kind kind;
	tf_jinja *jinja;
	tf_val *tokens;                 /* DICT: token_keys that are set */
	const char *stops[3];
};

static const char *const ling3_stops[] = { "<|role_end|>", "<|endoftext|>", NULL },
		  *const raw_stops[] = { "<|endoftext|>", NULL };

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "chat template: out of memory");
}

/* A JSON file, or NULL when there is none. */
static int read_json(const char *path, tf_val **out)
{
	char *text;
	size_t n;
	int rc = tf_text_read(path, CONFIG_MAX_FILE, &text, &n);

	*out = NULL;
	if (rc == TF_ERR_NOT_FOUND) {
		tf_diag_clear();
		return TF_OK;
	}
	if (rc)
		return rc;
	rc = tf_val_parse_json(text, n, out);
	free(text);
	return rc ? tf_diag_prefix(rc, "%s", path) : TF_OK;
}

/* bos_token etc.: a string, or an added token {"content": ...}. */
static int read_tokens(tf_chat_template *t, const tf_val *config)
{
	size_t i, n;

	if (!(t->tokens = tf_val_dict()))
		return nomem();
	for (i = 0; i < sizeof(token_keys) / sizeof(*token_keys); i++) {
		const tf_val *v = tf_val_dict_get(config, token_keys[i]);
		const char *s = tf_val_as_str(v, &n);

		if (!s)
			s = tf_val_as_str(tf_val_dict_get(v, "content"), &n);
		if (s && tf_val_dict_set(t->tokens, token_keys[i], strlen(token_keys[i]),
					 tf_val_str(s, n)))
			return nomem();
	}
	t->stops[0] = tf_val_as_str(tf_val_dict_get(t->tokens, "eos_token"), NULL);
	return TF_OK;
}

/* The template source in config's chat_template: a string, or the "default"
 * of a list of {"name", "template"}; NULL when there is none. */
static int config_source(const tf_val *config, const char *path, const tf_val **src)
{
	const tf_val *ct = tf_val_dict_get(config, "chat_template");
	size_t i;

	*src = NULL;
	if (!ct || tf_val_kind_of(ct) == TF_VAL_NONE)
		return TF_OK;
	if (tf_val_kind_of(ct) == TF_VAL_STR) {
		*src = ct;
		return TF_OK;
	}
	for (i = 0; tf_val_kind_of(ct) == TF_VAL_LIST && i < tf_val_len(ct); i++) {
		const tf_val *item = tf_val_at(ct, i);
		const char *name = tf_val_as_str(tf_val_dict_get(item, "name"), NULL);

		if (name && !strcmp(name, "default") &&
		    tf_val_kind_of(tf_val_dict_get(item, "template")) == TF_VAL_STR) {
			*src = tf_val_dict_get(item, "template");
			return TF_OK;
		}
	}
	return tf_diag_set(TF_ERR_FORMAT, "%s: chat_template: expected a string or a list of "
			   "{\"name\", \"template\"} with a \"default\"", path);
}

/*
 * Parses the checkpoint's template into t->jinja, if it has one: its
 * chat_template.jinja, else tokenizer_config.json's chat_template.
 */
static int load_jinja(tf_chat_template *t, const char *dir)
{
	char path[4200], cfg_path[4200];
	tf_val *config = NULL;
	const tf_val *src;
	const char *source;
	char *text = NULL;
	size_t n;
	int rc;

	snprintf(cfg_path, sizeof(cfg_path), "%s/tokenizer_config.json", dir);
	if ((rc = read_json(cfg_path, &config)) || (rc = read_tokens(t, config)))
		goto cleanup;
	snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
	rc = tf_text_read(path, TEMPLATE_MAX_FILE, &text, &n);
	if (rc == TF_OK) {
		rc = tf_jinja_parse(text, n, path, &t->jinja);
		goto cleanup;
	}
	if (rc != TF_ERR_NOT_FOUND)
		goto cleanup;
	tf_diag_clear();
	if ((rc = config_source(config, cfg_path, &src)) || !src)
		goto cleanup;
	snprintf(path, sizeof(path), "%s/tokenizer_config.json: chat_template", dir);
	source = tf_val_as_str(src, &n);
	rc = tf_jinja_parse(source, n, path, &t->jinja);
cleanup:
	free(text);
	tf_val_unref(config);
	return rc;
}

int tf_chat_template_init(const char *name, const char *dir, tf_chat_template **out)
{
	tf_chat_template *t;
	bool want_jinja;
	int rc = TF_OK;

	*out = NULL;
	if (!name)
		name = "auto";
	want_jinja = !strcmp(name, "jinja");
	if (!want_jinja && strcmp(name, "auto") && strcmp(name, "ling3") && strcmp(name, "raw"))
		return tf_diag_set(TF_ERR_INVALID, "unknown chat template '%s' (expected auto, "
				   "jinja, ling3 or raw)", name);
	if (!(t = calloc(1, sizeof(*t))))
		return nomem();
	t->kind = !strcmp(name, "raw") ? TF_CHAT_RAW : TF_CHAT_LING3;
	if ((want_jinja || !strcmp(name, "auto")) && dir)
		rc = load_jinja(t, dir);
	if (!rc && t->jinja)
		t->kind = TF_CHAT_JINJA;
	else if (!rc && want_jinja)
		rc = tf_diag_set(TF_ERR_NOT_FOUND, "%s has no chat template (chat_template.jinja, or "
				 "chat_template in tokenizer_config.json)", dir ? dir : "no checkpoint");
	if (rc) {
		tf_chat_template_free(t);
		return rc;
	}
	*out = t;
	return TF_OK;
}

int tf_chat_template_from_conf(const tf_conf *c, tf_chat_template **out)
{
	char dir[4096];
	const char *d;
	int rc = tf_conf_get_path(c, "model", "path", dir, sizeof(dir), &d);

	if (rc)
		return rc;
	if ((rc = tf_chat_template_init(tf_conf_get(c, "chat", "template"), d, out)))
		return tf_conf_fail(c, rc, "chat", "template", "%s", tf_diag_msg());
	return TF_OK;
}

void tf_chat_template_free(tf_chat_template *t)
{
	if (!t)
		return;
	tf_jinja_free(t->jinja);
	tf_val_unref(t->tokens);
	free(t);
}

tf_chat_kind tf_chat_template_kind(const tf_chat_template *t)
{
	return t->kind;
}

const char *const *tf_chat_template_stops(const tf_chat_template *t)
{
	switch (t->kind) {
	case TF_CHAT_LING3:
		return ling3_stops;
	case TF_CHAT_RAW:
		return raw_stops;
	case TF_CHAT_JINJA:
		break;
	}
	return t->stops;
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

/* Copies the entries of the DICT src into vars. */
static int set_all(tf_val *vars, const tf_val *src)
{
	size_t i, n;
	const char *k;

	for (i = 0; i < tf_val_len(src); i++) {
		k = tf_val_as_str(tf_val_key_at(src, i), &n);
		if (tf_val_dict_set(vars, k, n, tf_val_ref(tf_val_at(src, i))))
			return nomem();
	}
	return TF_OK;
}

/* The variables as HF apply_chat_template passes them. */
static int render_jinja(const tf_chat_template *t, const tf_val *req, tf_chat_prompt *out)
{
	static const char *const own[] = { "messages", "tools", "add_generation_prompt" };
	tf_val *vars = tf_val_dict();
	size_t i;
	int rc;

	if (!vars)
		return nomem();
	if ((rc = set_all(vars, t->tokens)) ||
	    (rc = set_all(vars, tf_val_dict_get(req, "chat_template_kwargs"))))
		goto cleanup;
	for (i = 0; i < sizeof(own) / sizeof(*own); i++)
		if (tf_val_dict_set(vars, own[i], strlen(own[i]),
				    tf_val_ref(tf_val_dict_get(req, own[i])))) {
			rc = nomem();
			goto cleanup;
		}
	if (tf_val_dict_set(vars, "documents", 9, tf_val_none())) {
		rc = nomem();
		goto cleanup;
	}
	rc = tf_jinja_render(t->jinja, vars, &out->text);
cleanup:
	tf_val_unref(vars);
	return rc;
}

int tf_chat_render(const tf_chat_template *t, const tf_val *req, tf_chat_prompt *out)
{
	switch (t->kind) {
	case TF_CHAT_LING3:
		return tf_ling3_render(req, out);
	case TF_CHAT_RAW:
		return render_raw(req, out);
	case TF_CHAT_JINJA:
		return render_jinja(t, req, out);
	}
	return tf_diag_set(TF_ERR_INTERNAL, "chat template: bad kind %d", (int)t->kind);
}
