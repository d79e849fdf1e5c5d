#!/bin/sh
# build.sh - configure and build the tree as demo.sh and test.sh both use
# it: RelWithDebInfo, warnings as errors.  One configuration for both, so
# running one after the other rebuilds nothing.
#
#     scripts/build.sh [build dir]      (default: build; JOBS=N, default nproc)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/env.sh"
build=${1:-"$root/build"}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTF_WERROR=ON >/dev/null
cmake --build "$build" -j "${JOBS:-$(nproc)}"
