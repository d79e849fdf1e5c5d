/* outdir.c - config.json and the copied files of a converted folder (outdir.h). */
#include "outdir.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fail.h"
#include "file.h"
#include "tf/error.h"
#include "tf/version.h"

/* config.json and tokenizer.json are a few MB; this bounds a wrong path. */
#define OUTDIR_MAX_FILE (1u << 30)

int tfq_outdir_config(const char *src, const char *dst, const tfq_meta *m)
{
	char path[4096];
	size_t len;
	int rc = TF_OK;

	snprintf(path, sizeof(path), "%s/config.json", src);
	char *text;
	if ((rc = tfq_file_read(path, OUTDIR_MAX_FILE, &text, &len)))
		return rc;
	cJSON *root = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return tfq_fail(TF_ERR_FORMAT, "%s: not a JSON object", path);
	}
	cJSON *q = cJSON_CreateObject(), *cal = cJSON_CreateObject();
	cJSON_AddStringToObject(q, "quant_method", m->format);
	cJSON_AddStringToObject(q, "version", "tensorfold-" TF_VERSION_STRING);
	cJSON_AddNumberToObject(q, "bits", round(m->bits * 100) / 100);
	if (strcmp(m->format, "exl3")) {
		cJSON_Delete(cal);
		goto save;
	}
	cJSON_AddNumberToObject(q, "head_bits", m->head_bits ? m->head_bits : 16);
	cJSON_AddNumberToObject(q, "mtp_bits", m->mtp_bits);
	cJSON_AddStringToObject(q, "codebook", m->variant ? m->variant : "mul1");
	cJSON_AddStringToObject(q, "out_scales", "always");
	/* No calibration: the identity-Hessian recipe. */
	cJSON_AddNumberToObject(cal, "rows", 0);
	cJSON_AddNumberToObject(cal, "cols", 0);
	cJSON_AddItemToObject(q, "calibration", cal);
save:
	cJSON_DeleteItemFromObject(root, "quantization_config");
	cJSON_AddItemToObject(root, "quantization_config", q);

	char *out = cJSON_Print(root);
	cJSON_Delete(root);
	if (!out)
		return tfq_fail(TF_ERR_NOMEM, "config.json: out of memory");
	snprintf(path, sizeof(path), "%s/config.json", dst);
	rc = tfq_file_write(path, out, strlen(out));
	free(out);
	return rc;
}

static int skip_file(const char *name)
{
	size_t n = strlen(name);
	return !strcmp(name, "config.json") || !strcmp(name, "model.safetensors.index.json") ||
	       (n > 12 && !strcmp(name + n - 12, ".safetensors"));
}

int tfq_outdir_copy_files(const char *src, const char *dst)
{
	DIR *d = opendir(src);
	struct dirent *e;
	int rc = TF_OK;

	if (!d)
		return tfq_fail(TF_ERR_IO, "%s: cannot list: %s", src, strerror(errno));
	while (!rc && (e = readdir(d))) {
		char from[4096], to[4096];
		struct stat sb;

		snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
		if (skip_file(e->d_name) || stat(from, &sb) || !S_ISREG(sb.st_mode))
			continue;
		snprintf(to, sizeof(to), "%s/%s", dst, e->d_name);
		rc = tfq_file_copy(from, to, OUTDIR_MAX_FILE);
	}
	closedir(d);
	return rc;
}
