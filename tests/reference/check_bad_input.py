#!/usr/bin/python3
"""Bad input to tfsynth, ling_ref and compare: a clear message, a non-zero
status, no crash (a signal) and no traceback.

    check_bad_input.py TFSYNTH MODEL_DIR SCRATCH_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def run(cmd, expect, failures):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    err = p.stderr
    ok = p.returncode > 0 and expect in err and "Traceback" not in err
    what = " ".join(os.path.basename(c) for c in cmd[:3])
    print(f"{'ok  ' if ok else 'FAIL'} rc={p.returncode} {what}"
          f" ... -> {err.strip().splitlines()[-1] if err.strip() else '(no message)'}")
    if not ok:
        failures.append(cmd)


def main():
    tfsynth, model, scratch = sys.argv[1:4]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    f = []
    out = os.path.join(scratch, "m")
    ref, cmp_ = os.path.join(HERE, "ling_ref.py"), os.path.join(HERE, "compare.py")

    # tfsynth
    run([tfsynth, "--preset", "ling-huge", "--out", out], "unknown preset 'ling-huge'", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--set", "n_group=3"],
        "n_group 3 must divide num_experts 16", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--set", "rope_yarn_factor=0.5"],
        "rope_yarn_factor must be 0 (none) or in", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--set", "hidden=1"],
        "unknown key 'hidden'", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--set", "hidden_size=x"],
        "hidden_size: 'x' is not an integer", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--seed", "-1"],
        "--seed: '-1' is not a non-negative integer", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--bogus", "1"],
        "unknown argument '--bogus'", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--tokenizer", "/nonexistent.json"],
        "/nonexistent.json: No such file", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", "x" * 4001], "path longer than", f)
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--set", "num_attention_heads=1073741824",
         "--set", "head_dim=1073741824"], "empty or too large", f)
    run([tfsynth, "--preset", "ling-tiny", "--out"], "--out needs a value", f)
    tok = os.path.join(scratch, "tokenizer.json")
    with open(tok, "w") as fh:
        fh.write('{"model": {"vocab": {"a": 0}}, "added_tokens": []}')
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--tokenizer", tok],
        "lacks <|role_end|> or <|endoftext|>", f)
    with open(tok, "w") as fh:
        fh.write('{"model": {"vocab": {"a": -4}}}')
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--tokenizer", tok],
        "model.vocab[\"a\"] is not an id", f)
    with open(tok, "w") as fh:
        fh.write('{"model": ')
    run([tfsynth, "--preset", "ling-tiny", "--out", out, "--tokenizer", tok],
        "not valid JSON", f)

    # ling_ref
    with open(os.path.join(model, "config.json")) as fh:
        vocab = json.load(fh)["vocab_size"]
    logits = os.path.join(scratch, "l.f32")
    run([PY, ref, model, "--tokens", f"1,{vocab}", "--out", logits], "token ids must be in", f)
    run([PY, ref, model, "--tokens", "1,x", "--out", logits], "not a comma-separated list", f)
    run([PY, ref, scratch, "--tokens", "1", "--out", logits], "config.json", f)
    broken = os.path.join(scratch, "broken")
    shutil.copytree(model, broken)
    with open(os.path.join(broken, "model.safetensors"), "r+b") as fh:
        fh.write((1 << 40).to_bytes(8, "little"))
    run([PY, ref, broken, "--tokens", "1", "--out", logits], "exceeds the file", f)
    os.remove(os.path.join(broken, "model.safetensors"))
    shutil.copy(os.path.join(model, "model.safetensors"), os.path.join(broken, "model.safetensors"))
    with open(os.path.join(broken, "config.json")) as fh:
        cfg = json.load(fh)
    cfg["hidden_size"] += 8
    with open(os.path.join(broken, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    run([PY, ref, broken, "--tokens", "1", "--out", logits], "expected", f)

    # compare
    a = os.path.join(scratch, "a.f32")
    np.ones((3, 16), dtype="<f4").tofile(a)
    b = os.path.join(scratch, "b.f32")
    np.ones((2, 16), dtype="<f4").tofile(b)
    run([PY, cmp_, a, b, "--vocab", "16"], "has 3 rows", f)
    run([PY, cmp_, a, a, "--vocab", "5"], "not a whole number of rows", f)
    np.full((3, 16), np.nan, dtype="<f4").tofile(b)
    run([PY, cmp_, b, b, "--vocab", "16"], "non-finite", f)
    c = os.path.join(scratch, "c.f32")
    x = np.arange(48, dtype="<f4").reshape(3, 16)
    x.tofile(a)
    x[:, ::-1].copy().tofile(c)
    run([PY, cmp_, a, c, "--vocab", "16", "--min-top1", "0.5"], "FAIL top-1", f)

    if f:
        print(f"{len(f)} bad-input case(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
