/*
 * test_presets.c - every INI preset in conf/ passes the INI schema (the
 * core's and the keys the plugins on the path declare), and its
 * model path resolves where the docs say (relative to the conf/ folder).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "tf/diag.h"

/* Arrays, not pointers: the test runner re-executes itself, so addresses
 * in a parameter do not survive. */
struct preset {
	char file[64];
	char model[256];        /* expected [model] path, resolved */
	int64_t tp_size;
};

static struct preset presets[] = {
	{ "ling-tiny.ini", TF_SOURCE_DIR "/conf/../models/ling-tiny", 1 },
	{ "ling-tiny-exl3.ini", TF_SOURCE_DIR "/conf/../models/ling-tiny-exl3", 1 },
	{ "ling-bench.ini", TF_SOURCE_DIR "/conf/../models/ling-bench-exl3", 1 },
	{ "ling-3.1-flash-tp2.ini", "/models/Ling-3.1-flash-exl3", 2 },
};

ParameterizedTestParameters(presets, load)
{
	return cr_make_param_array(struct preset, presets, sizeof(presets) / sizeof(presets[0]));
}

ParameterizedTest(struct preset *p, presets, load)
{
	char path[4096], buf[4096];
	const char *model;
	int64_t tp;
	tf_conf *c = NULL;

	snprintf(path, sizeof(path), "%s/conf/%s", TF_SOURCE_DIR, p->file);
	/* Their [mtp] keys are the mtp drafter's: the plugins declare them. */
	cr_assert_eq(tf_conf_open_checked(path, NULL, 0, &c), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_get_path(c, "model", "path", buf, sizeof(buf), &model), TF_OK,
		     "%s", tf_diag_msg());
	cr_assert_not_null(model, "%s: no [model] path", p->file);
	cr_expect_str_eq(model, p->model);
	cr_assert_eq(tf_conf_get_int(c, "tp", "size", 1, &tp), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(tp, p->tp_size, "%s", p->file);
	tf_conf_free(c);
}
