#!/bin/sh
# ling-nano.sh - trains ling-nano from nothing: the KJV corpus, its
# tokenizer, the shape (as a tfsynth template), the training run, then
# ling-nano-publish.sh (models/ling-nano and -exl3, plot, held-out figures).
#   usage: tools/train/ling-nano.sh [BUILD_DIR [OUT_DIR]]   (from the repo root)
# Needs scripts/deps.sh --train and a build.  OUT_DIR (default
# BUILD_DIR/ling-nano-train) gets data/, template/ and the trained model.
set -eu
build=${1:-build}
out=${2:-$build/ling-nano-train}
py=/usr/bin/python3
mkdir -p "$out"
$py tools/train/corpus.py "$out/data"
"$build/bin/tftoktrain" -o "$out/tokenizer.json" -n 4089 \
	-s '<|endoftext|>' -s '<|startoftext|>' -s '<|role_end|>' \
	-s '<role>' -s '</role>' -a '<think>' -a '</think>' "$out/data/train.txt"
rm -rf "$out/template"
"$build/bin/tfsynth" --preset ling-tiny --tokenizer "$out/tokenizer.json" \
	--out "$out/template" $(cat tools/train/ling-nano.shape)
# OpenBLAS threads would fight torch's for the same cores.  The shipped run
# had a 58-minute cap (--minutes 58) that stopped it at step 904 of the
# 1000-step schedule; --stop-step repeats exactly that run.
OPENBLAS_NUM_THREADS=1 $py tools/train/train.py --template "$out/template" \
	--data "$out/data" --out "$out/model" --tfrun "$build/bin/tfrun" \
	--steps 1000 --batch 8 --seq 128 --lr 3e-3 --warmup 30 --mtp-weight 0.3 \
	--bias-rate 1e-2 --seed 1 --threads 1 --save-every 100 --stop-step 904
tools/train/ling-nano-publish.sh "$build" "$out"
