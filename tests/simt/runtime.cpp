/*
 * runtime.cpp - the CUDA runtime calls of cuda_runtime_api.h on the CPU:
 * one device whose memory is host memory in a table, streams and events
 * that finish each call before returning, and the error state.
 */
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "harness.h"

struct tf_simt_stream {
	unsigned flags;
};

struct tf_simt_event {
	double ms;
};

namespace tf_simt {

namespace {

struct allocation {
	size_t bytes;
	bool pinned;            /* cudaMallocHost: host memory the device can read */
};

std::map<char *, allocation> table;
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
	table[(char *)*p] = allocation{ bytes, pinned };
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
	}
	return "unrecognized error code";
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	return tf_simt::allocate(p, bytes, false);
}

cudaError_t cudaFree(void *p)
{
	return tf_simt::release(p, false);
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
	return tf_simt::allocate(p, bytes, true);
}

cudaError_t cudaFreeHost(void *p)
{
	return tf_simt::release(p, true);
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t)
{
	return tf_simt::allocate(p, bytes, false);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t)
{
	return tf_simt::release(p, false);
}

/* Device sides must lie inside an allocation; host sides may be anything. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	const bool dev_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
	const bool dev_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	if (kind > cudaMemcpyDefault || (dev_dst && !tf_simt::inside(dst, bytes)) ||
	    (dev_src && !tf_simt::inside(src, bytes)))
		return fail(cudaErrorInvalidValue);
	memmove(dst, src, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t)
{
	return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
	if (!tf_simt::inside(p, bytes))
		return fail(cudaErrorInvalidValue);
	memset(p, value, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t)
{
	return cudaMemset(p, value, bytes);
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
	*stream = new tf_simt_stream{ flags };
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	delete stream;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t)
{
	return cudaGetLastError();
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	*event = new tf_simt_event{ 0.0 };
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	delete event;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t)
{
	event->ms = tf_simt::now_ms();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t)
{
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	*ms = (float)(end->ms - start->ms);
	return cudaSuccess;
}

} /* extern "C" */
