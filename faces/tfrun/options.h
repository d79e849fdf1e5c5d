/*
 * options.h - what `tfrun` was asked to do, from its command line.
 *
 * The sampling and chat flags (-n, --temp, --top-k, --top-p, --min-p,
 * --seed, --system, --no-think) are not fields here: tfrun turns each into
 * an INI override ("sampling.temperature=0.7") appended to `overrides`
 * after the --set ones, in command-line order, so the INI stays the one
 * place the pipeline reads them from and every value passes the INI's
 * checks (docs/ini.md).
 */
#ifndef TF_CLI_OPTIONS_H
#define TF_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum tf_run_mode {
	TF_RUN_GENERATE = 0,            /* tfrun MODEL.ini [input] */
	TF_RUN_CHECK,                   /* --check */
	TF_RUN_PLUGINS,                 /* --plugins */
	TF_RUN_VERSION,                 /* --version */
	TF_RUN_HELP,                    /* --help */
	TF_RUN_RENDER_CHAT,             /* --render-chat REQUEST.json */
	TF_RUN_PERPLEXITY,              /* --perplexity FILE */
	TF_RUN_SERVE,                   /* tfrun serve MODEL.ini */
} tf_run_mode;

/* Where the prompt comes from; exactly one. */
typedef enum tf_input {
	TF_INPUT_NONE = 0,              /* interactive only */
	TF_INPUT_TEXT,                  /* -p TEXT */
	TF_INPUT_FILE,                  /* -f FILE */
	TF_INPUT_TOKENS,                /* --tokens 1,2,3: ids, no tokenizer */
	TF_INPUT_STDIN,                 /* stdin is not a terminal: read it all */
} tf_input;

typedef struct tf_options {
	tf_run_mode mode;
	const char *ini;                /* MODEL.ini; NULL only for --plugins */

	tf_input input;
	const char *prompt;             /* TF_INPUT_TEXT */
	const char *prompt_file;        /* TF_INPUT_FILE */
	int32_t *tokens;                /* TF_INPUT_TOKENS */
	int n_tokens;

	/* A read-reply loop on stdin: -i, or a terminal with no prompt given.
	 * Otherwise tfrun answers the one prompt and exits. */
	bool interactive;
	bool json;                      /* machine-readable output */
	bool keys;                      /* --plugins --keys */
	const char *dump_logits;        /* write each step's logits here */
	const char *dump_mtp;           /* and the MTP layer's, teacher-forced */
	const char *render_request;     /* TF_RUN_RENDER_CHAT: the request file */
	const char *perplexity;         /* TF_RUN_PERPLEXITY: the text file */
	const char *host, *api_key;     /* serve: over [server] host, api_key */
	int port;                       /* serve: 0 for [server] port */
	const char *json_schema;        /* --json-schema FILE: the reply is such a document */
	const char *grammar;            /* --grammar FILE: GBNF the reply follows */
	const char **stops;             /* --stop strings (tf/stopstr.h) */
	int n_stops;
	int tp_local;                   /* --tp-local N: ranks on this machine, 0: none */

	char **overrides;               /* "section.key=value" */
	int n_overrides;
} tf_options;

#endif /* TF_CLI_OPTIONS_H */
