"""What the whole-model tests share: the checkpoints the fixture made, tfrun
runs, the independent float64 reference, and the comparison metrics.

The tests read their inputs from the environment (tests/model/CMakeLists.txt
sets it):
  TF_TFRUN      the tfrun binary
  TF_MODELS     the folder make_models.py filled
  TF_EXL3_BASE  the bf16 model whose "-exl3" conversion the EXL3 tests run
                (ling-tiny-q; ling-tiny when the full conversion was made)
  TF_ROUTER     the router plugin every INI pins (unset: the best-scoring)
  TF_BAD_ROUTERS  a folder of routers that break their contract
  TF_TOY_PLUGINS  a folder with a plugin of a new attention type ("toy")
  TF_TFQUANT    the tfquant binary (the int8 test converts with it)
"""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import compare  # noqa: E402
import exl3_np  # noqa: E402
import ling_ref  # noqa: E402

# Tolerances against the float64 reference.  The runtime keeps activations
# and accumulation in fp32 over the same stored weights, so the only
# difference is fp32 rounding (unit 6e-8): measured on ling-tiny, max rel
# err 3-5e-7 and mean KL 3e-13 over 150 tokens (tests/reference/README.md:
# 9e-7 on 32 tokens).  2e-5 leaves a 20x margin for rounding amplified by
# near-tied router choices, and is 2500x below the mildest plausible bug
# tolerance.py knows (SwiGLU clamp lists swapped: 5e-2).  KL goes as the
# square of the error: 1e-9 against 3e-13 measured.
REF_MAX_REL = 2e-5
REF_MAX_KL = 1e-9
REF_MIN_TOP1 = 1.0

# Logits of the same tokens by different routes through the runtime (chunk
# sizes, one-shot, token by token) differ only by the order of fp32 sums:
# KDA's chunked WY form vs its recurrence, batched vs per-token experts,
# the EXL3 one-row vs many-row product.  The one-row EXL3 product sums
# x * bytesum and takes the codebook's offset off at the end
# (plugins/exl3/matmul.c), which cancels about two bits: measured 1.1e-5 for
# chunk 1 on ling-tiny, at most 1.6e-6 for every other route.  1e-4 keeps a
# 9x margin and is still 500x below the mildest bug in tolerance.py.
PATH_MAX_REL = 1e-4
PATH_MAX_KL = 1e-9

TIMEOUT_S = 60


def env(name):
    v = os.environ.get(name)
    if not v:
        raise unittest.SkipTest(f"{name} is not set (run through ctest)")
    return v


def model_dir(name):
    d = os.path.join(env("TF_MODELS"), name)
    if not os.path.isfile(os.path.join(d, "config.json")):
        raise FileNotFoundError(f"{d}: no checkpoint (make_models.py makes it)")
    return d


def exl3_pair():
    """(bf16 folder, EXL3 folder) of the model the EXL3 tests run."""
    base = os.environ.get("TF_EXL3_BASE", "ling-tiny-q")
    return model_dir(base), model_dir(base + "-exl3")


def vocab_of(folder):
    return ling_ref.Model(folder).V


def prompt(n, seed, vocab):
    """n token ids, uniformly drawn: no two prompts alike, none all-zero."""
    return [int(t) for t in np.random.default_rng(seed).integers(0, vocab, n)]


def write_ini(folder, model, context=4096, chunk=64):
    """A model INI for `model` in `folder`.  No [plugins] quant pin: an EXL3
    checkpoint also holds the fp16 projections tfquant leaves unquantized,
    and each linear takes the quant plugin that recognises it.  The MLA
    cache is float32, so the runtime is exact against the float64
    reference (test_long.py measures the bf16 default).  $TF_ROUTER, when
    set, pins the router plugin."""
    path = os.path.join(folder, os.path.basename(model) + ".ini")
    router = os.environ.get("TF_ROUTER")
    with open(path, "w") as f:
        f.write(f"[model]\npath = {model}\n\n"
                f"[runtime]\ncontext = {context}\nthreads = 2\nmemory_limit = 1G\n"
                "kv_cache = f32\n"
                f"prefill_chunk = {chunk}\n\n"
                "[sampling]\ntemperature = 0\n\n[mtp]\nenabled = false\n")
        if router:
            f.write(f"\n[plugins]\nrouter = {router}\n")
    return path


