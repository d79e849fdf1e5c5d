/* check.c - see tf/check.h. */
#include "tf/check.h"

#include "engine/pipeline.h"
#include "model/memplan.h"
#include "plugin/registry.h"
#include "engine/runtime.h"

int tf_model_check(const char *ini_path, const char *const *overrides, int n_overrides,
		   bool json, FILE *f, bool *plan_only)
{
	tf_runtime *rt = NULL;
	int rc = tf_runtime_open_plan(ini_path, overrides, n_overrides, &rt);

	*plan_only = rc == TF_OK && tf_runtime_header_only(rt);
	if (rc == TF_OK && !*plan_only && (rc = tf_runtime_start(rt)) == TF_OK)
		rc = tf_pipeline_check(rt);
	if (rc == TF_OK && json) {
		rc = tf_runtime_print_json(rt, ini_path, f);
	} else if (rc == TF_OK) {
		if (!*plan_only)
			tf_runtime_print(rt, f);
		tf_memplan_print(tf_runtime_plan(rt), f);
	}
	tf_runtime_close(rt);
	return rc;
}

int tf_plugins_print(const char *ini_path, const char *const *overrides, int n_overrides,
		     bool keys, bool json, FILE *f)
{
	tf_runtime *rt;
	int rc = tf_runtime_open_plugins(ini_path, overrides, n_overrides, &rt);

	if (rc)
		return rc;
	const tf_registry *r = tf_runtime_registry(rt);
	rc = keys ? tf_registry_print_keys(r, f, json) : tf_registry_print(r, f, json);
	tf_runtime_close(rt);
	return rc;
}
