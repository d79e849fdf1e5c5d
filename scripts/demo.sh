#!/bin/sh
# demo.sh - from a fresh Debian machine to text from the tiny Ling model:
# install the dependencies, build, generate models/ling-tiny, run tfrun.
#
#     scripts/demo.sh ["prompt"]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/env.sh"
"$root/scripts/deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j "$(nproc)"
[ -f "$root/models/ling-tiny/config.json" ] ||
	"$root/build/bin/tfsynth" --preset ling-tiny --out "$root/models/ling-tiny"
"$root/build/bin/tfrun" "$root/conf/ling-tiny.ini" -p "${1:-Tell me about the sea.}" </dev/null
