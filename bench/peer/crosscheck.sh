#!/bin/sh
# crosscheck.sh IK_BUILD_DIR [TF_BUILD_DIR]
#
# Proves bench/peer/convert_gguf.py right: converts ling-nano at f32, runs
# ik_llama.cpp (IK_BUILD_DIR: a CPU build with llama-perplexity and
# libllama) and tfrun (TF_BUILD_DIR, default build/) on the held-out KJV text,
# prints both perplexities and the per-position logit comparison, and exits
# non-zero if they disagree beyond tolerance.
#
# Environment: IK_DIR the ik source tree (default IK_BUILD_DIR/..), HELDOUT
# the held-out text (default: made by tools/train/corpus.py, which needs
# Debian's bible-kjv), WINDOWS how many 128-token windows to compare logits
# on (default all 402), PYTHON (default /usr/bin/python3, needs numpy).
set -eu

ik_build=$(cd "${1:?usage: crosscheck.sh IK_BUILD_DIR [TF_BUILD_DIR]}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tf_build=$(cd "${2:-$root/build}" && pwd)
ik_dir=${IK_DIR:-$ik_build/..}
py=${PYTHON:-/usr/bin/python3}
window=128
tmp=$(mktemp -d /tmp/ik-crosscheck.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

for f in "$ik_build/bin/llama-perplexity" "$tf_build/bin/tfrun"; do
	[ -x "$f" ] || { echo "crosscheck: $f is missing" >&2; exit 1; }
done

# the model at f32, so that both sides compute from the same numbers
"$py" "$here/convert_gguf.py" "$root/models/ling-nano" "$tmp/nano-f32.gguf" \
	--outtype f32 --ik "$ik_dir"

# the 59 held-out chapters ling-nano's card reports perplexity on
if [ -n "${HELDOUT:-}" ]; then
	text=$(cd "$(dirname "$HELDOUT")" && pwd)/$(basename "$HELDOUT")
else
	"$py" "$root/tools/train/corpus.py" "$tmp/data" >/dev/null
	text=$tmp/data/heldout.txt
fi

# ik_logits against the ik build's shared libllama (ik's public llama.h only)
lib=$(find "$ik_build" -name 'libllama.so' | head -n 1)
[ -n "$lib" ] || { echo "crosscheck: no libllama.so under $ik_build" >&2; exit 1; }
libdirs=$(find "$ik_build" -name 'lib*.so' -exec dirname {} \; | sort -u)
ldflags=
for d in $libdirs; do ldflags="$ldflags -L$d -Wl,-rpath,$d"; done
# shellcheck disable=SC2086 # ldflags is a word list
cc -O2 -std=c11 -I"$ik_dir/include" -I"$ik_dir/ggml/include" \
	"$here/ik_logits.c" -o "$tmp/ik_logits" $ldflags -lllama -lggml -lm

# tokenization: the same ids from both tokenizers, or the check goes on
# with ours and says so
"$tf_build/bin/tfrun" --tokenizer "$root/models/ling-nano" \
	--encode-file "$text" >"$tmp/ours.ids"
"$tmp/ik_logits" tokenize "$tmp/nano-f32.gguf" "$text" >"$tmp/ik.ids" 2>"$tmp/ik-tok.log"
tok_same=yes
"$py" - "$tmp/ours.ids" "$tmp/ik.ids" <<'EOF' || tok_same=no
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
if a == b:
    print(f"tokenization: {len(a)} ids, identical")
else:
    print(f"tokenization: DIFFERS (ours {len(a)} ids, ik {len(b)}; first at {n}); "
          "ik runs on our ids below")
    sys.exit(1)
EOF

# ours: tfrun --perplexity, 128-token windows, each a fresh sequence
"$tf_build/bin/tfrun" "$root/conf/ling-nano.ini" --perplexity "$text" \
	--set runtime.context=$window --set runtime.kv_cache=f32 --json 2>/dev/null \
	| tail -n 1 >"$tmp/ours-ppl.json"

# ik on our ids, the same windows; -ger is grouped routing, which ik leaves
# off by default (IK_GER=1 in ik_logits)
"$tmp/ik_logits" logits "$tmp/nano-f32.gguf" "$tmp/ours.ids" $window \
	"$tmp/ik.f32" 2>"$tmp/ik-logits.log" >"$tmp/ik-ppl.json" \
	|| { tail -n 20 "$tmp/ik-logits.log" >&2; exit 1; }

# ik's own tool: scores the second half of each window (-c 128), over as
# many windows as the logit comparison; run in $tmp, where its llama.log goes
chunks=${WINDOWS:-0}
[ "$chunks" -gt 0 ] || chunks=-1
(cd "$tmp" && "$ik_build/bin/llama-perplexity" -m "$tmp/nano-f32.gguf" -f "$text" \
	-c $window -b $window --chunks "$chunks" -ger -ctk f32 -fa off -mla 1) \
	>"$tmp/ik-lp.out" 2>&1 \
	|| { tail -n 20 "$tmp/ik-lp.out" >&2; exit 1; }
lp=$(sed -n 's/.*Final estimate: PPL over .* = \([0-9.]*\).*/\1/p' "$tmp/ik-lp.out")

# per-position logits, KL and both perplexities from the two sides' logits
cmp=0
"$py" "$here/compare_logits.py" --tfrun "$tf_build/bin/tfrun" \
	--ini "$root/conf/ling-nano.ini" --ids "$tmp/ours.ids" --ik "$tmp/ik.f32" \
	--window $window --windows "${WINDOWS:-0}" --set runtime.kv_cache=f32 \
	>"$tmp/cmp.json" || cmp=1

"$py" - "$tmp/ours-ppl.json" "$tmp/ik-ppl.json" "$tmp/cmp.json" "${lp:-nan}" \
	"$tok_same" <<'EOF'
import json, math, sys
ours, ik, c = (json.load(open(p)) for p in sys.argv[1:4])
lp, tok = float(sys.argv[4]), sys.argv[5]
print(f"held-out perplexity, {ours['windows']} windows of {ours['window']}, "
      f"{ours['scored']} tokens scored:")
print(f"  tfrun --perplexity      {ours['perplexity']:.4f}")
print(f"  ik (ik_logits, -ger)    {ik['perplexity']:.4f}   ({ik['scored']} scored)")
print(f"second half of each window only (llama-perplexity -c {c['window']}):")
print(f"  tfrun logits            {c['ppl_half_ours']:.4f}")
print(f"  ik logits               {c['ppl_half_ik']:.4f}")
print(f"  llama-perplexity -ger   {lp:.4f}")
print(f"logits over {c['positions']} positions ({c['windows']} windows): relative error "
      f"median {c['rel_err_median']:.1e}, 99.9th percentile {c['rel_err_p999']:.1e}, "
      f"largest {c['max_rel_err']:.1e} (window {c['max_rel_at'][0]}, position "
      f"{c['max_rel_at'][1]}), {c['rel_over_1e-3']} positions over 1e-3")
print(f"  KL(tfrun || ik) mean {c['kl_mean']:.1e} max {c['kl_max']:.1e} nats, "
      f"top-1 agreement {c['top1_agree']:.5f}")
print(f"tokenization identical: {tok}")
bad = []
if abs(ik["perplexity"] - ours["perplexity"]) > 5e-4 * ours["perplexity"]:
    bad.append("held-out perplexities differ")
if not math.isfinite(lp) or abs(lp - c["ppl_half_ik"]) > 5e-4 * lp:
    bad.append("llama-perplexity disagrees with ik_logits")
if tok != "yes":
    bad.append("tokenization differs")
for b in bad:
    print(f"crosscheck: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
[ "$cmp" = 0 ] || { echo "crosscheck: logits disagree beyond tolerance" >&2; exit 1; }
echo "crosscheck: ik_llama.cpp agrees with tfrun on ling-nano"
