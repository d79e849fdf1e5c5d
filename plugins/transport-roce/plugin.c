/*
 * plugin.c - transport-roce.so: the "roce" transport.  Collectives move
 * in rounds (round.h) of RDMA writes with immediate into two registered
 * slots per peer, over one RC queue pair per peer; the tcp mesh of
 * transport-tcp is the control channel that carries the handshake and the
 * queue pairs' bootstrap (boot.h).  Sums are those of the tcp transport
 * (sum.h): rank order, fp32 accumulation, the same bits on every rank.
 *
 * Without an RDMA device (no kernel support, no NIC, every port down) the
 * probe scores 0 and says why, so the registry falls back to tcp.
 */
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "boot.h"
#include "coll.h"
#include "mesh.h"
#include "tf/transport.h"
#include "verbs.h"

#define ROCE_SLOT (1u << 20)            /* bytes a peer writes per round */
#define ROCE_SLOTS 2                    /* double buffering: see round.h */

typedef struct roce_comm {
	const tf_host *h;
	tf_mesh mesh;                   /* the control channel */
	tf_verbs v;
	tf_coll coll;
} roce_comm;

static int link_write(void *link, int p, uint32_t k, size_t len, char *why, size_t n)
{
	return tf_verbs_write(link, p, k, len, why, n);
}

static int link_poll(void *link, tf_completion *out, int max, char *why, size_t n)
{
	return tf_verbs_poll(link, out, max, why, n);
}

static const tf_link_ops verbs_link = { .write = link_write, .poll = link_poll };

static int roce_probe(const tf_host *h, const char **reason)
{
	static char why[256];   /* the probe runs once per process */
	(void)h;
	int n = tf_verbs_probe(why, sizeof(why));
	*reason = why;
	return n ? 30 : 0;
}

/* The IPv4 address of "host:port" in host order, 0 if it has none. */
static uint32_t addr_ipv4(const char *hostport)
{
	char host[256];
	const char *colon = hostport ? strrchr(hostport, ':') : NULL;
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	uint32_t a = 0;

	if (!colon || (size_t)(colon - hostport) >= sizeof(host))
		return 0;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	if (getaddrinfo(host, NULL, &hints, &ai))
		return 0;
	a = ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr);
	freeaddrinfo(ai);
	return a;
}

static int roce_init(const tf_host *h, void **inst)
{
	roce_comm *c = calloc(1, sizeof(*c));
	if (!c)
		return h->error(h, TF_ERR_NOMEM, "roce: out of memory");
	c->h = h;
	*inst = c;
	return TF_OK;
}

static void roce_fini(void *inst)
{
	roce_comm *c = inst;
	if (!c)
		return;
	tf_verbs_close(&c->v);
	tf_mesh_close(&c->mesh);
	free(c);
}

static int fail_peer(roce_comm *c, const char *what, int p, const char *why)
{
	const tf_mesh *m = &c->mesh;
	c->mesh.failed = true;
	if (p < 0 || p >= m->size)
		return c->h->error(c->h, TF_ERR_PEER, "roce: rank %d: %s: %s", m->rank, what, why);
	return c->h->error(c->h, TF_ERR_PEER, "roce: rank %d: %s: rank %d (%s): %s", m->rank,
			   what, p, m->addr[p], why);
}

/* Swap bootstraps over the control channel and bring every queue pair up. */
static int roce_bootstrap(roce_comm *c)
{
	tf_mesh *m = &c->mesh;
	uint8_t out[TF_ROUND_MAX][TF_BOOT_BYTES], in[TF_ROUND_MAX][TF_BOOT_BYTES];
	tf_mesh_xfer x[TF_MESH_MAX];
	char why[256];
	int rc;

	for (int p = 0; p < m->size; p++) {
		tf_boot b;
		if (p != m->rank) {
			tf_verbs_boot(&c->v, p, &b);
			tf_boot_encode(&b, out[p]);
		}
		x[p] = (tf_mesh_xfer){ out[p], TF_BOOT_BYTES, in[p], TF_BOOT_BYTES };
	}
	if ((rc = tf_mesh_exchange(m, TF_MESH_BOOTSTRAP, x)))
		return rc;
	for (int p = 0; p < m->size; p++) {
		tf_boot mine, theirs;
		int mtu;
		if (p == m->rank)
			continue;
		tf_verbs_boot(&c->v, p, &mine);
		tf_boot_decode(in[p], &theirs);
		if (tf_boot_agree(&mine, &theirs, &mtu, why, sizeof(why)) ||
		    tf_verbs_connect(&c->v, p, &theirs, mtu, why, sizeof(why)))
			return fail_peer(c, "bootstrap", p, why);
		if (theirs.mtu != mine.mtu)
			c->h->log(c->h, TF_LOG_WARN, "roce", "rank %d (%s) has active MTU %d, this "
				  "rank %d: both use %d; set the same interface MTU (9000) on "
				  "both hosts", p, m->addr[p], tf_boot_mtu_bytes(theirs.mtu),
				  tf_boot_mtu_bytes(mine.mtu), tf_boot_mtu_bytes(mtu));
	}
	/* Every queue pair must be ready to receive before anyone writes. */
	return tf_mesh_barrier(m);
}

