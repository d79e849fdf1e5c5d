#!/bin/sh
# bench/peer/run.sh - ling-bench on the CPU beside the peer, ik_llama.cpp:
# prefill (pp512), one-stream decode after a 512-token prompt (tg128) and
# aggregate decode of 1, 2, 4, 8 sequences, ours and its, alternately on a
# quiet machine, medians of the rounds.  Not a test: the tables go into
# bench/peer/README.md.
#
#     bench/peer/run.sh IK_DIR [BUILD_DIR]          (default: build)
#
# IK_DIR: an ik_llama.cpp tree built by bench/peer/build-ik.sh.  Ours:
#   cmake --build build --target tfrun tfsynth bench_batch bw \
#       backend-cpu exl3 kda mla moe router
#
# Environment (defaults in brackets):
#   PEER_ROUNDS   alternating rounds; medians reported          [3]
#   PEER_THREADS  threads on both sides                          [2]
#   PEER_QUANTS   the peer's quantizations of the same weights   [Q3_K_M IQ3_K Q4_K_M]
#   PEER_BATCH    1: the batched table too                       [1]
#   PEER_WORK     where the GGUFs and logs go (~17 GB)           [models/ling-bench-gguf]
#   PEER_LOAD     wait until the 1-minute load falls below this  [0.5]
#
# The same weights: tfsynth's bf16 ling-bench (7 GB) goes through
# convert_gguf.py to a bf16 GGUF, which the peer's llama-quantize takes to
# each of PEER_QUANTS; ours is the same draw in EXL3 at the recipe's bits
# (tfsynth --exl3: random trellises, see bench/model/README.md).  The peer
# always runs with -ger 1 (grouped expert routing: the model's n_group and
# topk_group; its default ignores them), once with -rtr 1 (run-time
# repacking, its fastest CPU decode) and, for the first quantization, once
# without.
set -eu

