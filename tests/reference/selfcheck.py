#!/usr/bin/python3
"""Self-checks of the float64 reference against facts it did not use itself.

    selfcheck.py [MODEL_DIR]

* KDA: the chunked (WY) form equals the recurrence (spec 2.4 vs 2.3).
* EXL3: the spec's bit-stream test vectors, codebook table and statistics
  (exl3.md 4.3-4.4); bit slicing equals the kernels' word-window extraction;
  the rebuilt weight equals the factored forward (exl3.md 3).
* With MODEL_DIR: MLA absorbed form equals the naive form on every MLA layer;
  the forms long inputs take (MLA attention in query blocks, chunked KDA,
  logits of some rows only) equal the plain ones; the forward is causal;
  the float32 mode does not silently widen to float64.
Exits non-zero on the first failure.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exl3_np  # noqa: E402
import ling_ref  # noqa: E402

failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        failures.append(name)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def check_kda(rng):
    T, nH, K, V = 45, 3, 16, 8          # 45 = two full chunks of 16 and a ragged one
    q = ling_ref.l2_norm(rng.standard_normal((T, nH, K))) * K ** -0.5
    k = ling_ref.l2_norm(rng.standard_normal((T, nH, K)))
    v = rng.standard_normal((T, nH, V))
    g = -5.0 * ling_ref.sigmoid(rng.standard_normal((T, nH, K)) * 3)   # safe-gate range
    beta = ling_ref.sigmoid(rng.standard_normal((T, nH)))
    o1, s1 = ling_ref.kda_recurrent(q, k, v, g, beta)
    o2, s2 = ling_ref.kda_chunked(q, k, v, g, beta, chunk=16)
    e = max(rel(o2, o1), rel(s2, s1))
    check("kda chunked == recurrent", e < 1e-12, f"(rel err {e:.1e})")


def pack_tile(symbols, K):
    """Encoder written from the format description: symbols -> 16K int16."""
    bits = np.array([(int(c) >> (K - 1 - b)) & 1 for c in symbols for b in range(K)],
                    dtype=np.uint64)
    words = (bits.reshape(-1, 32) << np.arange(31, -1, -1, dtype=np.uint64)).sum(axis=1)
    u16 = np.empty(2 * len(words), dtype=np.uint16)
    u16[0::2] = words & 0xFFFF
    u16[1::2] = words >> 16
    return u16.view(np.int16)


def window_states(tile, K):
    """The kernels' extraction (exl3.md 4.3 item 4), for comparison."""
    u16 = [int(x) for x in tile.view(np.uint16)]
    w = [u16[2 * m] | u16[2 * m + 1] << 16 for m in range(len(u16) // 2)]
    W = 8 * K
    out = []
    for t in range(256):
        b1 = (t + 1) * K + 256 * K
        i0, i1 = (b1 - 16) // 32, (b1 - 1) // 32
        sh = (i1 + 1) * 32 - b1
        out.append(((w[i0 % W] << 32 | w[i1 % W]) >> sh) & 0xFFFF)
    return np.array(out)


def check_exl3_vectors():
    vec = {
        2: ("a955 3ffa faa9 003f 3ffa 5500 003f a955", (0xaa94, 0xaa53, 0xa94f, 0xa53f), 0xeaa5,
            (1.60938, -2.27734, 1.20410, -0.87109)),
        3: ("f2cb 0fbe 8209 1a69 6595 df7d 040f 34d1", (0x6548, 0x2a43, 0x521f, 0x90fb), 0x2ca9,
            (1.71582, -0.02698, 0.51758, -0.10315)),
    }
    for K, (words, s0, s255, row0) in vec.items():
        sym = [((t * 2654435761) % 2 ** 32 >> 13) % 2 ** K for t in range(256)]
        tile = pack_tile(sym, K)
        got = " ".join(f"{w:04x}" for w in tile.view(np.uint16)[:8])
        check(f"exl3 K={K} packed words", got == words, f"({got})")
        st = exl3_np.tile_states(tile, K)
        check(f"exl3 K={K} states", tuple(st[:4]) == s0 and st[255] == s255,
              f"({' '.join(f'{s:04x}' for s in st[:4])} .. {st[255]:04x})")
        what = exl3_np.decode_what(tile.reshape(1, 1, -1), exl3_np.CB_3INST).astype(np.float64)
        check(f"exl3 K={K} 3INST row 0", np.allclose(what[0, :4], row0, atol=6e-6),
              f"({what[0, :4]})")


def check_codebooks():
    table = {   # f(0x0000), f(0x0001), f(0x1234), f(0x8000), f(0xFFFF); mean, rms, min, max
        exl3_np.CB_3INST: ((0x3A25, 0xBB5B, 0xC066, 0xB7F8, 0xB110),
                           (0.00021, 1.243711, -3.95703, 3.97266)),
        exl3_np.CB_MCG: ((0x3F60, 0x304E, 0x3E0F, 0xB915, 0x3ACD),
                         (-0.00004, 1.244112, -3.94922, 3.94922)),
        exl3_np.CB_MUL1: ((0xC2E8, 0x3921, 0xB89E, 0xBAF2, 0xB936),
                          (-0.00193, 1.000312, -3.45312, 3.34766)),
    }
    names = {0: "3INST", 1: "MCG", 2: "MUL1"}
    for cb, (points, stats) in table.items():
        v = exl3_np.codebook([0x0000, 0x0001, 0x1234, 0x8000, 0xFFFF], cb).view(np.uint16)
        check(f"codebook {names[cb]} values", tuple(int(x) for x in v) == points,
              f"({' '.join(f'{x:04x}' for x in v)})")
        allv = exl3_np.codebook(np.arange(65536), cb).astype(np.float64)
        got = (allv.mean(), np.sqrt(np.mean(allv ** 2)), allv.min(), allv.max())
        check(f"codebook {names[cb]} stats", np.allclose(got, stats, atol=1e-5),
              f"(mean {got[0]:.5f} rms {got[1]:.6f} min {got[2]:.5f} max {got[3]:.5f})")


def check_extraction(rng):
    bad = 0
    for K in range(1, 9):
        for _ in range(4):
            tile = rng.integers(0, 65536, 16 * K, dtype=np.uint64).astype(np.uint16).view(np.int16)
            st = exl3_np.tile_states(tile, K)
            bad += int(np.any(st != window_states(tile, K)))
            # Tail-biting: each state's high bits are the previous state's low bits.
            prev = np.roll(st, 1)
            bad += int(np.any((st >> K) != (prev & ((1 << (16 - K)) - 1))))
    check("exl3 bit slicing == word windows, tail-biting, K=1..8", bad == 0)


class _FakeCkpt:
    """A dict standing in for a checkpoint in the EXL3 checks."""

    def __init__(self, t):
        self.t = t

    def has(self, n):
        return n in self.t

    def get(self, n):
        return self.t[n]

    def f64(self, n):
        return self.t[n].astype(np.float64)


def check_exl3_linear(rng):
    h = exl3_np.hadamard128()
    check("hadamard orthonormal", np.allclose(h @ h, np.eye(128), atol=1e-12))
    k, n, K = 256, 384, 3
    t = {"l.trellis": rng.integers(0, 65536, (k // 16, n // 16, 16 * K),
                                   dtype=np.uint64).astype(np.uint16).view(np.int16),
         "l.suh": (rng.standard_normal(k) * 0.01).astype(np.float16),
         "l.svh": (rng.standard_normal(n)).astype(np.float16),
         "l.mul1": np.array(-2082680531, dtype=np.int32)}
    lin = exl3_np.Linear(_FakeCkpt(t), "l")
    x = rng.standard_normal((5, k))
    e = rel(x @ lin.weight().T, lin.forward(x))
    check("exl3 rebuilt weight == factored forward", e < 1e-12, f"(rel err {e:.1e})")


def check_mla(folder, rng):
    m = ling_ref.Model(folder)
    T = 9
    pos = np.arange(T, dtype=np.float64)
    for i in range(m.L + 1):
        if not m.is_mla(i):
            continue
        x = rng.standard_normal((T, m.H))
        p = f"model.layers.{i}.attention"
        e = rel(m.mla_absorbed(x, p, pos), m.mla(x, p, pos))
        check(f"mla layer {i} absorbed == naive", e < 1e-12, f"(rel err {e:.1e})")


def check_yarn():
    """YaRN (spec 3.4): factor 1 is plain RoPE; past the ramp the frequencies
    are divided by the factor, before it they are kept."""
    c = {"qk_rope_head_dim": 64, "rope_theta": 6e6, "max_position_embeddings": 32768}
    plain, a0, s0 = ling_ref.rope_params(c)
    ys = {"type": "yarn", "factor": 1.0, "original_max_position_embeddings": 4096,
          "beta_fast": 32, "beta_slow": 1, "mscale": 1, "mscale_all_dim": 1}
    one, a1, s1 = ling_ref.rope_params(dict(c, rope_scaling=ys))
    check("yarn factor 1 == plain rope", np.array_equal(one, plain) and a0 == a1 == s0 == s1 == 1)
    inv, attn, scale = ling_ref.rope_params(dict(c, rope_scaling=dict(ys, factor=8.0)))
    r = inv / plain
    # corr_dim(n) = 64 ln(4096 / (2 pi n)) / (2 ln 6e6): 6.18 for n = 32 (low 6),
    # 13.29 for n = 1 (high 14); the ramp runs over j = 7..13.
    ok = (np.allclose(r[:7], 1) and np.allclose(r[14:], 1 / 8) and
          np.all((r[7:14] < 1) & (r[7:14] > 1 / 8)) and np.all(np.diff(r) <= 1e-15))
    m = 0.1 * np.log(8) + 1
    check("yarn ramp and mscale", ok and attn == 1.0 and np.isclose(scale, m * m),
          f"(kept {np.sum(np.isclose(r, 1))}, divided {np.sum(np.isclose(r, 1 / 8))}, "
          f"softmax x{scale:.4f})")


def check_long_forms(folder):
    """A long input's forms (Model.long, attn_block, forward's rows) on a
    short one: the same float64 sums in another order."""
    m = ling_ref.Model(folder)
    toks = [int(t) for t in np.random.default_rng(7).integers(0, m.V, 40)]
    want, _ = m.forward(toks)
    m.long, m.attn_block = 0, 16        # 40 rows: two blocks of 16 and a ragged one
    got, _ = m.forward(toks)
    e = rel(got, want)
    check("blocked MLA attention, chunked KDA == plain forms", e < 1e-12, f"(rel err {e:.1e})")
    rows = [0, 5, 15, 16, 17, 33, 39]
    for long in (0, 1000):
        m.long = long
        sub, _ = m.forward(toks, rows)
        e = rel(sub, want[rows])
        check(f"logits of some rows == those rows of all (long = {long})", e < 1e-12,
              f"(rel err {e:.1e})")


def check_causal(folder):
    """Appending tokens leaves the logits of earlier positions unchanged."""
    m = ling_ref.Model(folder)
    short, _ = m.forward([5, 9, 14, 3, 7])
    full, _ = m.forward([5, 9, 14, 3, 7, 11, 2, 8])
    e = rel(full[:5], short)
    check("causal: later tokens do not change earlier logits", e < 1e-13, f"(rel err {e:.1e})")


def check_fp32(folder):
    m = ling_ref.Model(folder, np.float32)
    logits, hf = m.forward([1, 2, 3, 4, 5])
    mlog, _ = m.mtp(hf[:-1], [2, 3, 4, 5])
    check("float32 mode stays float32", logits.dtype == np.float32 and mlog.dtype == np.float32,
          f"({logits.dtype}, {mlog.dtype})")


def main():
    rng = np.random.default_rng(1234)
    check_kda(rng)
    check_exl3_vectors()
    check_codebooks()
    check_extraction(rng)
    check_exl3_linear(rng)
    check_yarn()
    if len(sys.argv) > 1:
        check_mla(sys.argv[1], rng)
        check_long_forms(sys.argv[1])
        check_causal(sys.argv[1])
        check_fp32(sys.argv[1])
    if failures:
        print(f"{len(failures)} self-check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
