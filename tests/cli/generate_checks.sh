#!/bin/sh
# generate_checks.sh TFRUN INI MODEL CHECK - end-to-end checks of
# `tfrun MODEL.ini` generation on the tiny model; CHECK names one.
set -eu
tfrun=$1 ini=$2 model=$3 check=$4
run() { "$tfrun" "$ini" --set "model.path=$model" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p"; }
reason() { sed -n 's/.*"finish_reason": "\([a-z]*\)".*/\1/p'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $check in
json)
	# One JSON object with the stats and the text, nothing else on stdout.
	out=$(run -p "Hello there" -n 8 --json 2>/dev/null)
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "expected one line: $out"
	n=$(printf '%s' "$out" | field generated_tokens)
	[ "$n" -ge 1 ] && [ "$n" -le 8 ] || fail "generated_tokens $n not in 1..8"
	printf '%s' "$out" | grep -q '"text": "' || fail "no text field: $out"
	printf '%s' "$out" | grep -q '"decode_tps": ' || fail "no decode_tps: $out"
	r=$(printf '%s' "$out" | reason)
	{ [ "$n" -eq 8 ] && [ "$r" = length ]; } || { [ "$n" -lt 8 ] && [ "$r" = eos ]; } ||
		fail "$n tokens of 8, finish_reason '$r': $out"
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
	for f in "$model"/*; do
		case $f in *tokenizer.json) ;; *) ln -s "$f" "$tmp/" ;; esac
	done
	out=$("$tfrun" "$ini" --set "model.path=$tmp" --tokens 1,2,3 -n 4 2>/dev/null)
	printf '%s' "$out" | grep -Eq '^[0-9]+(,[0-9]+)*$' || fail "expected ids, got '$out'"
	# --stop matches text, which needs the tokenizer: refused, not ignored.
	"$tfrun" "$ini" --set "model.path=$tmp" --tokens 1,2,3 --stop x 2>"$tmp/err" &&
		fail "--stop without a tokenizer ran"
	grep -q -- "--stop needs text: .* has no tokenizer.json" "$tmp/err" || fail "$(cat "$tmp/err")"
	;;
finish)
	# Why the reply ended: -n reached (length), or the context full first
	# (context, said on stderr too), never a silent short reply.  Every slot
	# is used: 7 tokens fill the context, and the 8th is sampled after them.
	out=$(run --tokens 1,2,3 -n 4 --json 2>/dev/null)
	n=$(printf '%s' "$out" | field generated_tokens)
	r=$(printf '%s' "$out" | reason)
	[ "$n" -eq 4 ] && [ "$r" = length ] || fail "-n 4: $n tokens, finish '$r': $out"
	out=$(run --tokens 1,2,3 -n 50 --set runtime.context=10 --json 2>"$tmp/err")
	n=$(printf '%s' "$out" | field generated_tokens)
	r=$(printf '%s' "$out" | reason)
	[ "$n" -eq 8 ] && [ "$r" = context ] || fail "context 10: $n tokens, finish '$r': $out"
	grep -q "the context of 10 tokens is full" "$tmp/err" || fail "stderr: $(cat "$tmp/err")"
	run --tokens 1,2,3 -n 2 2>&1 >/dev/null | grep -q "finish: length" ||
		fail "no finish on the stats line"
	;;
stop)
	# The reply ends before the first --stop string to appear, which is not
	# printed; a stop string that never appears changes nothing.
	full=$(run -p "Tell me a story" -n 48 --no-think 2>/dev/null)
	s=$(printf '%s' "$full" | grep -o '[A-Za-z]\{4,\}' | sed -n 3p | cut -c 2-4)
	[ -n "$s" ] || fail "no word to stop at in: $full"
	want=${full%%"$s"*}
	[ "$want" != "$full" ] || fail "'$s' not in: $full"
	got=$(run -p "Tell me a story" -n 48 --no-think --stop "$s" --stop "never-seen-Zq" 2>"$tmp/err")
	[ "$got" = "$want" ] || fail "--stop '$s': got '$got', want '$want'"
	grep -q "finish: stop" "$tmp/err" || fail "finish: $(cat "$tmp/err")"
	got=$(run -p "Tell me a story" -n 48 --no-think --stop "never-seen-Zq" 2>/dev/null)
	[ "$got" = "$full" ] || fail "an absent stop string changed the reply: '$got'"
	;;
chat_robust)
	# -i goes on past a turn of invalid UTF-8 (skipped, said so) and a turn
	# that overflows the context (a new conversation, said so); each reply
	# ends with a newline.
	printf 'Hi\nbad \377 byte\nTell me more about it\nlast\n' |
		run -i -n 16 --set runtime.context=48 --json >"$tmp/out" 2>"$tmp/err" ||
		fail "exit $?: $(cat "$tmp/err")"
	[ "$(grep -c '"generated_tokens": ' "$tmp/out")" -eq 3 ] || fail "replies: $(cat "$tmp/out")"
	grep -q "turn skipped: text is not valid UTF-8" "$tmp/err" || fail "utf-8: $(cat "$tmp/err")"
	grep -q "starting a new conversation" "$tmp/err" || fail "overflow: $(cat "$tmp/err")"
	printf 'Hi\nMore\n' | run -i -n 3 2>/dev/null >"$tmp/out"
	[ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d ' ')" = '\n' ] || fail "no final newline"
	;;
chat_skip)
	# A skipped turn leaves no trace: the next turn's prompt and reply are
	# those of a chat without it (the short first reply makes the second
	# turn feed the whole conversation again).
	printf 'Hi\nbad \377 byte\nTell me more\n' | run -i -n 2 --json >"$tmp/a" 2>"$tmp/err" ||
		fail "exit $?: $(cat "$tmp/err")"
	grep -q "turn skipped: text is not valid UTF-8" "$tmp/err" || fail "utf-8: $(cat "$tmp/err")"
	printf 'Hi\nTell me more\n' | run -i -n 2 --json >"$tmp/b" 2>/dev/null
	[ "$(grep -c '"generated_tokens": ' "$tmp/a")" -eq 2 ] || fail "replies: $(cat "$tmp/a")"
	turns() { sed 's/.*"prompt_tokens": \([0-9]*\).*"text": \(".*"\), "thinking".*/\1 \2/' "$1"; }
	[ "$(turns "$tmp/a")" = "$(turns "$tmp/b")" ] ||
		fail "with the skipped turn: $(cat "$tmp/a") without: $(cat "$tmp/b")"
	;;
chat_resync)
	# A reply cut short (length) never fed its end-of-turn token: the next
	# turn feeds the whole conversation again, more than the first prompt.
	long=$(printf 'word %.0s' $(seq 40))
	printf '%s\nMore\n' "$long" | run -i -n 2 --json >"$tmp/out" 2>/dev/null
	[ "$(sed -n 1p "$tmp/out" | reason)" = length ] || fail "first reply: $(cat "$tmp/out")"
	p1=$(sed -n 1p "$tmp/out" | field prompt_tokens)
	p2=$(sed -n 2p "$tmp/out" | field prompt_tokens)
	[ "$p2" -gt "$p1" ] || fail "second turn fed $p2 tokens, the first $p1"
	;;
