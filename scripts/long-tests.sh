#!/bin/sh
# long-tests.sh - the tests too long for the CI's 30 minutes on 2 cores,
# labelled `long` (ctest -L long): the whole model on cuda-sim beyond its
# logits, EXL3 and tensor-parallel EXL3 runs, which CI keeps (greedy and
# seeded ids with MTP drafts, the MTP layer's logits, tensor parallelism,
# CUDA graphs, tfrun serve), each minutes of harness CPU.  Builds as
# test.sh's native suite does, so running one after the other rebuilds
# nothing.
#
#     scripts/long-tests.sh [build dir]      (default: build; JOBS=N, default nproc)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}
"$root/scripts/build.sh" "$build"
ctest --test-dir "$build" -L long -j "${JOBS:-$(nproc)}" --output-on-failure --timeout 900
