/* stops.c - see tf/chat.h. */
#include "tf/chat.h"

#include <stdlib.h>

#include <cjson/cJSON.h>

#include "tf/diag.h"
#include "tf/text.h"
#include "tokenizer/tokenizer.h"

/* A generation_config.json is a few hundred bytes. */
#define GENCFG_MAX_FILE (1u << 20)

int tf_stop_add(tf_stopset *s, int32_t id)
{
	if (tf_stop_has(s, id))
		return TF_OK;
	if (s->n == TF_STOP_MAX)
		return tf_diag_set(TF_ERR_RANGE, "more than %d stop tokens", TF_STOP_MAX);
	s->ids[s->n++] = id;
	return TF_OK;
}

bool tf_stop_has(const tf_stopset *s, int32_t id)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (s->ids[i] == id)
			return true;
	return false;
}

int tf_stop_add_tokens(tf_stopset *s, const char *const *names, const tf_tokenizer *tok)
{
	int i, rc;

	for (i = 0; names[i]; i++) {
		int32_t id = tf_tok_find(tok, names[i]);

		if (id >= 0 && (rc = tf_stop_add(s, id)))
			return rc;
	}
	return TF_OK;
}

static int add_json_id(tf_stopset *s, const cJSON *v, const char *path)
{
	if (!cJSON_IsNumber(v) || !tf_tok_id_ok(v->valuedouble))
		return tf_diag_set(TF_ERR_FORMAT, "%s: eos_token_id: expected token ids", path);
	return tf_stop_add(s, (int32_t)v->valuedouble);
}

int tf_stop_add_generation_config(tf_stopset *s, const char *path)
{
	const cJSON *eos, *it;
	cJSON *root;
	char *text;
	size_t n;
	int rc = tf_text_read(path, GENCFG_MAX_FILE, &text, &n);

	if (rc == TF_ERR_NOT_FOUND) {
		tf_diag_clear();
		return TF_OK;
	}
	if (rc)
		return rc;
	root = cJSON_ParseWithLength(text, n);
	free(text);
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return tf_diag_set(TF_ERR_FORMAT, "%s: not a JSON object", path);
	}
	eos = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
	if (cJSON_IsArray(eos))
		cJSON_ArrayForEach(it, eos) {
			if ((rc = add_json_id(s, it, path)))
				break;
		}
	else if (eos && !cJSON_IsNull(eos))
		rc = add_json_id(s, eos, path);
	cJSON_Delete(root);
	return rc;
}
