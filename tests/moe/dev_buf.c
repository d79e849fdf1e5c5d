/* dev_buf.c - see dev_buf.h. */
#include "dev_buf.h"

#include <criterion/criterion.h>
#include <cuda_runtime_api.h>

void *dev_put(const void *h, size_t bytes)
{
	void *d = NULL;
	cr_assert_eq(cudaMalloc(&d, bytes), cudaSuccess);
	cr_assert_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

void *dev_poisoned(size_t bytes)
{
	void *d = NULL;
	cr_assert_eq(cudaMalloc(&d, bytes), cudaSuccess);
	cr_assert_eq(cudaMemset(d, 0xFF, bytes), cudaSuccess);
	return d;
}

void dev_get(void *h, const void *d, size_t bytes)
{
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}
