#!/usr/bin/python3
"""How far the integer-activation EXL3 paths move a model's logits from the
float path: top-1 agreement and mean KL over one random prompt, every
position a decode row (prefill_chunk 1, as decoding runs them).

    quant_agree.py TFRUN INI [--tokens N] [--seed S] [--set SECTION.KEY=VALUE ...]

Prints one line per path (exl3-int, exl3-q8) against exl3, and the time of
each run.  The numbers behind the default quant path (bench/model/README.md).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "reference"))
import compare  # noqa: E402


def run(tfrun, ini, quant, tokens, sets, out):
    cmd = [tfrun, ini, "--tokens", ",".join(map(str, tokens)), "-n", "1", "--dump-logits", out,
           "--set", f"plugins.quant={quant}", "--set", "runtime.prefill_chunk=1"]
    for kv in sets:
        cmd += ["--set", kv]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"quant_agree: {quant}: tfrun exited {p.returncode}: {p.stderr.strip()}")
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tfrun")
    ap.add_argument("ini")
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=2048, help="ids are drawn below this")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    a = ap.parse_args()
    toks = [int(t) for t in np.random.default_rng(a.seed).integers(0, a.vocab, a.tokens)]
    with tempfile.TemporaryDirectory(prefix="tf-agree-") as tmp:
        logits, secs = {}, {}
        for q in ("exl3", "exl3-int", "exl3-q8"):
            out = os.path.join(tmp, q + ".f32")
            secs[q] = run(a.tfrun, a.ini, q, toks, a.sets, out)
            logits[q] = np.fromfile(out, dtype="<f4").astype(np.float64).reshape(a.tokens, -1)
        print(f"{a.ini} {' '.join(a.sets)}: {a.tokens} tokens, seed {a.seed}")
        print(f"  exl3      {secs['exl3']:7.1f} s")
        for q in ("exl3-int", "exl3-q8"):
            rel, top1, kl = compare.metrics(logits[q], logits["exl3"])
            print(f"  {q:<9} {secs[q]:7.1f} s  top-1 {top1:.4f}  mean KL {kl:.2e}  "
                  f"max rel {rel:.2e}")


if __name__ == "__main__":
    main()
