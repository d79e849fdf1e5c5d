/* serve_cmd.h - tfrun serve: the OpenAI-compatible HTTP server (serve/). */
#ifndef TF_CLI_SERVE_CMD_H
#define TF_CLI_SERVE_CMD_H

#include "options.h"

int tf_cli_serve(const tf_options *o);

#endif /* TF_CLI_SERVE_CMD_H */
