/*
 * api.c - resolve the NCCL and CUDA driver entry points (api.h).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "api.h"

#define ENTRY(lib, field, sym) { lib, #sym, offsetof(tf_nccl_api, field) }

static const struct entry {
	int lib;                        /* 0: NCCL, 1: the CUDA driver */
	const char *sym;
	size_t off;
} entries[] = {
	ENTRY(0, GetVersion, ncclGetVersion),
	ENTRY(0, GetUniqueId, ncclGetUniqueId),
	ENTRY(0, CommInitRank, ncclCommInitRank),
	ENTRY(0, CommDestroy, ncclCommDestroy),
	ENTRY(0, CommAbort, ncclCommAbort),
	ENTRY(0, CommGetAsyncError, ncclCommGetAsyncError),
	ENTRY(0, GetErrorString, ncclGetErrorString),
	ENTRY(0, AllReduce, ncclAllReduce),
	ENTRY(0, AllGather, ncclAllGather),
	ENTRY(0, Broadcast, ncclBroadcast),
	ENTRY(1, cuInit, cuInit),
	ENTRY(1, cuDeviceGetCount, cuDeviceGetCount),
	ENTRY(1, cuDeviceGet, cuDeviceGet),
	ENTRY(1, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain),
	ENTRY(1, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2),
	ENTRY(1, cuCtxSetCurrent, cuCtxSetCurrent),
	ENTRY(1, cuMemAlloc, cuMemAlloc_v2),
	ENTRY(1, cuMemFree, cuMemFree_v2),
	ENTRY(1, cuMemcpyHtoD, cuMemcpyHtoD_v2),
	ENTRY(1, cuMemcpyDtoH, cuMemcpyDtoH_v2),
	ENTRY(1, cuStreamCreate, cuStreamCreate),
	ENTRY(1, cuStreamDestroy, cuStreamDestroy_v2),
	ENTRY(1, cuStreamQuery, cuStreamQuery),
};

int tf_nccl_load(tf_nccl_api *a, const char *nccl_path, const char *cuda_path, char *why,
		 size_t n)
{
	memset(a, 0, sizeof(*a));
	if (!(a->nccl = dlopen(nccl_path ? nccl_path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL))) {
		snprintf(why, n, "NCCL not found: %s", dlerror());
		return -1;
	}
	if (!(a->cuda = dlopen(cuda_path ? cuda_path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
		snprintf(why, n, "no CUDA driver: %s", dlerror());
		tf_nccl_unload(a);
		return -1;
	}
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		void *f = dlsym(entries[i].lib ? a->cuda : a->nccl, entries[i].sym);
		if (!f) {
			snprintf(why, n, "%s lacks %s (too old?)", entries[i].lib ?
				 "libcuda.so.1" : "libnccl.so.2", entries[i].sym);
			tf_nccl_unload(a);
			return -1;
		}
		memcpy((char *)a + entries[i].off, &f, sizeof(f));
	}
	return 0;
}

void tf_nccl_unload(tf_nccl_api *a)
{
	if (a->nccl)
		dlclose(a->nccl);
	if (a->cuda)
		dlclose(a->cuda);
	memset(a, 0, sizeof(*a));
}
