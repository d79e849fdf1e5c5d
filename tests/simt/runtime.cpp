/*
 * runtime.cpp - the CUDA runtime calls of cuda_runtime_api.h on the CPU:
 * one device whose memory is host memory in a table (with the host
 * ranges registered for it: cudaHostRegister), streams and events
 * that finish each call before returning, stream capture into graphs and
 * their replay, and the error state.
 *
 * A capturing stream records its launches, copies and memsets as nodes
 * instead of running them; what CUDA refuses or makes unsafe while a
 * capture is open is a fault here (api_fault): a host wait on the
 * capturing stream (cudaStreamSynchronize, cudaDeviceSynchronize,
 * cudaEventSynchronize on an event recorded inside the capture), a copy
 * between the device and pageable host memory on it, and in
 * cudaStreamCaptureModeGlobal the potentially unsafe calls (allocation,
 * freeing, synchronous copies and memsets).  Stream-ordered allocations
 * on it become memory nodes the graph owns.  A replay checks that every
 * copy and memset endpoint still lies in the allocation it lay in at
 * capture: an address freed (and perhaps handed out again) since then
 * no longer means what the graph was built on.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include <unistd.h>

#include "harness.h"

namespace tf_simt {

namespace {

/* One node of a captured chain. */
struct node {
	enum { KERNEL, COPY, SET, ALLOC, FREE } kind;
	const void *kernel;                     /* KERNEL: what an update must match */
	std::function<cudaError_t()> run;       /* KERNEL: the launch, arguments by value */
	void *dst;                              /* COPY, SET; ALLOC, FREE: the memory */
	const void *src;                        /* COPY */
	size_t bytes;
	cudaMemcpyKind dir;
	int value;                              /* SET */
	uint64_t dst_serial, src_serial;        /* their allocations at capture, 0: none */
	std::shared_ptr<void> owned;            /* ALLOC: the memory, the graph's to keep */
};

struct capture {
	uint64_t id;                    /* an event names it by this, not its address */
	cudaStreamCaptureMode mode;
	bool invalid;
	std::vector<node> nodes;
};

} /* namespace */

} /* namespace tf_simt */

struct tf_simt_stream {
	unsigned flags;
	tf_simt::capture *cap;          /* while capturing */
};

struct tf_simt_event {
	double ms;
	uint64_t captured;              /* recorded inside this capture (its id), or 0 */
};

struct tf_simt_graph {
	std::vector<tf_simt::node> nodes;
};

struct tf_simt_graph_exec {
	std::vector<tf_simt::node> nodes;
};

namespace tf_simt {

namespace {

/* What a table entry is: device memory (cudaMalloc, cudaMallocAsync),
 * pinned host memory (cudaMallocHost), or host memory of the caller's
 * registered with cudaHostRegister. */
enum mem_kind { DEVICE, PINNED, REGISTERED };

struct allocation {
	size_t bytes;
	mem_kind kind;
	bool read_only;         /* REGISTERED with cudaHostRegisterReadOnly */
	uint64_t serial;        /* which allocation: an address may be handed out again */
};

std::map<char *, allocation> table;
uint64_t serials, captures;
std::vector<capture *> open_captures;
cudaError_t pending = cudaSuccess;

/* Live and peak bytes of device memory and of registered host memory,
 * printed at exit with TF_SIMT_STATS=1 (tests/simt/README.md). */
struct usage {
	uint64_t device, device_peak, registered, registered_peak;

