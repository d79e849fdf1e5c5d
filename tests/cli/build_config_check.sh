#!/bin/sh
# build_config_check.sh SCRIPTS_DIR - demo.sh and test.sh configure build/
# the same way, so running one after the other rebuilds nothing.
#
# Runs copies of both scripts in a scratch tree whose cmake and ctest are
# stand-ins that log their arguments (and whose deps.sh, fuzzing and tfrun
# do nothing), then compares the two configure commands for build/.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

mkdir -p "$t/scripts" "$t/bin" "$t/build/bin"
for s in demo.sh test.sh build.sh env.sh suites.sh cross-test.sh; do
	cp "$1/$s" "$t/scripts/" || fail "no $1/$s"
done
printf '#!/bin/sh\nexit 0\n' >"$t/scripts/deps.sh"
printf '#!/bin/sh\nexit 0\n' >"$t/build/bin/tfrun"
printf '#!/bin/sh\necho "$0 $*" >>"%s/log"\necho "100%% tests passed, 0 tests failed out of 1"\n' \
	"$t" >"$t/bin/cmake"
cp "$t/bin/cmake" "$t/bin/ctest"
chmod +x "$t"/scripts/*.sh "$t/build/bin/tfrun" "$t/bin/cmake" "$t/bin/ctest"

configure_of() {   # the cmake command line that configures build/ in the log
	grep "cmake -S $t -B $t/build " "$t/log" | sed 's/^[^ ]*\///'
}
PATH=$t/bin:$PATH sh "$t/scripts/demo.sh" hi >/dev/null 2>&1 || fail "demo.sh failed"
demo=$(configure_of)
: >"$t/log"
PATH=$t/bin:$PATH SANITIZE=0 FUZZ_RUNS=0 sh "$t/scripts/test.sh" >/dev/null 2>&1 ||
	fail "test.sh failed"
test=$(configure_of)

[ -n "$demo" ] || fail "demo.sh did not configure build/"
[ -n "$test" ] || fail "test.sh did not configure build/"
[ "$demo" = "$test" ] || fail "build/ configured two ways: demo.sh '$demo', test.sh '$test'"
echo "demo.sh and test.sh configure build/ alike: $demo"
