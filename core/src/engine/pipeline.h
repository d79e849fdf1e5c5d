/*
 * pipeline.h - the Ling layer stack: one step over a batch of rows.
 *
 *   embed -> for each layer: rmsnorm -> attention -> +residual
 *                            rmsnorm -> ffn       -> +residual
 *         -> final norm                      (tf_pipeline_step)
 *         -> lm_head                         (tf_pipeline_head)
 *
 * The pipeline creates one instance of the chosen attention and ffn plugin
 * per layer (tf_runtime_attention/ffn), holding weights only, and owns the
 * activation buffers of one step of at most [runtime] prefill_chunk rows.
 * The rows of a step belong to one or more sequences, each a tf_seqstate
 * (seqstate.h) holding that sequence's state in every layer: linears and
 * the FFN run over all rows at once, attention per sequence.
 *
 * When the drafter runs the MTP layer (TF_DRAFTER_MTP), the layer at index
 * num_hidden_layers opens too, through the plugins chosen for that index,
 * and its state is one more layer of every tf_seqstate.  A step keeps its final-normed rows in their
 * sequences (seqstate.h) instead of feeding them to the MTP layer: decoding
 * without drafts spends nothing on it.  When a draft is wanted
 * (tf_pipeline_mtp_catch_up), or when the rows kept would pass a step's,
 * the layer takes them in one batched pass; in the latter case a sequence
 * that skips (tf_seqstate_mtp_skip) drops the older ones instead.
 *
 * Tensor parallel ([tp] size > 1): the layer plugins open this rank's
 * share of their weights (tf_host lin_open_part) and lm_head opens this
 * rank's rows of the vocabulary.  With the communicator attached
 * (tf_pipeline_attach_tp), each attention and FFN block's partial output
 * is all-reduced before the residual add, and the logits are all-gathered,
 * so every rank holds the same hidden states and logits.
 */
#ifndef TF_PIPELINE_H
#define TF_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/runtime.h"
#include "tf/sampler.h"

struct tf_tp;

typedef struct tf_pipeline tf_pipeline;
typedef struct tf_seqstate tf_seqstate;

/* Where forward time went, by plugin slot (seconds, since init/reset);
 * layers of a type a plugin adds count under TF_STAGE_OTHER. */
typedef enum tf_stage {
	TF_STAGE_EMBED, TF_STAGE_KDA, TF_STAGE_MLA, TF_STAGE_DENSE, TF_STAGE_MOE,
	TF_STAGE_NORM, TF_STAGE_HEAD, TF_STAGE_OTHER,
	TF_STAGE_TP,                    /* tensor parallel: inside all-reduce and all-gather */
	TF_STAGE_COUNT
} tf_stage;

int tf_pipeline_init(tf_runtime *rt, tf_pipeline **out);
/* The communicator of [tp] size ranks the steps sum over (not owned). */
void tf_pipeline_attach_tp(tf_pipeline *p, struct tf_tp *tp);
void tf_pipeline_free(tf_pipeline *p);

/* `tfrun --check`: open every layer, the embedding, the norms and the
 * head against their tensors (presence, dtype, shape, quant format) and
 * close them again, without computing or paging the weights in first.
 * Fails like tf_pipeline_init, naming the layer, tensor and config key. */
int tf_pipeline_check(tf_runtime *rt);

/* The rows [row0, row0 + n) of a step that continue one sequence. */
typedef struct tf_pipe_seg {
	tf_seqstate *state;
	int64_t row0, n;
} tf_pipe_seg;

/* Which rows of a step leave it: row[k]'s final-normed hidden state goes
 * to row at[k] of the caller's buffer. */
typedef struct tf_pipe_out {
	const int64_t *row, *at;
	int64_t n;
} tf_pipe_out;

/*
 * One step of n <= tf_pipeline_rows() tokens: seg[0..n_seg) cover rows
 * 0..n-1 in order, one segment per sequence, pos[i] row i's position.
 * The hidden states `out` names go to hidden [*, hidden_size], in backend
 * memory.  Tokens were checked against the vocabulary by the caller.  On
 * failure the states of the segments may have moved part way.
 */
int tf_pipeline_step(tf_pipeline *p, const int32_t *tokens, const int32_t *pos, int64_t n,
		     const tf_pipe_seg *seg, int n_seg, const tf_pipe_out *out, float *hidden);

/*
 * Feed s's MTP layer every row s kept whose next token is known: all but
 * the last, whose hidden the first draft takes.
 */
int tf_pipeline_mtp_catch_up(tf_pipeline *p, tf_seqstate *s);
/* The seconds and rows of every catching up so far, for the drafter's policy. */
void tf_pipeline_mtp_caught(const tf_pipeline *p, double *seconds, int64_t *rows);

