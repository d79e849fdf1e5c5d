/*
 * tf/check.h - a model description checked without running it, and the
 * plugins it would run on: what `tfrun --check` and `tfrun --plugins` print.
 *
 * Both read the INI and its overrides as tf_engine_open does, so they fail
 * where it would, naming the file, key, plugin or tensor (tf_diag_msg()).
 */
#ifndef TF_CHECK_H
#define TF_CHECK_H

#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Open the model and every layer against its tensors (presence, dtype,
 * shape, quant format) without computing or paging the weights in, then
 * print what was chosen (model, backend, quant policy, the plugins of each
 * run of layers) and the memory plan; json: all of it as one object, with
 * "ini" naming ini_path.  A header-only checkpoint (tfsynth --header-only)
 * stops after the memory plan, with *plan_only set: there is no data to
 * open layers on, and no device or transport is needed to plan it.
 * Nothing is printed on failure.
 */
int tf_model_check(const char *ini_path, const char *const *overrides, int n_overrides,
		   bool json, FILE *f, bool *plan_only);

/*
 * Every plugin on the plugin path, usable or rejected with its reason and
 * probe score (one line each, or a JSON array); keys: instead, the INI keys
 * they declare, as docs/ini.md's table of plugin keys (json: an array of
 * {kind, plugin, section, key, type, default, help}).  ini_path may be NULL;
 * a backend that fails to start is logged, not fatal.
 */
int tf_plugins_print(const char *ini_path, const char *const *overrides, int n_overrides,
		     bool keys, bool json, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* TF_CHECK_H */
