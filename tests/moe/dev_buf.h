/*
 * dev_buf.h - device buffers for the MoE kernel tests (test_moe_cuda.c,
 * test_moe_cuda_exl3.c), on the SIMT harness or a GPU alike; each fails
 * the test when a CUDA call does.
 */
#ifndef TF_TEST_MOE_DEV_BUF_H
#define TF_TEST_MOE_DEV_BUF_H

#include <stddef.h>

/* A device copy of bytes at h. */
void *dev_put(const void *h, size_t bytes);
/* Device memory filled with 0xFF bytes: NaN as float, -1 as int32. */
void *dev_poisoned(size_t bytes);
/* The device's queued work finished, then bytes at d copied to h. */
void dev_get(void *h, const void *d, size_t bytes);

#endif /* TF_TEST_MOE_DEV_BUF_H */