	void add(mem_kind k, size_t bytes)
	{
		if (k == DEVICE)
			device_peak = std::max(device_peak, device += bytes);
		else if (k == REGISTERED)
			registered_peak = std::max(registered_peak, registered += bytes);
	}
	void sub(mem_kind k, size_t bytes)
	{
		if (k == DEVICE)
			device -= bytes;
		else if (k == REGISTERED)
			registered -= bytes;
	}
	~usage()
	{
		const char *e = getenv("TF_SIMT_STATS");
		if (e && *e == '1')
			fprintf(stderr, "simt: device memory peak %llu bytes, registered host memory "
				"peak %llu bytes\n", (unsigned long long)device_peak,
				(unsigned long long)registered_peak);
	}
} used;

/* The entry [p, p + bytes) lies in, or null. */
const allocation *inside(const void *p, size_t bytes)
{
	auto it = table.upper_bound((char *)p);
	if (it == table.begin())
		return nullptr;
	--it;
	const size_t off = (size_t)((const char *)p - it->first);
	return off <= it->second.bytes && bytes <= it->second.bytes - off ? &it->second : nullptr;
}

cudaError_t fail(cudaError_t e)
{
	pending = e;
	return e;
}

/* Poisoned so that what a kernel leaves unwritten shows (as NaN). */
cudaError_t allocate(void **p, size_t bytes, mem_kind kind)
{
	if (!p)
		return fail(cudaErrorInvalidValue);
	*p = nullptr;
	if (!bytes)
		return cudaSuccess;
	if (posix_memalign(p, 256, bytes))
		return fail(cudaErrorMemoryAllocation);
	memset(*p, 0xFF, bytes);
	table[(char *)*p] = allocation{ bytes, kind, false, ++serials };
	used.add(kind, bytes);
	return cudaSuccess;
}

/* cudaFree (DEVICE) or cudaFreeHost (PINNED) of p. */
cudaError_t release(void *p, mem_kind kind)
{
	if (!p)
		return cudaSuccess;
	auto it = table.find((char *)p);
	if (it != table.end() && it->second.kind == REGISTERED) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s of %p, host memory registered with cudaHostRegister: "
			 "cudaHostUnregister it and free it as it was allocated",
			 kind == DEVICE ? "cudaFree" : "cudaFreeHost", p);
		return api_fault(cudaErrorInvalidValue, msg);
	}
	if (it == table.end() || it->second.kind != kind)
		return fail(cudaErrorInvalidValue);
	used.sub(kind, it->second.bytes);
	table.erase(it);
	free(p);
	return cudaSuccess;
}

/* The serial of the allocation [p, p + bytes) lies in, or 0. */
uint64_t serial_of(const void *p, size_t bytes)
{
	const allocation *a = inside(p, bytes);
	return a ? a->serial : 0;
}

capture *capturing(cudaStream_t s)
{
	return s ? s->cap : nullptr;
}

/* A fault that also spoils `c` (CUDA invalidates the capture). */
cudaError_t capture_fault(capture *c, const char *what)
{
	if (c)
		c->invalid = true;
	return api_fault(cudaErrorStreamCaptureUnsupported, what);
}

/* `call` is potentially unsafe while a cudaStreamCaptureModeGlobal capture
 * is open: a fault, which invalidates those captures. */
cudaError_t unsafe(const char *call)
{
	bool global = false;
	for (capture *c : open_captures)
		if (c->mode != cudaStreamCaptureModeRelaxed) {
			c->invalid = true;
			global = true;
		}
	if (!global)
		return cudaSuccess;
	char msg[512];
	snprintf(msg, sizeof(msg), "%s while a stream capture in cudaStreamCaptureModeGlobal is "
		 "open: a potentially unsafe call, prohibited in that mode "
		 "(cudaErrorStreamCaptureUnsupported; see cudaThreadExchangeStreamCaptureMode), "
		 "and the capture is invalidated; make it before the capture or capture in "
		 "cudaStreamCaptureModeRelaxed", call);
	return api_fault(cudaErrorStreamCaptureUnsupported, msg);
}

/* A copy between the device and pageable host memory on a capturing
 * stream: the runtime stages it through its own buffer with a host wait
 * (CUDA Runtime API, "API synchronization behavior"), which capture
 * forbids. */
cudaError_t pageable(capture *c, const void *host, size_t bytes, bool to_device)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "cudaMemcpyAsync %s pageable host memory %p (%zu bytes) on a "
		 "capturing stream: the runtime stages such a copy with a host synchronization, "
		 "which stream capture forbids (cudaErrorStreamCaptureUnsupported; the capture "
		 "is invalidated); copy %s cudaMallocHost memory", to_device ? "from" : "into",
		 host, bytes, to_device ? "from" : "into");
	return capture_fault(c, msg);
}

/* Node k of a replay: its copy or memset endpoints must lie where they
 * lay at capture. */
