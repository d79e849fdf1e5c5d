/*
 * tokenize_cmd.h - `tfrun --tokenizer FILE ...`: the tokenizer on its own,
 * for scripts and tests.
 *
 *   --encode TEXT | --encode-file PATH   prints the ids as a JSON array
 *   --decode 1,2,3                       prints the text
 *   --add-special    add the post-processor's BOS/EOS when encoding
 *   --skip-special   leave special tokens out when decoding
 *
 * FILE is a tokenizer.json or a folder holding one.
 */
#ifndef TF_CLI_TOKENIZE_CMD_H
#define TF_CLI_TOKENIZE_CMD_H

/* Parses all of argv itself; returns the exit status (0, 1 error, 2 usage). */
int tf_cli_tokenizer(int argc, char **argv);

#endif /* TF_CLI_TOKENIZE_CMD_H */
