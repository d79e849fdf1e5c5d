#!/bin/sh
# gpu-check.sh - on a machine with an NVIDIA GPU: build the CUDA plugins,
# check exl3's CUDA kernels against the CPU reference on random layers,
# print the GEMV and prefill GEMM benchmark tables (the GEMM against its
# floor: trellis reads over the copy bandwidth or its products over the
# tensor cores' peak, TF_BENCH_TENSOR_TFLOPS, default the H200's 989),
# run the KDA kernels' tests (those test_kda_cuda_sim runs on the SIMT
# harness) on the device and time them, then the MLA kernels' tests
# (test_mla_cuda_sim's), then the MoE kernels' tests (test_moe_cuda_sim's,
# the EXL3 experts' GEMV and GEMM among them)
# and time them (prefill through the EXL3 experts too), the sampler's
# (test_sample_cuda_sim's), then the device plugins: plain-cuda against the
# CPU plain linear, moe-cuda's ffn plugins (fp32 and EXL3 experts) against
# moe.so, backend-cuda's ops and sample slot
# (test_backend_cuda_sim's tests, and the conformance suite's backend
# cases), the conformance suite's attention cases on backend-cuda (kda-cuda
# and mla-cuda against the float64 layers and the attention contract) and
# its quant cases there (exl3-cuda and plain-cuda on exl3's quantized
# tensors and plain weights against the CPU linears' weights), and
# the whole model (ling-tiny, and its EXL3 variant) on backend-cuda against
# the float64 reference and the CPU path (tests/model/test_cuda_sim.py, as
# model_cuda_sim_* runs it on cuda-sim; its unified-memory cases run where
# the GPU is integrated and skip on a discrete one), its decode speed with CUDA
# graphs on and off ([runtime] cuda_graph: medians of three runs each, the
# ratio of the two; alone, with MTP drafts, over two ranks and both), and
# last ling-bench in EXL3 at the recipe's bits:
# prefill and decode tok/s on backend-cuda against the decode roofline
# (the device's bandwidth / weight bytes read per token), as
# bench/model/run.sh measures it on the CPU.
#
# Everything it prints also goes into a report, by default
# bench/gpu/gpu-check-<UTC time>.md (TF_GPU_REPORT=FILE to choose), each
# section stamped with the seconds since the start: the whole should take
# under ten minutes.
#
#     scripts/gpu-check.sh [build dir]      (default: build-gpu)
#
# Needs nvcc (CUDA 12+) on PATH or in /usr/local/cuda/bin.  Architectures
# default to 90 and 121; set CUDA_ARCHS="90" (say) to build fewer.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${TF_GPU_CHECK_T0:-}" ]; then
	report=${TF_GPU_REPORT:-"$root/bench/gpu/gpu-check-$(date -u +%Y%m%dT%H%M%SZ).md"}
	mkdir -p "$(dirname "$report")"
	rcfile=$(mktemp)
	{
		r=0
		TF_GPU_CHECK_T0=$(date +%s) sh "$0" "$@" 2>&1 || r=$?
		echo "$r" >"$rcfile"
	} | tee "$report"
	rc=$(cat "$rcfile")
	rm -f "$rcfile"
	echo "gpu-check: exit $rc; report in $report"
	exit "$rc"
fi
# A section's title, with the seconds since the start.
section() { echo "== [$(($(date +%s) - TF_GPU_CHECK_T0)) s] $*"; }

build=${1:-"$root/build-gpu"}
archs=${CUDA_ARCHS:-"90;121"}
jobs=$(nproc 2>/dev/null || echo 2)

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
	PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
cmake --build "$build" -j "$jobs" --target exl3 exl3-cuda backend-cuda gpu_check \
	test_kda_cuda_gpu kda_gpu_bench test_mla_cuda_gpu test_moe_cuda_gpu moe_gpu_bench \
	test_sample_cuda_gpu \
	backend-cpu kda kda-cuda mla mla-cuda moe moe-cuda router tfsynth tfquant \
	test_plain_cuda_gpu test_moe_cuda_plugin_gpu test_conformance test_backend_cuda tfrun \
	cuda_bw

section "exl3 CUDA kernels vs the CPU reference, then the one-row GEMV and the prefill GEMM benchmarks"
"$build/bin/gpu_check"

section "KDA kernels (plugins/kda-cuda) vs the CPU step and the float64 layer"
"$build/tests/test_kda_cuda_gpu" --jobs=1 --verbose
"$build/bin/kda_gpu_bench"