cudaError_t replay_check(const node &n, size_t k)
{
	if (n.kind == node::KERNEL || n.kind == node::FREE)
		return cudaSuccess;
	const char *side = nullptr;
	const void *p = nullptr;
	if (n.dst_serial && serial_of(n.dst, n.bytes) != n.dst_serial) {
		side = "destination";
		p = n.dst;
	} else if (n.src_serial && serial_of(n.src, n.bytes) != n.src_serial) {
		side = "source";
		p = n.src;
	}
	if (!side)
		return cudaSuccess;
	char msg[512];
	snprintf(msg, sizeof(msg), "cudaGraphLaunch: node %zu (a %s of %zu bytes) has its %s at "
		 "%p, in an allocation freed since the capture%s: the replay would use what the "
		 "address holds now, not what the graph was captured on", k,
		 n.kind == node::SET ? "memset" : "copy", n.bytes, side, p,
		 serial_of(p, n.bytes) ? " and handed out again" : "");
	return api_fault(cudaErrorInvalidValue, msg);
}

double now_ms()
{
	return std::chrono::duration<double, std::milli>(
		std::chrono::steady_clock::now().time_since_epoch()).count();
}

} /* namespace */

std::vector<region> device_regions()
{
	std::vector<region> out;
	for (auto &a : table)
		if (a.second.kind != REGISTERED)        /* the device only reads those */
			out.push_back(region{ a.first, a.second.bytes });
	return out;
}

void set_error(cudaError_t e)
{
	pending = e;
}

bool capture_launch(cudaStream_t stream, const void *kernel, std::function<cudaError_t()> run)
{
	capture *c = capturing(stream);
	if (!c)
		return false;
	node n{};
	n.kind = node::KERNEL;
	n.kernel = kernel;
	n.run = std::move(run);
	c->nodes.push_back(std::move(n));
	return true;
}

} /* namespace tf_simt */

using tf_simt::fail;

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int *device)
{
	*device = 0;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
	if (device != 0)
		return fail(cudaErrorInvalidDevice);
	*prop = cudaDeviceProp{};
	strcpy(prop->name, "SIMT harness (CPU)");
	prop->totalGlobalMem = (size_t)1 << 32;
	prop->sharedMemPerBlock = 48 << 10;
	prop->warpSize = 32;
	prop->maxThreadsPerBlock = 1024;
	prop->major = 9;
	prop->multiProcessorCount = 1;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = tf_simt::pending;
	tf_simt::pending = cudaSuccess;
	return e;
}

cudaError_t cudaDeviceSynchronize(void)
{
	if (!tf_simt::open_captures.empty())
		return tf_simt::capture_fault(tf_simt::open_captures[0],
			"cudaDeviceSynchronize while a stream is being captured: the host would wait "
			"for work that has not been queued (cudaErrorStreamCaptureUnsupported; the "
			"capture is invalidated)");
	return cudaGetLastError();
}

const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	case cudaErrorHostMemoryAlreadyRegistered:
		return "part or all of the requested memory range is already mapped";
	case cudaErrorHostMemoryNotRegistered:
		return "pointer does not correspond to a registered memory region";
	case cudaErrorStreamCaptureUnsupported:
		return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated:
		return "operation failed due to a previous error during capture";
	case cudaErrorGraphExecUpdateFailure:
		return "the graph update was not performed because it included changes which "
		       "violated constraints specific to instantiated graph update";
	}
	return "unrecognized error code";
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	cudaError_t e = tf_simt::unsafe("cudaMalloc");
	return e ? e : tf_simt::allocate(p, bytes, tf_simt::DEVICE);
}

cudaError_t cudaFree(void *p)
{
	cudaError_t e = tf_simt::unsafe("cudaFree");
	return e ? e : tf_simt::release(p, tf_simt::DEVICE);
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
	cudaError_t e = tf_simt::unsafe("cudaMallocHost");
	return e ? e : tf_simt::allocate(p, bytes, tf_simt::PINNED);
}

cudaError_t cudaFreeHost(void *p)
{
	cudaError_t e = tf_simt::unsafe("cudaFreeHost");
	return e ? e : tf_simt::release(p, tf_simt::PINNED);
}

