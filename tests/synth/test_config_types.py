#!/usr/bin/python3
"""test_config_types.py - every config.json the project writes has its
float-typed keys as JSON floats and one clamp entry a decoder layer (what
transformers' strict BailingHybridConfig needs), with no transformers:
the committed models, tfsynth's and tfquant's outputs (hf_config.py).
The writers' key lists (tools/lib/outdir.c) are hf_config.py's.
"""
import os
import re
import sys
import tempfile

import hf_config


def c_list(text, name):
    m = re.search(r"\b%s\[\] = \{(.*?)\};" % name, text, re.S)
    return tuple(re.findall(r'"(\w+)"', m.group(1))) if m else None


def main():
    errs = []
    with open(os.path.join(hf_config.SRC, "tools", "lib", "outdir.c")) as f:
        src = f.read()
    for name, want in (("float_keys", hf_config.FLOAT_KEYS),
                       ("rope_float_keys", hf_config.ROPE_FLOAT_KEYS)):
        if c_list(src, name) != want:
            errs.append(f"tools/lib/outdir.c {name} {c_list(src, name)} != "
                        f"hf_config.py's {want}")
    with tempfile.TemporaryDirectory(prefix="tf-cfgtypes-") as out:
        folders = hf_config.checkpoints(out)
        for d in folders:
            errs += hf_config.float_errors(d)
    for e in errs:
        print("FAIL:", e)
    if errs:
        return 1
    print(f"{len(folders)} configs: float keys are JSON floats, clamp lists per layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
