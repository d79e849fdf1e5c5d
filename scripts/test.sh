#!/bin/sh
# test.sh - install the dependencies, build everything with warnings as
# errors (CUDA plugins too where nvcc exists), and run every suite: the
# ctest suite (but the tests labelled `long`: scripts/long-tests.sh), again
# under ASan and UBSan, the NEON self-tests under qemu, the kernels'
# self-tests on the scalar fallback, and a short fuzz
# run of each fuzz target (deterministic: its seed corpus, then FUZZ_RUNS
# inputs from a fixed seed).  Ends with a line naming each suite with its
# counts (and the tests that failed), then "summary: N passed, N failed";
# a suite that did not configure, build or run fails the run, its first
# error line quoted.
#
# The ASan+UBSan build is -O2 (the quantizer and model tests are too slow
# unoptimised; SANITIZE=0 skips it).
#
#     scripts/test.sh            FUZZ_RUNS=0 scripts/test.sh  (no fuzzing)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/env.sh"
. "$root/scripts/suites.sh"
jobs=${JOBS:-$(nproc)}
runs=${FUZZ_RUNS:-100000}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
"$root/scripts/deps.sh" --train         # tests/train needs PyTorch

# Each suite chains its steps with && (a function called by suite_run
# runs without set -e).
#
# use_tls=0: LeakSanitizer's tracer crashed at exit in every tfrun that
# loaded all the plugins on the path (any one fewer, and it did not): its
# scan of thread-local storage walks glibc's per-module TLS table, which
# many dlopen()ed modules outgrow.  A heap block held only from TLS would
# now be reported as a leak: a false alarm, never a missed leak.
# print_suppressions=0: the built-in suppression that then matches glibc's
# own TLS block (by symbol: deps.sh installs libc6-dbg for ld.so's) must
# not print into outputs the tests read.  The native suite needs them too:
# tests/simt/ and what is built on it are ASan builds (its tracer crashed
# there once, in model_cuda_sim_unifiedmemoryparts).
lsan_options=use_tls=0:print_suppressions=0
native_ctest() {
	LSAN_OPTIONS=$lsan_options \
		ctest --test-dir "$root/build" -j "$jobs" -LE long --output-on-failure --timeout 600 "$@"
}
native() {
	JOBS=$jobs "$root/scripts/build.sh" "$root/build" && suite_ctest_lsan native_ctest
}
asan_ctest() {
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LSAN_OPTIONS=$lsan_options \
		ctest --test-dir "$root/build-asan" --output-on-failure --timeout 900 "$@"
}
# The CUDA plugins are built (and their host-side tests run) by the native
# suite; their tests through the simulator are ASan builds there.  nvcc
# for two architectures was most of this suite's build time, for two tests.
asan() {
	cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DTF_WERROR=ON -DTF_SANITIZE=address,undefined -DTF_CUDA=OFF >/dev/null &&
		cmake --build "$root/build-asan" -j "$jobs" &&
		suite_ctest_lsan asan_ctest -j "$jobs"
}
cross() { JOBS=$jobs "$root/scripts/cross-test.sh" "$root/build-aarch64"; }
scalar() { JOBS=$jobs "$root/scripts/cross-test.sh" --scalar "$root/build-scalar"; }
fuzz() { "$root/scripts/fuzz.sh" --runs "$runs"; }

suite_run "native ctest" native
[ "${SANITIZE:-1}" = 0 ] || suite_run "asan ctest" asan
suite_run "aarch64 qemu" cross
suite_run "scalar" scalar
[ "$runs" -eq 0 ] || suite_run fuzz fuzz
suite_summary
