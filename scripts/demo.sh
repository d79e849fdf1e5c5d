#!/bin/sh
# demo.sh - from a fresh Debian machine to text from the tiny Ling model:
# install the dependencies, build (build/, as test.sh builds it),
# generate models/ling-tiny, run tfrun.
#
#     scripts/demo.sh ["prompt"]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/build.sh" "$root/build"
[ -f "$root/models/ling-tiny/config.json" ] ||
	"$root/build/bin/tfsynth" --preset ling-tiny --out "$root/models/ling-tiny"
"$root/build/bin/tfrun" "$root/conf/ling-tiny.ini" -p "${1:-Tell me about the sea.}" </dev/null
