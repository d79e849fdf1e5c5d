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

/*
 * The keys transformers' BailingHybridConfig (and its RopeParameters) types
 * float, at the top level and in rope_scaling / rope_parameters.  The
 * tests' list is tests/synth/hf_config.py FLOAT_KEYS.
 */
static const char *const float_keys[] = {
	"routed_scaling_factor", "rope_theta", "partial_rotary_factor",
	"kda_lower_bound", "rms_norm_eps", "initializer_range",
	"attention_dropout", "mtp_loss_scaling_factor", NULL
};
static const char *const rope_float_keys[] = {
	"rope_theta", "factor", "attention_factor", "beta_fast", "beta_slow",
	"mscale", "mscale_all_dim", NULL
};

/* cJSON's digits (15, or 17 to round-trip), plus ".0" on a whole number. */
static int float_item(cJSON *obj, const char *key)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	char buf[40];

	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return TF_OK;
	snprintf(buf, sizeof(buf), "%.15g", v->valuedouble);
	if (strtod(buf, NULL) != v->valuedouble)
		snprintf(buf, sizeof(buf), "%.17g", v->valuedouble);
	if (!strpbrk(buf, ".eE"))
		strcat(buf, ".0");
	cJSON *raw = cJSON_CreateRaw(buf);
	if (!raw || !cJSON_ReplaceItemInObjectCaseSensitive(obj, key, raw)) {
		cJSON_Delete(raw);
		return TF_ERR_NOMEM;
	}
	return TF_OK;
}

static int float_keys_of(cJSON *obj, const char *const *keys)
{
	int rc = TF_OK;

	for (; !rc && *keys; keys++)
		rc = float_item(obj, *keys);
	return rc;
}

int tfq_config_floats(cJSON *config)
{
	int rc = float_keys_of(config, float_keys);
	cJSON *r;

	if (!rc && cJSON_IsObject(r = cJSON_GetObjectItemCaseSensitive(config, "rope_scaling")))
		rc = float_keys_of(r, rope_float_keys);
	if (!rc && cJSON_IsObject(r = cJSON_GetObjectItemCaseSensitive(config, "rope_parameters")))
		rc = float_keys_of(r, rope_float_keys);
	return rc;
}

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

	char *out = tfq_config_floats(root) ? NULL : cJSON_Print(root);
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
