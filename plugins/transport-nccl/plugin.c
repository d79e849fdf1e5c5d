/*
 * plugin.c - transport-nccl.so: the "nccl" transport, NCCL collectives on
 * the GPU, for the recipe's baseline.  libnccl.so.2 and the CUDA driver
 * are loaded at run time (api.h); the tcp mesh is the control channel
 * that carries the handshake and rank 0's ncclUniqueId.
 *
 * The collectives take host buffers like every transport: they are copied
 * to one device buffer, reduced in place by NCCL on a stream, and copied
 * back.  Waits poll the stream against [tp] timeout; a stream that does
 * not finish aborts the communicator.  NCCL gives every rank the same
 * bits, summed in its own order and precision: for two ranks in f32 the
 * same as the other transports (a + b is b + a), otherwise not promised.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "clock.h"
#include "mesh.h"
#include "tf/transport.h"

typedef struct nccl_comm {
	const tf_host *h;
	tf_nccl_api api;
	tf_mesh mesh;
	tf_nccl_comm comm;
	int device;
	tf_cu_context ctx;
	tf_cu_stream stream;
	tf_cu_ptr dbuf;
	size_t dbuf_size;
} nccl_comm;

/* Usable when NCCL and the driver load and a CUDA device exists. */
static int nccl_probe(const tf_host *h, const char **reason)
{
	static char why[256];   /* the probe runs once per process */
	tf_nccl_api a;
	int n = 0;
	(void)h;
	*reason = why;
	/* No NVIDIA device node, no device: answered without loading the
	 * driver, so a process that only probes plugins never starts it. */
	if (access("/dev/nvidiactl", F_OK)) {
		snprintf(why, sizeof(why), "no CUDA device (no /dev/nvidiactl)");
		return 0;
	}
	if (tf_nccl_load(&a, NULL, NULL, why, sizeof(why)))
		return 0;
	if (a.cuInit(0) || a.cuDeviceGetCount(&n) || n < 1)
		snprintf(why, sizeof(why), "no CUDA device");
	tf_nccl_unload(&a);
	return n > 0 ? 20 : 0;
}

static int nccl_init(const tf_host *h, void **inst)
{
	nccl_comm *c = calloc(1, sizeof(*c));
	char why[256];
	if (!c)
		return h->error(h, TF_ERR_NOMEM, "nccl: out of memory");
	c->h = h;
	if (tf_nccl_load(&c->api, NULL, NULL, why, sizeof(why))) {
		free(c);
		return h->error(h, TF_ERR_UNSUPPORTED, "nccl: %s", why);
	}
	*inst = c;
	return TF_OK;
}

static void nccl_fini(void *inst)
{
	nccl_comm *c = inst;
	if (!c)
		return;
	if (c->comm)
		c->api.CommDestroy(c->comm);
	if (c->dbuf)
		c->api.cuMemFree(c->dbuf);
	if (c->stream)
		c->api.cuStreamDestroy(c->stream);
	if (c->ctx)
		c->api.cuDevicePrimaryCtxRelease(c->device);
	tf_mesh_close(&c->mesh);
	tf_nccl_unload(&c->api);
	free(c);
}

/* A CUDA call of `what` failed: "<why> <code>". */
static int fail(nccl_comm *c, const char *what, const char *why, int code)
{
	c->mesh.failed = true;
	return c->h->error(c->h, TF_ERR_DEVICE, "nccl: rank %d: %s: %s %d", c->mesh.rank, what,
			   why, code);
}

/* The device: rank modulo the count, so ranks on one host spread. */
static int nccl_device(nccl_comm *c)
{
	tf_nccl_api *a = &c->api;
	int n = 0, dev, e;
	if ((e = a->cuInit(0)) || (e = a->cuDeviceGetCount(&n)) || n < 1)
		return fail(c, "CUDA", "no device; cuInit/cuDeviceGetCount returned", e);
	if ((e = a->cuDeviceGet(&dev, c->mesh.rank % n)) ||
	    (e = a->cuDevicePrimaryCtxRetain(&c->ctx, dev)) ||
	    (e = a->cuCtxSetCurrent(c->ctx)) || (e = a->cuStreamCreate(&c->stream, 0)))
		return fail(c, "CUDA", "context or stream: CUresult", e);
	c->device = dev;
	return TF_OK;
}

