/* recipe.c - per-class bit widths and the quantize-or-keep rule (recipe.h). */
#include "recipe.h"

#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"

static const struct {
	const char *key;
	tf_wclass cls;
	int bits;
} classes[] = {
	{ "routed", TF_WCLASS_ROUTED, 3 }, { "shared", TF_WCLASS_SHARED, 5 },
	{ "kda", TF_WCLASS_KDA, 4 },       { "dense", TF_WCLASS_DENSE, 4 },
	{ "mla", TF_WCLASS_MLA, 6 },       { "head", TF_WCLASS_HEAD, 6 },
	{ "mtp", TF_WCLASS_MTP, 4 },
};
#define N_CLASSES (sizeof(classes) / sizeof(classes[0]))

void tfq_recipe_default(tfq_recipe *r)
{
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < N_CLASSES; i++)
		r->bits[classes[i].cls] = classes[i].bits;
}

static int recipe_set(tfq_recipe *r, const char *key, const char *value,
		      const char *origin)
{
	char *end;
	long v = strtol(value, &end, 10);

	for (size_t i = 0; i < N_CLASSES; i++) {
		if (strcmp(key, classes[i].key))
			continue;
		int head16 = classes[i].cls == TF_WCLASS_HEAD && v == 16;
		if (end == value || *end || ((v < 1 || v > 8) && !head16))
			return tfq_fail(TF_ERR_INVALID,
					   "%s: %s = '%s': expected bits 1..8%s", origin, key,
					   value, classes[i].cls == TF_WCLASS_HEAD ? " or 16" : "");
		r->bits[classes[i].cls] = (int)v;
		return TF_OK;
	}
	return tfq_fail(TF_ERR_INVALID,
			   "%s: unknown class '%s' (routed, shared, kda, mla, dense, head, mtp)",
			   origin, key);
}

int tfq_recipe_parse(tfq_recipe *r, const char *spec, const char *origin)
{
	char buf[512];
	int rc = TF_OK;

	if (strlen(spec) >= sizeof(buf))
		return tfq_fail(TF_ERR_INVALID, "%s: too long", origin);
	strcpy(buf, spec);
	for (char *save = NULL, *item = strtok_r(buf, ",", &save); item && !rc;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (!eq)
			return tfq_fail(TF_ERR_INVALID, "%s: '%s' is not class=bits",
					   origin, item);
		*eq = '\0';
		rc = recipe_set(r, item, eq + 1, origin);
	}
	return rc;
}

struct ini_ctx {
	tfq_recipe *r;
	const char *path;
	int rc;
};

static int ini_item(void *user, const char *section, const char *key,
		    const char *value)
{
	struct ini_ctx *c = user;
	char origin[512];

	if (c->rc)
		return 0;
	snprintf(origin, sizeof(origin), "%s: [%s] %s", c->path, section, key);
	if (strcmp(section, "bits")) {
		c->rc = tfq_fail(TF_ERR_INVALID, "%s: unknown section [%s] (tfquant reads [bits])",
				    origin, section);
		return 0;
	}
	c->rc = recipe_set(c->r, key, value, origin);
	return !c->rc;
}

int tfq_recipe_load_ini(tfq_recipe *r, const char *path)
{
	struct ini_ctx c = { .r = r, .path = path };
	int line = ini_parse(path, ini_item, &c);
	if (c.rc)
		return c.rc;
	if (line < 0)
		return tfq_fail(TF_ERR_IO, "%s: cannot read", path);
	if (line > 0)
		return tfq_fail(TF_ERR_FORMAT, "%s:%d: malformed line", path, line);
	return TF_OK;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

int tfq_recipe_bits(const tfq_recipe *r, const tf_model_config *cfg,
		    const tf_tensor *t)
{
	static const char *const linear[] = {
		"_proj.weight", "kv_a_proj_with_mqa.weight", ".dense.weight",
	};
	int is_linear = !strcmp(t->name, "lm_head.weight");

	for (size_t i = 0; i < sizeof(linear) / sizeof(linear[0]); i++)
		is_linear |= ends_with(t->name, linear[i]);
	if (!is_linear || t->ndim != 2 || t->shape[0] < TFQ_MIN_OUT ||
	    ends_with(t->name, "kv_b_proj.weight"))
		return 0;
	if (t->dtype != TF_DTYPE_F32 && t->dtype != TF_DTYPE_F16 && t->dtype != TF_DTYPE_BF16)
		return 0;
	int bits = r->bits[tf_wclass_of(cfg, t->name)];
	return bits >= 1 && bits <= 8 ? bits : 0;
}
