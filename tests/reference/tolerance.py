#!/usr/bin/python3
"""Evidence for the runtime-vs-reference tolerances on a generated model.

    tolerance.py MODEL_DIR

The tolerances (TOL below, used with compare.py) must pass an implementation
that only rounds differently and fail one with a plausible bug:
* the reference evaluated in float32 (what an fp32-activation runtime does
  with the same bf16 weights) must stay inside every tolerance;
* each mutant - the reference with one bug a runtime could have - must break
  at least one.
Prints the metrics of each; exits 1 if the tolerances fail to separate them.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
from ling_ref import Model  # noqa: E402

# max rel err (per row, vs the row's largest |logit|), top-1 agreement, mean KL.
# float32 rounding measures ~1e-6 / 1.0 / 3e-12 on ling-tiny: the margins
# leave room for other summation orders and approximate exp/sigmoid, while
# the mildest bug below (the two clamp lists mixed up) is ~5e-2 / 0.97 / 1e-3.
# A runtime that rounds activations to bf16 lands near the first bugs
# (Bf16Activations, printed for information): it needs its own reference.
TOL = {"max_rel": 1e-3, "min_top1": 0.95, "max_kl": 1e-5}


def within(metrics):
    rel, top1, kl = metrics
    return rel <= TOL["max_rel"] and top1 >= TOL["min_top1"] and kl <= TOL["max_kl"]


class NoClamp(Model):
    def limit(self, key, i):
        return 0.0


class SwappedClampLists(Model):
    def limit(self, key, i):
        other = {"expert_swiglu_limit_list": "share_expert_swiglu_limit_list",
                 "share_expert_swiglu_limit_list": "expert_swiglu_limit_list"}
        return super().limit(other[key], i)


class WrongEps(Model):
    def __init__(self, folder):
        super().__init__(folder)
        self.eps = 1e-5


class NeoxRope(Model):
    """Rotate-half pairing (x_j, x_j+d/2) instead of interleaved pairs."""

    def rope(self, x, pos):
        d = x.shape[-1]
        inter = np.stack([x[..., :d // 2], x[..., d // 2:]], axis=-1).reshape(x.shape)
        y = super().rope(inter, pos)
        return np.concatenate([y[..., 0::2], y[..., 1::2]], axis=-1)


class NoExpertBias(Model):
    def __init__(self, folder):
        super().__init__(folder)
        self.cfg["moe_router_enable_expert_bias"] = False


class NoGroupLimit(Model):
    """Plain top-k over all experts, ignoring n_group / topk_group."""

    def __init__(self, folder):
        super().__init__(folder)
        self.cfg["topk_group"] = self.cfg["n_group"]


class NoRenormalise(Model):
    def __init__(self, folder):
        super().__init__(folder)
        self.cfg["norm_topk_prob"] = False


class DeltaBeforeDecay(Model):
    """The delta correction computed from the state before this step's decay."""

    def delta_rule(self, q, k, v, g, beta):
        T, nH, K = k.shape
        S = np.zeros((nH, K, v.shape[-1]))
        o = np.empty_like(v)
        for t in range(T):
            u = beta[t][:, None] * (v[t] - np.einsum("hkv,hk->hv", S, k[t]))
            S = S * np.exp(g[t])[:, :, None] + k[t][:, :, None] * u[:, None, :]
            o[t] = np.einsum("hkv,hk->hv", S, q[t])
        return o, S


class KimiGate(Model):
    """The Kimi softplus gate instead of Ling's safe gate."""

    def __init__(self, folder):
        super().__init__(folder)
        self.cfg["kda_safe_gate"] = False


class MtpHiddenFirst(Model):
    """MTP input concatenated hidden-first instead of embedding-first."""

    def linear(self, x, prefix, out):
        if prefix.endswith(".eh_proj"):
            x = np.concatenate([x[:, self.H:], x[:, :self.H]], axis=-1)
        return super().linear(x, prefix, out)


class Bf16Activations(Model):
    """Every linear's input and output rounded to bf16 (not a bug: a
    precision policy these tolerances are not meant for)."""

    @staticmethod
    def _bf16(x):
        u = x.astype(np.float32).view(np.uint32)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return u.view(np.float32).astype(np.float64)

    def linear(self, x, prefix, out):
        return self._bf16(super().linear(self._bf16(x), prefix, out))


MUTANTS = [NoClamp, SwappedClampLists, WrongEps, NeoxRope, NoExpertBias, NoGroupLimit,
           NoRenormalise, DeltaBeforeDecay, KimiGate, MtpHiddenFirst]


def run(model, tokens):
    logits, hf = model.forward(tokens)
    mtp, _ = model.mtp(hf[:-1], tokens[1:])
    return logits.astype(np.float64), mtp.astype(np.float64)


def main():
    folder = sys.argv[1]
    ref = Model(folder)
    tokens = [(11 * i + 5) % ref.V for i in range(32)]
    want = run(ref, tokens)
    bad = 0
    print(f"tolerances: {TOL}")
    for name, model in [("float32", Model(folder, np.float32)),
                        ("Bf16Activations", Bf16Activations(folder))] + \
                       [(m.__name__, m(folder)) for m in MUTANTS]:
        if model.dtype == ref.dtype:
            model._cache = ref._cache       # same weights: convert them once
        got = run(model, tokens)
        ms = [compare.metrics(g, w) for g, w in zip(got, want)]
        inside = all(within(m) for m in ms)
        ok = inside if name == "float32" else name == "Bf16Activations" or not inside
        bad += not ok
        line = "  ".join(f"{part} rel {m[0]:.1e} top-1 {m[1]:.3f} KL {m[2]:.1e}"
                         for part, m in zip(("main", "mtp"), ms))
        print(f"{'ok  ' if ok else 'FAIL'} {name:18s} {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
