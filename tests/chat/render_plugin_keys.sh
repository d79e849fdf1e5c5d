#!/bin/sh
# render_plugin_keys.sh TFRUN MODEL TOY_PLUGINS WORKDIR - `tfrun INI
# --render-chat` reads an INI that carries a key a plugin on its path
# declares ([toy] mode), and still refuses a key nobody declares.
set -u
tfrun=$1 model=$2 toy=$3 work=$4
mkdir -p "$work"
echo '{"messages": [{"role": "user", "content": "hi"}]}' >"$work/req.json"
fail=0

# ini KEY: an INI on the tiny model with the toy plugin and [toy] KEY = sum.
ini() {
	printf '[model]\npath = %s\n[plugins]\npath = %s\n[chat]\ntemplate = ling3\n[toy]\n%s = sum\n' \
		"$model" "$toy" "$1" >"$work/toy-$1.ini"
	echo "$work/toy-$1.ini"
}

if ! out=$("$tfrun" "$(ini mode)" --render-chat "$work/req.json" 2>&1); then
	echo "FAIL: a declared plugin key was refused: $out"
	fail=1
elif ! printf '%s' "$out" | grep -q 'hi'; then
	echo "FAIL: no prompt rendered: $out"
	fail=1
fi
if out=$("$tfrun" "$(ini moed)" --render-chat "$work/req.json" 2>&1); then
	echo "FAIL: an undeclared key was accepted: $out"
	fail=1
elif ! printf '%s' "$out" | grep -q '\[toy\] moed: unknown key'; then
	echo "FAIL: the refusal does not name the key: $out"
	fail=1
fi
[ $fail = 0 ] && echo ok
exit $fail
