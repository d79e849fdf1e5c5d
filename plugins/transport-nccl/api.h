/*
 * api.h - the few NCCL and CUDA driver entry points the nccl transport
 * uses, found with dlopen/dlsym at run time: the plugin builds without the
 * CUDA toolkit and loads where neither library is installed (its probe
 * then says which is missing).  The types and constants below are those
 * of nccl.h (2.10 and later, for bf16) and cuda.h, declared here.
 */
#ifndef TF_NCCL_API_H
#define TF_NCCL_API_H

#include <stddef.h>

typedef struct { char internal[128]; } tf_nccl_unique_id;     /* ncclUniqueId */
typedef void *tf_nccl_comm;                                     /* ncclComm_t */
typedef void *tf_cu_stream;                                     /* CUstream == cudaStream_t */
typedef void *tf_cu_context;
typedef unsigned long long tf_cu_ptr;                           /* CUdeviceptr */

enum {
	TF_NCCL_SUCCESS = 0, TF_NCCL_IN_PROGRESS = 7,           /* ncclResult_t */
	TF_NCCL_UINT8 = 1, TF_NCCL_FLOAT32 = 7, TF_NCCL_BF16 = 9, /* ncclDataType_t */
	TF_NCCL_SUM = 0,                                        /* ncclRedOp_t */
	TF_CU_NOT_READY = 600,                                  /* CUresult */
};

typedef struct tf_nccl_api {
	void *nccl, *cuda;              /* dlopen handles */
	int (*GetVersion)(int *);
	int (*GetUniqueId)(tf_nccl_unique_id *);
	int (*CommInitRank)(tf_nccl_comm *, int, tf_nccl_unique_id, int);
	int (*CommDestroy)(tf_nccl_comm);
	int (*CommAbort)(tf_nccl_comm);
	int (*CommGetAsyncError)(tf_nccl_comm, int *);
	const char *(*GetErrorString)(int);
	int (*AllReduce)(const void *, void *, size_t, int, int, tf_nccl_comm, tf_cu_stream);
	int (*AllGather)(const void *, void *, size_t, int, tf_nccl_comm, tf_cu_stream);
	int (*Broadcast)(const void *, void *, size_t, int, int, tf_nccl_comm, tf_cu_stream);

	int (*cuInit)(unsigned);
	int (*cuDeviceGetCount)(int *);
	int (*cuDeviceGet)(int *, int);
	int (*cuDevicePrimaryCtxRetain)(tf_cu_context *, int);
	int (*cuDevicePrimaryCtxRelease)(int);
	int (*cuCtxSetCurrent)(tf_cu_context);
	int (*cuMemAlloc)(tf_cu_ptr *, size_t);
	int (*cuMemFree)(tf_cu_ptr);
	int (*cuMemcpyHtoD)(tf_cu_ptr, const void *, size_t);
	int (*cuMemcpyDtoH)(void *, tf_cu_ptr, size_t);
	int (*cuStreamCreate)(tf_cu_stream *, unsigned);
	int (*cuStreamDestroy)(tf_cu_stream);
	int (*cuStreamQuery)(tf_cu_stream);
} tf_nccl_api;

/* Load libnccl.so.2 and libcuda.so.1 (or the files named; NULL: the
 * loader's search path) and resolve every entry: 0, or -1 with why. */
int tf_nccl_load(tf_nccl_api *a, const char *nccl_path, const char *cuda_path, char *why,
		 size_t n);
void tf_nccl_unload(tf_nccl_api *a);

#endif /* TF_NCCL_API_H */
