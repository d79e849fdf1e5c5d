/*
 * render_cmd.h - `tfrun [MODEL.ini] --render-chat REQUEST.json`: the prompt
 * an OpenAI chat request makes, exactly as the model would be fed it.
 *
 * Prints the prompt text and nothing else; with --json, one JSON object
 * {"prompt": TEXT, "tokens": [IDS]} (the ids need MODEL.ini's tokenizer).
 * The template is MODEL.ini's [chat] template; without MODEL.ini, ling3.
 */
#ifndef TF_RENDER_CMD_H
#define TF_RENDER_CMD_H

#include "options.h"

int tf_cli_render_chat(const tf_options *o);

#endif /* TF_RENDER_CMD_H */
