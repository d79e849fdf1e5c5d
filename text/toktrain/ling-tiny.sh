#!/bin/sh
# Regenerates conf/tokenizers/ling-tiny/tokenizer.json, the tokenizer of the
# generated tiny Ling model: 2041 byte-level BPE tokens trained on our own
# public-domain texts and the plugin ABI headers, then the Ling-3 added
# tokens, ids 2041..2047 (vocab_size 2048).
#   usage: text/toktrain/ling-tiny.sh [BUILD_DIR]    (from the repo root)
set -e
build=${1:-build}
"$build/bin/tftoktrain" -o conf/tokenizers/ling-tiny/tokenizer.json -n 2041 \
	-s '<|endoftext|>' -s '<|startoftext|>' -s '<|role_end|>' \
	-s '<role>' -s '</role>' -a '<think>' -a '</think>' \
	text/toktrain/corpus/*.txt core/include/tf/*.h text/include/tf/*.h
