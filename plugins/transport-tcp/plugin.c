/*
 * plugin.c - transport-tcp.so: the "tcp" transport, collectives over the
 * full mesh of mesh.h.  Always usable; the baseline the others are held
 * to, and what CI runs between processes and network namespaces.
 *
 * all_reduce sends this rank's buffer to every peer, receives theirs and
 * sums all of them in rank order (sum.h): n-1 sends per rank, which for
 * TP=2 is the one message the link must carry anyway.
 */
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "sum.h"
#include "tf/transport.h"

typedef struct tcp_comm {
	const tf_host *h;
	tf_mesh mesh;
	uint8_t *scratch;               /* the peers' contributions */
	size_t scratch_size;
} tcp_comm;

static int tcp_probe(const tf_host *h, const char **reason)
{
	(void)h;
	(void)reason;
	return 10;
}

static int tcp_init(const tf_host *h, void **inst)
{
	tcp_comm *c = calloc(1, sizeof(*c));
	if (!c)
		return h->error(h, TF_ERR_NOMEM, "tcp: out of memory");
	c->h = h;
	*inst = c;
	return TF_OK;
}

static void tcp_fini(void *inst)
{
	tcp_comm *c = inst;
	if (!c)
		return;
	tf_mesh_close(&c->mesh);
	free(c->scratch);
	free(c);
}

static int tcp_connect(void *inst, const tf_tp_config *cfg)
{
	tcp_comm *c = inst;
	return tf_mesh_open(&c->mesh, c->h, "tcp", cfg);
}

static int tcp_scratch(tcp_comm *c, size_t bytes)
{
	if (bytes <= c->scratch_size)
		return TF_OK;
	void *p = realloc(c->scratch, bytes);
	if (!p)
		return c->h->error(c->h, TF_ERR_NOMEM, "tcp: %zu bytes of receive buffer", bytes);
	c->scratch = p;
	c->scratch_size = bytes;
	return TF_OK;
}

static int tcp_all_reduce(void *inst, void *buf, size_t count, tf_dtype dtype)
{
	tcp_comm *c = inst;
	tf_mesh *m = &c->mesh;
	size_t esize = dtype == TF_DTYPE_F32 ? 4 : dtype == TF_DTYPE_BF16 ? 2 : 0;
	tf_mesh_xfer x[TF_MESH_MAX];
	const void *parts[TF_MESH_MAX];
	int rc;

	if (!esize)
		return c->h->error(c->h, TF_ERR_UNSUPPORTED, "tcp: all_reduce of %s: only "
				   "f32 and bf16", tf_dtype_name(dtype));
	size_t bytes = count * esize;
	if (count > SIZE_MAX / esize / (size_t)m->size)
		return c->h->error(c->h, TF_ERR_RANGE, "tcp: all_reduce of %zu elements", count);
	if ((rc = tcp_scratch(c, bytes * (size_t)m->size)))
		return rc;
	for (int r = 0; r < m->size; r++) {
		uint8_t *slot = c->scratch + (size_t)r * bytes;
		x[r] = (tf_mesh_xfer){ buf, bytes, slot, bytes };
		parts[r] = r == m->rank ? buf : slot;
	}
	if ((rc = tf_mesh_exchange(m, TF_MESH_ALL_REDUCE, x)))
		return rc;
	if (dtype == TF_DTYPE_F32)
		tf_sum_f32(buf, (const float *const *)parts, m->size, count);
	else
		tf_sum_bf16(buf, (const uint16_t *const *)parts, m->size, count);
	return TF_OK;
}

static int tcp_all_gather(void *inst, const void *in, void *out, size_t bytes)
{
	tcp_comm *c = inst;
	tf_mesh *m = &c->mesh;
	tf_mesh_xfer x[TF_MESH_MAX];

	for (int r = 0; r < m->size; r++)
		x[r] = (tf_mesh_xfer){ in, bytes, (uint8_t *)out + (size_t)r * bytes, bytes };
	memmove((uint8_t *)out + (size_t)m->rank * bytes, in, bytes);
	return tf_mesh_exchange(m, TF_MESH_ALL_GATHER, x);
}

static int tcp_broadcast(void *inst, void *buf, size_t bytes, int root)
{
	tcp_comm *c = inst;
	tf_mesh *m = &c->mesh;
	tf_mesh_xfer x[TF_MESH_MAX];

	for (int r = 0; r < m->size; r++)
		x[r] = m->rank == root ? (tf_mesh_xfer){ buf, bytes, NULL, 0 } :
		       r == root ? (tf_mesh_xfer){ NULL, 0, buf, bytes } :
		       (tf_mesh_xfer){ NULL, 0, NULL, 0 };
	return tf_mesh_exchange(m, TF_MESH_BROADCAST, x);
}

static int tcp_barrier(void *inst)
{
	tcp_comm *c = inst;
	return tf_mesh_barrier(&c->mesh);
}

static const tf_plugin_transport tcp_transport = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_transport, TF_KIND_TRANSPORT, "tcp", "0.1.0",
				"collectives over TCP sockets, a full mesh of the ranks",
				tcp_probe),
	.init = tcp_init,
	.fini = tcp_fini,
	.connect = tcp_connect,
	.all_reduce = tcp_all_reduce,
	.all_gather = tcp_all_gather,
	.broadcast = tcp_broadcast,
	.barrier = tcp_barrier,
};

TF_EXPORT const tf_plugin_transport *tf_plugin_transport_v1(unsigned index)
{
	return index == 0 ? &tcp_transport : NULL;
}
