#!/bin/sh
# deps.sh - install the Debian packages TensorFold builds and tests with.
#
# Idempotent; needs root (or sudo).  Every package a script or test needs
# is named here: they are installed without their Recommends, so what a
# Recommends would bring (the arm64 C library beside the cross compiler)
# is listed too; llvm brings llvm-symbolizer, without which ASan, UBSan
# and the fuzzers print stack traces as bare addresses, and libc6-dbg the
# symbols of ld.so, without which LeakSanitizer's built-in suppression of
# glibc's TLS blocks (*tls_get_addr*) matches nothing and, with the ASan
# suite's use_tls=0 (scripts/test.sh), every tfrun that loads plugins
# reports a 4-byte leak.  The CUDA toolkit
# is not a Debian package here: CUDA plugins build when nvcc is found (on
# PATH or in /usr/local/cuda/bin) and are skipped with a message otherwise.
#
#     scripts/deps.sh [--train] [--peer] [--fresh-root]
#
# --train adds what tools/train and its tests need: PyTorch (large), the KJV
# text and its reader, OpenBLAS (Debian's torch calls the system BLAS; the
# reference BLAS is ~5x slower), matplotlib for the loss plot.
# --peer adds what bench/peer needs beside the peer's own source: YAML for
# its gguf-py (the GGUF converter writes through it) and the KJV text for
# the cross-check's held-out chapters.
# --fresh-root adds debootstrap, which makes the bare Debian root that
# tests/README.md's fresh-machine proof runs .ci/run in.
set -eu

pkgs="build-essential cmake pkg-config git
      libinih-dev libcjson-dev libpcre2-dev libcriterion-dev
      libmicrohttpd-dev
      libibverbs-dev librdmacm-dev iproute2
      python3 python3-numpy python3-jinja2 python3-jsonschema python3-venv
      clang libclang-rt-14-dev llvm libc6-dbg
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static"
for opt in "$@"; do
	case $opt in
	--train)
		pkgs="$pkgs python3-torch python3-matplotlib bible-kjv bible-kjv-text
		      libopenblas0-pthread" ;;
	--peer)
		pkgs="$pkgs python3-yaml bible-kjv bible-kjv-text" ;;
	--fresh-root)
		pkgs="$pkgs debootstrap" ;;
	*)
		echo "usage: scripts/deps.sh [--train] [--peer] [--fresh-root]" >&2
		exit 2 ;;
	esac
done

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "deps.sh: installing$missing"
$sudo apt-get update -qq
# shellcheck disable=SC2086  # one word per package
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
