#!/bin/sh
# fuzz.sh - fuzz every tests/fuzz/fuzz_*.c target.
#
#     scripts/fuzz.sh [seconds]     open-ended: each target for `seconds`
#                                   (default 30) from a random seed
#     scripts/fuzz.sh --runs N      deterministic, as CI runs it: each target
#                                   replays its seed corpus, then N inputs
#                                   mutated from seed 1 (FUZZ_SEED=S for another)
#
# Builds the targets with clang, libFuzzer, ASan and UBSan in build-fuzz/,
# starting each from its seed corpus in tests/fuzz/corpus/<target>/.  In
# the open-ended mode new inputs and crash reproducers go to
# fuzz-out/<target>/ (git-ignored), so the seed corpus only changes by hand:
# copy a fixed crash there to keep it as a regression input.  --runs keeps
# no new inputs (they would change the next run) but its reproducers.
# Exits non-zero when any target crashes, leaks or times out; the last line
# counts the targets ("P targets passed, F failed").
set -eu

runs="" secs=30
case ${1:-} in
--runs) runs=${2:?"usage: scripts/fuzz.sh [seconds] | --runs N"} ;;
"") ;;
*) secs=$1 ;;
esac
each="$secs s"
[ -z "$runs" ] || each="$runs runs from seed ${FUZZ_SEED:-1}"
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
out=$root/fuzz-out

targets=$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')

CC=${FUZZ_CC:-clang} cmake -S "$root" -B "$build" -DTF_FUZZ=ON \
	-DTF_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	"-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -fno-sanitize-recover=all" >/dev/null
# shellcheck disable=SC2086  # one word per target
cmake --build "$build" -j2 --target $targets

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed="" n=0
for t in $targets; do
	n=$((n + 1))
	mkdir -p "$out/$t/corpus"
	if [ -n "$runs" ]; then
		mkdir "$scratch/$t"     # new inputs land in the first folder
		set -- -runs="$runs" -seed="${FUZZ_SEED:-1}" "$scratch/$t"
	else
		set -- -max_total_time="$secs" "$out/$t/corpus"
	fi
	echo "== $t: $each"
	if ! "$build/fuzz/$t" "$@" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$out/$t/" "$root/tests/fuzz/corpus/$t"; then
		failed="$failed $t"
	fi
done

nf=$(echo $failed | wc -w)
if [ -n "$failed" ]; then
	echo "fuzz.sh: failures in:$failed (reproducers in $out/)" >&2
fi
echo "fuzz.sh: $((n - nf)) targets passed, $nf failed ($each each)"
[ -z "$failed" ]