static int nccl_connect(void *inst, const tf_tp_config *cfg)
{
	nccl_comm *c = inst;
	tf_nccl_unique_id id;
	tf_mesh_xfer x[TF_MESH_MAX];
	int rc = tf_mesh_open(&c->mesh, c->h, "nccl", cfg), e;

	if (rc || (rc = nccl_device(c)))
		return rc;
	if (!cfg->rank && (e = c->api.GetUniqueId(&id)))
		return c->h->error(c->h, TF_ERR_DEVICE, "nccl: rank 0: ncclGetUniqueId: %s",
				   c->api.GetErrorString(e));
	for (int r = 0; r < cfg->size; r++)
		x[r] = !cfg->rank ? (tf_mesh_xfer){ &id, sizeof(id), NULL, 0 } :
		       r == 0 ? (tf_mesh_xfer){ NULL, 0, &id, sizeof(id) } :
		       (tf_mesh_xfer){ NULL, 0, NULL, 0 };
	if ((rc = tf_mesh_exchange(&c->mesh, TF_MESH_BOOTSTRAP, x)))
		return rc;
	if ((e = c->api.CommInitRank(&c->comm, cfg->size, id, cfg->rank)))
		return c->h->error(c->h, TF_ERR_DEVICE, "nccl: rank %d: ncclCommInitRank: %s",
				   cfg->rank, c->api.GetErrorString(e));
	return TF_OK;
}

/* Wait for the stream within [tp] timeout, watching NCCL's async errors;
 * NCCL cannot say which peer stalled, so the error lists them all. */
static int nccl_wait(nccl_comm *c, const char *what)
{
	int64_t deadline = tf_tp_now_ms() + c->mesh.timeout_ms;
	for (;;) {
		int e = c->api.cuStreamQuery(c->stream), async = TF_NCCL_SUCCESS;
		if (!e)
			return TF_OK;
		if (e != TF_CU_NOT_READY)
			return fail(c, what, "stream failed: CUresult", e);
		c->api.CommGetAsyncError(c->comm, &async);
		if (async != TF_NCCL_SUCCESS && async != TF_NCCL_IN_PROGRESS) {
			c->api.CommAbort(c->comm);
			c->comm = NULL;
			c->mesh.failed = true;
			return c->h->error(c->h, TF_ERR_PEER, "nccl: rank %d: %s: %s (peers: %s "
					   "...)", c->mesh.rank, what,
					   c->api.GetErrorString(async), c->mesh.addr[0]);
		}
		if (tf_tp_now_ms() > deadline) {
			c->api.CommAbort(c->comm);
			c->comm = NULL;
			c->mesh.failed = true;
			return c->h->error(c->h, TF_ERR_PEER, "nccl: rank %d: %s did not finish "
					   "within %d ms ([tp] timeout): a peer of %d (%s, ...) "
					   "is dead or stopped", c->mesh.rank, what,
					   c->mesh.timeout_ms, c->mesh.size, c->mesh.addr[0]);
		}
		sched_yield();
	}
}

/* Grow the device buffer to `room` and copy `in` to it at in_off; the
 * caller queues the collective and nccl_finish waits and copies back. */
