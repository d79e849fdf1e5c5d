/* tok_fixture.c - the shared test tokenizers, gpt2's assembled in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tok_fixture.h"

char *tok_fixture_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = 0;
		if (len)
			*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* HF's openai-community/gpt2 tokenizer.json, from OpenAI's two files. */
static char *gpt2_json(void)
{
	char *enc = tok_fixture_read(TOK_DATA "/gpt2/encoder.json", NULL);
	char *bpe = tok_fixture_read(TOK_DATA "/gpt2/vocab.bpe", NULL);
	cJSON *root = cJSON_CreateObject(), *model, *merges, *pre, *added, *eot;
	char *line, *save = NULL, *out = NULL;

	if (!enc || !bpe)
		goto out;
	added = cJSON_AddArrayToObject(root, "added_tokens");
	eot = cJSON_CreateObject();
	cJSON_AddNumberToObject(eot, "id", 50256);
	cJSON_AddStringToObject(eot, "content", "<|endoftext|>");
	cJSON_AddBoolToObject(eot, "special", 1);
	cJSON_AddItemToArray(added, eot);
	cJSON_AddNullToObject(root, "normalizer");
	pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
	cJSON_AddStringToObject(pre, "type", "ByteLevel");
	cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
	cJSON_AddBoolToObject(pre, "use_regex", 1);
	cJSON_AddItemToObject(root, "decoder", cJSON_Duplicate(pre, 1));
	model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON_AddItemToObject(model, "vocab", cJSON_Parse(enc));
	merges = cJSON_AddArrayToObject(model, "merges");
	for (line = strtok_r(bpe, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, "#version", 8))
			cJSON_AddItemToArray(merges, cJSON_CreateString(line));
	out = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	free(enc);
	free(bpe);
	return out;
}

tf_tokenizer *tok_fixture_load(const char *name)
{
	tf_tokenizer *tok = NULL;
	char path[512];

	if (!strcmp(name, "gpt2")) {
		char *json = gpt2_json();

		if (json && tf_tok_load_json(json, strlen(json), "gpt2", &tok))
			tok = NULL;
		free(json);
		return tok;
	}
	snprintf(path, sizeof(path), TOK_DATA "/%s/tokenizer.json", name);
	return tf_tok_load(path, &tok) ? NULL : tok;
}
