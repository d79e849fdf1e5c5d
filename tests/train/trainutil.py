"""Shared by the tests of tools/train: paths, tfrun runs, comparisons."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
TFRUN = os.environ.get("TF_TFRUN", os.path.join(ROOT, "build", "bin", "tfrun"))
TFSYNTH = os.environ.get("TF_TFSYNTH", os.path.join(ROOT, "build", "bin", "tfsynth"))
PYTHON = "/usr/bin/python3"
NANO = os.path.join(ROOT, "models", "ling-nano")
NANO_INI = os.path.join(ROOT, "conf", "ling-nano.ini")
NANO_EXL3_INI = os.path.join(ROOT, "conf", "ling-nano-exl3.ini")
HELDOUT = os.path.join(ROOT, "tests", "train", "kjv-heldout-sample.txt")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        raise AssertionError(f"{' '.join(cmd)}: status {r.returncode}\n{r.stderr}")
    return r.stdout


def tfrun_logits(ini, tokens, out, *sets):
    """tfrun's logits [len(tokens), vocab] for the prompt `tokens`, with the
    float32 MLA cache (exact against a float64 reference) unless `sets`
    say otherwise."""
    args = [TFRUN, ini, "--tokens", ",".join(map(str, tokens)), "--dump-logits", out,
            "-n", "1", "--set", "mtp.enabled=false", "--set", "runtime.kv_cache=f32"]
    for s in sets:
        args += ["--set", s]
    run(args)
    return np.fromfile(out, dtype="<f4").reshape(len(tokens), -1)


def max_rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def mean_kl(a, b):
    """Mean KL(softmax b || softmax a) over rows (b the reference)."""
    la = a - a.max(-1, keepdims=True)
    la -= np.log(np.exp(la).sum(-1, keepdims=True))
    lb = b - b.max(-1, keepdims=True)
    lb -= np.log(np.exp(lb).sum(-1, keepdims=True))
    return float((np.exp(lb) * (lb - la)).sum(-1).mean())


def top1(a, b):
    return float((a.argmax(-1) == b.argmax(-1)).mean())
