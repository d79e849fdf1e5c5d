/* tfrun.c - the command line: run a model described by an INI file. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cmd.h"
#include "doctor_cmd.h"
#include "fail.h"
#include "generate_cmd.h"
#include "options.h"
#include "perplexity_cmd.h"
#include "render_cmd.h"
#include "serve_cmd.h"
#include "tf/check.h"
#include "tf/conf.h"
#include "tf/diag.h"
#include "tf/plugin.h"
#include "tf/version.h"
#include "tokenize_cmd.h"
#include "tplocal.h"

#define EXIT_USAGE 2

static const char usage[] =
"usage: tfrun MODEL.ini [options] [-p TEXT | -f FILE | --tokens IDS]\n"
"       tfrun MODEL.ini --check\n"
"       tfrun MODEL.ini --perplexity FILE [--json]\n"
"       tfrun [MODEL.ini] --plugins [--keys] [--json]\n"
"       tfrun [MODEL.ini] --render-chat REQUEST.json [--json]\n"
"       tfrun serve MODEL.ini [--host ADDR] [--port N] [--api-key KEY] [--set ...]\n"
"       tfrun doctor [MODEL.ini] [--set ...] [--tp-local N] [--max-bytes N]\n"
"       tfrun bench MODEL.ini [-p N] [-n N] [-s N,...] [--vs B.ini | --vs-set K=V]\n"
"       tfrun --version | --help\n"
"\n"
"Runs the model MODEL.ini describes (docs/ini.md).  With no prompt flag it\n"
"reads the prompt from stdin when stdin is not a terminal, answers once and\n"
"exits; on a terminal it reads prompts line by line.\n"
"\n"
"Modes (at most one):\n"
"  --check             validate MODEL.ini and the plugins, open every layer\n"
"                      against its tensors (presence, dtype, shape, quant\n"
"                      format) without computing, print the plugins chosen,\n"
"                      the linears each quant plugin opened and the memory\n"
"                      plan (--json: one JSON object); exit 0 if fine.  A\n"
"                      header-only checkpoint (tfsynth --header-only) gets the\n"
"                      memory plan of every [tp] rank only, with no device\n"
"  --plugins           list every plugin candidate on the plugin path with its\n"
"                      kind, file, probe score and why it was rejected;\n"
"                      --keys: the INI keys the plugins declare instead, as\n"
"                      a Markdown table (docs/ini.md), --json: an array\n"
"  --render-chat FILE  print the prompt the chat template makes of an OpenAI\n"
"                      chat request body (FILE; - for stdin), nothing else;\n"
"                      --json: {\"prompt\", \"tokens\"}.  Without MODEL.ini the\n"
"                      built-in ling3 template\n"
"  --perplexity FILE   perplexity of the UTF-8 text in FILE over non-overlapping\n"
"                      windows of [runtime] context tokens (--set\n"
"                      runtime.context=N), each window a fresh sequence\n"
"  -V, --version       print the version and plugin ABI\n"
"  -h, --help          print this help\n"
"\n"
"serve: an OpenAI-compatible HTTP server (POST /v1/chat/completions,\n"
"/v1/completions, /v1/responses; GET /v1/models[/ID], /health, /metrics);\n"
"structured output, scoring (echo), n, tools; [server] keys\n"
"in docs/ini.md.  [server] slots requests are decoded together, each one\n"
"of [runtime] sequences.  SIGTERM finishes the replies under way first.\n"
"      --host ADDR     address to listen on       [server] host (127.0.0.1)\n"
"      --port N                                   [server] port (8080)\n"
"      --api-key KEY   a Bearer token to ask for  [server] api_key\n"
"\n"
"Input (one of; generation only):\n"
"  -p, --prompt TEXT   the prompt\n"
"  -f, --file FILE     read the prompt from FILE\n"
"      --tokens IDS    feed these token ids (comma-separated), no tokenizer\n"
"  -i, --interactive   read prompts from stdin line by line, reply to each; a\n"
"                      turn that overflows the context starts a new\n"
"                      conversation, one that cannot be read is skipped\n"
"\n"
"Output:\n"
"      --stop TEXT     end the reply before TEXT (repeatable; the first to\n"
"                      appear wins; TEXT itself is not printed)\n"
"      --json          machine-readable output (--plugins: a JSON array)\n"
"      --json-schema FILE  the reply is a JSON document valid under the JSON\n"
"                      Schema in FILE (constrained decoding; no thinking)\n"
"      --grammar FILE  the reply follows the GBNF grammar in FILE\n"
"      --dump-logits FILE  write the logits of every prompt position to FILE\n"
"                      (float32 little-endian, [prompt tokens, vocab_size])\n"
"      --dump-mtp-logits FILE  write the MTP layer's teacher-forced logits:\n"
"                      row t predicts prompt token t + 2 ([mtp] enabled;\n"
"                      float32 little-endian, [prompt tokens - 1, vocab_size])\n"
"\n"
"Sampling and chat (each sets the INI key in brackets):\n"
"  -n N                tokens to generate         [sampling] max_tokens\n"
"      --temp X        temperature, 0 = greedy    [sampling] temperature\n"
"      --top-k N                                  [sampling] top_k\n"
"      --top-p X                                  [sampling] top_p\n"
"      --min-p X                                  [sampling] min_p\n"
"      --seed N        -1 = from the clock        [sampling] seed\n"
"      --system TEXT   system message             [chat] system\n"
"      --no-think      answer without thinking    [chat] think = false\n"
"\n"
"Tensor parallel ([tp] in docs/ini.md):\n"
"  --set tp.rank=R     on each machine: rank 0 runs the command and prints,\n"
"                      the other ranks follow it and print nothing\n"
"      --tp-local N    run N ranks as processes of this machine over\n"
"                      loopback tcp (free ports); this process is rank 0\n"
"\n"
"  --set SECTION.KEY=VALUE   override any INI key (repeatable)\n"
"  --tokenizer ...     tokenizer tools; see tfrun --tokenizer --help\n"
"\n"
"doctor: tensor-parallel readiness: the transports and what they see (RDMA\n"
"devices, ports, MTU, GIDs), each [tp] peer's control port, and a ping-pong\n"
"and all-reduce sweep (8 B to 16 MB); --tp-local N forks N ranks on\n"
"loopback.  See tfrun doctor --help\n"
"\n"
"bench: prefill and decode speed as a table; with --vs or --vs-set, the\n"
"A/B of two configurations on speed (B/A, 95% interval) and exactness.\n"
"See tfrun bench --help\n"
"\n"
"Environment: TF_PLUGIN_PATH, ':'-separated plugin folders searched after\n"
"[plugins] path and before the build's own plugin folder.\n";

enum {
	OPT_CHECK = 256, OPT_PLUGINS, OPT_JSON, OPT_TOKENS, OPT_DUMP_LOGITS, OPT_DUMP_MTP,
	OPT_TEMP, OPT_TOP_K, OPT_TOP_P, OPT_MIN_P, OPT_SEED, OPT_SYSTEM,
	OPT_NO_THINK, OPT_SET, OPT_STOP, OPT_RENDER_CHAT, OPT_KEYS, OPT_PERPLEXITY,
	OPT_HOST, OPT_PORT, OPT_API_KEY, OPT_TP_LOCAL, OPT_JSON_SCHEMA, OPT_GRAMMAR,
};

static const struct option long_opts[] = {
	{ "help",        no_argument,       NULL, 'h' },
	{ "version",     no_argument,       NULL, 'V' },
	{ "check",       no_argument,       NULL, OPT_CHECK },
	{ "plugins",     no_argument,       NULL, OPT_PLUGINS },
	{ "json",        no_argument,       NULL, OPT_JSON },
	{ "keys",        no_argument,       NULL, OPT_KEYS },
	{ "prompt",      required_argument, NULL, 'p' },
	{ "file",        required_argument, NULL, 'f' },
	{ "tokens",      required_argument, NULL, OPT_TOKENS },
	{ "interactive", no_argument,       NULL, 'i' },
	{ "dump-logits", required_argument, NULL, OPT_DUMP_LOGITS },
	{ "dump-mtp-logits", required_argument, NULL, OPT_DUMP_MTP },
	{ "temp",        required_argument, NULL, OPT_TEMP },
	{ "top-k",       required_argument, NULL, OPT_TOP_K },
	{ "top-p",       required_argument, NULL, OPT_TOP_P },
	{ "min-p",       required_argument, NULL, OPT_MIN_P },
	{ "seed",        required_argument, NULL, OPT_SEED },
	{ "system",      required_argument, NULL, OPT_SYSTEM },
	{ "no-think",    no_argument,       NULL, OPT_NO_THINK },
	{ "set",         required_argument, NULL, OPT_SET },
	{ "render-chat", required_argument, NULL, OPT_RENDER_CHAT },
	{ "stop",        required_argument, NULL, OPT_STOP },
	{ "json-schema", required_argument, NULL, OPT_JSON_SCHEMA },
	{ "grammar",     required_argument, NULL, OPT_GRAMMAR },
	{ "perplexity",  required_argument, NULL, OPT_PERPLEXITY },
	{ "host",        required_argument, NULL, OPT_HOST },
	{ "port",        required_argument, NULL, OPT_PORT },
	{ "api-key",     required_argument, NULL, OPT_API_KEY },
	{ "tp-local",    required_argument, NULL, OPT_TP_LOCAL },
	{ NULL, 0, NULL, 0 },
};

/* The INI key each sampling or chat flag stands for. */
static const struct flag_key {
	int opt;
	const char *flag, *section, *key;
} flag_keys[] = {
	{ 'n',          "-n",         "sampling", "max_tokens" },
	{ OPT_TEMP,     "--temp",     "sampling", "temperature" },
	{ OPT_TOP_K,    "--top-k",    "sampling", "top_k" },
	{ OPT_TOP_P,    "--top-p",    "sampling", "top_p" },
	{ OPT_MIN_P,    "--min-p",    "sampling", "min_p" },
	{ OPT_SEED,     "--seed",     "sampling", "seed" },
	{ OPT_SYSTEM,   "--system",   "chat",     "system" },
	{ OPT_NO_THINK, "--no-think", "chat",     "think" },
};

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "tfrun: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\nTry 'tfrun --help'.\n");
	va_end(ap);
	return EXIT_USAGE;
}

