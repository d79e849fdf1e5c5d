/*
 * tp_case.h - one rank's side of the collective checks, shared by the
 * forked-process tests (test_tp_tcp.c) and the one-rank program the
 * network-namespace test runs in each namespace (tp_rank.c).
 *
 * Every rank's inputs come from (seed, rank), so each rank rebuilds the
 * others' and holds its results to a plain rank-order reference on its
 * own; the digest of all results lets the caller check that the ranks
 * agree bit for bit.
 */
#ifndef TF_TEST_TP_CASE_H
#define TF_TEST_TP_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "tf/tp.h"

/* tf_tp_open with [tp] size, rank, peers, timeout (seconds) and the
 * transport as overrides, and `extra` (NULL: none) after them. */
int tp_case_open(int rank, int size, const char *peers, const char *fingerprint,
		 double timeout_s, const char *transport, const char *extra, tf_tp **out);

/* Peers "127.0.0.1:P0,127.0.0.1:P1,..." on ports free just now. */
void tp_case_local_peers(int size, char *out, size_t n);

/* Rank r's input to case c: count values uniform in [-4, 4) (bf16:
 * rounded), from (seed, c, r) alone. */
void tp_case_fill(void *buf, tf_dtype dt, uint64_t seed, int c, int r, size_t count);

/* got against the reference, element by element rank 0's input plus rank
 * 1's plus ... in f32, rounded once to dt: 0, or non-zero with the first
 * difference in msg. */
int tp_case_check_reduce(const void *got, tf_dtype dt, uint64_t seed, int c, int size,
			 size_t count, char *msg, size_t n);

/* all_reduce (f32, bf16, several sizes), all_gather, broadcast from each
 * rank, barrier: 0 with digest (16 hex digits), else the status with the
 * first disagreement or the transport's error in msg. */
int tp_case_collectives(tf_tp *tp, uint64_t seed, char digest[17], char *msg, size_t n);

#endif /* TF_TEST_TP_CASE_H */
