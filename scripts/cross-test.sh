#!/bin/sh
# cross-test.sh - build the plain-C self-tests of the kernels and run them:
# for aarch64 (NEON, dotprod) under qemu, or natively with the scalar
# fallback.  Only the self-test targets are built: the core, tools and
# Criterion tests need libraries not installed for arm64.
#
#     scripts/cross-test.sh [build-dir]          aarch64 (default: build-aarch64)
#     scripts/cross-test.sh --scalar [build-dir] scalar (default: build-scalar)
#
# aarch64 needs gcc-aarch64-linux-gnu and qemu-user-static.  Exits non-zero
# when a self-test fails.
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-2}
if [ "${1:-}" = --scalar ]; then
	build=${2:-"$src/build-scalar"}
	set -- -DTF_SIMD=scalar
else
	build=${1:-"$src/build-aarch64"}
	set -- -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-aarch64.cmake"
fi

cmake -S "$src" -B "$build" "$@" \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DTF_BUILD_TESTS=OFF -DTF_SELFTESTS=ON -DTF_WERROR=ON
cmake --build "$build" -j "$jobs" --target selftests
ctest --test-dir "$build" --output-on-failure
