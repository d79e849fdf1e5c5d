/*
 * tf/transport.h - the transport kind: collectives between TP ranks.
 *
 * An instance is one rank's end of a communicator:
 *
 *     init(host, &inst) -> connect(inst, cfg) -> collectives ... -> fini(inst)
 *
 * connect() reaches every peer named in cfg->peers and refuses, naming the
 * peer, one whose handshake disagrees: another fingerprint (checkpoint and
 * overrides), another size, a rank already connected.  The collectives are
 * host-blocking and in place, one at a time per instance, called in the
 * same order with the same sizes on every rank (a rank that calls another
 * collective or size fails naming the peer).  Every call returns within
 * cfg->timeout_ms: a peer that dies, stops, times out or disagrees gives
 * TF_ERR_PEER with a message, through host->error, naming the operation
 * and the peer's rank and host:port.  After such a failure the instance
 * only fails: the ranks are out of step.
 *
 * all_reduce sums in rank order (rank 0's values, plus rank 1's, ...) with
 * fp32 accumulation, so every rank holds the same bits.  A transport that
 * cannot choose the order (nccl) must still give every
 * rank the same bits, and says so in its description.
 *
 * ABI 1.0 fixed the lifecycle; ABI 1.6 appended connect and the
 * collectives.  No transport predates 1.6, so the registry requires them.
 */
#ifndef TF_TRANSPORT_H
#define TF_TRANSPORT_H

#include <stddef.h>

#include "tf/dtype.h"
#include "tf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What connect() is given; the core fills it from [tp]. */
typedef struct tf_tp_config {
	uint32_t struct_size;
	int rank, size;                 /* 0 <= rank < size */
	const char *const *peers;       /* size entries, "host:port", rank order */
	const char *fingerprint;        /* the same on every rank, <= 255 bytes */
	int timeout_ms;                 /* the bound on connect and every call */
	const char *rdma_device;        /* [tp] rdma_device, NULL when unset */
} tf_tp_config;

/* One line of a describe() report, without its newline. */
typedef void (*tf_tp_emit)(void *arg, const char *line);

typedef struct tf_plugin_transport {
	tf_plugin_header hdr;
	int (*init)(const tf_host *h, void **inst);
	void (*fini)(void *inst);

	/* Since ABI 1.4, optional: the INI keys this plugin reads. */
	const tf_plugin_key *keys;

	/* Since ABI 1.6, required. */
	int (*connect)(void *inst, const tf_tp_config *cfg);
	/* Sum `count` elements (TF_DTYPE_F32 or TF_DTYPE_BF16) in place. */
	int (*all_reduce)(void *inst, void *buf, size_t count, tf_dtype dtype);
	/* out[r * bytes ..] = rank r's in[0 .. bytes), for every rank r. */
	int (*all_gather)(void *inst, const void *in, void *out, size_t bytes);
	/* Every rank's buf becomes root's. */
	int (*broadcast)(void *inst, void *buf, size_t bytes, int root);
	int (*barrier)(void *inst);

	/* Since ABI 1.6, optional: what `tfrun doctor` prints about this
	 * machine (devices, ports, which one connect would pick and why),
	 * with no instance open. */
	int (*describe)(const tf_host *h, tf_tp_emit emit, void *arg);
} tf_plugin_transport;

const tf_plugin_transport *tf_plugin_transport_v1(unsigned index);

#ifdef __cplusplus
}
#endif
#endif /* TF_TRANSPORT_H */