/* On a capturing stream, a memory node: the memory is allocated at
 * capture and kept by the graph (and its executable copies); each replay
 * poisons it afresh, as a new allocation would be.  Its free in the same
 * capture is a node that does nothing. */
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t stream)
{
	tf_simt::capture *c = tf_simt::capturing(stream);
	cudaError_t e = tf_simt::allocate(p, bytes, tf_simt::DEVICE);
	if (e || !c || !*p)
		return e;
	tf_simt::node n{};
	n.kind = tf_simt::node::ALLOC;
	n.dst = *p;
	n.bytes = bytes;
	n.dst_serial = tf_simt::serial_of(*p, bytes);
	n.owned = std::shared_ptr<void>(*p, [](void *q) { tf_simt::release(q, tf_simt::DEVICE); });
	c->nodes.push_back(n);
	return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t stream)
{
	tf_simt::capture *c = tf_simt::capturing(stream);
	if (!c)
		return tf_simt::release(p, tf_simt::DEVICE);
	for (const tf_simt::node &a : c->nodes)
		if (a.kind == tf_simt::node::ALLOC && a.dst == p) {
			tf_simt::node n{};
			n.kind = tf_simt::node::FREE;
			n.dst = p;
			c->nodes.push_back(n);
			return cudaSuccess;
		}
	return tf_simt::capture_fault(c, "cudaFreeAsync on a capturing stream of memory the "
				      "capture did not allocate: not modelled by the harness");
}

namespace {

/* Device sides must lie inside an allocation or a registered range, and
 * a destination not in one registered read-only; host sides may be
 * anything. */
cudaError_t copy_check(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	const bool dev_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
	const bool dev_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	if (kind > cudaMemcpyDefault)
		return fail(cudaErrorInvalidValue);
	const tf_simt::allocation *d = dev_dst ? tf_simt::inside(dst, bytes) : nullptr;
	const char *why = nullptr;
	const void *at = nullptr;
	if (dev_dst && !d) {
		why = "is neither device memory nor registered host memory";
		at = dst;
	} else if (dev_src && !tf_simt::inside(src, bytes)) {
		why = "is neither device memory nor registered host memory";
		at = src;
	} else if (d && d->read_only) {
		why = "is host memory registered read-only (cudaHostRegisterReadOnly)";
		at = dst;
	}
	if (!why)
		return cudaSuccess;
	char msg[320];
	snprintf(msg, sizeof(msg), "a copy of %zu bytes whose device %s %p %s", bytes,
		 at == dst ? "destination" : "source", at, why);
	return tf_simt::api_fault(cudaErrorInvalidValue, msg);
}

} /* namespace */

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	cudaError_t e = tf_simt::unsafe("cudaMemcpy (synchronous)");
	if (e || (e = copy_check(dst, src, bytes, kind)))
		return e;
	memmove(dst, src, bytes);
	return cudaSuccess;
}

