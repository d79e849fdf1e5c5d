/*
 * unified.c - backend-cuda's map and unmap slots (ABI 1.11): host memory
 * the device reads in place, on a device that shares the CPU's memory.
 *
 * On GB10 (DGX Spark) the CPU and GPU share one DRAM: a weight copied
 * into cudaMalloc memory sits there twice, once in the mapped
 * checkpoint's page cache and once as the device copy, and loading
 * copies all of it.  `[runtime] unified_memory` (auto, on, off) lets the
 * device plugins read the host's bytes instead (cuda-common's
 * tf_cuda_weight.h).  auto maps on an integrated device
 * (cudaDevAttrIntegrated) that can reach host memory: through the host's
 * page tables when it reports cudaDevAttrPageableMemoryAccessUsesHostPageTables
 * (the pointer as is), else by registering the pages read-only
 * (cudaHostRegister), where it must use the host's addresses for them
 * (cudaDevAttrCanUseHostPointerForRegisteredMem), so that ranges
 * registered apart read as one.  A discrete GPU copies (auto = off there:
 * its reads of host memory would cross PCIe every step).
 *
 * The driver pins whole pages, and a page only once, while checkpoint
 * tensors start anywhere and share pages: the registered page ranges are
 * kept sorted and disjoint, each counting the maps that use it; a map
 * registers only the pages of its range no range holds yet, and a range
 * is unregistered when its last map is undone.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_backend.h"

static const char *const cuda_um_what[] = {
	[TF_CUDA_UM_COPY] = "weights copied to device memory",
	[TF_CUDA_UM_REGISTER] = "weights read in place (host pages registered read-only)",
	[TF_CUDA_UM_PAGEABLE] = "weights read in place (through the host's page tables)",
};

/* An attribute, 0 when the runtime cannot say. */
static int cuda_attr(int device, enum cudaDeviceAttr attr)
{
	int v = 0;
	if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return v;
}

int cuda_unified_init(tf_cuda *c)
{
	const tf_host *h = c->host;
	enum { UM_AUTO, UM_ON, UM_OFF };
	int want = UM_AUTO, rc;

	if (TF_HAS_SLOT(h, tf_host, conf_enum) && h->conf_enum &&
	    (rc = h->conf_enum(h, "runtime", "unified_memory", UM_AUTO, &want)))
		return rc;
	const int integrated = cuda_attr(c->device, cudaDevAttrIntegrated);
	const int tables = cuda_attr(c->device, cudaDevAttrPageableMemoryAccessUsesHostPageTables);
	const int registers = cuda_attr(c->device, cudaDevAttrCanMapHostMemory) &&
			      cuda_attr(c->device, cudaDevAttrCanUseHostPointerForRegisteredMem);
	const char *why = !integrated ? "is not integrated (cudaDevAttrIntegrated = 0): it has "
					"memory of its own"
			: !tables && !registers ? "cannot read host memory at the host's addresses"
			: NULL;
	c->um.mode = TF_CUDA_UM_COPY;
	if (want == UM_ON && why)
		return h->error(h, TF_ERR_UNSUPPORTED,
				"[runtime] unified_memory = on: device %d %s; set auto or off",
				c->device, why);
	if (want != UM_OFF && !why)
		c->um.mode = tables ? TF_CUDA_UM_PAGEABLE : TF_CUDA_UM_REGISTER;
	h->log(h, TF_LOG_INFO, "backend-cuda", "unified memory (%s): %s",
	       want == UM_AUTO ? "auto" : want == UM_ON ? "on" : "off", cuda_um_what[c->um.mode]);
	return TF_OK;
}

