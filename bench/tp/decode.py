#!/usr/bin/python3
"""bench/tp/decode.py [BUILD_DIR] - tensor-parallel decode against one rank.

For each model: decode tok/s of TP2 (`tfrun --tp-local 2`, two processes of
one thread each, over loopback tcp) against TP1 (one process of two
threads), rounds alternating so drift hits both alike; the median of the
rounds, and each TP2 run's communication share: rank 0's seconds inside
all-reduce and all-gather (the `tp-comm` stage, which counts waiting for
the slower rank too) over all its stage seconds.  Prompts are a few
tokens, so the stages are nearly all decode.  Not a test: the numbers go
into bench/tp/README.md with the command and the machine.

Environment (defaults in brackets):
  TF_BENCH_MODELS  INI files, space-separated [conf/ling-nano.ini conf/ling-bench.ini]
  TF_BENCH_GEN     tokens decoded per run   [64]; TF_BENCH_GEN_<STEM> per model
                   (e.g. TF_BENCH_GEN_LING_BENCH=16)
  TF_BENCH_RUNS    rounds                   [3]
"""
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENS = "5,17,300,42"


def run(tfrun, ini, n, extra):
    argv = [tfrun, ini, "--tokens", TOKENS, "-n", str(n), "--temp", "0", "--json",
            "--set", "runtime.context=1024", *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if p.returncode:
        sys.exit(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench(tfrun, ini, n, runs):
    tp1, tp2, share = [], [], []
    for _ in range(runs):
        a = run(tfrun, ini, n, ["--set", "runtime.threads=2"])
        b = run(tfrun, ini, n, ["--set", "runtime.threads=1", "--tp-local", "2"])
        tp1.append(a["decode_tps"])
        tp2.append(b["decode_tps"])
        st = b["stages_s"]
        share.append(st["tp-comm"] / sum(st.values()))
        if a["text"] != b["text"]:
            sys.exit(f"{ini}: TP2 decoded other tokens than TP1")
    return tp1, tp2, share


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    tfrun = os.path.join(build, "bin", "tfrun")
    models = os.environ.get("TF_BENCH_MODELS",
                            "conf/ling-nano.ini conf/ling-bench.ini").split()
    runs = int(os.environ.get("TF_BENCH_RUNS", "3"))
    print("| model | tokens | TP1 2 threads tok/s | TP2 1+1 tok/s | TP2 / TP1 | comm share (TP2) |")
    print("|---|---|---|---|---|---|")
    for ini in models:
        stem = os.path.splitext(os.path.basename(ini))[0]
        n = int(os.environ.get("TF_BENCH_GEN_" + stem.upper().replace("-", "_"),
                               os.environ.get("TF_BENCH_GEN", "64")))
        tp1, tp2, share = bench(tfrun, os.path.join(ROOT, ini), n, runs)
        m1, m2 = statistics.median(tp1), statistics.median(tp2)
        print(f"| {stem} | {n} | {m1:.2f} ({min(tp1):.2f}..{max(tp1):.2f}) "
              f"| {m2:.2f} ({min(tp2):.2f}..{max(tp2):.2f}) | {m2 / m1:.2f} "
              f"| {100 * statistics.median(share):.1f}% "
              f"({100 * min(share):.1f}..{100 * max(share):.1f}%) |", flush=True)


if __name__ == "__main__":
    main()