/* On a capturing stream: a node, its host side pinned memory. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	tf_simt::capture *c = tf_simt::capturing(stream);
	cudaError_t e = copy_check(dst, src, bytes, kind);
	if (e || !c) {
		if (!e)
			memmove(dst, src, bytes);
		return e;
	}
	if (kind == cudaMemcpyHostToDevice && !tf_simt::serial_of(src, bytes))
		return tf_simt::pageable(c, src, bytes, true);
	if (kind == cudaMemcpyDeviceToHost && !tf_simt::serial_of(dst, bytes))
		return tf_simt::pageable(c, dst, bytes, false);
	tf_simt::node n{};
	n.kind = tf_simt::node::COPY;
	n.dst = dst;
	n.src = src;
	n.bytes = bytes;
	n.dir = kind;
	n.dst_serial = tf_simt::serial_of(dst, bytes);
	n.src_serial = tf_simt::serial_of(src, bytes);
	c->nodes.push_back(n);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
	cudaError_t e = tf_simt::unsafe("cudaMemset (synchronous)");
	if (e)
		return e;
	const tf_simt::allocation *a = tf_simt::inside(p, bytes);
	if (!a || a->read_only)
		return fail(cudaErrorInvalidValue);
	memset(p, value, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream)
{
	tf_simt::capture *c = tf_simt::capturing(stream);
	const tf_simt::allocation *a = tf_simt::inside(p, bytes);
	if (!a || a->read_only)
		return fail(cudaErrorInvalidValue);
	if (!c) {
		memset(p, value, bytes);
		return cudaSuccess;
	}
	tf_simt::node n{};
	n.kind = tf_simt::node::SET;
	n.dst = p;
	n.bytes = bytes;
	n.value = value;
	n.dst_serial = tf_simt::serial_of(p, bytes);
	c->nodes.push_back(n);
	return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *p)
{
	const tf_simt::allocation *a = tf_simt::inside(p, 0);
	const bool host = a && a->kind != tf_simt::DEVICE;
	*attr = cudaPointerAttributes{};
	attr->type = !a ? cudaMemoryTypeUnregistered : host ? cudaMemoryTypeHost
							  : cudaMemoryTypeDevice;
	if (a)
		attr->devicePointer = (void *)p;
	if (host)
		attr->hostPointer = (void *)p;
	return cudaSuccess;
}

/* A registration is checked as the driver pins: whole pages, none twice. */
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned flags)
{
	const unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped |
			       cudaHostRegisterReadOnly;
	if (!p || !bytes || (flags & ~known))
		return fail(cudaErrorInvalidValue);
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	const uintptr_t lo = (uintptr_t)p & ~(page - 1);
	const uintptr_t hi = ((uintptr_t)p + bytes + page - 1) & ~(page - 1);
	for (auto &a : tf_simt::table) {
		const uintptr_t b = (uintptr_t)a.first, e = b + a.second.bytes;
		const uintptr_t bl = a.second.kind == tf_simt::REGISTERED ? b & ~(page - 1) : b;
		const uintptr_t eh = a.second.kind == tf_simt::REGISTERED ? (e + page - 1) & ~(page - 1)
									  : e;
		if (bl >= hi || eh <= lo)
			continue;
		char msg[400];
		snprintf(msg, sizeof(msg), "cudaHostRegister of [%p, +%zu): its pages overlap %s "
			 "[%p, +%zu); a page is registered once "
			 "(cudaErrorHostMemoryAlreadyRegistered)", p, bytes,
			 a.second.kind == tf_simt::REGISTERED ? "the registered range"
			 : a.second.kind == tf_simt::PINNED ? "cudaMallocHost memory"
							    : "device memory",
			 (void *)a.first, a.second.bytes);
		return tf_simt::api_fault(cudaErrorHostMemoryAlreadyRegistered, msg);
	}
	tf_simt::table[(char *)p] = tf_simt::allocation{ bytes, tf_simt::REGISTERED,
						       (flags & cudaHostRegisterReadOnly) != 0,
						       ++tf_simt::serials };
	tf_simt::used.add(tf_simt::REGISTERED, bytes);
	return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p)
{
	auto it = tf_simt::table.find((char *)p);
	if (it == tf_simt::table.end() || it->second.kind != tf_simt::REGISTERED) {
		char msg[256];
		snprintf(msg, sizeof(msg), "cudaHostUnregister of %p, which does not start a range "
			 "registered with cudaHostRegister (cudaErrorHostMemoryNotRegistered)", p);
		return tf_simt::api_fault(cudaErrorHostMemoryNotRegistered, msg);
	}
	tf_simt::used.sub(tf_simt::REGISTERED, it->second.bytes);
	tf_simt::table.erase(it);
	return cudaSuccess;
}

/* The device reads host memory at its host address (unified addressing). */
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags)
{
	const tf_simt::allocation *a = tf_simt::inside(host, 0);
	if (!dev || flags)
		return fail(cudaErrorInvalidValue);
	if (!a || a->kind == tf_simt::DEVICE) {
		char msg[256];
		snprintf(msg, sizeof(msg), "cudaHostGetDevicePointer of %p, which is neither "
			 "registered (cudaHostRegister) nor cudaMallocHost memory", host);
		return tf_simt::api_fault(cudaErrorInvalidValue, msg);
	}
	*dev = host;
	return cudaSuccess;
}

/* TF_SIMT_INTEGRATED=1 makes the device one that shares the CPU's memory
 * (as GB10 or a Jetson), which maps registered host memory; pageable
 * memory it cannot reach. */
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	const char *e = getenv("TF_SIMT_INTEGRATED");
	if (!value || device != 0)
		return fail(device != 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
	switch (attr) {
	case cudaDevAttrIntegrated: *value = e && *e == '1'; return cudaSuccess;
	case cudaDevAttrCanMapHostMemory: *value = 1; return cudaSuccess;
	case cudaDevAttrCanUseHostPointerForRegisteredMem: *value = 1; return cudaSuccess;
	case cudaDevAttrPageableMemoryAccess: *value = 0; return cudaSuccess;
	case cudaDevAttrPageableMemoryAccessUsesHostPageTables: *value = 0; return cudaSuccess;
	}
	return fail(cudaErrorInvalidValue);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
	*stream = new tf_simt_stream{ flags, nullptr };
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	if (stream && stream->cap) {
		auto &o = tf_simt::open_captures;
		o.erase(std::find(o.begin(), o.end(), stream->cap));
		delete stream->cap;
	}
	delete stream;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	if (tf_simt::capturing(stream))
		return tf_simt::capture_fault(tf_simt::capturing(stream),
			"cudaStreamSynchronize on a stream being captured: nothing captured has run, "
			"the host would wait for a graph not yet launched "
			"(cudaErrorStreamCaptureUnsupported; the capture is invalidated)");
	return cudaGetLastError();
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	if (!stream || stream->cap)     /* the legacy stream; or already capturing */
		return fail(cudaErrorInvalidValue);
	stream->cap = new tf_simt::capture{ ++tf_simt::captures, mode, false, {} };
	tf_simt::open_captures.push_back(stream->cap);
	return cudaSuccess;
}

