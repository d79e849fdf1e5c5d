#!/bin/sh
# test.sh - install the dependencies, build everything with warnings as
# errors (CUDA plugins too where nvcc exists), and run every test: the
# ctest suite, the NEON self-tests under qemu, and a short fuzz run.
# Ends with one line counting every ctest entry of every suite.
#
# The suite runs twice: a release build, then ASan+UBSan at -O2 (the
# quantizer and model tests are too slow unoptimised; SANITIZE=0 skips).
#
#     scripts/test.sh            FUZZ_SECONDS=0 scripts/test.sh  (no fuzzing)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/env.sh"
jobs=${JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
"$root/scripts/deps.sh" --train         # tests/train needs PyTorch

# The count of "N% tests passed, F tests failed out of T" in a ctest log.
counts() { sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$1"; }

cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTF_WERROR=ON >/dev/null
cmake --build "$root/build" -j "$jobs"
# Pass or fail is read from ctest's own count below (a pipe hides exit codes).
ctest --test-dir "$root/build" -j "$jobs" --output-on-failure --timeout 600 \
	2>&1 | tee "$logs/native"

if [ "${SANITIZE:-1}" != 0 ]; then
	echo "== the suite again under ASan and UBSan"
	cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTF_WERROR=ON \
		-DTF_SANITIZE=address,undefined >/dev/null
	cmake --build "$root/build-asan" -j "$jobs"
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		ctest --test-dir "$root/build-asan" -j "$jobs" --output-on-failure --timeout 900 \
		2>&1 | tee "$logs/asan"
fi

echo "== aarch64 self-tests (qemu)"
JOBS=$jobs "$root/scripts/cross-test.sh" "$root/build-aarch64" 2>&1 | tee "$logs/cross"

status=0
secs=${FUZZ_SECONDS:-10}
if [ "$secs" -gt 0 ]; then
	echo "== fuzzing, $secs s per target"
	"$root/scripts/fuzz.sh" "$secs" || status=1
fi

[ -f "$logs/asan" ] || echo "100% tests passed, 0 tests failed out of 0" >"$logs/asan"
set -- $(counts "$logs/native") $(counts "$logs/asan") $(counts "$logs/cross")
failed=$(( ${1:-1} + ${3:-1} + ${5:-1} ))
total=$(( ${2:-0} + ${4:-0} + ${6:-0} ))
echo "summary: $((total - failed)) passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
