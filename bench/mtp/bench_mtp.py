#!/usr/bin/python3
"""bench_mtp - decode tok/s with speculative decoding off, with the MTP
drafter at fixed depths and adaptive, and with the ngram drafter, in one run.

    bench/mtp/bench_mtp.py [-r R] [-n N] [--threads T] [--temp T] [--seed S]
                           [--depths 1,2,3] [--p-min P] [--workload W]
                           [--tfrun PATH] MODEL.ini [MODEL.ini ...]

Each repeat runs every configuration once, in an order rotated by the
repeat (so a slow spell of a shared machine does not always hit the same
one), each a fresh `tfrun MODEL.ini -p PROMPT -n N --json` sampling at
--temp with --seed (greedy text from a small model loops, and a loop's
period against the depth decides the acceptance), with [runtime]
threads = T; the table has each configuration's median decode
tok/s (min-max over the repeats), its ratio to MTP off's median, the
acceptance by draft position and the tokens per main-model pass, summed
over the repeats.  Configurations:

    off        [mtp] enabled = false
    depth k    enabled, adaptive = false, max_depth = k, p_min = 0
    adaptive   enabled, adaptive = true, max_depth = the deepest of --depths,
               p_min = --p-min, else the INI's (the configuration as shipped)
    ngram      [plugins] drafter = ngram, max_depth = the deepest of --depths
    ngram adaptive   the same with [ngram] adaptive = true (its default budget)

Workloads (--workload): story, a prompt to continue freely; repeat, a
passage given twice and begun a third time, which a model that follows
its prompt copies (what prompt lookup is for: editing, quoting, code).
The step columns divide decode time by main-model passes (plain steps or
verifies, with their drafts and undoing).

[draft] accept = exact keeps the tokens of serial decoding, so every
configuration generates the same text; the script checks that and fails
otherwise.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
STORY = ("The old lighthouse keeper climbed the stairs every evening to light the lamp. "
         "One night, as the storm grew stronger, he saw a small boat")
PASSAGE = ("And God said, Let there be light: and there was light. And God saw the light, "
           "that it was good: and God divided the light from the darkness. And God called "
           "the light Day, and the darkness he called Night. ")
WORKLOADS = {"story": STORY, "repeat": PASSAGE * 2 + PASSAGE[:40]}


def configs(depths, p_min):
    yield "off", ["mtp.enabled=false"]
    for k in depths:
        yield f"depth {k}", ["mtp.enabled=true", "mtp.adaptive=false",
                             f"mtp.max_depth={k}", "mtp.p_min=0"]
    yield "adaptive", ["mtp.enabled=true", "mtp.adaptive=true",
                       f"mtp.max_depth={max(depths)}"] + (
                           [f"mtp.p_min={p_min}"] if p_min is not None else [])
    yield "ngram", ["mtp.enabled=false", "plugins.drafter=ngram",
                    f"ngram.max_depth={max(depths)}"]
    yield "ngram adaptive", ["mtp.enabled=false", "plugins.drafter=ngram",
                             f"ngram.max_depth={max(depths)}", "ngram.adaptive=true"]


def run(a, ini, sets):
    cmd = [a.tfrun, ini, "-p", WORKLOADS[a.workload], "-n", str(a.n), "--json",
           "--set", "chat.template=raw", "--set", f"sampling.temperature={a.temp}",
           "--set", f"sampling.seed={a.seed}", "--set", "draft.accept=exact",
           "--set", f"runtime.threads={a.threads}"]
    for kv in sets:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        sys.exit(f"bench_mtp: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench(a, ini):
    cfgs = list(configs(a.depths, a.p_min))
    tps = {name: [] for name, _ in cfgs}
    tried = {name: [0] * max(a.depths) for name, _ in cfgs}
    kept = {name: [0] * max(a.depths) for name, _ in cfgs}
    passes = {name: [0, 0] for name, _ in cfgs}
    step_ms = {name: [] for name, _ in cfgs}
    text = None
    for r in range(a.repeats):
        order = cfgs[r % len(cfgs):] + cfgs[:r % len(cfgs)]
        for name, sets in order:
            out = run(a, ini, sets)
            if text is None:
                text = out["text"]
            elif out["text"] != text:
                sys.exit(f"bench_mtp: {ini} {name}: the text differs from the other runs'")
            tps[name].append(out["decode_tps"])
            m = out.get("drafts")
            # a step: one main-model pass, with its drafts and undoing
            step_ms[name].append(1e3 * out["decode_s"] / (m["forwards"] if m else
                                                          out["generated_tokens"]))
            if m:
                for j, f in enumerate(m["accepted_by_position"]):
                    # drafts at position j: those of every step deep enough
                    tried[name][j] += m["drafted_by_position"][j]
                    kept[name][j] += round(f * m["drafted_by_position"][j])
                passes[name][0] += out["generated_tokens"]
                passes[name][1] += m["forwards"]
            print(f"  {os.path.basename(ini)} repeat {r + 1} {name}: "
                  f"{out['decode_tps']:.1f} tok/s", file=sys.stderr, flush=True)
    off = statistics.median(tps["off"])
    print(f"\n{ini}: {a.workload}, {a.n} tokens, {a.threads} threads, temperature {a.temp}, "
          f"median of {a.repeats}; load average after: {os.getloadavg()[0]:.1f}")
    print("| config | decode tok/s (min-max) | vs off | accepted by position | tokens/pass "
          "| ms/step | step vs off |")
    print("|---|---|---|---|---|---|---|")
    off_ms = statistics.median(step_ms["off"])
    for name, _ in cfgs:
        med = statistics.median(tps[name])
        acc = " ".join(f"{kept[name][j] / tried[name][j]:.2f}" for j in range(len(tried[name]))
                       if tried[name][j]) or "-"
        tpp = f"{passes[name][0] / passes[name][1]:.2f}" if passes[name][1] else "1.00"
        ms = statistics.median(step_ms[name])
        print(f"| {name} | {med:.1f} ({min(tps[name]):.1f}-{max(tps[name]):.1f}) | "
              f"{med / off:.3f} | {acc} | {tpp} | {ms:.2f} | {ms / off_ms:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ini", nargs="+")
    ap.add_argument("-r", "--repeats", type=int, default=5)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--depths", default="1,2,3")
    ap.add_argument("--p-min", type=float, default=None,
                    help="adaptive's [mtp] p_min (default: the INI's)")
    ap.add_argument("--temp", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="story")
    ap.add_argument("--tfrun", default=os.path.join(ROOT, "build", "bin", "tfrun"))
    a = ap.parse_args()
    a.depths = [int(d) for d in a.depths.split(",")]
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cpus; tfrun {a.tfrun}")
    for ini in a.ini:
        bench(a, ini)


if __name__ == "__main__":
    main()
