#!/usr/bin/python3
"""report.py - bench/peer/run.sh's tables from its results.jsonl.

    bench/peer/report.py --ik IK_DIR --work WORK --out RUN_DIR --threads N --ours EXL3_DIR

Single stream: pp512 and tg128 (after a 512-token prompt), medians of the
rounds with their ranges, bits per weight and file size of each model, the
decode roofline (read bandwidth / bytes read per decoded token) and ours
against the peer's best 3-bit configuration.  Batched: aggregate decode
tok/s at 1, 2, 4, 8 sequences.  Bits per weight count the main model (the
peer's GGUF has no MTP layer, so ours leaves it out too) over the bf16
GGUF's parameters.
"""
import argparse
import json
import os
import re
import statistics
import sys


def gguf_bytes(ik, path):
    """(all tensor bytes, bytes a decoded token reads, parameters) of a GGUF:
    every tensor but the embedding table (one row), routed experts at top-k
    over the expert count."""
    sys.path.insert(0, os.path.join(ik, "gguf-py"))
    from gguf import GGUFReader
    r = GGUFReader(path)
    kv = {f.name: f.parts[f.data[0]][0] for f in r.fields.values() if len(f.data) == 1}
    n_exp = int(kv["bailingmoe3.expert_count"])
    top_k = int(kv["bailingmoe3.expert_used_count"])
    total = active = params = 0
    for t in r.tensors:
        total += int(t.n_bytes)
        params += int(t.n_elements)
        if t.name == "token_embd.weight":
            continue
        active += int(t.n_bytes) * (top_k / n_exp if "_exps" in t.name else 1)
    return total, active, params


def bandwidth(path, threads):
    with open(path) as f:
        for line in f:
            m = re.match(r"threads (\d+)\s+read GB/s ([\d.]+)", line)
            if m and int(m.group(1)) == threads:
                return float(m.group(2))
    sys.exit(f"{path}: no read bandwidth for {threads} threads")


def summary(vals):
    return statistics.median(vals), min(vals), max(vals)


def cell(vals):
    if not vals:
        return "-"
    m, lo, hi = summary(vals)
    return f"{m:.1f} ({lo:.1f}-{hi:.1f})"


def main():
    ap = argparse.ArgumentParser()
    for a in ("--ik", "--work", "--out", "--ours"):
        ap.add_argument(a, required=True)
    ap.add_argument("--threads", type=int, required=True)
    a = ap.parse_args()

    res = [json.loads(l) for l in open(os.path.join(a.out, "results.jsonl")) if l.strip()]
    check = json.load(open(os.path.join(a.out, "check.json")))
    bw = bandwidth(os.path.join(a.out, "bw.txt"), a.threads)
    _, _, params = gguf_bytes(a.ik, os.path.join(a.work, "ling-bench-bf16.gguf"))

    mem = check["memory"]
    mtp = mem["checkpoint_class_bytes"].get("MTP layer", 0)
    ours_file = mem["checkpoint_bytes"] - mtp
    ours_active = mem["checkpoint_active_bytes"]

    configs = []
    for r in res:
        if r["config"] not in configs:
            configs.append(r["config"])

    def vals(config, test):
        return [r["tok_s"] for r in res if r["config"] == config and r["test"] == test]

    def sizes(config):
        if config.startswith("ours"):
            return ours_file, ours_active
        quant = config.split()[1]
        total, active, _ = gguf_bytes(a.ik, os.path.join(a.work, f"ling-bench-{quant}.gguf"))
        return total, active

    rounds = max(r["round"] for r in res)
    print(f"ling-bench, {params / 1e9:.2f} G parameters (main model), {a.threads} threads, "
          f"read bandwidth {bw:.1f} GB/s; medians of {rounds} alternating rounds (range)\n")
    print("| config | bpw | file MiB | pp512 t/s | tg128 t/s | decode roofline t/s | tg / roofline |")
    print("|---|---|---|---|---|---|---|")
    single = [c for c in configs if vals(c, "pp")]
    for c in single:
        total, active = sizes(c)
        roof = bw * 1e9 / active
        tg = vals(c, "tg")
        share = f"{statistics.median(tg) / roof:.0%}" if tg else "-"
        print(f"| {c} | {total * 8 / params:.2f} | {total / 2**20:.0f} | {cell(vals(c, 'pp'))} "
              f"| {cell(tg)} | {roof:.1f} | {share} |")

    # The peer's best 3-bit configuration, by each test.
    three = [c for c in single if c.startswith("ik") and "3" in c.split()[1]]
    if three:
        print("\n| ours / ik's best 3-bit | pp512 | tg128 |\n|---|---|---|")
        best = {t: max(statistics.median(vals(c, t)) for c in three) for t in ("pp", "tg")}
        who = {t: max(three, key=lambda c: statistics.median(vals(c, t))) for t in ("pp", "tg")}
        for c in single:
            if c.startswith("ours"):
                print(f"| {c} | {statistics.median(vals(c, 'pp')) / best['pp']:.2f}x "
                      f"| {statistics.median(vals(c, 'tg')) / best['tg']:.2f}x |")
        print(f"\n(best 3-bit: pp512 {who['pp']}, tg128 {who['tg']})")

    batched = [c for c in configs if vals(c, "b1")]
    if batched:
        seqs = sorted({int(r["test"][1:]) for r in res if r["test"].startswith("b")})
        print("\nAggregate decode, tok/s (128-token prompts, 64 steps), speed-up over one "
              "sequence in brackets\n")
        print("| config | " + " | ".join(f"{s} seq" for s in seqs) + " |")
        print("|---|" + "---|" * len(seqs))
        for c in batched:
            base = statistics.median(vals(c, "b1"))
            row = []
            for s in seqs:
                v = vals(c, f"b{s}")
                row.append(f"{statistics.median(v):.1f} ({statistics.median(v) / base:.2f}x)"
                           if v else "-")
            print(f"| {c} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
