#!/usr/bin/python3
"""Make the checkpoints the whole-model tests run (the ctest fixture).

    make_models.py TFSYNTH TFQUANT OUT_DIR [--full-exl3]

OUT_DIR gets
  ling-tiny          the tiny model, bf16 (tfsynth --preset ling-tiny)
  ling-tiny-q        a smaller variant of it, bf16: the source of ...
  ling-tiny-q-exl3   ... its EXL3 conversion at the recipe's bits
  ling-tiny-exl3     (--full-exl3 only) ling-tiny itself in EXL3

Why a smaller variant: tfquant's trellis search costs about 10-15 us of CPU
per weight, so the 17.8 M-parameter ling-tiny takes 3.5 minutes of CPU to
convert, over the whole suite's budget.  The variant keeps every kind of
layer (KDA, MLA, a dense lead layer, grouped MoE with a shared expert,
SwiGLU clamps, the MTP layer) at a quarter of the weights: ~30 s of CPU.

A folder is rebuilt only when its stamp (the tool's size and mtime and the
arguments) changed, so a second ctest run costs nothing.  Each one is
written under a temporary name and renamed when complete: an interrupted
run never leaves a half-written model that looks finished.
"""
import os
import shutil
import subprocess
import sys

# ling-tiny at a quarter of its weights: hidden 128, one layer group (three
# KDA layers and an MLA layer), 8 experts in 4 groups, 2 per token.
VARIANT = ["hidden_size=128", "num_hidden_layers=4", "intermediate_size=256",
           "num_experts=8", "num_experts_per_tok=2"]


def read_stamp(folder):
    try:
        with open(os.path.join(folder, ".stamp")) as f:
            return f.read()
    except OSError:
        return None


def check_tfquant_progress(stdout):
    """tfquant prefixes each tensor's line with its overall progress and an
    ETA ("[ 42%, 1m05s left]"), rising to 100%."""
    pcts = [int(line[1:4]) for line in stdout.splitlines()
            if line.startswith("[") and "s left] " in line]
    if not pcts or pcts != sorted(pcts) or pcts[-1] != 100:
        sys.exit(f"make_models: tfquant's progress is not [NN%, MmSSs left] rising to 100%: "
                 f"{pcts}\n{stdout[:2000]}")


def make(out, tool, args, source=None, check=None):
    """Run `tool args... <tmp>` into out unless out's stamp, which includes
    the source folder's own stamp, says it is current; `check` is given
    the tool's stdout."""
    st = os.stat(tool)
    stamp = f"{os.path.realpath(tool)} {st.st_size} {st.st_mtime_ns}\n{' '.join(args)}\n"
    if source:
        stamp += read_stamp(source)
    if read_stamp(out) == stamp:
        print(f"{os.path.basename(out)}: up to date")
        return
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    p = subprocess.run([tool] + args + [tmp], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"make_models: {os.path.basename(tool)} failed ({p.returncode}):\n{p.stderr}")
    if check:
        check(p.stdout)
    lines = p.stdout.strip().splitlines() + p.stderr.strip().splitlines()
    print(f"{os.path.basename(out)}: {lines[-1] if lines else 'made'}")
    with open(os.path.join(tmp, ".stamp"), "w") as f:
        f.write(stamp)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)


def main(argv):
    if len(argv) not in (4, 5) or (len(argv) == 5 and argv[4] != "--full-exl3"):
        sys.exit(__doc__.split("\n\n")[1])
    tfsynth, tfquant, out = argv[1:4]
    os.makedirs(out, exist_ok=True)
    synth = ["--preset", "ling-tiny"]
    variant = [a for kv in VARIANT for a in ("--set", kv)]
    quant = ["--threads", str(min(os.cpu_count() or 1, 2))]
    make(os.path.join(out, "ling-tiny"), tfsynth, synth + ["--out"])
    make(os.path.join(out, "ling-tiny-q"), tfsynth, synth + variant + ["--out"])
    for name in ["ling-tiny-q"] + (["ling-tiny"] if len(argv) == 5 else []):
        src = os.path.join(out, name)
        make(src + "-exl3", tfquant, quant + [src], source=src, check=check_tfquant_progress)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
