/*
 * tpsync.h - tensor-parallel ranks kept in step with rank 0.
 *
 * Rank 0 runs the face (tfrun, the server) and its engine; every other
 * rank's engine replays rank 0's state-changing calls, sent to it as they
 * happen (tf_engine_follow), so the collectives inside a step meet.  Rank
 * 0 sends each call before running it: the followers refuse a bad call
 * exactly as rank 0 does, since their sequence tables are the same.
 * Rank 0 alone samples; its tokens reach the others inside the next
 * forward call, so nothing depends on two ranks drawing the same token.
 *
 * The engine's part of the fingerprint the handshake compares covers the
 * checkpoint (config.json, every tensor's name, type, shape and first
 * bytes); tf_tp_open joins the INI's and the overrides' to it, so ranks
 * that would compute different things are refused before loading.
 */
#ifndef TF_ENGINE_TPSYNC_H
#define TF_ENGINE_TPSYNC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/runtime.h"
#include "tf/engine.h"
#include "tf/tp.h"

/* "ckpt:<16 hex>" into out (at least TF_TPSYNC_FP_LEN bytes). */
#define TF_TPSYNC_FP_LEN 24
int tf_tpsync_fingerprint(const tf_runtime *rt, char *out);

typedef enum tf_tpsync_op {
	TF_TPSYNC_CLOSE = 1,            /* rank 0 closed its engine */
	TF_TPSYNC_SEQ_NEW,
	TF_TPSYNC_SEQ_FREE,             /* seq */
	TF_TPSYNC_SEQ_FORK,             /* seq: the source */
	TF_TPSYNC_SEQ_SNAPSHOT,         /* seq */
	TF_TPSYNC_SEQ_ROLLBACK,         /* seq */
	TF_TPSYNC_SEQ_TRUNCATE,         /* seq, arg: the length kept */
	TF_TPSYNC_FORWARD,              /* the batch; arg: TF_TPSYNC_LOGITS, _TAPE */
	TF_TPSYNC_SEQ_DRAFT,            /* seq, arg: the next token, n: the depth;
					 * greedy MTP drafts (tf_seq_draft) */
	TF_TPSYNC_BEAT,                 /* rank 0 is idle but alive */
	TF_TPSYNC_SEQ_DRAFT_TOLD,       /* seq, arg: MTP row 0's token, n: the most
					 * rows; after each row rank 0 broadcasts
					 * the next row's token, -1 where its
					 * drafter stops */
	TF_TPSYNC_SEQ_UNDO,             /* seq, arg: the length kept, n: the rows of
					 * the verify just run, undone from its tape */
} tf_tpsync_op;

/* A FORWARD's arg: lm_head runs (its all-gather needs every rank); the
 * step is a verify that keeps its tape (pipeline.h) for a SEQ_UNDO. */
enum { TF_TPSYNC_LOGITS = 1, TF_TPSYNC_TAPE = 2 };

/* One call as it travels. */
typedef struct tf_tpsync_msg {
	int32_t op;
	tf_seq_id seq;
	int64_t arg;
	int64_t n;                      /* FORWARD: tokens; SEQ_DRAFT*: depth */
	uint32_t has;                   /* FORWARD: which of seq, pos, out follow */
	uint32_t row0;                  /* SEQ_UNDO: the sequence's first row in the verify */
} tf_tpsync_msg;

/* A received FORWARD's arrays, grown as needed. */
typedef struct tf_tpsync_buf {
	unsigned char *bytes;
	size_t cap;
} tf_tpsync_buf;

/* Rank 0: send m and, for FORWARD, b's arrays. */
int tf_tpsync_send(tf_tp *tp, tf_tpsync_msg m, const tf_batch *b);
/* A follower: the next call; for FORWARD, *b points into buf. */
int tf_tpsync_recv(tf_tp *tp, tf_tpsync_msg *m, tf_batch *b, tf_tpsync_buf *buf);
void tf_tpsync_buf_free(tf_tpsync_buf *buf);

/*
 * Rank 0's heartbeat: a followers wait at most [tp] timeout for rank 0's
 * next call, so while rank 0's face is idle (a chat waiting for its user,
 * a server for requests) a thread sends a BEAT every `interval` seconds
 * without a call.  Rank 0's calls hold the lock (tf_tpsync_beat_lock) from
 * their send to the end of their collectives, so no beat falls between.
 * A beat that fails is not retried: the next call fails naming the peer.
 */
typedef struct tf_tpsync_beat tf_tpsync_beat;
int tf_tpsync_beat_start(tf_tp *tp, double interval, tf_tpsync_beat **out);
void tf_tpsync_beat_stop(tf_tpsync_beat *b);
void tf_tpsync_beat_lock(tf_tpsync_beat *b);
void tf_tpsync_beat_unlock(tf_tpsync_beat *b);

#endif /* TF_ENGINE_TPSYNC_H */