section "MLA kernels (plugins/mla-cuda) vs attend.c and the float64 layer"
"$build/tests/test_mla_cuda_gpu" --jobs=1 --verbose

section "MoE kernels (plugins/moe-cuda) vs router.so and moe.so"
"$build/tests/test_moe_cuda_gpu" --jobs=1 --verbose
"$build/bin/moe_gpu_bench"

section "the sampler's kernels (plugins/backend-cuda/sample.cu) vs core's sampler"
"$build/tests/test_sample_cuda_gpu" --jobs=1 --verbose

section "device plugins: plain-cuda vs the CPU plain linear"
"$build/tests/test_plain_cuda_gpu" --jobs=1 --verbose

section "device plugins: moe-cuda and dense-cuda (fp32 and EXL3 experts) vs moe.so"
"$build/tests/test_moe_cuda_plugin_gpu" --jobs=1 --verbose

section "backend-cuda's ops (convert included) and sample slot vs cpu-ref and core's sampler"
"$build/tests/test_backend_cuda" --jobs=1 --verbose

section "conformance, backend cases (every backend on the plugin path, cuda included)"
"$build/bin/tfsynth" --preset ling-tiny --out "$build/tests/core-model/ling-tiny" >/dev/null
"$build/tests/test_conformance" backend

section "conformance, attention cases, on backend-cuda (kda-cuda, mla-cuda)"
TF_TEST_BACKEND="$build/plugins/backend-cuda.so" TF_TEST_QUANT="$build/plugins/exl3-cuda.so" \
	"$build/tests/test_conformance" attention

section "conformance, quant cases, on backend-cuda (exl3-cuda, plain-cuda)"
TF_TEST_BACKEND="$build/plugins/backend-cuda.so" "$build/tests/test_conformance" quant

section "the whole model: ling-tiny (bf16, EXL3) on backend-cuda vs the float64 reference and the CPU path"
/usr/bin/python3 "$root/tests/model/make_models.py" "$build/bin/tfsynth" "$build/bin/tfquant" \
	"$build/tests/model"
TF_TFRUN="$build/bin/tfrun" TF_TFSYNTH="$build/bin/tfsynth" TF_MODELS="$build/tests/model" \
	TF_DEVICE_BACKEND=cuda /usr/bin/python3 "$root/tests/model/test_cuda_sim.py" -v

section "decode with CUDA graphs on and off: ling-tiny, 3-token prompt, 128 tokens, median of 3 each; alone, with MTP drafts 2 deep, over two ranks (--tp-local 2 on this GPU) and both (the recipe's settings)"
for how in plain mtp tp2 tp2+mtp; do
	case $how in
	plain) extra= ;;
	mtp) extra="--set mtp.enabled=true --set mtp.adaptive=false --set mtp.max_depth=2" ;;
	tp2) extra="--tp-local 2" ;;
	tp2+mtp) extra="--tp-local 2 --set mtp.enabled=true --set mtp.adaptive=false --set mtp.max_depth=2" ;;
	esac
	for graph in true false; do
		for _ in 1 2 3; do
			# shellcheck disable=SC2086 # $extra is a list of arguments
			"$build/bin/tfrun" "$root/conf/ling-tiny.ini" \
				--set "model.path=$build/tests/model/ling-tiny" \
				--set plugins.backend=cuda --set sampling.temperature=0 \
				--set "runtime.cuda_graph=$graph" --tokens 5,16,27 -n 128 --json $extra |
				sed "s/^{/{\"how\": \"$how\", /"
		done
	done
done | /usr/bin/python3 -c '
import json, statistics, sys
runs = [json.loads(l) for l in sys.stdin if l.startswith("{")]
med = lambda rs: statistics.median(r["decode_tps"] for r in rs)
for how in ("plain", "mtp", "tp2", "tp2+mtp"):
    rs = [r for r in runs if r["how"] == how]
    on, off = rs[:3], rs[3:]
    for tag, g in (("graphs on", on), ("graphs off", off)):
        print("%-8s %-10s: decode %8.1f tok/s (runs %s), graph steps %d, runs %d, built %d" % (
            how, tag, med(g), [r["decode_tps"] for r in g], g[0]["graph_steps"],
            g[0]["graph_runs"], g[0]["graph_built"]))
    print(f"{how:8s} graphs on / off: {med(on) / med(off):.3f}")
'

section "the whole model: ling-bench EXL3 (recipe bits, random trellises) on backend-cuda vs the roofline"
TF_BENCH_BACKEND=cuda "$root/bench/model/run.sh" "$build"
