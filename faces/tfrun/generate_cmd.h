/*
 * generate_cmd.h - `tfrun MODEL.ini [input]`: prefill, decode, report.
 *
 * Opens the runtime and the layer pipeline, turns the input into token ids
 * (--tokens as given; text through the checkpoint's tokenizer.json and the
 * chat template), runs the prompt through in [runtime] prefill_chunk
 * steps, then samples up to [sampling] max_tokens tokens, streaming text
 * (cut before any --stop string), and ends with the stats line (or one
 * JSON object with --json) saying why the reply ended: eos, length,
 * context (also said on stderr; the exit status stays 0) or stop.
 * --dump-logits writes float32 little-endian logits [n_prompt, vocab].
 */
#ifndef TF_GENERATE_CMD_H
#define TF_GENERATE_CMD_H

#include "options.h"

int tf_cli_generate(const tf_options *o);

#endif /* TF_GENERATE_CMD_H */
