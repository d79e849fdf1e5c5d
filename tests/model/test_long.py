#!/usr/bin/python3
"""A long prefill: 16384 tokens on ling-tiny (bf16) in chunks of 512.

    Long   tfrun prefills 16384 random tokens (fixed seed) with the MLA latent
           cache in f32, then again in bf16 ([runtime] kv_cache), dumping
           the logits of every position; sampled rows are checked

* f32 cache against the float64 reference (ling_ref.py, which takes its
  blocked MLA attention and chunked KDA at this length and runs the last
  layer for the sampled rows only): the whole-model tolerances of
  tfmodel.py (REF_MAX_REL, REF_MAX_KL, top-1 1.0).
* bf16 cache against the f32 cache, every row, at the bounds below.

The rows (65): 48 spread evenly over the sequence, the first two rows of some
chunks (where a chunk first reads the cache the chunks before it wrote)
and the last 8.  The tiny model's config says max_position_embeddings
4096, which the runtime holds [runtime] context to; its RoPE is plain
(rope_scaling null), so positions past 4096 are the same math, and the
test runs a copy of the checkpoint (the tensors linked) whose config says
CONTEXT instead.

bf16 cache vs f32 cache, over all 16384 rows.  bf16 keeps 8 significant
bits: each cached latent and rope-key element is rounded once, with
relative error <= 2^-8 (3.9e-3), in the two MLA layers only.  The MLA
output, sums of such elements, moves by a like fraction of its size however
many keys a query averages (the signal and the rounding average alike):
tests/mla measured 2.2e-3 per layer against the exact reference.  The MLA
layers are two of eight residual contributions, so a typical row's logits
move by well under one rounding (bound: median row rel err <= 2^-9).  But
the router's top-k is discontinuous: a row whose expert scores are near a
tie takes another expert and moves by a whole expert's output, as in the
Exl3Q8 test of test_reference.py, so no bound holds for the worst row
(printed, not asserted).  Those rows are few (top-1 >= 0.999, 16 flips of
16384) and carry the mean KL (bound 5e-4, ~10x the measured).

Measured on ling-tiny: median row rel err 3.0e-5, 99th percentile 1.9e-3,
max 0.18 (a router flip at row 9038), top-1 0.99982 (3 rows), mean KL
4.5e-5; over the 65 sampled rows alone max rel 3.9e-3, KL 1.7e-6.

Time on a 2-core machine shared with other work (measured): each tfrun
prefill 27-41 s, the reference 43-87 s, 113-171 s in all; the ASan build's
tfrun (RelWithDebInfo) takes 96-158 s a prefill, 4-6 minutes in all (one
run: 237 s, clean).  So the ASan build runs 6144 tokens (TF_LONG_TOKENS:
still past the config's 4096 positions, twelve chunks, 24 cache pages):
what it looks for, a bad access, shows on the first pages crossed as on
the last, and the CI's 30 minutes on 2 cores have no room for the rest
(tests/model/CMakeLists.txt).
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

# TF_LONG_TOKENS: the sanitizer build's shorter run (tests/model/CMakeLists.txt).
N_TOKENS = int(os.environ.get("TF_LONG_TOKENS", "16384"))
CHUNK = 512
CONTEXT = N_TOKENS + 16          # room for the one generated token
SEED = 41
TFRUN_TIMEOUT_S = 500            # per run; ctest's TIMEOUT bounds the whole test

BF16_MEDIAN_REL = 2.0 ** -9
BF16_MAX_KL = 5e-4
BF16_MIN_TOP1 = 0.999
ROWS_PER_READ = 1024             # rows of both dumps in memory at once


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


def row_metrics(a, b):
    """Per row of a against reference b (float32 arrays or memmaps): rel
    err ||a_t - b_t||_inf / ||b_t||_inf, top-1 agreement, KL(b_t || a_t);
    read ROWS_PER_READ rows at a time."""
    rel, top1, kl = [], [], []
    for r0 in range(0, a.shape[0], ROWS_PER_READ):
        x = np.array(a[r0:r0 + ROWS_PER_READ], dtype=np.float64)
        y = np.array(b[r0:r0 + ROWS_PER_READ], dtype=np.float64)
        rel.append(np.max(np.abs(x - y), axis=-1) / np.max(np.abs(y), axis=-1))
        top1.append(x.argmax(axis=-1) == y.argmax(axis=-1))
        lx, ly = tm.compare.log_softmax(x), tm.compare.log_softmax(y)
        kl.append(np.sum(np.exp(ly) * (ly - lx), axis=-1))
    return np.concatenate(rel), np.concatenate(top1), np.concatenate(kl)


class Long(unittest.TestCase):
    def prefill(self, ini, tokens, vocab, kv_cache):
        """tfrun's logits with [runtime] kv_cache = kv_cache, as a read-only
        memmap of the dump (n x vocab float32: 128 MiB here), which is
        deleted with the test's folder."""
        out = os.path.join(os.path.dirname(ini), f"logits-{kv_cache}.f32")
        cmd = [tm.env("TF_TFRUN"), ini, "--tokens", ",".join(map(str, tokens)), "--json",
               "-n", "1", "--dump-logits", out, "--set", f"runtime.kv_cache={kv_cache}"]
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TFRUN_TIMEOUT_S)
        print(f"  tfrun, {kv_cache} cache: {time.monotonic() - t0:.0f} s", flush=True)
        self.assertEqual(p.returncode, 0, f"tfrun ({kv_cache} cache): {p.stderr.strip()}")
        self.assertEqual(os.path.getsize(out), 4 * len(tokens) * vocab, "dump size")
        return np.memmap(out, dtype="<f4", mode="r", shape=(len(tokens), vocab))

    def test_long_prefill(self):
        model = tm.model_dir("ling-tiny")
        tmp = tempfile.TemporaryDirectory(prefix="tf-long-")
        self.addCleanup(tmp.cleanup)
        ref = tm.Reference(model)
        toks = tm.prompt(N_TOKENS, SEED, ref.m.V)
        rows = sample_rows(N_TOKENS, CHUNK)
        ini = tm.write_ini(tmp.name, long_model(tmp.name, model, CONTEXT), CONTEXT, CHUNK)
        f32 = self.prefill(ini, toks, ref.m.V, "f32")
        bf16 = self.prefill(ini, toks, ref.m.V, "bf16")

        t0 = time.monotonic()
        want, _ = ref.m.forward(toks, rows)
        print(f"  reference: {time.monotonic() - t0:.0f} s", flush=True)
        got = np.array(f32[rows], dtype=np.float64)
        self.assertTrue(np.all(np.isfinite(got)), "f32 cache: non-finite logits")
        tm.check(self, f"f32 cache, {N_TOKENS} tokens vs reference", got, want,
                 tm.REF_MAX_REL, tm.REF_MAX_KL, tm.REF_MIN_TOP1)
        rel = np.max(np.abs(got - want), axis=-1) / np.max(np.abs(want), axis=-1)
        print(f"  worst row {rows[np.argmax(rel)]} of {N_TOKENS}", flush=True)

        rel, top1, kl = row_metrics(bf16, f32)
        self.assertTrue(np.all(np.isfinite(rel)) and np.all(np.isfinite(kl)),
                        "bf16 cache: non-finite logits")
        print(f"  bf16 cache vs f32 cache, all {N_TOKENS} rows: median rel "
              f"{np.median(rel):.2e}  99% {np.quantile(rel, 0.99):.2e}  max {rel.max():.2e} "
              f"(row {rel.argmax()})  top-1 {top1.mean():.5f}  KL {kl.mean():.2e}", flush=True)
        self.assertGreater(rel.max(), 0.0, "the bf16 cache was not used")
        self.assertLessEqual(np.median(rel), BF16_MEDIAN_REL, "bf16 cache: median row rel err")
        self.assertLessEqual(kl.mean(), BF16_MAX_KL, "bf16 cache: mean KL")
        self.assertGreaterEqual(top1.mean(), BF16_MIN_TOP1, "bf16 cache: top-1 agreement")
        del f32, bf16


if __name__ == "__main__":
    tm.main()
