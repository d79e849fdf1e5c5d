/*
 * verbs.h - the libibverbs side of the roce transport: finding a port and
 * GID, registering the slot regions, connecting one RC queue pair per peer
 * and moving chunks with RDMA write with immediate.
 *
 * Everything here needs an RDMA device, so CI only compiles and links it
 * and runs the "no device" path; the decisions it makes (GID choice, MTU,
 * bootstrap, completions) live in gid.c, boot.c and round.c, which are
 * tested without hardware.
 */
#ifndef TF_ROCE_VERBS_H
#define TF_ROCE_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boot.h"
#include "round.h"

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_mr;
struct ibv_qp;

typedef struct tf_verbs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *send_mr, *recv_mr;
	uint8_t *send_buf, *recv_buf;   /* slots x slot_bytes; size x slots x slot_bytes */
	struct ibv_qp *qp[TF_ROUND_MAX];
	uint64_t remote_addr[TF_ROUND_MAX];
	uint32_t remote_rkey[TF_ROUND_MAX];
	int rank, size, port, gid_index, slots;
	uint32_t max_inline;            /* bytes a write may carry inline */
	size_t slot_bytes;
	tf_boot local;                  /* this rank's bootstrap, qpn per peer aside */
	char device[64];
} tf_verbs;

/* > 0: devices with an active port; 0 with why (no kernel support, no
 * device, every port down). */
int tf_verbs_probe(char *why, size_t n);

/* Devices, ports, state, MTU, GIDs and which entry this rank would use
 * for its IPv4 address (host order; 0: unknown), one line at a time. */
void tf_verbs_describe(uint32_t ipv4, const char *device,
		       void (*emit)(void *arg, const char *line), void *arg);

/* Pick the port and GID (device NULL: any whose RoCE v2 GID carries ipv4),
 * register the regions and create a queue pair per peer, in INIT. */
int tf_verbs_open(tf_verbs *v, const char *device, uint32_t ipv4, int rank, int size,
		  size_t slot_bytes, int slots, char *why, size_t n);
/* This rank's bootstrap for peer p. */
void tf_verbs_boot(const tf_verbs *v, int p, tf_boot *out);
/* Move peer p's queue pair to RTR and RTS toward `theirs` at `mtu`, and
 * post its receives. */
int tf_verbs_connect(tf_verbs *v, int p, const tf_boot *theirs, int mtu, char *why,
		     size_t n);
/* Write len bytes from send slot k % slots into peer p's slot for this
 * rank, with k as the immediate. */
int tf_verbs_write(tf_verbs *v, int p, uint32_t k, size_t len, char *why, size_t n);
/* Up to max completions, without waiting; receives are reposted. */
int tf_verbs_poll(tf_verbs *v, tf_completion *out, int max, char *why, size_t n);
void tf_verbs_close(tf_verbs *v);

#endif /* TF_ROCE_VERBS_H */
