/*
 * harness.h - what the harness's parts share (not for kernels): the
 * device memory table (runtime.cpp) the scheduler (simt.cpp) saves,
 * restores and compares between schedules, the launch error, faults
 * outside kernels, and the recording of launches on a capturing stream.
 */
#ifndef TF_SIMT_HARNESS_H
#define TF_SIMT_HARNESS_H

#include <cstddef>
#include <functional>
#include <vector>

#include "cuda_runtime_api.h"

namespace tf_simt {

struct region {
	char *p;
	size_t bytes;
};

/* Every live cudaMalloc / cudaMallocHost block, in address order. */
std::vector<region> device_regions();

/* Makes `e` the next cudaGetLastError / synchronize result. */
void set_error(cudaError_t e);

/* A fault of a runtime call (`what` says which and why): printed and
 * aborted on, or with tf_simt_set_abort(0) recorded as the last fault
 * and made the next error.  Returns e. */
cudaError_t api_fault(cudaError_t e, const char *what);

/* When `stream` is being captured: `run` (the launch, its arguments held
 * by value, as CUDA copies them at capture) becomes the capture's next
 * node, identified for cudaGraphExecUpdate by `kernel`; returns true.
 * False (nothing recorded) on a stream that is not capturing. */
bool capture_launch(cudaStream_t stream, const void *kernel, std::function<cudaError_t()> run);

} /* namespace tf_simt */

#endif /* TF_SIMT_HARNESS_H */
