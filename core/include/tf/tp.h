/*
 * tf/tp.h - a tensor-parallel communicator, opened from an INI's [tp].
 *
 * The face that runs one rank (tfrun, `tfrun doctor`, a test) opens this
 * process's end of the communicator and calls the collectives that
 * tf/transport.h describes:
 *
 *     const char *set[] = { "tp.rank=1" };
 *     tf_tp *tp;
 *     if (tf_tp_open("conf/x.ini", set, 1, fingerprint, &tp) != TF_OK)
 *         die(tf_engine_errmsg());
 *     tf_tp_all_reduce(tp, h, n, TF_DTYPE_BF16);
 *     tf_tp_close(tp);
 *
 * [tp] size, rank, peers, transport (the plugin's name; unset: the best
 * usable one), rdma_device and timeout (seconds, default 30) are read from
 * the INI and the overrides; ini may be NULL when the overrides say it all.
 * The handshake refuses a peer whose fingerprint differs: the caller's
 * (say a hash of the checkpoint) joined to a hash of every INI key and
 * override except the per-host ones ([tp] rank and peers, [model] path,
 * [plugins] path, [runtime] threads, memory_limit and log_level, [server]).
 *
 * Errors return a tf_status; the detail, naming the key, the plugin or the
 * peer (rank, host:port) and the operation, is tf_engine_errmsg().
 */
#ifndef TF_TP_H
#define TF_TP_H

#include <stddef.h>
#include <stdio.h>

#include "tf/dtype.h"
#include "tf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_TP_DEFAULT_TIMEOUT_S 30.0

typedef struct tf_tp tf_tp;

/* Connect to every peer; refused at the handshake when a peer's
 * fingerprint, size or rank disagrees.  fingerprint: at most 200 bytes. */
int tf_tp_open(const char *ini, const char *const *overrides, int n_overrides,
	       const char *fingerprint, tf_tp **out);
void tf_tp_close(tf_tp *tp);

int tf_tp_rank(const tf_tp *tp);
int tf_tp_size(const tf_tp *tp);
const char *tf_tp_transport(const tf_tp *tp);     /* the plugin's name */
const char *tf_tp_peer(const tf_tp *tp, int rank); /* its "host:port" */

int tf_tp_all_reduce(tf_tp *tp, void *buf, size_t count, tf_dtype dtype);
int tf_tp_all_gather(tf_tp *tp, const void *in, void *out, size_t bytes);
int tf_tp_broadcast(tf_tp *tp, void *buf, size_t bytes, int root);
int tf_tp_barrier(tf_tp *tp);

/* Every transport plugin on the path, usable or not, with its probe's
 * verdict and what its describe() says about this machine (RDMA devices,
 * ports, GIDs, which it would pick), printed to f. */
int tf_tp_describe(const char *ini, const char *const *overrides, int n_overrides,
		   FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* TF_TP_H */