static int conflict(const char *a, const char *b)
{
	return usage_error("%s and %s cannot be combined", a, b);
}

static void options_free(tf_options *o)
{
	for (int i = 0; i < o->n_overrides; i++)
		free(o->overrides[i]);
	free(o->overrides);
	free(o->tokens);
	free(o->stops);
}

/* Append a "section.key=value" override, checked now so that a bad value
 * fails before anything is loaded and names the flag it came from. */
static int add_override(tf_options *o, const char *flag, char *assignment)
{
	char **grown = assignment ? realloc(o->overrides, (size_t)(o->n_overrides + 1) *
					    sizeof(*grown)) : NULL;
	if (!grown) {
		free(assignment);
		fprintf(stderr, "tfrun: out of memory\n");
		return EXIT_FAILURE;
	}
	o->overrides = grown;
	o->overrides[o->n_overrides++] = assignment;
	if (tf_conf_check_set(assignment)) {
		fprintf(stderr, "tfrun: %s: %s\n", flag, tf_diag_msg());
		return EXIT_USAGE;
	}
	return 0;
}

static int add_flag_override(tf_options *o, const struct flag_key *fk,
			     const char *value)
{
	char *s = NULL;
	if (asprintf(&s, "%s.%s=%s", fk->section, fk->key, value) < 0)
		s = NULL;
	return add_override(o, fk->flag, s);
}

