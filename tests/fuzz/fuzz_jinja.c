/*
 * fuzz_jinja.c - the Jinja interpreter on hostile templates.
 *
 * The bytes are a template, rendered with a chat request's variables.  Each
 * either renders, or fails with TF_ERR_FORMAT (parsing) or TF_ERR_INVALID
 * (rendering) and a message that names the template's place; the limits on
 * nesting, steps and output keep every input finite.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "tf/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char vars_json[] = "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, "
				"{\"role\": \"user\", \"content\": \"h\\u00e9\"},"
				" {\"role\": \"assistant\", \"content\": \"<think>r</think>a\", "
				"\"tool_calls\": [{\"function\":"
				" {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": "
				"[null]}}}]}, {\"role\": \"tool\", \"content\": \"ok\"}],"
				" \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
				"\"f\"}}], \"add_generation_prompt\": true,"
				" \"n\": 3, \"s\": \" a b \"}";

static void check_failure(int rc, int status)
{
	if (rc != status && rc != TF_ERR_NOMEM)
		abort();
	if (rc == status && strncmp(tf_diag_msg(), "fuzz.jinja:", 11) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static tf_val *vars;
	tf_jinja *t;
	tf_bytes out = { 0 };

	if (!vars && tf_val_parse_json(vars_json, sizeof(vars_json) - 1, &vars) < 0)
		abort();
	int rc = tf_jinja_parse((const char *)data, size, "fuzz.jinja", &t);
	if (rc < 0) {
		check_failure(rc, TF_ERR_FORMAT);
		return 0;
	}
	if ((rc = tf_jinja_render(t, vars, &out)) < 0) {
		check_failure(rc, TF_ERR_INVALID);
		if (out.len)
			abort();   /* a failed render leaves the output as it was */
	}
	tf_bytes_free(&out);
	tf_jinja_free(t);
	return 0;
}
