#!/bin/sh
# cross-test.sh - build the plain-C self-tests for aarch64 (NEON kernels)
# and run them under qemu.  Only the self-test targets are built: the
# core, tools and Criterion tests need libraries not installed for arm64.
#
#     scripts/cross-test.sh [build-dir]      (default: build-aarch64)
#
# Needs gcc-aarch64-linux-gnu and qemu-user-static.  Exits non-zero when a
# self-test fails.
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$src/build-aarch64"}
jobs=${JOBS:-2}

cmake -S "$src" -B "$build" \
	-DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-aarch64.cmake" \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DTF_BUILD_TESTS=OFF -DTF_SELFTESTS=ON -DTF_WERROR=ON
cmake --build "$build" -j "$jobs" --target selftests
ctest --test-dir "$build" --output-on-failure