[ $# -ge 1 ] || { echo "usage: run.sh IK_DIR [BUILD_DIR]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
ik=$(cd "$1" && pwd)
build=$(cd "${2:-$root/build}" && pwd)
rounds=${PEER_ROUNDS:-3}
threads=${PEER_THREADS:-2}
quants=${PEER_QUANTS:-Q3_K_M IQ3_K Q4_K_M}
batch=${PEER_BATCH:-1}
work=${PEER_WORK:-$root/models/ling-bench-gguf}
load_max=${PEER_LOAD:-0.5}
py=/usr/bin/python3
models=$root/models
n_prompt=512
n_gen=128

for t in llama-bench llama-batched-bench llama-quantize; do
	[ -x "$ik/build/bin/$t" ] || { echo "run.sh: $ik/build/bin/$t is not built (bench/peer/build-ik.sh)" >&2; exit 1; }
done
for t in tfrun tfsynth bench_batch bw; do
	[ -x "$build/bin/$t" ] || { echo "run.sh: $build/bin/$t is not built" >&2; exit 1; }
done
mkdir -p "$work"
out=$work/run-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"

# The models, each made once and reused while it exists.
make_model() {           # DIR, tfsynth's extra arguments
	dir=$1
	shift
	[ -f "$dir/config.json" ] && return 0
	rm -rf "$dir.tmp"
	"$build/bin/tfsynth" --preset ling-bench "$@" --out "$dir.tmp"
	mv "$dir.tmp" "$dir"
}
make_model "$models/ling-bench"
make_model "$models/ling-bench-exl3" --exl3
bf16=$work/ling-bench-bf16.gguf
if [ ! -f "$bf16" ]; then
	$py "$root/bench/peer/convert_gguf.py" --ik "$ik" "$models/ling-bench" "$bf16.tmp"
	mv "$bf16.tmp" "$bf16"
fi
for q in $quants; do
	f=$work/ling-bench-$q.gguf
	[ -f "$f" ] && continue
	"$ik/build/bin/llama-quantize" "$bf16" "$f.tmp" "$q" "$threads" > "$work/quantize-$q.log" 2>&1 ||
		{ echo "run.sh: llama-quantize $q failed: $work/quantize-$q.log" >&2; exit 1; }
	mv "$f.tmp" "$f"
done

# Ours, each EXL3 path pinned: exl3 (float), exl3-int (15-bit activations,
# the default) and exl3-q8 (8-bit).  MTP off on both sides.
ours_ini() {             # FILE, quant pin
	cat > "$1" <<-INI
	[model]
	path = $models/ling-bench-exl3

	[runtime]
	context = 4096
	threads = $threads
	memory_limit = 0
	prefill_chunk = $n_prompt

	[plugins]
	quant = $2

	[sampling]
	temperature = 0

	[mtp]
	enabled = false
	INI
}
ours_ini "$out/exl3.ini" exl3
ours_ini "$out/exl3-int.ini" exl3-int
ours_ini "$out/exl3-q8.ini" exl3-q8
"$build/bin/tfrun" "$out/exl3.ini" --check --json > "$out/check.json"
vocab=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" \
	"$models/ling-bench-exl3/config.json")
tokens=$($py -c "import random,sys; r=random.Random(1); n,v=map(int,sys.argv[1:]); \
print(','.join(str(r.randrange(v)) for _ in range(n)))" "$n_prompt" "$vocab")

# Benchmarks on a loaded machine measure the load: wait (10 minutes at
# most) for the 1-minute load average to fall.
wait_quiet() {
	i=0
	while [ $i -lt 120 ] && ! awk -v m="$load_max" '{ exit !($1 < m) }' /proc/loadavg; do
		sleep 5
		i=$((i + 1))
	done
	[ $i -lt 120 ] || echo "run.sh: load still $(cut -d' ' -f1 /proc/loadavg) after 10 minutes; going on" >&2
}

# One JSON line per measurement into results.jsonl:
# {"config", "round", "test", "tok_s"}.
record() { echo "{\"config\": \"$1\", \"round\": $2, \"test\": \"$3\", \"tok_s\": $4}" >> "$out/results.jsonl"; }

peer_single() {          # round, quant, rtr
	name="ik $2"
	[ "$3" = 0 ] || name="$name -rtr 1"
	"$ik/build/bin/llama-bench" -m "$work/ling-bench-$2.gguf" -t "$threads" \
		-p "$n_prompt" -n 0 -gp "$n_prompt,$n_gen" -r 1 -ger 1 -rtr "$3" -o json \
		> "$out/ik-$2-rtr$3-$1.json" 2>> "$out/ik.log"
	$py - "$out/ik-$2-rtr$3-$1.json" "$name" "$1" >> "$out/results.jsonl" <<-'PY'
	import json, sys
	for t in json.load(open(sys.argv[1])):
	    test = "pp" if t["n_gen"] == 0 else "tg"
	    print(json.dumps({"config": sys.argv[2], "round": int(sys.argv[3]), "test": test,
	                      "tok_s": t["avg_ts"]}))
	PY
}
ours_single() {          # round, config
	j=$("$build/bin/tfrun" "$out/$2.ini" --tokens "$tokens" --json -n 1)
	record "ours $2" "$1" pp "$(echo "$j" | $py -c 'import json,sys; print(json.load(sys.stdin)["prefill_tps"])')"
	j=$("$build/bin/tfrun" "$out/$2.ini" --tokens "$tokens" --json -n "$n_gen")
	record "ours $2" "$1" tg "$(echo "$j" | $py -c 'import json,sys; print(json.load(sys.stdin)["decode_tps"])')"
}
# llama-batched-bench takes -ger and -rtr bare (llama-bench takes 0|1), and
# prints its table on stderr.
peer_batched() {         # round, quant
	"$ik/build/bin/llama-batched-bench" -m "$work/ling-bench-$2.gguf" -t "$threads" \
		-c 4096 -b 2048 -ub 512 -npp 128 -ntg 64 -npl 1,2,4,8 -ger -rtr \
		> "$out/ikb-$2-$1.txt" 2>&1
	awk -v c="ik $2 -rtr 1" -v r="$1" -F'|' 'NF > 9 && $2 + 0 == 128 {
		gsub(/ /, "", $4); gsub(/ /, "", $9)
		printf "{\"config\": \"%s\", \"round\": %d, \"test\": \"b%d\", \"tok_s\": %s}\n", c, r, $4, $9
	}' "$out/ikb-$2-$1.txt" >> "$out/results.jsonl"
}
ours_batched() {         # round, config
	"$build/bin/bench_batch" -s 1,2,4,8 -p 128 -n 64 -r 1 --json "$out/$2.ini" > "$out/bb-$2-$1.json"
	$py - "$out/bb-$2-$1.json" "ours $2" "$1" >> "$out/results.jsonl" <<-'PY'
	import json, sys
	for r in json.load(open(sys.argv[1]))["results"]:
	    if r["path"] == "batch":
	        print(json.dumps({"config": sys.argv[2], "round": int(sys.argv[3]),
	                          "test": f"b{r['seqs']}", "tok_s": r["tok_s"],
	                          "experts": r["experts_per_moe_pass"]}))
	PY
}

# The peer's tools leave a llama.log in the working folder.
cd "$out"
wait_quiet
"$build/bin/bw" 1024 5 > "$out/bw.txt"
first=${quants%% *}
r=1
while [ $r -le "$rounds" ]; do
	echo "round $r of $rounds"
	for q in $quants; do peer_single $r "$q" 1; done
	peer_single $r "$first" 0
	ours_single $r exl3
	ours_single $r exl3-int
	ours_single $r exl3-q8
	if [ "$batch" = 1 ]; then
		peer_batched $r "$first"
		ours_batched $r exl3-int
		ours_batched $r exl3-q8
	fi
	r=$((r + 1))
done

$py "$root/bench/peer/report.py" --ik "$ik" --work "$work" --out "$out" --threads "$threads" \
	--ours "$models/ling-bench-exl3" | tee "$out/report.md"
