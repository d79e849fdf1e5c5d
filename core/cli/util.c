/* util.c - see util.h. */
#include "util.h"

#include <stdio.h>
#include <time.h>

#include "diag.h"

double tf_cli_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int tf_cli_model_file(const tf_conf *conf, const char *file, char *path, size_t size)
{
	char dir[4096];
	const char *d;
	int rc = tf_conf_get_path(conf, "model", "path", dir, sizeof(dir), &d);

	if (rc)
		return rc;
	if (!d)
		return tf_diag_set(TF_ERR_INVALID, "[model] path is not set, so no %s", file);
	if ((size_t)snprintf(path, size, "%s/%s", d, file) >= size)
		return tf_diag_set(TF_ERR_INVALID, "%s/%s: path too long", d, file);
	return TF_OK;
}
