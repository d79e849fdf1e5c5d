#!/bin/sh
# fuzz.sh [seconds] - fuzz every tests/fuzz/fuzz_*.c target.
#
# Builds the targets with clang, libFuzzer, ASan and UBSan in build-fuzz/,
# then runs each for `seconds` (default 30), starting from its seed corpus in
# tests/fuzz/corpus/<target>/.  New inputs and crash reproducers go to
# fuzz-out/<target>/ (git-ignored), so the seed corpus only changes by hand:
# copy a fixed crash there to keep it as a regression input.  Exits non-zero
# when any target crashes, leaks or times out; the last line counts the
# targets ("P targets passed, F failed").
set -eu

secs=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
out=$root/fuzz-out

targets=$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')

CC=${FUZZ_CC:-clang} cmake -S "$root" -B "$build" -DTF_FUZZ=ON \
	-DTF_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	"-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -fno-sanitize-recover=all" >/dev/null
# shellcheck disable=SC2086  # one word per target
cmake --build "$build" -j2 --target $targets

failed="" n=0
for t in $targets; do
	n=$((n + 1))
	mkdir -p "$out/$t/corpus"
	echo "== $t: $secs s"
	if ! "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$out/$t/" \
		"$out/$t/corpus" "$root/tests/fuzz/corpus/$t"; then
		failed="$failed $t"
	fi
done

nf=$(echo $failed | wc -w)
if [ -n "$failed" ]; then
	echo "fuzz.sh: failures in:$failed (reproducers in $out/)" >&2
fi
echo "fuzz.sh: $((n - nf)) targets passed, $nf failed ($secs s each)"
[ -z "$failed" ]