static int add_stop(tf_options *o, const char *text)
{
	if (!*text)
		return usage_error("%s", "--stop needs a non-empty TEXT");
	const char **grown = realloc(o->stops, (size_t)(o->n_stops + 1) * sizeof(*grown));
	if (!grown)
		return usage_error("%s", "out of memory");
	o->stops = grown;
	o->stops[o->n_stops++] = text;
	return 0;
}

static int parse_tokens(tf_options *o, const char *arg)
{
	size_t n = 1;
	for (const char *p = arg; *p; p++)
		n += *p == ',';
	free(o->tokens);
	o->tokens = malloc(n * sizeof(*o->tokens));
	if (!o->tokens)
		return usage_error("%s", "out of memory");
	o->n_tokens = 0;
	for (const char *p = arg;;) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || v < 0 || v > INT32_MAX || errno || (*end && *end != ','))
			return usage_error("--tokens %s: expected token ids like 1,2,3", arg);
		o->tokens[o->n_tokens++] = (int32_t)v;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

static int set_input(tf_options *o, tf_input in)
{
	if (o->input != TF_INPUT_NONE && o->input != in)
		return usage_error("%s", "give one of -p, -f and --tokens");
	o->input = in;
	return 0;
}

/* One mode flag per command line; *flag: the one given so far, or NULL. */
static int set_mode(tf_options *o, const char **flag, tf_run_mode mode, const char *name)
{
	if (*flag && strcmp(*flag, name))
		return conflict(*flag, name);
	*flag = name;
	o->mode = mode;
	return 0;
}

