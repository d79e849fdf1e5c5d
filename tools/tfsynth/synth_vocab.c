/*
 * synth_vocab.c - what the tokenizer decides about the model: vocab size and
 * the special ids that config.json and generation_config.json name.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"              /* tools/lib */
#include "file.h"              /* tools/lib */
#include "synth.h"

/* Ling pads its vocab to a multiple of 128 (157184 = 1228 * 128). */
#define VOCAB_ALIGN 128

/* A real tokenizer.json is ~10 MB; this bounds what a wrong path can cost. */
#define VOCAB_MAX_FILE (1u << 30)

/* The id of an added token with this content, -1 if there is none. */
static int added_id(const cJSON *added, const char *content)
{
	const cJSON *tok;
	cJSON_ArrayForEach(tok, added) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(tok, "content");
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(tok, "id");
		if (cJSON_IsString(c) && cJSON_IsNumber(id) && strcmp(c->valuestring, content) == 0)
			return id->valueint;
	}
	return -1;
}

int tf_synth_vocab_load(const char *path, tf_synth_vocab *v)
{
	char *text;
	size_t len;
	int rc = tfq_file_read(path, VOCAB_MAX_FILE, &text, &len);
	if (rc)
		return rc;

	cJSON *root = cJSON_ParseWithLength(text, len);
	free(text);
	if (!root)
		return tfq_fail(TF_ERR_FORMAT, "%s: not valid JSON", path);

	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
	const cJSON *e;
	int top = -1;

	if (!cJSON_IsObject(vocab)) {
		rc = tfq_fail(TF_ERR_FORMAT, "%s: model.vocab is not an object", path);
		goto out;
	}
	cJSON_ArrayForEach(e, vocab) {
		if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1 << 24) {
			rc = tfq_fail(TF_ERR_FORMAT, "%s: model.vocab[\"%s\"] is not an id",
					 path, e->string);
			goto out;
		}
		if (e->valueint > top)
			top = e->valueint;
	}
	cJSON_ArrayForEach(e, added) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
		if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 1 << 24) {
			rc = tfq_fail(TF_ERR_FORMAT, "%s: added_tokens entry without a valid id",
					 path);
			goto out;
		}
		if (id->valueint > top)
			top = id->valueint;
	}
	if (top < 0) {
		rc = tfq_fail(TF_ERR_FORMAT, "%s: empty vocabulary", path);
		goto out;
	}
	v->n_tokens = top + 1;
	v->vocab_size = (v->n_tokens + VOCAB_ALIGN - 1) / VOCAB_ALIGN * VOCAB_ALIGN;
	/* Spec 5: Ling-3 stops on <|role_end|> and pads with <|endoftext|>. */
	v->eos_id = added_id(added, "<|role_end|>");
	v->pad_id = added_id(added, "<|endoftext|>");
	if (v->eos_id < 0 || v->pad_id < 0)
		rc = tfq_fail(TF_ERR_FORMAT,
				 "%s: added_tokens lacks <|role_end|> or <|endoftext|>", path);
out:
	cJSON_Delete(root);
	return rc;
}

int tf_synth_vocab_copy(const char *path, const char *dir)
{
	char to[4096], cfg[4096];
	const char *slash = strrchr(path, '/');
	int rc;

	snprintf(to, sizeof(to), "%s/tokenizer.json", dir);
	if ((rc = tfq_file_copy(path, to, VOCAB_MAX_FILE)))
		return rc;
	/* The special-token flags live beside it, if at all. */
	if (slash)
		snprintf(cfg, sizeof(cfg), "%.*s/tokenizer_config.json", (int)(slash - path), path);
	else
		snprintf(cfg, sizeof(cfg), "tokenizer_config.json");
	snprintf(to, sizeof(to), "%s/tokenizer_config.json", dir);
	FILE *f = fopen(cfg, "rb");
	if (!f)
		return TF_OK;
	fclose(f);
	return tfq_file_copy(cfg, to, VOCAB_MAX_FILE);
}
