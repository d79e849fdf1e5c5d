#!/bin/sh
# ling-nano-publish.sh - from a finished ling-nano.sh run to the shipped
# model: models/ling-nano (bf16, HF layout), models/ling-nano-exl3 (tfquant
# at the Ling-3 recipe's bits), the loss curve, and the held-out figures
# the model card and bench/README.md quote (models/ling-nano/heldout-eval.txt).
#   usage: tools/train/ling-nano-publish.sh [BUILD_DIR [RUN_DIR]]   (repo root)
set -eu
build=${1:-build}
run=${2:-$build/ling-nano-train}
py=/usr/bin/python3
dst=models/ling-nano
hf=$run/hf                       # the checkpoint alone, for tfquant to copy
rm -rf "$hf" models/ling-nano-exl3
mkdir -p "$hf" "$dst"
for f in config.json model.safetensors tokenizer.json generation_config.json; do
	cp "$run/model/$f" "$hf/"
done
# The Ling-3 special tokens' roles, as ling-tiny's tokenizer has them.
cp conf/tokenizers/ling-tiny/tokenizer_config.json "$hf/"
# The chat format it was trained on ([chat] template = jinja reads it).
cp tools/train/ling-nano-chat.jinja "$hf/chat_template.jinja"
"$build/bin/tfquant" --threads 2 "$hf" models/ling-nano-exl3
cp "$hf"/* "$dst/"
cp "$run/model/train-log.jsonl" "$dst/"
$py tools/train/plot.py "$dst/train-log.jsonl" "$dst/loss.png"

held=$run/data/heldout.txt
ctx=128
export OPENBLAS_NUM_THREADS=1
{
	echo "torch float32 (training weights): $($py tools/train/eval.py "$dst" "$held" \
		--window $ctx --tfrun "$build/bin/tfrun" --state "$run/model/train-state.pt" --json)"
	echo "torch bf16: $($py tools/train/eval.py "$dst" "$held" --window $ctx \
		--tfrun "$build/bin/tfrun" --json)"
	echo "tfrun bf16: $("$build/bin/tfrun" conf/ling-nano.ini --perplexity "$held" \
		--set runtime.context=$ctx --json)"
	echo "tfrun EXL3: $("$build/bin/tfrun" conf/ling-nano-exl3.ini --perplexity "$held" \
		--set runtime.context=$ctx --json)"
} > "$dst/heldout-eval.txt"
cat "$dst/heldout-eval.txt"