/* An invalidated capture ends with no graph. */
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
	if (!stream || !stream->cap)
		return fail(cudaErrorInvalidValue);
	tf_simt::capture *c = stream->cap;
	auto &o = tf_simt::open_captures;
	o.erase(std::find(o.begin(), o.end(), c));
	stream->cap = nullptr;
	*graph = c->invalid ? nullptr : new tf_simt_graph{ std::move(c->nodes) };
	const bool invalid = c->invalid;
	delete c;
	return invalid ? fail(cudaErrorStreamCaptureInvalidated) : cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
	const tf_simt::capture *c = tf_simt::capturing(stream);
	*status = !c ? cudaStreamCaptureStatusNone : c->invalid ? cudaStreamCaptureStatusInvalidated
								 : cudaStreamCaptureStatusActive;
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long)
{
	if (!exec || !graph)
		return fail(cudaErrorInvalidValue);
	*exec = new tf_simt_graph_exec{ graph->nodes };
	return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
				cudaGraphExecUpdateResultInfo *info)
{
	if (!exec || !graph)
		return fail(cudaErrorInvalidValue);
	cudaGraphExecUpdateResult r = cudaGraphExecUpdateSuccess;
	if (exec->nodes.size() != graph->nodes.size())
		r = cudaGraphExecUpdateErrorTopologyChanged;
	for (size_t k = 0; !r && k < graph->nodes.size(); k++) {
		const tf_simt::node &a = exec->nodes[k], &b = graph->nodes[k];
		if (a.kind != b.kind)
			r = cudaGraphExecUpdateErrorNodeTypeChanged;
		else if (a.kernel != b.kernel)
			r = cudaGraphExecUpdateErrorFunctionChanged;
		else if (a.dir != b.dir)
			r = cudaGraphExecUpdateErrorParametersChanged;
	}
	if (info)
		*info = cudaGraphExecUpdateResultInfo{ r, nullptr, nullptr };
	if (r)
		return fail(cudaErrorGraphExecUpdateFailure);
	exec->nodes = graph->nodes;
	return cudaSuccess;
}

/* The nodes in capture order, each finished before the next. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
	if (!exec)
		return fail(cudaErrorInvalidValue);
	if (tf_simt::capturing(stream))
		return tf_simt::capture_fault(tf_simt::capturing(stream),
			"cudaGraphLaunch into a capturing stream: child graphs are not modelled by "
			"the harness");
	for (size_t k = 0; k < exec->nodes.size(); k++) {
		const tf_simt::node &n = exec->nodes[k];
		cudaError_t e = tf_simt::replay_check(n, k);
		if (e)
			return e;
		if (n.kind == tf_simt::node::KERNEL)
			e = n.run();
		else if (n.kind == tf_simt::node::COPY)
			memmove(n.dst, n.src, n.bytes);
		else if (n.kind == tf_simt::node::SET)
			memset(n.dst, n.value, n.bytes);
		else if (n.kind == tf_simt::node::ALLOC)
			memset(n.dst, 0xFF, n.bytes);
		if (e)
			return e;
	}
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
	delete exec;
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	delete graph;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	*event = new tf_simt_event{ 0.0, 0 };
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	delete event;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	const tf_simt::capture *c = tf_simt::capturing(stream);
	event->captured = c ? c->id : 0;
	if (!c)
		event->ms = tf_simt::now_ms();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	for (tf_simt::capture *c : tf_simt::open_captures)
		if (event->captured == c->id)
			return tf_simt::capture_fault(c,
			"cudaEventSynchronize on an event recorded inside an open stream capture: "
			"the host would wait for captured work that has not run "
				"(cudaErrorStreamCaptureUnsupported; the capture is invalidated)");
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	*ms = (float)(end->ms - start->ms);
	return cudaSuccess;
}

} /* extern "C" */
