/* util.h - small helpers the tfrun subcommands share. */
#ifndef TF_CLI_UTIL_H
#define TF_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tf/chat.h"
#include "tf/conf.h"
#include "tf/engine.h"
#include "tf/model.h"
#include "tf/sampler.h"

/* A monotonic clock, in seconds. */
double tf_cli_now_s(void);

/* path = "<[model] path>/<file>"; TF_ERR_INVALID when [model] path is unset
 * or the result does not fit. */
int tf_cli_model_file(const tf_conf *conf, const char *file, char *path, size_t size);

/* [sampling]: the sampler's parameters (seed -1: the clock) and the reply
 * length max_tokens. */
int tf_cli_sampling(const tf_conf *conf, tf_sampler_params *sp, int64_t *max_tokens);

/* The stop ids every reply ends at: config.json's eos ids and those of
 * generation_config.json beside it (the template's are added by name). */
int tf_cli_stop_ids(const tf_conf *conf, const tf_model_config *cfg, tf_stopset *stops);

/* A tensor-parallel rank other than 0 follows rank 0 (tf_engine_follow)
 * and prints nothing: its exit status, or -1 on rank 0, which goes on. */
int tf_cli_follow(tf_engine *e, const char *ini);

#endif /* TF_CLI_UTIL_H */
