#!/bin/sh
# demo.sh - from a fresh Debian machine to text from ling-nano, the small
# Ling-3 model trained on the King James Bible (models/ling-nano, in git):
# install the dependencies, build (build/, as test.sh builds it), run tfrun.
#
#     scripts/demo.sh ["prompt"]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/build.sh" "$root/build"
"$root/build/bin/tfrun" "$root/conf/ling-nano.ini" -p "${1:-Tell me about the sea.}" </dev/null
