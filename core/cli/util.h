/* util.h - small helpers the tfrun subcommands share. */
#ifndef TF_CLI_UTIL_H
#define TF_CLI_UTIL_H

#include <stddef.h>

#include "conf.h"

/* A monotonic clock, in seconds. */
double tf_cli_now_s(void);

/* path = "<[model] path>/<file>"; TF_ERR_INVALID when [model] path is unset
 * or the result does not fit. */
int tf_cli_model_file(const tf_conf *conf, const char *file, char *path, size_t size);

#endif /* TF_CLI_UTIL_H */