/* The flags only generation reads, checked once the mode is known. */
static int check_combination(const tf_options *o, const char *mode_flag)
{
	static const char *const input_flags[] = {
		[TF_INPUT_TEXT] = "-p", [TF_INPUT_FILE] = "-f", [TF_INPUT_TOKENS] = "--tokens",
	};
	const char *input = o->input ? input_flags[o->input] : NULL;
	const char *gen = input ? input : o->interactive ? "-i" : o->n_stops ? "--stop" :
			  o->dump_logits ? "--dump-logits" :
			  o->dump_mtp ? "--dump-mtp-logits" :
			  o->json_schema ? "--json-schema" : o->grammar ? "--grammar" : NULL;

	if (mode_flag && gen)
		return conflict(mode_flag, gen);
	if (o->interactive && input)
		return conflict(input, "-i");
	if (o->json_schema && o->grammar)
		return conflict("--json-schema", "--grammar");
	if (o->interactive && o->dump_logits)
		return conflict("-i", "--dump-logits");
	if (o->interactive && o->dump_mtp)
		return conflict("-i", "--dump-mtp-logits");
	if (o->keys && o->mode != TF_RUN_PLUGINS)
		return usage_error("%s", "--keys needs --plugins");
	if ((o->host || o->port || o->api_key) && o->mode != TF_RUN_SERVE)
		return usage_error("%s", "--host, --port and --api-key need tfrun serve");
	return 0;
}

