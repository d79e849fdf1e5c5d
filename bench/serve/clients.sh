#!/bin/sh
# clients.sh [INI] - clients nobody here wrote, against tfrun serve.
#
# lm-eval 0.4 (local-completions: token-id prompts, echo, logprobs, batches
# of prompts) runs three tasks on ling-nano's held-out KJV chapters
# (kjv_tasks.py): multiple choice, rolling loglikelihood, generate_until;
# then guidellm runs 1, 2 and 4 concurrent streams.  Both are large PyPI installs, made
# once into VENV (default ../bench-venv, with the system's site packages
# for Debian's python3-torch, which lm-eval imports): not for CI.  Results
# go to bench/serve/results/.  Needs scripts/deps.sh --train (bible-kjv).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ini=${1:-$root/conf/ling-nano.ini}
venv=${VENV:-$root/../bench-venv}
port=${PORT:-8093}
out=$here/results
work=$(mktemp -d)
trap 'kill $srv 2>/dev/null; rm -rf "$work"' EXIT

[ -x "$venv/bin/lm_eval" ] || {
	/usr/bin/python3 -m venv --system-site-packages "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check "lm-eval[api]" transformers "numpy>=2" "scipy>=1.14" guidellm
}
/usr/bin/python3 "$here/kjv_tasks.py" "$work/data"
mkdir -p "$work/tasks" "$out"
for f in "$here"/tasks/*.yaml; do
	sed "s|@DATA@|$work/data|" "$f" > "$work/tasks/$(basename "$f")"
done

"$root/build/bin/tfrun" serve "$ini" --port "$port" --set runtime.sequences=4 \
	--set server.prefix_cache=0 2> "$work/serve.log" &
srv=$!
until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do sleep 0.2; done

"$venv/bin/lm_eval" --model local-completions \
	--model_args "model=ling-nano,base_url=http://127.0.0.1:$port/v1/completions,tokenizer_backend=huggingface,tokenizer=$root/models/ling-nano,tokenized_requests=True,num_concurrent=4,max_retries=1,max_length=1024" \
	--tasks kjv_next_verse,kjv_chapters,kjv_halves --include_path "$work/tasks" \
	--output_path "$out/lm-eval" --log_samples 2>&1 | tee "$out/lm-eval.txt"
# guidellm: the held-out half-verses as prompts, 1 and 4 streams.
/usr/bin/python3 - "$work/data/halves.jsonl" "$work/prompts.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for line in open(sys.argv[1]):
        f.write(json.dumps({"prompt": json.loads(line)["prompt"]}) + "\n")
PY
"$venv/bin/guidellm" run \
	--backend "kind=openai_http,target=http://127.0.0.1:$port,model=ling-nano" \
	--profile kind=concurrent --override profile.streams 1,2,4 \
	--constraint kind=max_requests,count=40 \
	--data "kind=json_file,path=$work/prompts.jsonl" \
	--tokenizer "kind=hf_auto,model=$root/models/ling-nano" \
	--output "kind=json,path=$out/guidellm.json" --disable-progress 2>&1 |
	tee "$out/guidellm.txt"
echo "server log (unknown fields it ignored are named here):"
cat "$work/serve.log"
