/*
 * cuda_runtime_api.h (SIMT harness) - the part of the CUDA runtime API our
 * plugins call, implemented on the CPU by tests/simt/simt.cpp.  C and C++.
 *
 * One "device" whose memory is host memory: cudaMalloc'd bytes come back
 * filled with 0xFF (NaN as float) so unwritten outputs show, and are kept
 * in a table the harness uses to compare kernel results between thread
 * schedules.  Streams and events are ordered queues run at once: every
 * call has finished when it returns, except on a stream being captured,
 * whose launches, copies and memsets are recorded into a graph that
 * cudaGraphLaunch replays.  Faults the harness detects are printed and
 * abort the process, unless tf_simt_set_abort(0).
 */
#ifndef TF_SIMT_CUDA_RUNTIME_API_H
#define TF_SIMT_CUDA_RUNTIME_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#define TF_SIMT_DEFAULT(v) = v
#else
#define TF_SIMT_DEFAULT(v)
#endif

typedef enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInvalidDevice = 101,
	cudaErrorHostMemoryAlreadyRegistered = 712,
	cudaErrorHostMemoryNotRegistered = 713,
	cudaErrorLaunchFailure = 719,
	cudaErrorStreamCaptureUnsupported = 900,
	cudaErrorStreamCaptureInvalidated = 901,
	cudaErrorGraphExecUpdateFailure = 910,
} cudaError_t;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
	cudaMemoryTypeUnregistered = 0,
	cudaMemoryTypeHost = 1,
	cudaMemoryTypeDevice = 2,
};

struct cudaPointerAttributes {
	enum cudaMemoryType type;
	int device;
	void *devicePointer;
	void *hostPointer;
};

typedef struct cudaDeviceProp {
	char name[256];
	size_t totalGlobalMem;
	size_t sharedMemPerBlock;
	int warpSize;
	int maxThreadsPerBlock;
	int major, minor;
	int multiProcessorCount;
} cudaDeviceProp;

/* The attributes the backend reads to decide on mapping host memory. */
enum cudaDeviceAttr {
	cudaDevAttrIntegrated = 18,
	cudaDevAttrCanMapHostMemory = 19,
	cudaDevAttrPageableMemoryAccess = 88,
	cudaDevAttrPageableMemoryAccessUsesHostPageTables = 100,
	cudaDevAttrCanUseHostPointerForRegisteredMem = 91,
};

#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
#define cudaHostRegisterReadOnly 0x08

typedef struct tf_simt_stream *cudaStream_t;
typedef struct tf_simt_event *cudaEvent_t;
#define cudaStreamNonBlocking 0x01

/* Stream capture and graphs: one stream's work as a chain of nodes. */
typedef struct tf_simt_graph *cudaGraph_t;
typedef struct tf_simt_graph_exec *cudaGraphExec_t;
typedef struct tf_simt_graph_node *cudaGraphNode_t;     /* never made: the update's result only */

enum cudaStreamCaptureMode {
	cudaStreamCaptureModeGlobal = 0,
	cudaStreamCaptureModeThreadLocal = 1,
	cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
	cudaStreamCaptureStatusNone = 0,
	cudaStreamCaptureStatusActive = 1,
	cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaGraphExecUpdateResult {
	cudaGraphExecUpdateSuccess = 0,
	cudaGraphExecUpdateError = 1,
	cudaGraphExecUpdateErrorTopologyChanged = 2,
	cudaGraphExecUpdateErrorNodeTypeChanged = 3,
	cudaGraphExecUpdateErrorFunctionChanged = 4,
	cudaGraphExecUpdateErrorParametersChanged = 5,
	cudaGraphExecUpdateErrorNotSupported = 6,
};

typedef struct cudaGraphExecUpdateResultInfo {
	enum cudaGraphExecUpdateResult result;
	cudaGraphNode_t errorNode;
	cudaGraphNode_t errorFromNode;
} cudaGraphExecUpdateResultInfo;

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void *p, cudaStream_t stream);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
			    enum cudaMemcpyKind kind, cudaStream_t stream TF_SIMT_DEFAULT(0));
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
			    cudaStream_t stream TF_SIMT_DEFAULT(0));
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *p);

/* Host memory the device reads in place.  A range registers whole pages,
 * none of them twice; unregistering takes the address it was registered
 * at; cudaFree of it is a fault.  Registered ranges count as device
 * memory for copies (read-only ones not as a destination). */
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned flags);
cudaError_t cudaHostUnregister(void *p);
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
				 unsigned long long flags TF_SIMT_DEFAULT(0));
/* Takes the graph's parameters when its nodes match the executable's one
 * for one (kind, kernel, copy direction); else cudaErrorGraphExecUpdateFailure. */
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
				cudaGraphExecUpdateResultInfo *info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/* Events record the host clock: the harness measures nothing worth timing. */
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream TF_SIMT_DEFAULT(0));
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/* The harness's own controls. */
void tf_simt_set_abort(int on);         /* default on: a fault prints and aborts */
const char *tf_simt_last_fault(void);   /* the last fault's message, "" if none */

#ifdef __cplusplus
}

template <class T> static inline cudaError_t cudaMalloc(T **p, size_t bytes)
{
	return cudaMalloc((void **)p, bytes);
}

template <class T> static inline cudaError_t cudaMallocHost(T **p, size_t bytes)
{
	return cudaMallocHost((void **)p, bytes);
}
#endif
#endif /* TF_SIMT_CUDA_RUNTIME_API_H */