static int nccl_stage(nccl_comm *c, size_t room, const void *in, size_t in_off,
		      size_t in_bytes)
{
	tf_nccl_api *a = &c->api;
	int e;
	if (c->mesh.failed || !c->comm)
		return c->h->error(c->h, TF_ERR_PEER, "nccl: rank %d: the communicator failed "
				   "in an earlier step", c->mesh.rank);
	if (room > c->dbuf_size) {
		if (c->dbuf)
			a->cuMemFree(c->dbuf);
		c->dbuf = 0;
		c->dbuf_size = 0;
		if ((e = a->cuMemAlloc(&c->dbuf, room)))
			return fail(c, "cuMemAlloc", "CUresult", e);
		c->dbuf_size = room;
	}
	if (in_bytes && (e = a->cuMemcpyHtoD(c->dbuf + in_off, in, in_bytes)))
		return fail(c, "copy to the device", "CUresult", e);
	return TF_OK;
}

static int nccl_finish(nccl_comm *c, const char *what, int e, void *out, size_t bytes)
{
	if (e)
		return c->h->error(c->h, TF_ERR_DEVICE, "nccl: rank %d: %s: %s", c->mesh.rank,
				   what, c->api.GetErrorString(e));
	int rc = nccl_wait(c, what);
	if (!rc && bytes && (e = c->api.cuMemcpyDtoH(out, c->dbuf, bytes)))
		return fail(c, "copy from the device", "CUresult", e);
	return rc;
}

static int nccl_all_reduce(void *inst, void *buf, size_t count, tf_dtype dtype)
{
	nccl_comm *c = inst;
	size_t es = dtype == TF_DTYPE_F32 ? 4 : dtype == TF_DTYPE_BF16 ? 2 : 0;
	int rc;
	if (!es)
		return c->h->error(c->h, TF_ERR_UNSUPPORTED, "nccl: all_reduce of %s: only "
				   "f32 and bf16", tf_dtype_name(dtype));
	if ((rc = nccl_stage(c, count * es, buf, 0, count * es)))
		return rc;
	void *d = (void *)(uintptr_t)c->dbuf;
	int e = c->api.AllReduce(d, d, count, es == 4 ? TF_NCCL_FLOAT32 : TF_NCCL_BF16,
				 TF_NCCL_SUM, c->comm, c->stream);
	return nccl_finish(c, "all_reduce", e, buf, count * es);
}

static int nccl_all_gather(void *inst, const void *in, void *out, size_t bytes)
{
	nccl_comm *c = inst;
	size_t mine = (size_t)c->mesh.rank * bytes;
	int rc = nccl_stage(c, bytes * (size_t)c->mesh.size, in, mine, bytes);
	if (rc)
		return rc;
	void *d = (void *)(uintptr_t)c->dbuf;
	int e = c->api.AllGather((char *)d + mine, d, bytes, TF_NCCL_UINT8, c->comm, c->stream);
	return nccl_finish(c, "all_gather", e, out, bytes * (size_t)c->mesh.size);
}

static int nccl_broadcast(void *inst, void *buf, size_t bytes, int root)
{
	nccl_comm *c = inst;
	int rc = nccl_stage(c, bytes, buf, 0, c->mesh.rank == root ? bytes : 0);
	if (rc)
		return rc;
	void *d = (void *)(uintptr_t)c->dbuf;
	int e = c->api.Broadcast(d, d, bytes, TF_NCCL_UINT8, root, c->comm, c->stream);
	return nccl_finish(c, "broadcast", e, buf, bytes);
}

/* Over the control channel: nothing for the GPU to do. */
static int nccl_barrier(void *inst)
{
	nccl_comm *c = inst;
	return tf_mesh_barrier(&c->mesh);
}

static const tf_plugin_transport nccl_transport = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_transport, TF_KIND_TRANSPORT, "nccl", "0.1.0",
				"NCCL collectives on the GPU (libnccl.so.2 loaded at run time; "
				"NCCL's summation order)",
				nccl_probe),
	.init = nccl_init,
	.fini = nccl_fini,
	.connect = nccl_connect,
	.all_reduce = nccl_all_reduce,
	.all_gather = nccl_all_gather,
	.broadcast = nccl_broadcast,
	.barrier = nccl_barrier,
};

TF_EXPORT const tf_plugin_transport *tf_plugin_transport_v1(unsigned index)
{
	return index == 0 ? &nccl_transport : NULL;
}
