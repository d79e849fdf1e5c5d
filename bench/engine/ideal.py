#!/usr/bin/env python3
"""ideal.py - bench_batch's aggregate decode rates beside what reading, or
decoding, each weight once per step allows.

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
A speculative verify of k + 1 rows of one sequence (bench_batch -k: its
"verify" rows) has the same bound with S = k + 1 and its own X: it costs
(k + 1) / speed-up plain steps, printed beside what each bound allows.
Its drafts' cost (bench_batch -d: the MTP layer drafting d tokens) is
printed after the table, in plain steps.

Where the CPU is bound by decoding the weights rather than reading them
(EXL3's trellises: a weight costs the same decode at 3 bits as at 6), the
same bound holds with "decoded once" for "read once", B1 and R1 counted in
weights (the memory plan's elements: an EXL3 trellis its in x out) instead
of bytes.  The two differ where the classes differ in bits: ling-bench's
3-bit experts are 36% of a token's bytes and 46% of its weights.

Prints a Markdown table: measured speed-up, both ideals and the fraction of
each reached.  Which bound applies is the path's: "decoded once" for the
EXL3 paths on a CPU (bench/README.md), "read once" where the weights stream
from memory at their bits.
"""
import json
import sys


def bound(check, unit):
    """B1 and R1 of a one-row step, in bytes or params."""
    mem = check["memory"]
    top_k = check["num_experts_per_tok"]
    b1 = mem[f"checkpoint_active_{unit}"]
    r1 = mem[f"checkpoint_class_{unit}"]["routed experts"] * top_k / check["num_experts"]
    return b1, r1


def ideal(s, x, top_k, b1, r1):
    return s * b1 / ((b1 - r1) + r1 * x / top_k)


def ideal_rows(check, batch):
    top_k = check["num_experts_per_tok"]
    read, dec = bound(check, "bytes"), bound(check, "params")
    rows = [r for r in batch["results"] if r["path"] in ("batch", "verify")]
    base = next(r["tok_s"] for r in rows if r["path"] == "batch" and r["seqs"] == 1)
    out = []
    for r in rows:
        s, x = r.get("rows", r["seqs"]), r["experts_per_moe_pass"]
        got = r["tok_s"] / base
        i_read, i_dec = ideal(s, x, top_k, *read), ideal(s, x, top_k, *dec)
        out.append((r["path"], r["seqs"], s, r["tok_s"], got, x, i_read, got / i_read, i_dec,
                    got / i_dec))
    drafts = [(r["rows"], r["rows"] * base / r["tok_s"])
              for r in batch["results"] if r["path"] == "draft"]
    return read, dec, out, drafts


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: ideal.py CHECK.json BATCH.json")
    with open(argv[1]) as f:
        check = json.load(f)
    with open(argv[2]) as f:
        batch = json.load(f)
    (b1, r1), (p1, q1), rows, drafts = ideal_rows(check, batch)
    print(f"{batch['ini']}: a one-row step reads {b1 / 1e6:.1f} MB, {r1 / 1e6:.1f} MB of it "
          f"routed experts, and decodes {p1 / 1e6:.1f} M weights, {q1 / 1e6:.1f} M of them "
          f"routed experts ({batch['command']})\n")
    print("| path | seqs | rows | rows/s | vs 1 | experts/pass | ideal, read once | of it "
          "| ideal, decoded once | of it | plain steps a step (read once, decoded once) |")
    print("| :--- | ---: | ---: | -----: | ---: | -----------: | ---------------: | ----: "
          "| ------------------: | ----: | :--- |")
    for path, seqs, s, tok_s, got, x, i_read, f_read, i_dec, f_dec in rows:
        cost = s / got
        print(f"| {path} | {seqs:4d} | {s:4d} | {tok_s:7.1f} | {got:4.2f} | {x:12.1f} | "
              f"{i_read:16.2f} | {f_read:5.0%} | {i_dec:19.2f} | {f_dec:5.0%} | "
              f"{cost:.2f} ({s / i_read:.2f}, {s / i_dec:.2f}) |")
    if drafts:
        print()
    for d, cost in drafts:
        print(f"MTP draft of {d} token{'s' if d > 1 else ''}: {cost:.2f} plain steps")


if __name__ == "__main__":
    main(sys.argv)
