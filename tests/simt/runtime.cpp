/*
 * runtime.cpp - the CUDA runtime calls of cuda_runtime_api.h on the CPU:
 * one device whose memory is host memory in a table, streams and events
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

struct allocation {
	size_t bytes;
	bool pinned;            /* cudaMallocHost: host memory the device can read */
	uint64_t serial;        /* which allocation: an address may be handed out again */
};

std::map<char *, allocation> table;
uint64_t serials, captures;
std::vector<capture *> open_captures;
cudaError_t pending = cudaSuccess;

/* The allocation [p, p + bytes) lies in, or null. */
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
cudaError_t allocate(void **p, size_t bytes, bool pinned)
{
	if (!p)
		return fail(cudaErrorInvalidValue);
	*p = nullptr;
	if (!bytes)
		return cudaSuccess;
	if (posix_memalign(p, 256, bytes))
		return fail(cudaErrorMemoryAllocation);
	memset(*p, 0xFF, bytes);
	table[(char *)*p] = allocation{ bytes, pinned, ++serials };
	return cudaSuccess;
}

cudaError_t release(void *p, bool pinned)
{
	if (!p)
		return cudaSuccess;
	auto it = table.find((char *)p);
	if (it == table.end() || it->second.pinned != pinned)
		return fail(cudaErrorInvalidValue);
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
	return e ? e : tf_simt::allocate(p, bytes, false);
}

cudaError_t cudaFree(void *p)
{
	cudaError_t e = tf_simt::unsafe("cudaFree");
	return e ? e : tf_simt::release(p, false);
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
	cudaError_t e = tf_simt::unsafe("cudaMallocHost");
	return e ? e : tf_simt::allocate(p, bytes, true);
}

cudaError_t cudaFreeHost(void *p)
{
	cudaError_t e = tf_simt::unsafe("cudaFreeHost");
	return e ? e : tf_simt::release(p, true);
}

/* On a capturing stream, a memory node: the memory is allocated at
 * capture and kept by the graph (and its executable copies); each replay
 * poisons it afresh, as a new allocation would be.  Its free in the same
 * capture is a node that does nothing. */
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t stream)
{
	tf_simt::capture *c = tf_simt::capturing(stream);
	cudaError_t e = tf_simt::allocate(p, bytes, false);
	if (e || !c || !*p)
		return e;
	tf_simt::node n{};
	n.kind = tf_simt::node::ALLOC;
	n.dst = *p;
	n.bytes = bytes;
	n.dst_serial = tf_simt::serial_of(*p, bytes);
	n.owned = std::shared_ptr<void>(*p, [](void *q) { tf_simt::release(q, false); });
	c->nodes.push_back(n);
	return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t stream)
{
	tf_simt::capture *c = tf_simt::capturing(stream);
	if (!c)
		return tf_simt::release(p, false);
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

/* Device sides must lie inside an allocation; host sides may be anything. */
cudaError_t copy_check(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	const bool dev_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
	const bool dev_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	if (kind > cudaMemcpyDefault || (dev_dst && !tf_simt::inside(dst, bytes)) ||
	    (dev_src && !tf_simt::inside(src, bytes)))
		return fail(cudaErrorInvalidValue);
	return cudaSuccess;
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
	if (!tf_simt::inside(p, bytes))
		return fail(cudaErrorInvalidValue);
	memset(p, value, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream)
{
	tf_simt::capture *c = tf_simt::capturing(stream);
	if (!tf_simt::inside(p, bytes))
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
	*attr = cudaPointerAttributes{};
	attr->type = !a ? cudaMemoryTypeUnregistered : a->pinned ? cudaMemoryTypeHost
								 : cudaMemoryTypeDevice;
	if (a)
		attr->devicePointer = (void *)p;
	if (a && a->pinned)
		attr->hostPointer = (void *)p;
	return cudaSuccess;
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
