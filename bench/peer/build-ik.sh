#!/bin/sh
# build-ik.sh - build the peer, ik_llama.cpp, CPU-only, for bench/peer/run.sh.
#
#     bench/peer/build-ik.sh IK_DIR
#
# IK_DIR is a checkout of the public ikawrakow/ik_llama.cpp, outside this
# tree.  Builds Release with native flags into IK_DIR/build: llama-bench,
# llama-batched-bench, llama-perplexity and llama-quantize (~18 minutes on
# two cores).
#
# It edits one line of IK_DIR first.  llama-quantize asserts that the count
# of attn_v tensors is 0, one or three per layer; a Ling-3 model has them on
# its KDA layers only, so the assert stops every quantization of
# `bailingmoe3`.  The edit adds that architecture to the assert's
# exceptions (as it already lists DECI): nothing else reads the count but
# a choice of bits for attn_v, which Q3_K_M/IQ3_K/Q4_K_M make per tensor.
set -eu

[ $# -eq 1 ] || { echo "usage: build-ik.sh IK_DIR" >&2; exit 2; }
ik=$(cd "$1" && pwd)
q=$ik/src/llama-quantize.cpp
[ -f "$q" ] || { echo "build-ik.sh: $q: not an ik_llama.cpp tree" >&2; exit 1; }

if ! grep -q 'model.arch == LLM_ARCH_BAILINGMOE3 ||' "$q"; then
	sed -i 's/^\( *\)model\.arch == LLM_ARCH_DECI ||$/&\n\1model.arch == LLM_ARCH_BAILINGMOE3 ||/' "$q"
	grep -q 'model.arch == LLM_ARCH_BAILINGMOE3 ||' "$q" || {
		echo "build-ik.sh: $q: the n_attention_wv assert has changed; add" \
			"LLM_ARCH_BAILINGMOE3 to its exceptions by hand" >&2
		exit 1
	}
	echo "build-ik.sh: $q: LLM_ARCH_BAILINGMOE3 added to the n_attention_wv assert"
fi

cmake -S "$ik" -B "$ik/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
	-DGGML_NATIVE=ON -DLLAMA_CURL=OFF >/dev/null
cmake --build "$ik/build" -j "${JOBS:-$(nproc)}" --target llama-bench \
	llama-batched-bench llama-perplexity llama-quantize
echo "build-ik.sh: built $ik/build/bin"
