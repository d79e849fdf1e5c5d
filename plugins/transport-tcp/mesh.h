/*
 * mesh.h - a full mesh of TCP connections between the ranks, and the
 * framed, bounded exchange every collective is built from.
 *
 * tf_mesh_open listens on this rank's [tp] peers address, dials every
 * lower rank (retrying until the peer listens or the timeout passes),
 * accepts every higher one, and swaps a
 * hello (hello.h) on each connection.  Sockets are non-blocking with
 * TCP_NODELAY; waits go through poll() with a deadline, so no call outlives
 * cfg->timeout_ms and a dead or stopped peer fails naming its rank, its
 * host:port and the operation.
 */
#ifndef TF_TCP_MESH_H
#define TF_TCP_MESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/transport.h"

#define TF_MESH_MAX 64                  /* [tp] size's upper bound */

/* What an exchange is part of; a peer in another one is an error. */
typedef enum tf_mesh_op {
	TF_MESH_ALL_REDUCE = 1,
	TF_MESH_ALL_GATHER,
	TF_MESH_BROADCAST,
	TF_MESH_BARRIER,
	TF_MESH_BOOTSTRAP,              /* another transport's setup blobs */
	TF_MESH_OP_COUNT
} tf_mesh_op;

typedef struct tf_mesh {
	const tf_host *h;
	const char *who;                /* the plugin's name, for errors */
	int rank, size, timeout_ms;
	int *fd;                        /* per rank; -1 for this rank */
	int lfd;                        /* listening until close: the port stays ours */
	char **addr;                    /* per rank: its [tp] peers entry */
	uint32_t step;                  /* exchanges so far */
	bool failed;                    /* an exchange failed: the streams are out of step */
} tf_mesh;

/* One peer's part of an exchange: what to send it, where its data goes. */
typedef struct tf_mesh_xfer {
	const void *send;
	size_t send_len;
	void *recv;
	size_t recv_len;                /* what this rank expects from it */
} tf_mesh_xfer;

/* m may be all zeros (never opened) for tf_mesh_close. */
int tf_mesh_open(tf_mesh *m, const tf_host *h, const char *who, const tf_tp_config *cfg);
void tf_mesh_close(tf_mesh *m);

/* Send and receive with every other rank at once (x: size entries, this
 * rank's ignored); a header with the op, step and length goes first, so
 * ranks that disagree on the collective or its size fail naming the peer. */
int tf_mesh_exchange(tf_mesh *m, tf_mesh_op op, tf_mesh_xfer *x);

/* An exchange of headers only: every rank has reached this step. */
int tf_mesh_barrier(tf_mesh *m);

const char *tf_mesh_op_name(tf_mesh_op op);

#endif /* TF_TCP_MESH_H */