/* 0, or the exit status to leave with. */
static int options_parse(int argc, char **argv, tf_options *o)
{
	const char *mode_flag = o->mode == TF_RUN_SERVE ? "serve" : NULL;
	char *end;
	bool help = false, version = false;
	int c, rc = 0;
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, ":hVp:f:in:", long_opts, NULL)) != -1) {
		const struct flag_key *fk = NULL;
		for (size_t i = 0; i < sizeof(flag_keys) / sizeof(flag_keys[0]); i++)
			if (flag_keys[i].opt == c)
				fk = &flag_keys[i];
		if (fk) {
			rc = add_flag_override(o, fk, c == OPT_NO_THINK ? "false" : optarg);
			continue;
		}
		switch (c) {
		case 'h': help = true; break;
		case 'V': version = true; break;
		case OPT_CHECK: rc = set_mode(o, &mode_flag, TF_RUN_CHECK, "--check"); break;
		case OPT_PLUGINS: rc = set_mode(o, &mode_flag, TF_RUN_PLUGINS, "--plugins"); break;
		case OPT_PERPLEXITY:
			rc = set_mode(o, &mode_flag, TF_RUN_PERPLEXITY, "--perplexity");
			o->perplexity = optarg;
			break;
		case OPT_JSON: o->json = true; break;
		case OPT_KEYS: o->keys = true; break;
		case 'i': o->interactive = true; break;
		case OPT_DUMP_LOGITS: o->dump_logits = optarg; break;
		case OPT_DUMP_MTP: o->dump_mtp = optarg; break;
		case OPT_SET: rc = add_override(o, "--set", strdup(optarg)); break;
		case OPT_RENDER_CHAT:
			rc = set_mode(o, &mode_flag, TF_RUN_RENDER_CHAT, "--render-chat");
			o->render_request = strcmp(optarg, "-") ? optarg : "/dev/stdin";
			break;
		case OPT_STOP: rc = add_stop(o, optarg); break;
		case OPT_JSON_SCHEMA: o->json_schema = optarg; break;
		case OPT_GRAMMAR: o->grammar = optarg; break;
		case OPT_HOST: o->host = optarg; break;
		case OPT_API_KEY: o->api_key = optarg; break;
		case OPT_TP_LOCAL:
			o->tp_local = (int)strtol(optarg, &end, 10);
			if (*end || o->tp_local < 2 || o->tp_local > TF_TP_LOCAL_MAX)
				rc = usage_error("--tp-local %s: expected 2..%d ranks", optarg,
						 TF_TP_LOCAL_MAX);
			break;
		case OPT_PORT:
			o->port = (int)strtol(optarg, &end, 10);
			if (*end || o->port < 1 || o->port > 65535)
				rc = usage_error("--port %s: expected 1..65535", optarg);
			break;
		case 'p':
			rc = set_input(o, TF_INPUT_TEXT);
			o->prompt = optarg;
			break;
		case 'f':
			rc = set_input(o, TF_INPUT_FILE);
			o->prompt_file = optarg;
			if (!rc && access(optarg, R_OK) != 0) {
				fprintf(stderr, "tfrun: -f %s: %s\n", optarg, strerror(errno));
				rc = EXIT_USAGE;
			}
			break;
		case OPT_TOKENS:
			rc = set_input(o, TF_INPUT_TOKENS);
			if (!rc)
				rc = parse_tokens(o, optarg);
			break;
		case ':':
			return usage_error("%s needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (rc)
		return rc;
	/* --help and --version answer whatever else is given. */
	if (help || version) {
		o->mode = help ? TF_RUN_HELP : TF_RUN_VERSION;
		return 0;
	}
	if ((rc = check_combination(o, mode_flag)))
		return rc;
	if (optind < argc)
		o->ini = argv[optind++];
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->ini && o->mode != TF_RUN_PLUGINS && o->mode != TF_RUN_RENDER_CHAT)
		return usage_error("%s", "no MODEL.ini given");
	if (o->mode == TF_RUN_GENERATE && o->input == TF_INPUT_NONE) {
		if (!isatty(STDIN_FILENO) && !o->interactive)
			o->input = TF_INPUT_STDIN;
		else
			o->interactive = true;
	}
	return 0;
}

static int run_plugins(const tf_options *o)
{
	if (tf_plugins_print(o->ini, (const char *const *)o->overrides, o->n_overrides,
			     o->keys, o->json, stdout))
		return tf_cli_fail(NULL);
	return 0;
}

/* --check --json's answer when the check fails: {"ini", "ok", "error"}. */
static void check_json_error(const char *ini)
{
	cJSON *o = cJSON_CreateObject();
	char *s = NULL;
	if (o && cJSON_AddStringToObject(o, "ini", ini) && cJSON_AddBoolToObject(o, "ok", 0) &&
	    cJSON_AddStringToObject(o, "error", tf_diag_msg()) && (s = cJSON_Print(o)))
		printf("%s\n", s);
	cJSON_free(s);
	cJSON_Delete(o);
}

/* Open the model and every layer against its tensors, then report. */
static int run_check(const tf_options *o)
{
	bool plan_only;
	if (tf_model_check(o->ini, (const char *const *)o->overrides, o->n_overrides, o->json,
			   stdout, &plan_only)) {
		if (o->json)
			check_json_error(o->ini);
		return tf_cli_fail(o->ini);
	}
	if (!o->json)
		printf("%s: ok%s\n", o->ini, plan_only ? " (header-only checkpoint: the memory "
			"plan only; no plugin, device or layer opened)" : "");
	return 0;
}

int main(int argc, char **argv)
{
	/* The tokenizer tools parse flags of their own. */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--tokenizer"))
			return tf_cli_tokenizer(argc, argv);

	/* "doctor" and "bench" parse flags of their own. */
	if (argc > 1 && !strcmp(argv[1], "doctor"))
		return tf_cli_doctor(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return tf_cli_bench(argc - 1, argv + 1);

	/* "serve" is a subcommand word: the flags follow it. */
	bool serve = argc > 1 && !strcmp(argv[1], "serve");
	tf_options o = { .mode = serve ? TF_RUN_SERVE : TF_RUN_GENERATE };
	int rc = options_parse(argc - serve, argv + serve, &o);
	tf_tp_local local = { 0 };
	if (!rc && o.tp_local && !(rc = tf_cli_tp_local_start(&local, o.tp_local, argc, argv)))
		for (int s = 0; !rc && s < TF_TP_LOCAL_SETS; s++)
			rc = add_override(&o, "--tp-local", strdup(local.set[s]));
	if (rc) {
		if (o.tp_local)
			rc = tf_cli_tp_local_finish(&local, rc);
		options_free(&o);
		return rc;
	}
	switch (o.mode) {
	case TF_RUN_HELP:
		fputs(usage, stdout);
		break;
	case TF_RUN_VERSION:
		printf("tfrun %s (plugin ABI %d.%d)\n", TF_VERSION_STRING, TF_ABI_MAJOR,
		       TF_ABI_MINOR);
		break;
	case TF_RUN_PLUGINS:
		rc = run_plugins(&o);
		break;
	case TF_RUN_CHECK:
		rc = run_check(&o);
		break;
	case TF_RUN_GENERATE:
		rc = tf_cli_generate(&o);
		break;
	case TF_RUN_RENDER_CHAT:
		rc = tf_cli_render_chat(&o);
		break;
	case TF_RUN_PERPLEXITY:
		rc = tf_cli_perplexity(&o);
		break;
	case TF_RUN_SERVE:
		rc = tf_cli_serve(&o);
		break;
	}
	if (o.tp_local)
		rc = tf_cli_tp_local_finish(&local, rc);
	options_free(&o);
	return rc;
}