/* The index of the first registered range ending above p. */
static int cuda_pin_after(const tf_cuda_unified *u, const char *p)
{
	int lo = 0, hi = u->n_pins;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (u->pins[mid].hi <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Register [lo, hi) and insert it at index i. */
static int cuda_pin_add(tf_cuda *c, int i, char *lo, char *hi)
{
	tf_cuda_unified *u = &c->um;
	if (u->n_pins == u->cap) {
		int cap = u->cap ? 2 * u->cap : 64;
		tf_cuda_pin *p = realloc(u->pins, (size_t)cap * sizeof(*p));
		if (!p)
			return c->host->error(c->host, TF_ERR_NOMEM, "backend-cuda: map: out of memory");
		u->pins = p;
		u->cap = cap;
	}
	cudaError_t e = cudaHostRegister(lo, (size_t)(hi - lo),
					 cudaHostRegisterMapped | cudaHostRegisterReadOnly);
	if (e != cudaSuccess)
		return c->host->error(c->host, TF_ERR_DEVICE,
				      "backend-cuda: map: registering %zu bytes of host memory: %s",
				      (size_t)(hi - lo), cudaGetErrorString(e));
	memmove(&u->pins[i + 1], &u->pins[i], (size_t)(u->n_pins - i) * sizeof(*u->pins));
	u->pins[i] = (tf_cuda_pin){ .lo = lo, .hi = hi, .refs = 0 };
	u->n_pins++;
	return TF_OK;
}

/* Each range over [lo, hi) counts one map more (delta 1) or fewer (-1);
 * a range no map uses any more is unregistered. */
static void cuda_pin_count(tf_cuda *c, char *lo, char *hi, int delta)
{
	tf_cuda_unified *u = &c->um;
	for (int i = cuda_pin_after(u, lo); i < u->n_pins && u->pins[i].lo < hi;) {
		if ((u->pins[i].refs += delta) > 0) {
			i++;
			continue;
		}
		cudaHostUnregister(u->pins[i].lo);
		cudaGetLastError();
		memmove(&u->pins[i], &u->pins[i + 1], (size_t)(u->n_pins - i - 1) * sizeof(*u->pins));
		u->n_pins--;
	}
}

/* The pages [lo, hi) registered: the gaps between ranges held already. */
static int cuda_pin_range(tf_cuda *c, char *lo, char *hi)
{
	tf_cuda_unified *u = &c->um;
	char *at = lo;
	int rc = TF_OK;
	for (int i = cuda_pin_after(u, lo); !rc && at < hi; i++) {
		char *end = i < u->n_pins && u->pins[i].lo < hi ? u->pins[i].lo : hi;
		if (at < end && !(rc = cuda_pin_add(c, i, at, end)))
			i++;            /* past the range just added */
		if (i < u->n_pins && u->pins[i].lo < hi)
			at = u->pins[i].hi;
		else
			at = hi;
	}
	return rc;
}

int cuda_unified_map(void *ctx, const void *host, size_t bytes, const void **dev)
{
	tf_cuda *c = ctx;
	tf_cuda_unified *u = &c->um;
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	*dev = NULL;
	if (u->mode == TF_CUDA_UM_COPY)
		return TF_ERR_UNSUPPORTED;
	if (c->graph.recording)
		return c->host->error(c->host, TF_ERR_INTERNAL,
				      "backend-cuda: map while a step is recorded as a graph");
	if (!host || !bytes) {
		*dev = host;
		return TF_OK;
	}
	if (u->mode == TF_CUDA_UM_REGISTER) {
		char *lo = (char *)((uintptr_t)host & ~(page - 1));
		char *hi = (char *)(((uintptr_t)host + bytes + page - 1) & ~(page - 1));
		void *d = NULL;
		cuda_enter(c);
		int rc = cuda_pin_range(c, lo, hi);
		/* A failure drops the ranges it added, which no map uses yet. */
		cuda_pin_count(c, lo, hi, rc ? 0 : 1);
		if (rc)
			return rc;
		cudaError_t e = cudaHostGetDevicePointer(&d, (void *)host, 0);
		if (e != cudaSuccess || d != host) {
			cuda_pin_count(c, lo, hi, -1);
			return c->host->error(c->host, TF_ERR_DEVICE,
					      "backend-cuda: map: the device address of %zu bytes of host memory %s",
					      bytes, e != cudaSuccess ? cudaGetErrorString(e)
					      : "differs from the host's");
		}
	}
	u->mapped += bytes;
	u->mapped_total += bytes;
	if (u->mapped > u->mapped_peak)
		u->mapped_peak = u->mapped;
	*dev = host;
	return TF_OK;
}

/* The device may still read the range: the stream drains first. */
void cuda_unified_unmap(void *ctx, const void *host, size_t bytes)
{
	tf_cuda *c = ctx;
	tf_cuda_unified *u = &c->um;
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	if (u->mode == TF_CUDA_UM_COPY || !host || !bytes)
		return;
	u->mapped -= bytes < u->mapped ? bytes : u->mapped;
	if (u->mode != TF_CUDA_UM_REGISTER)
		return;
	cuda_enter(c);
	cudaStreamSynchronize(c->stream);
	cuda_pin_count(c, (char *)((uintptr_t)host & ~(page - 1)),
		       (char *)(((uintptr_t)host + bytes + page - 1) & ~(page - 1)), -1);
}

bool cuda_unified_covers(const tf_cuda *c, const void *p, size_t bytes)
{
	const tf_cuda_unified *u = &c->um;
	const char *at = p, *end = (const char *)p + bytes;
	int i = cuda_pin_after(u, at);
	if (i == u->n_pins || u->pins[i].lo > at)
		return true;            /* not ours: the runtime's attributes say */
	for (; i < u->n_pins && u->pins[i].lo <= at && at < end; i++)
		at = u->pins[i].hi;
	return at >= end;
}

void cuda_unified_fini(tf_cuda *c)
{
	tf_cuda_unified *u = &c->um;
	if (u->mode != TF_CUDA_UM_COPY)
		c->host->log(c->host, TF_LOG_INFO, "backend-cuda",
			     "unified memory: %llu bytes of weights read in place, not copied "
			     "(%llu at most at once)", (unsigned long long)u->mapped_total,
			     (unsigned long long)u->mapped_peak);
	if (u->n_pins)
		c->host->log(c->host, TF_LOG_WARN, "backend-cuda",
			     "unified memory: %d host ranges still mapped at fini", u->n_pins);
	for (int i = 0; i < u->n_pins; i++)
		cudaHostUnregister(u->pins[i].lo);
	cudaGetLastError();
	free(u->pins);
	*u = (tf_cuda_unified){ 0 };
}