chat_long)
	# A turn longer than the whole context is skipped and the conversation
	# goes on: the third turn is fed after the first, not alone.
	long=$(printf 'word %.0s' $(seq 80))
	printf 'Hi\n%s\nHi\n' "$long" |
		run -i -n 2 --set runtime.context=64 --json >"$tmp/out" 2>"$tmp/err" ||
		fail "exit $?: $(cat "$tmp/err")"
	grep -q "turn skipped: the turn needs [0-9]* tokens, more than the context of 64" \
		"$tmp/err" || fail "no skip: $(cat "$tmp/err")"
	! grep -q "starting a new conversation" "$tmp/err" || fail "reset: $(cat "$tmp/err")"
	[ "$(grep -c '"generated_tokens": ' "$tmp/out")" -eq 2 ] || fail "replies: $(cat "$tmp/out")"
	p1=$(sed -n 1p "$tmp/out" | field prompt_tokens)
	p3=$(sed -n 2p "$tmp/out" | field prompt_tokens)
	[ "$p3" -gt "$p1" ] || fail "the third turn fed $p3 tokens, the first alone $p1"
	;;
chat_template)
	# With a template that wants alternating roles, a turn it refuses is
	# skipped and the next is not refused for following it; a template that
	# rewrites earlier turns starts the conversation over, not the turn.
	for f in "$model"/*; do
		case $f in *chat_template.jinja) ;; *) ln -s "$f" "$tmp/" ;; esac
	done
	cat >"$tmp/chat_template.jinja" <<'EOT'
{%- for m in messages -%}
{%- if (m.role == 'user') != (loop.index0 % 2 == 0) -%}{{ raise_exception('roles must alternate') }}{%- endif -%}
{%- if m.content == 'boom' -%}{{ raise_exception('boom') }}{%- endif -%}
<role>{{ m.role }}</role>{{ m.content }}<|role_end|>
{%- endfor -%}
{%- if add_generation_prompt -%}<role>assistant</role>{%- endif -%}
EOT
	printf 'Hi\nboom\nMore\n' | "$tfrun" "$ini" --set "model.path=$tmp" --set chat.template=jinja \
		-i -n 2 --json >"$tmp/out" 2>"$tmp/err" || fail "exit $?: $(cat "$tmp/err")"
	grep -q "turn skipped: .*boom" "$tmp/err" || fail "boom: $(cat "$tmp/err")"
	[ "$(grep -c '"generated_tokens": ' "$tmp/out")" -eq 2 ] || fail "$(cat "$tmp/out" "$tmp/err")"
	printf '{{ messages | length }} messages\n' | cat - "$tmp/chat_template.jinja" >"$tmp/t"
	mv "$tmp/t" "$tmp/chat_template.jinja"
	# The first reply must end with its stop token, so that the second turn
	# follows it: the greedy first token (from the ids alone) is made one.
	printf '{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true}' \
		>"$tmp/req.json"
	ids=$("$tfrun" "$ini" --set "model.path=$tmp" --set chat.template=jinja \
		--render-chat "$tmp/req.json" --json | sed 's/.*"tokens": \[\([0-9, ]*\)\].*/\1/' |
		tr -d ' ')
	mkdir "$tmp/ids"
	for f in "$model"/*; do
		case $f in *tokenizer.json) ;; *) ln -s "$f" "$tmp/ids/" ;; esac
	done
	eos=$("$tfrun" "$ini" --set "model.path=$tmp/ids" --tokens "$ids" -n 1 2>/dev/null)
	rm "$tmp/generation_config.json"
	printf '{"eos_token_id": [%s]}\n' "$eos" >"$tmp/generation_config.json"
	printf 'Hi\nMore\n' | "$tfrun" "$ini" --set "model.path=$tmp" --set chat.template=jinja \
		-i -n 2 --json >"$tmp/out" 2>"$tmp/err" || fail "exit $?: $(cat "$tmp/err")"
	[ "$(sed -n 1p "$tmp/out" | reason)" = eos ] || fail "first reply: $(cat "$tmp/out")"
	[ "$(grep -c '"generated_tokens": ' "$tmp/out")" -eq 2 ] || fail "$(cat "$tmp/out" "$tmp/err")"
	p1=$(sed -n 1p "$tmp/out" | field prompt_tokens)
	p2=$(sed -n 2p "$tmp/out" | field prompt_tokens)
	[ "$p2" -gt "$p1" ] || fail "second turn fed $p2 tokens, not the whole conversation"
	;;
*)
	fail "unknown check $check"
	;;
esac
echo "PASS: $check"
