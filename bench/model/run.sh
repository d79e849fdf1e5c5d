#!/bin/sh
# bench/model/run.sh - the model benchmark: prefill and decode tok/s of
# ling-bench in EXL3 on the CPU, next to this machine's decode roofline
# (read bandwidth / weight bytes read per decoded token), measured in the
# same run.  Not a test: numbers go into bench/model/README.md.
#
#     bench/model/run.sh [BUILD_DIR]          (default: build)
#
# Build first:  cmake --build BUILD_DIR --target tfrun tfsynth bw \
#                   backend-cpu exl3 kda mla moe      (and tfquant for its route;
#               for cuda: cuda_bw backend-cuda exl3-cuda kda-cuda mla-cuda moe-cuda)
#
# Environment (defaults in brackets):
#   TF_BENCH_NAME     model folder name under models/         [ling-bench]
#   TF_BENCH_SET      tfsynth --set overrides for a smaller variant, e.g.
#                     "num_experts=16 hidden_size=1024"        [none]
#   TF_BENCH_ROUTE    how the EXL3 model is made: synth (tfsynth --exl3
#                     draws random trellises, minutes for ling-bench) or
#                     tfquant (bf16 then the real quantizer, ~10 us of CPU
#                     per weight: small variants only)     [synth]
#   TF_BENCH_THREADS  threads for tfrun and tfquant           [2]
#   TF_BENCH_PROMPT   prompt tokens of the prefill run        [512]
#   TF_BENCH_GEN      tokens generated in the decode run      [128]
#   TF_BENCH_RUNS     tfrun bench's rounds; medians reported  [3]
#   TF_BENCH_QUANT    a quant plugin to pin, e.g. exl3-int    [none: each
#                     linear takes the best match]
#   TF_BENCH_BACKEND  cpu, or cuda: the device plugins, and the
#                     roofline from the device's bandwidth (cuda_bw)
#                                                             [cpu]
#
# The EXL3 model (recipe bits) is made once into models/NAME-exl3 (by the
# tfquant route from the bf16 models/NAME) and reused while it exists.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
name=${TF_BENCH_NAME:-ling-bench}
threads=${TF_BENCH_THREADS:-2}
n_prompt=${TF_BENCH_PROMPT:-512}
n_gen=${TF_BENCH_GEN:-128}
runs=${TF_BENCH_RUNS:-3}
quant=${TF_BENCH_QUANT:-}
route=${TF_BENCH_ROUTE:-synth}
backend=${TF_BENCH_BACKEND:-cpu}
models=$root/models
src=$models/$name
dst=$models/$name-exl3
out=$models/$name-bench
py=/usr/bin/python3

case $route in
synth) tools="tfrun tfsynth" ;;
tfquant) tools="tfrun tfsynth tfquant" ;;
*) echo "run.sh: TF_BENCH_ROUTE=$route: expected synth or tfquant" >&2; exit 1 ;;
esac
case $backend in
cpu) bw="bw 1024 5" ;;
cuda) bw="cuda_bw 1024" ;;
*) echo "run.sh: TF_BENCH_BACKEND=$backend: expected cpu or cuda" >&2; exit 1 ;;
esac
tools="$tools ${bw%% *}"
for tool in $tools; do
	[ -x "$build/bin/$tool" ] || { echo "run.sh: $build/bin/$tool is not built" >&2; exit 1; }
done
mkdir -p "$models" "$out"

# Seconds since the epoch, fractional: for the generation timings.
now() { date +%s.%N; }

# tfsynth into folder $1 with the --set overrides, then its own arguments.
synth() {
	dir=$1
	shift
	for kv in ${TF_BENCH_SET:-}; do set -- "$@" --set "$kv"; done
	t0=$(now)
	rm -rf "$dir.tmp"
	"$build/bin/tfsynth" --preset ling-bench "$@" --out "$dir.tmp"
	mv "$dir.tmp" "$dir"
	echo "tfsynth: $(echo "$(now) - $t0" | bc) s"
}

if [ ! -f "$dst/config.json" ] && [ "$route" = synth ]; then
	synth "$dst" --exl3
elif [ ! -f "$dst/config.json" ]; then
	[ -f "$src/config.json" ] || synth "$src"
	t0=$(now)
	rm -rf "$dst.tmp"
	"$build/bin/tfquant" --threads "$threads" "$src" "$dst.tmp" > "$out/tfquant.log"
	mv "$dst.tmp" "$dst"
	echo "tfquant: $(echo "$(now) - $t0" | bc) s ($(tail -n 1 "$out/tfquant.log"))"
fi

# Without a [plugins] quant pin each linear takes the quant plugin that
# recognises it best.  MTP off: the roofline counts the main model's weights.
ini=$out/bench.ini
pin=
[ -z "$quant" ] || pin="quant = $quant"
cat > "$ini" <<EOF
[model]
path = ../$name-exl3

[runtime]
context = $((n_prompt + n_gen + 16))
threads = $threads
memory_limit = 0
prefill_chunk = $n_prompt

[plugins]
backend = $backend
$pin

[sampling]
temperature = 0

[mtp]
enabled = false
EOF

"$build/bin/tfrun" "$ini" --check > "$out/check.txt"
"$build/bin/"$bw > "$out/bw.txt"

# The timings are tfrun bench's: prefill of the prompt, then decode after a
# prompt as long, each the median of its rounds.
"$build/bin/tfrun" bench "$ini" -p "$n_prompt" -n 0 -r "$runs" --json > "$out/prefill.json"
"$build/bin/tfrun" bench "$ini" -p 0 -n "$n_gen" -d "$n_prompt" -r "$runs" --json \
	> "$out/decode.json"

# One whole run for what tfrun bench does not time: the load, the resident peak.
vocab=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" \
	"$dst/config.json")
tokens=$($py -c "import random,sys; r=random.Random(1); n,v=map(int,sys.argv[1:]); \
print(','.join(str(r.randrange(v)) for _ in range(n)))" "$n_prompt" "$vocab")
"$build/bin/tfrun" "$ini" --tokens "$tokens" --json -n "$n_gen" > "$out/run.json"

$py "$root/bench/model/report.py" --name "$name${quant:+ ($quant)}" --check "$out/check.txt" \
	--bw "$out/bw.txt" --prefill "$out/prefill.json" --decode "$out/decode.json" \
	--run "$out/run.json" --threads "$threads" --backend "$backend"