static int roce_connect(void *inst, const tf_tp_config *cfg)
{
	roce_comm *c = inst;
	char why[256];
	int rc = tf_mesh_open(&c->mesh, c->h, "roce", cfg);
	if (rc)
		return rc;
	if (tf_verbs_open(&c->v, cfg->rdma_device, addr_ipv4(cfg->peers[cfg->rank]),
			  cfg->rank, cfg->size, ROCE_SLOT, ROCE_SLOTS, why, sizeof(why)))
		return c->h->error(c->h, TF_ERR_DEVICE, "roce: rank %d: %s", cfg->rank, why);
	tf_coll_init(&c->coll, &verbs_link, &c->v, c->v.send_buf, c->v.recv_buf, cfg->rank,
		     cfg->size, ROCE_SLOTS, ROCE_SLOT, cfg->timeout_ms);
	return roce_bootstrap(c);
}

static int roce_fail(roce_comm *c)
{
	return fail_peer(c, c->coll.what, c->coll.peer, c->coll.why);
}

static int roce_all_reduce(void *inst, void *buf, size_t count, tf_dtype dtype)
{
	roce_comm *c = inst;
	if (dtype != TF_DTYPE_F32 && dtype != TF_DTYPE_BF16)
		return c->h->error(c->h, TF_ERR_UNSUPPORTED, "roce: all_reduce of %s: only "
				   "f32 and bf16", tf_dtype_name(dtype));
	return tf_coll_all_reduce(&c->coll, buf, count, dtype) ? roce_fail(c) : TF_OK;
}

static int roce_all_gather(void *inst, const void *in, void *out, size_t bytes)
{
	roce_comm *c = inst;
	return tf_coll_all_gather(&c->coll, in, out, bytes) ? roce_fail(c) : TF_OK;
}

static int roce_broadcast(void *inst, void *buf, size_t bytes, int root)
{
	roce_comm *c = inst;
	return tf_coll_broadcast(&c->coll, buf, bytes, root) ? roce_fail(c) : TF_OK;
}

static int roce_barrier(void *inst)
{
	roce_comm *c = inst;
	return tf_coll_barrier(&c->coll) ? roce_fail(c) : TF_OK;
}

static int roce_describe(const tf_host *h, tf_tp_emit emit, void *arg)
{
	const char *peers = h->conf_get(h, "tp", "peers");
	char mine[256] = "";
	/* This rank's [tp] peers entry names the address its GID must carry. */
	for (int r = 0; peers && r <= h->tp_rank; r++) {
		size_t n = strcspn(peers, ",");
		if (r == h->tp_rank)
			snprintf(mine, sizeof(mine), "%.*s", (int)n, peers);
		peers = peers[n] ? peers + n + 1 : NULL;
	}
	tf_verbs_describe(addr_ipv4(mine[0] ? mine : NULL), h->conf_get(h, "tp", "rdma_device"),
			  emit, arg);
	return TF_OK;
}

static const tf_plugin_transport roce_transport = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_transport, TF_KIND_TRANSPORT, "roce", "0.1.0",
				"collectives by RDMA write with immediate over RC queue pairs "
				"(libibverbs; RoCE v2 or InfiniBand)", roce_probe),
	.init = roce_init,
	.fini = roce_fini,
	.connect = roce_connect,
	.all_reduce = roce_all_reduce,
	.all_gather = roce_all_gather,
	.broadcast = roce_broadcast,
	.barrier = roce_barrier,
	.describe = roce_describe,
};

TF_EXPORT const tf_plugin_transport *tf_plugin_transport_v1(unsigned index)
{
	return index == 0 ? &roce_transport : NULL;
}
