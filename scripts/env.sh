# env.sh - sourced by the scripts: puts the image's CUDA toolkit on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
	PATH=/usr/local/cuda/bin:$PATH
	export PATH
fi
