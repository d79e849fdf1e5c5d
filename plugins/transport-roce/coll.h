/*
 * coll.h - the roce transport's collectives, over any link that can write
 * a slot to a peer with an immediate and report completions.
 *
 * verbs.c is the real link; tests/tp/test_roce_coll.c runs the same
 * collectives over a link of threads and shared memory, so the chunking,
 * the double-buffered slots and the completions (round.h) are exercised
 * without RDMA hardware.
 */
#ifndef TF_ROCE_COLL_H
#define TF_ROCE_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "round.h"
#include "tf/dtype.h"

typedef struct tf_link_ops {
	/* Write len bytes of send slot k % slots into peer p's slot for this
	 * rank (tf_slot_offset), with k as the immediate: 0, or -1 with why. */
	int (*write)(void *link, int p, uint32_t k, size_t len, char *why, size_t n);
	/* Up to max completions, without waiting: their count, or -1 with why. */
	int (*poll)(void *link, tf_completion *out, int max, char *why, size_t n);
} tf_link_ops;

typedef struct tf_coll {
	const tf_link_ops *ops;
	void *link;
	uint8_t *send_buf;              /* slots x slot_bytes */
	const uint8_t *recv_buf;        /* size x slots x slot_bytes */
	int rank, size, slots, timeout_ms;
	size_t slot_bytes;
	tf_round round;
	uint32_t k;                     /* the next round */
	uint32_t expect[TF_ROUND_MAX];
	bool failed;
	/* The last failure: the operation and round, the peer (-1: none in
	 * particular) and why. */
	char what[64];
	int peer;
	char why[256];
} tf_coll;

void tf_coll_init(tf_coll *c, const tf_link_ops *ops, void *link, uint8_t *send_buf,
		  const uint8_t *recv_buf, int rank, int size, int slots, size_t slot_bytes,
		  int timeout_ms);

/* 0, or -1 with what, peer and why set; then every later call fails. */
int tf_coll_all_reduce(tf_coll *c, void *buf, size_t count, tf_dtype dtype);
int tf_coll_all_gather(tf_coll *c, const void *in, void *out, size_t bytes);
int tf_coll_broadcast(tf_coll *c, void *buf, size_t bytes, int root);
int tf_coll_barrier(tf_coll *c);

#endif /* TF_ROCE_COLL_H */
