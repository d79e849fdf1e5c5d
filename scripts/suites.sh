# suites.sh - sourced by test.sh: run each test suite into its own log and
# print one summary naming every suite with its counts.
#
#   suite_run NAME CMD...   run CMD (output shown and logged); never exits
#   suite_summary           print the summary; status 0 when all passed
#   suite_ctest_lsan FN ARGS...
#                           FN ARGS runs ctest; retried once for
#                           LeakSanitizer's own crash (below)
#
# Each suite's wall-clock seconds follow its counts: CI must stay under
# 30 minutes on 2 cores, and this says which suite to trim.
# A suite's counts come from its log, and a failed ctest suite names its
# failed tests: ctest's "N% tests passed, F tests
# failed out of T", or fuzz.sh's "P targets passed, F failed".  A suite
# that exits non-zero without failing a counted test did not configure,
# build or run: it counts as one failure and the summary quotes its first
# error line.  Needs $logs, a scratch folder.

suite_names=""

# "passed failed" from a suite's log, or nothing when it holds no count.
suite_counts() {
	sed -n -e 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/ctest \1 \2/p' \
		-e 's/.* \([0-9]*\) targets passed, \([0-9]*\) failed.*/fuzz \1 \2/p' "$1" |
		tail -n 1 | {
			read -r kind a b || exit 0
			if [ "$kind" = ctest ]; then echo "$((b - a)) $a"; else echo "$a $b"; fi
		}
}

# The names of the tests ctest listed as failed, comma-separated.
suite_failed_tests() {
	sed -n '/The following tests FAILED:/,/^[^ \t]/s/^[ \t]*[0-9]* - \(.*\)$/\1/p' "$1" |
		tr '\n' ',' | sed -e 's/,$//' -e 's/,/, /g' | cut -c 1-300
}

# The first line of a log that looks like an error, else its last line.
suite_first_error() {
	line=$(grep -m 1 -E 'error:|Error:|cannot find|No such file|not found|FATAL|Could not' "$1" ||
		grep -m 1 -i 'error' "$1" || tail -n 1 "$1")
	printf '%s' "$line" | cut -c 1-200
}

suite_run() {
	name=$1
	shift
	log=$logs/$(printf '%s' "$name" | tr ' ' _)
	suite_names="$suite_names $(printf '%s' "$name" | tr ' ' _)"
	echo "== $name"
	t0=$(date +%s)
	{ rc=0; "$@" || rc=$?; echo "$rc" >"$log.rc"; } 2>&1 | tee "$log"
	echo "$(($(date +%s) - t0))" >"$log.secs"
}

suite_summary() {
	line="" passed=0 failed=0
	for s in $suite_names; do
		log=$logs/$s
		rc=$(cat "$log.rc" 2>/dev/null || echo 1)
		set -- $(suite_counts "$log")
		p=${1:-0} f=${2:-0} note=""
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			f=1
			note=" (did not configure, build or run: $(suite_first_error "$log"))"
		elif [ "$f" -gt 0 ]; then
			note=" (failed: $(suite_failed_tests "$log"))"
		fi
		secs=$(cat "$log.secs" 2>/dev/null || echo 0)
		line="$line${line:+; }$(printf '%s' "$s" | tr _ ' ') $p passed $f failed$note (${secs} s)"
		passed=$((passed + p))
		failed=$((failed + f))
	done
	echo "suites: $line"
	echo "summary: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# LeakSanitizer's own stop-the-world tracer sometimes crashes as a test
# exits ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal
# error", google/sanitizers#1353): no leak and nothing of ours.  When that
# is in the log of a failed run, the failed tests run once more and their
# second result counts; the log says so.  Variables are prefixed: sh has
# no locals, and suite_run keeps its own rc.
suite_ctest_lsan() {
	lsan_fn=$1
	shift
	{ r=0; "$lsan_fn" "$@" || r=$?; echo "$r" >"$logs/lsan.rc"; } 2>&1 | tee "$logs/lsan.first"
	if [ "$(cat "$logs/lsan.rc")" -eq 0 ] ||
		! grep -q 'LeakSanitizer has encountered a fatal error' "$logs/lsan.first"; then
		return "$(cat "$logs/lsan.rc")"
	fi
	lsan_total=$(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$logs/lsan.first" | tail -n 1)
	echo "LeakSanitizer's tracer crashed (google/sanitizers#1353): the failed tests run again"
	{ r=0; "$lsan_fn" --rerun-failed || r=$?; echo "$r" >"$logs/lsan.rc"; } 2>&1 |
		tee "$logs/lsan.again"
	lsan_failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$logs/lsan.again" | tail -n 1)
	echo "after the rerun: $((lsan_total - ${lsan_failed:-0})) tests passed, ${lsan_failed:-0} tests failed out of $lsan_total"
	return "$(cat "$logs/lsan.rc")"
}
