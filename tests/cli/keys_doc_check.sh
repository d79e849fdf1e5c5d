#!/bin/sh
# keys_doc_check.sh TFRUN DOC TOY_DIR - docs/ini.md's table of plugin keys
# is what `tfrun --plugins --keys` prints for the plugins on the path (the
# build's and the toy's): every line of the output must be in DOC.
set -eu
out=$(TF_PLUGIN_PATH=$3 "$1" --plugins --keys)
echo "$out"
[ "$(echo "$out" | wc -l)" -gt 2 ] || { echo "no keys listed"; exit 1; }
echo "$out" | while IFS= read -r line; do
	grep -qxF -- "$line" "$2" || { echo "not in $2: $line"; exit 1; }
done
