/*
 * harness.h - what the harness's parts share (not for kernels): the
 * device memory table (runtime.cpp) the scheduler (simt.cpp) saves,
 * restores and compares between schedules, and the launch error.
 */
#ifndef TF_SIMT_HARNESS_H
#define TF_SIMT_HARNESS_H

#include <cstddef>
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

} /* namespace tf_simt */

#endif /* TF_SIMT_HARNESS_H */
