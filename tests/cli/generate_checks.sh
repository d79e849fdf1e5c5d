#!/bin/sh
# generate_checks.sh TFRUN INI MODEL CHECK - end-to-end checks of
# `tfrun MODEL.ini` generation on the tiny model; CHECK names one.
set -eu
tfrun=$1 ini=$2 model=$3 check=$4
run() { "$tfrun" "$ini" --set "model.path=$model" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p"; }

case $check in
json)
	# One JSON object with the stats and the text, nothing else on stdout.
	out=$(run -p "Hello there" -n 8 --json 2>/dev/null)
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "expected one line: $out"
	n=$(printf '%s' "$out" | field generated_tokens)
	[ "$n" -ge 1 ] && [ "$n" -le 8 ] || fail "generated_tokens $n not in 1..8"
	printf '%s' "$out" | grep -q '"text": "' || fail "no text field: $out"
	printf '%s' "$out" | grep -q '"decode_tps": ' || fail "no decode_tps: $out"
	# Load time and the resident peak: a loaded model takes both.
	load=$(printf '%s' "$out" | field load_s)
	rss=$(printf '%s' "$out" | field peak_rss_mib)
	awk -v l="$load" -v r="$rss" 'BEGIN { exit !(l > 0 && l < 600 && r >= 1) }' ||
		fail "load_s '$load' or peak_rss_mib '$rss' out of range: $out"
	;;
seeded)
	# The same seed gives the same sampled text; another seed another text.
	a=$(run -p "Once upon a time" -n 32 --temp 0.9 --seed 7 --json 2>/dev/null)
	b=$(run -p "Once upon a time" -n 32 --temp 0.9 --seed 7 --json 2>/dev/null)
	c=$(run -p "Once upon a time" -n 32 --temp 0.9 --seed 8 --json 2>/dev/null)
	ta=$(printf '%s' "$a" | sed 's/.*"text": \(".*"\), "thinking".*/\1/')
	tb=$(printf '%s' "$b" | sed 's/.*"text": \(".*"\), "thinking".*/\1/')
	tc=$(printf '%s' "$c" | sed 's/.*"text": \(".*"\), "thinking".*/\1/')
	[ "$ta" = "$tb" ] || fail "seed 7 twice differs: $ta / $tb"
	[ "$ta" != "$tc" ] || fail "seeds 7 and 8 gave the same 32 tokens: $ta"
	;;
chat)
	# -i: each stdin line is a turn; the second continues the first.
	out=$(printf 'Hi\nTell me more\n' | run -i -n 3 --json 2>/dev/null)
	[ "$(printf '%s\n' "$out" | grep -c '"generated_tokens": ')" -eq 2 ] ||
		fail "expected two replies: $out"
	p2=$(printf '%s\n' "$out" | sed -n 2p | field prompt_tokens)
	[ "$p2" -ge 5 ] || fail "second turn fed only $p2 tokens"
	;;
threads)
	# Greedy tokens do not depend on the thread count.
	a=$(run --tokens 5,17,300,42,7 -n 16 --set runtime.threads=1 2>/dev/null)
	b=$(run --tokens 5,17,300,42,7 -n 16 --set runtime.threads=2 2>/dev/null)
	[ -n "$a" ] && [ "$a" = "$b" ] || fail "threads=1 gave '$a', threads=2 '$b'"
	;;
no_tokenizer)
	# --tokens runs a checkpoint without tokenizer.json, printing ids.
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for f in "$model"/*; do
		case $f in *tokenizer.json) ;; *) ln -s "$f" "$tmp/" ;; esac
	done
	out=$("$tfrun" "$ini" --set "model.path=$tmp" --tokens 1,2,3 -n 4 2>/dev/null)
	printf '%s' "$out" | grep -Eq '^[0-9]+(,[0-9]+)*$' || fail "expected ids, got '$out'"
	;;
*)
	fail "unknown check $check"
	;;
esac
echo "PASS: $check"
