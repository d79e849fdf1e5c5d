/*
 * tf_launch.h - the one way our .cu files launch a kernel:
 *
 *     TF_LAUNCH(grid, block, smem, stream, kernel)(args...);
 *
 * Under nvcc this is kernel<<<grid, block, smem, stream>>>(args...).
 * Compiled by the host C++ compiler against the SIMT harness
 * (tests/simt/), it runs the kernel on the CPU with the harness's checks.
 * The kernel comes last so a template kernel's commas need no parentheses.
 */
#ifndef TF_LAUNCH_H
#define TF_LAUNCH_H

#ifdef __CUDACC__
#define TF_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#else
#include "simt.h"       /* defines TF_LAUNCH */
#endif

#endif /* TF_LAUNCH_H */