/*
 * One row of the MTP layer for s at position pos (spec 1.10): token is the
 * one at pos + 1, hidden (backend memory) the final-normed hidden at pos,
 * or NULL for the one s kept from its last step (caught up first).  out [hidden_size]
 * (backend memory, may alias hidden) receives the layer's final-normed
 * output, the head's input and the next row's hidden.  The MTP layer's
 * state in s grows by the row.
 */
int tf_pipeline_mtp(tf_pipeline *p, tf_seqstate *s, int32_t token, int32_t pos,
		    const float *hidden, float *out);

/*
 * A verify's tape, to undo rejected drafts cheaply.  tf_pipeline_tape_open
 * makes room for up to `rows` rows (at most the step's); tf_pipeline_tape
 * arms it for the next step alone, which then keeps every layer's
 * attention input, its tokens and, with the MTP layer open, its
 * final-normed rows, if its rows fit and each of its sequences continues
 * (its first row at a position > 0); tf_pipeline_taped says how many rows
 * the last step kept (0: none).  tf_pipeline_replay takes one of the
 * step's sequences, rolled back to before the step, forward by n of its
 * rows (the step's rows row0.., positions pos..) through each layer's
 * attention alone: the FFNs, norms and head hold no state, and the rows'
 * attention inputs are those the step computed, so every state (and the
 * rows kept for the MTP layer) is what the step left after those rows.
 * At most once per sequence of the step.  No collectives: a
 * tensor-parallel rank replays its own share from the tape its own run of
 * the step kept.  The tape is backend memory, copied there within the
 * step (no download: a verify still runs as graphs); the replay downloads
 * only the final-normed rows.
 */
int tf_pipeline_tape_open(tf_pipeline *p, int64_t rows);
void tf_pipeline_tape(tf_pipeline *p);
int64_t tf_pipeline_taped(const tf_pipeline *p);
int tf_pipeline_replay(tf_pipeline *p, tf_seqstate *s, int64_t row0, int32_t pos, int64_t n);

/* logits [n, vocab] (host memory) = lm_head(hidden [n, hidden_size]). */
int tf_pipeline_head(tf_pipeline *p, const float *hidden, int64_t n, float *logits);

/*
 * Logits kept on the device.  Where the backend has a stream and the
 * sample slot (tf/backend.h) and no [tp] gather is needed
 * (tf_pipeline_can_sample), tf_pipeline_head_keep leaves lm_head's n rows
 * in backend memory, until the next head; tf_pipeline_kept_logits
 * downloads rows [row0, row0 + n) of them, and tf_pipeline_sample picks
 * a token per row there with par over the first n_vocab logits, row r at
 * (seq[r], pos[r]) and no history (TF_ERR_UNSUPPORTED, no diagnostic:
 * the backend cannot reproduce par's pick; -1 for a row of only -inf).
 */
bool tf_pipeline_can_sample(const tf_pipeline *p);
int tf_pipeline_head_keep(tf_pipeline *p, const float *hidden, int64_t n);
int tf_pipeline_kept_logits(tf_pipeline *p, int64_t row0, int64_t n, float *logits);
int tf_pipeline_sample(tf_pipeline *p, const tf_sampler_params *par, int64_t row0, int64_t n,
		       int n_vocab, const uint64_t *seq, const uint64_t *pos, int32_t *token);

int64_t tf_pipeline_rows(const tf_pipeline *p);       /* rows per step */
int tf_pipeline_vocab(const tf_pipeline *p);
int tf_pipeline_hidden_size(const tf_pipeline *p);
const tf_host *tf_pipeline_host(const tf_pipeline *p);

double tf_pipeline_stage_seconds(const tf_pipeline *p, tf_stage s);
/* The stages' clock: monotonic seconds. */
double tf_pipeline_clock(void);
void tf_pipeline_stats_reset(tf_pipeline *p);
const char *tf_stage_name(tf_stage s);
/* Steps (MTP drafts and catch-ups too) run as graphs, the graphs they ran
 * (a part between each two host waits), and those of them that built a
 * new one. */
void tf_pipeline_graph_stats(const tf_pipeline *p, uint64_t *steps, uint64_t *runs,
			     uint64_t *built);

/* For seqstate.c: the layers with state (the MTP layer last, when open),
 * layer i's attention plugin and instance, and whether the plugin keeps
 * state apart (ABI 1.5) or in the instance. */
int tf_pipeline_layers(const tf_pipeline *p);
bool tf_pipeline_has_mtp(const tf_pipeline *p);
const tf_plugin_attention *tf_pipeline_attn(const tf_pipeline *p, int i, void **inst);
bool tf_pipeline_attn_batched(const tf_pipeline *p, int i);
/* The pipeline's pre-1.5 layers hold one sequence: claim them for `owner`
 * (TF_ERR_UNSUPPORTED naming the first such layer when another holds
 * them; TF_OK when there are none), release them when it goes. */
int tf_pipeline_legacy_claim(tf_pipeline *p, const void *owner);
void tf_pipeline_legacy_release(tf_pipeline *p, const void *owner);

#endif /* TF_PIPELINE_H */
