#!/bin/sh
# test.sh - install the dependencies, build everything with warnings as
# errors (CUDA plugins too where nvcc exists), and run every test: the
# ctest suite, the NEON self-tests under qemu, and a short fuzz run.
#
#     scripts/test.sh            FUZZ_SECONDS=0 scripts/test.sh  (no fuzzing)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/env.sh"
jobs=${JOBS:-$(nproc)}
"$root/scripts/deps.sh"

cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTF_WERROR=ON >/dev/null
cmake --build "$root/build" -j "$jobs"
ctest --test-dir "$root/build" -j "$jobs" --output-on-failure --timeout 600

echo "== aarch64 self-tests (qemu)"
JOBS=$jobs "$root/scripts/cross-test.sh" "$root/build-aarch64"

secs=${FUZZ_SECONDS:-10}
if [ "$secs" -gt 0 ]; then
	echo "== fuzzing, $secs s per target"
	"$root/scripts/fuzz.sh" "$secs"
fi
