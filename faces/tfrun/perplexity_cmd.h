/*
 * perplexity_cmd.h - `tfrun MODEL.ini --perplexity FILE`: the perplexity of
 * a text, like llama-perplexity.
 *
 * The file (UTF-8) is encoded by the checkpoint's tokenizer without special
 * tokens and cut into non-overlapping windows of [runtime] context tokens
 * (the tail shorter than a window is dropped).  Each window starts a fresh
 * sequence; every token of it but the first is scored from the tokens
 * before it in the window.  Prints exp(mean negative log-likelihood) with a
 * progress bar, or one JSON object with --json.
 */
#ifndef TF_PERPLEXITY_CMD_H
#define TF_PERPLEXITY_CMD_H

#include "options.h"

int tf_cli_perplexity(const tf_options *o);

#endif /* TF_PERPLEXITY_CMD_H */
