/*
 * round.h - slots and completions of the RDMA collectives.
 *
 * A collective moves in rounds.  In round k every rank RDMA-writes one
 * chunk (perhaps empty) into each peer's receive region, at the slot
 * tf_slot_offset gives, with k as the immediate; the write's receive
 * completion tells the peer the chunk is there.  A rank starts round k+1
 * only when it holds every peer's chunk k, and a peer's chunk k+1 goes to
 * the other slot, so with two slots a chunk is never overwritten before
 * it is read.  A fast peer's chunk k+1 may complete while this rank still
 * waits in round k: it is kept and counted when round k+1 begins.
 */
#ifndef TF_ROCE_ROUND_H
#define TF_ROCE_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TF_ROUND_MAX 64                 /* ranks */

/* One work completion as the verbs layer reports it. */
typedef struct tf_completion {
	int peer;                       /* whose queue pair */
	bool recv;                      /* a peer's write arrived (else our write finished) */
	bool ok;
	uint32_t imm;                   /* recv: the round it belongs to */
	uint32_t len;                   /* recv: bytes written */
	const char *status;             /* !ok: the verbs status text */
} tf_completion;

typedef struct tf_round {
	int rank, size;
	uint32_t k;
	const uint32_t *expect;         /* bytes each peer writes this round */
	bool got[TF_ROUND_MAX], sent[TF_ROUND_MAX];
	bool ahead[TF_ROUND_MAX];       /* a chunk of round k+1 already in */
	uint32_t ahead_len[TF_ROUND_MAX];
} tf_round;

/* Where peer's chunk of round k lands in this rank's receive region. */
size_t tf_slot_offset(int peer, uint32_t k, int slots, size_t slot_bytes);

/* Rounds a message of `bytes` takes in slots of slot_bytes (at least 1). */
size_t tf_round_count(size_t bytes, size_t slot_bytes);

void tf_round_init(tf_round *r, int rank, int size);
/* Start round k (the previous one's successor, or the first); expect:
 * size entries, alive until the round is done.  0, or 1 with why when a
 * chunk kept from the previous round disagrees. */
int tf_round_begin(tf_round *r, uint32_t k, const uint32_t *expect, char *why, size_t n);
/* Count one completion: 0, or 1 with why (a failed write, a chunk of
 * another round or size, a duplicate). */
int tf_round_complete(tf_round *r, const tf_completion *c, char *why, size_t n);
bool tf_round_done(const tf_round *r);
/* The first peer the round still waits for, -1 when none. */
int tf_round_pending(const tf_round *r);

#endif /* TF_ROCE_ROUND_H */
