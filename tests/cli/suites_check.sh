#!/bin/sh
# suites_check.sh SCRIPTS_DIR - test.sh's suite runner and summary
# (scripts/suites.sh) on made-up suites: one passes, one fails a test, one
# fails to configure the way a missing install step makes it fail.
set -u
. "$1/suites.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

ok_suite() { echo "100% tests passed, 0 tests failed out of 7"; }
bad_test() {
	echo "96% tests passed, 1 tests failed out of 25"
	echo
	echo "The following tests FAILED:"
	printf '\t 70 - model_make (Timeout)\n'
	echo "Errors while running CTest"
	return 8
}
no_libc() {
	echo "-- Check for working C compiler: /usr/bin/aarch64-linux-gnu-gcc - broken"
	echo "/usr/bin/aarch64-linux-gnu-ld: cannot find crt1.o: No such file or directory"
	echo "CMake Error at CMakeLists.txt:2 (project):"
	return 1
}
fuzz_ok() { echo "fuzz.sh: 4 targets passed, 0 failed (10 s each)"; }

# Everything passing: status 0, every suite named with its counts.
suite_run "native ctest" ok_suite >/dev/null
suite_run fuzz fuzz_ok >/dev/null
out=$(suite_summary) || fail "all passed, yet status $?: $out"
printf '%s\n' "$out" |
	grep -Eqx 'suites: native ctest 7 passed 0 failed \([0-9]+ s\); fuzz 4 passed 0 failed \([0-9]+ s\)' ||
	fail "suites line: $out"
[ "$(printf '%s\n' "$out" | tail -n 1)" = "summary: 11 passed, 0 failed" ] || fail "total: $out"

# A failed test and a suite that never ran: status 1, each named, the
# latter with its first error line.
suite_run "asan ctest" bad_test >/dev/null
suite_run "aarch64 qemu" no_libc >/dev/null
out=$(suite_summary) && fail "failures, yet status 0: $out"
printf '%s\n' "$out" | grep -Eq 'asan ctest 24 passed 1 failed \(failed: model_make \(Timeout\)\) \([0-9]+ s\);' ||
	fail "asan counts and failed test: $out"
printf '%s\n' "$out" | grep -q "aarch64 qemu 0 passed 1 failed (did not configure, build or run: /usr/bin/aarch64-linux-gnu-ld: cannot find crt1.o" ||
	fail "aarch64 not named with its error: $out"
[ "$(printf '%s\n' "$out" | tail -n 1)" = "summary: 35 passed, 2 failed" ] || fail "total: $out"
# LeakSanitizer's tracer crash: the failed test runs again; a pass then
# counts, a real failure still fails.
lsan_then() {
	if [ "$1" = --rerun-failed ]; then
		echo "100% tests passed, 0 tests failed out of 1"
		return "$again"
	fi
	echo "Tracer caught signal 11: addr=0x130 pc=0x7f4b310e80f0"
	echo "==1==LeakSanitizer has encountered a fatal error."
	echo "98% tests passed, 1 tests failed out of 50"
	return 8
}
lsan_suite() { suite_ctest_lsan lsan_then -j 2; }
suite_names=""
again=0
suite_run "asan ctest" lsan_suite >/dev/null
out=$(suite_summary) || fail "a tracer crash passing on rerun, yet status $?: $out"
printf '%s\n' "$out" | grep -Eqx 'suites: asan ctest 50 passed 0 failed \([0-9]+ s\)' ||
	fail "rerun counts: $out"
suite_names=""
again=8
suite_run "asan ctest" lsan_suite >/dev/null
out=$(suite_summary) && fail "a rerun that fails again, yet status 0: $out"
# Any other failure is not run again.
no_lsan() {
	[ "$1" = --rerun-failed ] && { touch "$logs/rerun"; return 0; }
	echo "90% tests passed, 1 tests failed out of 10"
	return 8
}
plain_suite() { suite_ctest_lsan no_lsan -j 2; }
suite_names=""
suite_run "asan ctest" plain_suite >/dev/null
out=$(suite_summary) && fail "a plain failure, yet status 0: $out"
[ ! -e "$logs/rerun" ] || fail "a plain failure was run again"
echo "PASS: suites"
