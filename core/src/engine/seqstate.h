/*
 * seqstate.h - one sequence's attention state in every layer of a pipeline.
 *
 * A layer whose plugin has the ABI 1.5 state slots gets a state object of
 * its own per sequence.  A plugin built before 1.5 holds its one sequence
 * inside its layer instance: while the pipeline has such a layer, only one
 * seqstate exists at a time (TF_ERR_UNSUPPORTED names the layer), and it
 * cannot be copied.
 *
 * Each seqstate keeps a snapshot per slot (tf_seqstate_snapshot): the
 * caller's (tf_seq_snapshot) and a verify's, so that undoing drafts never
 * moves the caller's; buffers taken on first use and kept for the next.
 */
#ifndef TF_SEQSTATE_H
#define TF_SEQSTATE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/pipeline.h"

/* An empty state for up to max_ctx tokens. */
int tf_seqstate_new(tf_pipeline *p, int64_t max_ctx, tf_seqstate **out);
void tf_seqstate_free(tf_seqstate *s);

/* Empty it again. */
void tf_seqstate_reset(tf_seqstate *s);
/* dst holds what src holds (same pipeline); TF_ERR_UNSUPPORTED for a
 * pre-1.5 layer. */
int tf_seqstate_copy(tf_seqstate *dst, const tf_seqstate *src);

typedef enum tf_snap_slot {
	TF_SNAP_USER,                   /* tf_seq_snapshot's */
	TF_SNAP_VERIFY,                 /* taken before a verify, to undo drafts */
	TF_SNAP_SLOTS
} tf_snap_slot;

/* Save the state as it is now in `slot`, replacing what it held; go back
 * to it (TF_ERR_INVALID when none was taken). */
int tf_seqstate_snapshot(tf_seqstate *s, tf_snap_slot slot);
int tf_seqstate_rollback(tf_seqstate *s, tf_snap_slot slot);

/*
 * With the MTP layer (pipeline.h): mark its state alone, apart from the
 * snapshot, and go back to the mark, so drafts past the main state leave
 * no trace.
 */
int tf_seqstate_mtp_mark(tf_seqstate *s);
int tf_seqstate_mtp_back(tf_seqstate *s);

/*
 * The rows the MTP layer has not been fed yet (pipeline.h): the
 * final-normed hidden states hidden [n, hidden_size] (host memory) and the
 * tokens of positions *pos0 .. *pos0 + n - 1, n returned; the snapshot and
 * the copy cover them with the rest.  tf_seqstate_pend_add makes room for
 * n more, at positions pos.. (right after the kept ones), copies their
 * tokens and points *rows where their hidden states go;
 * tf_seqstate_pend_drop forgets the first n, fed now.
 */
int64_t tf_seqstate_pending(const tf_seqstate *s, float **hidden, int32_t **tokens,
			    int32_t *pos0);
int64_t tf_seqstate_pending_n(const tf_seqstate *s);    /* the count alone */
int tf_seqstate_pend_add(tf_seqstate *s, int32_t pos, const int32_t *tokens, int64_t n,
			 float **rows);
void tf_seqstate_pend_drop(tf_seqstate *s, int64_t n);

/* While set ([mtp] adaptive decoding plainly), rows kept past a step's are
 * dropped instead of fed to the MTP layer (pipeline.h). */
void tf_seqstate_mtp_skip(tf_seqstate *s, bool skip);
bool tf_seqstate_mtp_skips(const tf_seqstate *s);

/* Layer i's state object (the instance itself for a pre-1.5 plugin). */
void *tf_seqstate_layer(const tf_seqstate *s, int i);

#endif /* TF_SEQSTATE_H */