def tfrun(ini, tokens, *extra):
    """tfrun on these tokens; the CompletedProcess (text)."""
    cmd = [env("TF_TFRUN"), ini, "--tokens", ",".join(map(str, tokens)), "--json", "-n", "1"]
    return subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=TIMEOUT_S)


class Runtime:
    """tfrun over one checkpoint: logits of every prompt position.  `sets`
    are INI overrides ("section.key=value") for every run, `args` more of
    tfrun's arguments (["--tp-local", "2"])."""

    def __init__(self, model, sets=(), args=()):
        self.model = model
        self.sets = [a for kv in sets for a in ("--set", kv)] + list(args)
        self.tmp = tempfile.TemporaryDirectory(prefix="tf-model-")
        self.ini = write_ini(self.tmp.name, model)
        self.vocab = vocab_of(model)

    def close(self):
        self.tmp.cleanup()

    def logits(self, tokens, chunk=None):
        out = os.path.join(self.tmp.name, "logits.f32")
        if os.path.exists(out):
            os.remove(out)
        extra = ["--dump-logits", out] + self.sets
        if chunk:
            extra += ["--set", f"runtime.prefill_chunk={chunk}"]
        p = tfrun(self.ini, tokens, *extra)
        if p.returncode != 0:
            raise AssertionError(f"tfrun {self.model} ({len(tokens)} tokens, chunk {chunk}) "
                                 f"exited {p.returncode}: {p.stderr.strip()}")
        return compare.load(out, self.vocab).reshape(len(tokens), self.vocab)


class Reference:
    """The float64 reference of one checkpoint (EXL3 linears decoded)."""

    def __init__(self, model):
        self.m = ling_ref.Model(model)

    def logits(self, tokens):
        return self.m.forward(tokens)[0]


class ReferenceUnrounded(Reference):
    """The reference with EXL3 weights as the runtime's fused decode makes
    them: the codebook value in fp32, without its final rounding to fp16
    (plugins/exl3/matmul.h).  Only the MUL1 codebook, tfquant's default."""

    def __init__(self, model):
        super().__init__(model)
        self.saved = exl3_np.decode_what
        exl3_np.decode_what = self.decode_what

    def close(self):
        exl3_np.decode_what = self.saved

    @staticmethod
    def decode_what(trellis, cb):
        if cb != exl3_np.CB_MUL1:
            raise NotImplementedError("unrounded decode: MUL1 codebook only")
        kt, nt, words = trellis.shape
        perm = exl3_np.tc_perm()
        out = np.empty((kt, nt, 256))
        for i in range(kt):
            s = exl3_np.tile_states(trellis[i], words // 16).astype(np.uint64) & 0xFFFF
            x = (s * np.uint64(0x83DCD12D)) & np.uint64(0xFFFFFFFF)
            bs = sum((x >> np.uint64(8 * b)) & np.uint64(0xFF) for b in range(4))
            w = (1024.0 + bs.astype(np.float64)) * 0.00676727294921875 - 10.3828125
            out[i][:, perm] = w.astype(np.float32)
        return out.reshape(kt, nt, 16, 16).transpose(0, 2, 1, 3).reshape(kt * 16, nt * 16)


def check(tc, what, a, b, max_rel=None, max_kl=None, min_top1=None):
    """Print and assert compare.py's metrics of a against reference b."""
    rel, top1, kl = compare.metrics(a, b)
    print(f"  {what:<44} rows {a.shape[0]:4d}  max rel {rel:.2e}  "
          f"top-1 {top1:.4f}  KL {kl:.2e}", flush=True)
    if max_rel is not None:
        tc.assertLessEqual(rel, max_rel, f"{what}: max rel err")
    if max_kl is not None:
        tc.assertLessEqual(kl, max_kl, f"{what}: mean KL")
    if min_top1 is not None:
        tc.assertGreaterEqual(top1, min_top1, f"{what}: top-1 agreement")
    return rel, top1, kl


def main():
    unittest.main(verbosity=2)
