#!/usr/bin/env python3
"""ideal.py - bench_batch's aggregate decode rates beside what reading each
weight once per step allows.

    build/bin/tfrun MODEL.ini --check --json > check.json
    build/bin/bench_batch --json MODEL.ini > batch.json
    bench/engine/ideal.py check.json batch.json

A step of S sequences must read every non-expert weight once and each expert
any of its rows routes to once.  With B1 the bytes a one-row step reads (the
memory plan's active bytes), R1 of them routed experts (their bytes times
top-k over the number of experts), and X(S) the distinct experts per MoE
pass at S rows (bench_batch's experts_per_moe_pass):

    BS = (B1 - R1) + R1 * X(S) / top_k,    ideal(S) = S * B1 / BS

the speed-up over one sequence that a step bound by its weight reads gets.
Prints a Markdown table: measured speed-up, ideal, and the fraction of the
ideal reached.  The same bound holds where the CPU is bound by decoding the
weights rather than reading them: "decoded once" for "read once".
"""
import json
import sys


def ideal_rows(check, batch):
    mem = check["memory"]
    b1 = mem["checkpoint_active_bytes"]
    top_k = check["num_experts_per_tok"]
    r1 = mem["checkpoint_class_bytes"]["routed experts"] * top_k / check["num_experts"]
    rows = [r for r in batch["results"] if r["path"] == "batch"]
    base = next(r["tok_s"] for r in rows if r["seqs"] == 1)
    out = []
    for r in rows:
        s = r["seqs"]
        bs = (b1 - r1) + r1 * r["experts_per_moe_pass"] / top_k
        ideal = s * b1 / bs
        got = r["tok_s"] / base
        out.append((s, r["tok_s"], got, r["experts_per_moe_pass"], ideal, got / ideal))
    return b1, r1, out


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: ideal.py CHECK.json BATCH.json")
    with open(argv[1]) as f:
        check = json.load(f)
    with open(argv[2]) as f:
        batch = json.load(f)
    b1, r1, rows = ideal_rows(check, batch)
    print(f"{batch['ini']}: B1 {b1 / 1e6:.1f} MB a one-row step, {r1 / 1e6:.1f} MB of it "
          f"routed experts ({batch['command']})\n")
    print("| seqs | tok/s | vs 1 | experts/pass | ideal | of ideal |")
    print("| ---: | ----: | ---: | -----------: | ----: | -------: |")
    for s, tok_s, got, x, ideal, frac in rows:
        print(f"| {s:4d} | {tok_s:7.1f} | {got:4.2f} | {x:12.1f} | {ideal:5.2f} | {frac:7.0%} |")


if __name__ == "__main__":
    main(sys.argv)
