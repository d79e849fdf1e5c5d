#!/bin/sh
# gpu-check.sh - on a machine with an NVIDIA GPU: build the CUDA plugins,
# check exl3's CUDA kernels against the CPU reference on random layers,
# print the GEMV benchmark table, run the KDA kernels' tests (those
# test_kda_cuda_sim runs on the SIMT harness) on the device and time them,
# and run the MLA kernels' tests (test_mla_cuda_sim's) on the device.
#
#     scripts/gpu-check.sh [build dir]      (default: build-gpu)
#
# Needs nvcc (CUDA 12+) on PATH or in /usr/local/cuda/bin.  Architectures
# default to 90 and 121; set CUDA_ARCHS="90" (say) to build fewer.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build-gpu"}
archs=${CUDA_ARCHS:-"90;121"}
jobs=$(nproc 2>/dev/null || echo 2)

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
	PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
cmake --build "$build" -j "$jobs" --target exl3 exl3-cuda backend-cuda gpu_check \
	test_kda_cuda_gpu kda_gpu_bench test_mla_cuda_gpu

echo "== exl3 CUDA kernels vs the CPU reference, then the one-row benchmark"
"$build/bin/gpu_check"

echo "== KDA kernels (plugins/kda-cuda) vs the CPU step and the float64 layer"
"$build/tests/test_kda_cuda_gpu" --jobs=1 --verbose
"$build/bin/kda_gpu_bench"

echo "== MLA kernels (plugins/mla-cuda) vs attend.c and the float64 layer"
"$build/tests/test_mla_cuda_gpu" --jobs=1 --verbose
