/*
 * pipeline.h - the Ling layer stack of one sequence, token ids in, logits out.
 *
 *   embed -> for each layer: rmsnorm -> attention -> +residual
 *                            rmsnorm -> ffn       -> +residual
 *         -> final norm -> lm_head
 *
 * The pipeline creates one instance of the chosen attention and ffn plugin
 * per layer (tf_runtime_attention/ffn), owns the activation buffers, and
 * runs any number of tokens that continue the sequence, cut into chunks of
 * at most [runtime] prefill_chunk rows.  The MTP layer at index
 * num_hidden_layers is not part of the stack; the drafter runs it.
 */
#ifndef TF_PIPELINE_H
#define TF_PIPELINE_H

#include <stdint.h>

#include "runtime.h"

typedef struct tf_pipeline tf_pipeline;

/* Where forward time went, by plugin slot (seconds, since init/reset). */
typedef enum tf_stage {
	TF_STAGE_EMBED, TF_STAGE_KDA, TF_STAGE_MLA, TF_STAGE_DENSE, TF_STAGE_MOE,
	TF_STAGE_NORM, TF_STAGE_HEAD, TF_STAGE_COUNT
} tf_stage;

int tf_pipeline_init(tf_runtime *rt, tf_pipeline **out);
void tf_pipeline_free(tf_pipeline *p);

/* `tfrun --check`: open every layer, the embedding, the norms and the
 * head against their tensors (presence, dtype, shape, quant format) and
 * close them again, without computing or paging the weights in first.
 * Fails like tf_pipeline_init, naming the layer, tensor and config key. */
int tf_pipeline_check(tf_runtime *rt);

/* Run n tokens continuing the sequence.  `logits`, when not NULL, receives
 * [n, vocab] float32 rows for every position when all_logits, else one
 * row for the last token.  Fails with TF_ERR_RANGE past the context. */
int tf_pipeline_forward(tf_pipeline *p, const int32_t *tokens, int64_t n,
			float *logits, int all_logits);

/* Forget the sequence (every attention state) and the stage timers. */
void tf_pipeline_reset(tf_pipeline *p);

/* Tokens consumed so far, and the sequence limit. */
int64_t tf_pipeline_pos(const tf_pipeline *p);
int64_t tf_pipeline_context(const tf_pipeline *p);
int tf_pipeline_vocab(const tf_pipeline *p);

/* The final-normed hidden state of the last token run ([hidden_size]). */
const float *tf_pipeline_hidden(const tf_pipeline *p);

double tf_pipeline_stage_seconds(const tf_pipeline *p, tf_stage s);
const char *tf_stage_name(tf_stage s);

#endif /* TF_PIPELINE_H */
