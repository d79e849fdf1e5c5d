#!/usr/bin/python3
"""Independent float64 reference of the Ling-3 (bailing_hybrid) forward pass.

Written from spec ling-arch.md (1.3-1.10, 2.3-2.4, 3.2-3.3) with numpy only;
it shares no code with the runtime.  Weights are read from the checkpoint's
safetensors (bf16/fp16/fp32, or EXL3 linears decoded by exl3_np) and widened
to float64; every activation stays float64.

    ling_ref.py MODEL_DIR --tokens 1,2,3 --out logits.f32 [--hidden-rms]
                [--mtp-out mtp.f32]

writes float32 little-endian logits [n_tokens, vocab_size]; --mtp-out adds the
MTP layer's draft logits [n_tokens - 1, vocab_size] (row t: hidden t and token
t+1, predicting token t+2).  --generate N extends the tokens greedily by N,
prints the new ids, and writes the logits of every step (prompt rows, then one
row per generated token but the last: n_tokens + N - 1 rows).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exl3_np  # noqa: E402
from safetensors_np import Checkpoint  # noqa: E402


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))     # no overflow for large |x|


def silu(x):
    return x * sigmoid(x)


def softplus(x):
    return np.logaddexp(0.0, x)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def l2_norm(x, eps=1e-6):
    """Spec 1.5: x / sqrt(sum x^2 + eps) over the last axis."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def causal_conv(x, w):
    """Depthwise causal conv: y_t[c] = sum_j w[c, 0, j] x_{t-W+1+j}[c] (zeros before 0)."""
    T, W = x.shape[0], w.shape[-1]
    xp = np.concatenate([np.zeros((W - 1, x.shape[1]), dtype=x.dtype), x], axis=0)
    return sum(w[:, 0, j] * xp[j:j + T] for j in range(W))


def kda_recurrent(q, k, v, g, beta):
    """Spec 2.3 per head: decay, delta with the decayed state, write, read.

    q, k: [T, nH, K] (q already scaled), v: [T, nH, V], g: [T, nH, K] log-decay,
    beta: [T, nH].  Returns o [T, nH, V] and the final state [nH, K, V].
    """
    T, nH, K = k.shape
    S = np.zeros((nH, K, v.shape[-1]), dtype=v.dtype)
    o = np.empty_like(v)
    for t in range(T):
        S = S * np.exp(g[t])[:, :, None]
        u = beta[t][:, None] * (v[t] - np.einsum("hkv,hk->hv", S, k[t]))
        S = S + k[t][:, :, None] * u[:, None, :]
        o[t] = np.einsum("hkv,hk->hv", S, q[t])
    return o, S


def kda_chunked(q, k, v, g, beta, chunk=64):
    """Spec 2.4: the WY (chunked) form; equal to kda_recurrent up to rounding."""
    T, nH, K = k.shape
    V = v.shape[-1]
    o = np.empty((T, nH, V))
    S_out = np.empty((nH, K, V))
    for h in range(nH):
        S = np.zeros((K, V))
        for c0 in range(0, T, chunk):
            sl = slice(c0, min(c0 + chunk, T))
            qc, kc, vc, bc = q[sl, h], k[sl, h], v[sl, h], beta[sl, h]
            G = np.cumsum(g[sl, h], axis=0)                            # [C, K]
            C = kc.shape[0]
            # Relative exponents only: exp(G_i - G_j) for j <= i never overflows.
            D = np.exp(np.minimum(G[:, None, :] - G[None, :, :], 0.0))  # [C, C, K]
            kk = np.einsum("id,jd,ijd->ij", kc, kc, D)
            N = np.tril(bc[:, None] * kk, -1)
            Tm = np.linalg.solve(np.eye(C) + N, np.diag(bc))
            W = Tm @ (np.exp(G) * kc)
            U = Tm @ vc
            Vn = U - W @ S
            Aqk = np.tril(np.einsum("id,jd,ijd->ij", qc, kc, D))
            o[sl, h] = (qc * np.exp(G)) @ S + Aqk @ Vn
            S = np.exp(G[-1])[:, None] * S + (np.exp(G[-1] - G) * kc).T @ Vn
        S_out[h] = S
    return o, S_out


def causal_softmax(s):
    """Softmax over the last axis of scores [..., T, T], keys after the query masked."""
    T = s.shape[-1]
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def yarn_mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * np.log(factor) + 1.0


def rope_params(c):
    """Spec 3.4: (inv_freq [d/2], cos/sin factor, softmax-scale factor) for the
    rope slice; plain RoPE when rope_scaling is null, else YaRN."""
    d, base = c["qk_rope_head_dim"], c["rope_theta"]
    inv_extrap = base ** (-np.arange(0, d, 2) / d)
    rs = c.get("rope_scaling")
    if not rs:
        return inv_extrap, 1.0, 1.0
    kind = rs.get("rope_type", rs.get("type"))
    if kind != "yarn":
        raise NotImplementedError(f"rope_scaling type {kind!r}")
    f = rs["factor"]
    orig = rs.get("original_max_position_embeddings", c["max_position_embeddings"])
    m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")

    def corr_dim(n_rot):
        return d * np.log(orig / (n_rot * 2 * np.pi)) / (2 * np.log(base))

    low = max(np.floor(corr_dim(rs.get("beta_fast", 32))), 0)
    high = min(np.ceil(corr_dim(rs.get("beta_slow", 1))), d - 1)
    if high == low:
        high += 0.001                 # HF's guard against a zero-width ramp
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0, 1)
    extrap = 1 - ramp                 # the share of each frequency left unscaled
    inv = inv_extrap / f * (1 - extrap) + inv_extrap * extrap
    attn = yarn_mscale(f, m) / yarn_mscale(f, m_all) if m and m_all else yarn_mscale(f, 1.0)
    scale = yarn_mscale(f, m_all) ** 2 if m_all else 1.0
    return inv, attn, scale


def rope_interleaved(x, pos, inv_freq, attn=1.0):
    """Rotate pairs (x_2j, x_2j+1) by pos * inv_freq[j] (GPT-J style), scaled by
    attn (YaRN's magnitude factor); x: [T, ..., d]."""
    d = x.shape[-1]
    ang = pos[:, None] * inv_freq[None, :]                              # [T, d/2]
    shape = (x.shape[0],) + (1,) * (x.ndim - 2) + (d // 2,)
    cos = (attn * np.cos(ang)).reshape(shape).astype(x.dtype)
    sin = (attn * np.sin(ang)).reshape(shape).astype(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


class Model:
    """A loaded checkpoint: config, layer schedule and float64 weights."""

    def __init__(self, folder, dtype=np.float64):
        with open(os.path.join(folder, "config.json")) as f:
            self.cfg = json.load(f)
        c = self.cfg
        if c.get("model_type") != "bailing_hybrid":
            raise ValueError(f"{folder}/config.json: model_type {c.get('model_type')!r} "
                             "is not bailing_hybrid")
        score = c.get("score_function", c.get("scoring_func", "sigmoid"))
        if score != "sigmoid":
            raise NotImplementedError(f"{folder}/config.json: score function {score!r}")
        self.ckpt = Checkpoint(folder)
        self.L = c["num_hidden_layers"]
        self.eps = c["rms_norm_eps"]
        self.H = c["hidden_size"]
        self.V = c["vocab_size"]
        try:
            self.rope_inv_freq, self.rope_attn, self.softmax_mult = rope_params(c)
        except NotImplementedError as e:
            raise NotImplementedError(f"{folder}/config.json: {e}") from None
        self.dtype = dtype         # float32 sizes an fp32 implementation's rounding
        # Inputs longer than `long` tokens take the forms whose cost stays
        # bounded: MLA attention in blocks of attn_block query rows
        # (mla_blocked, memory linear in T), KDA in its chunked form.
        self.long = 512
        self.attn_block = 512
        self._cache = {}
        self.trace = None          # a list to collect per-layer statistics in

    # Schedule (spec 1.3); the MTP layer at index L is MLA + MoE.
    def is_mla(self, i):
        g = self.cfg["layer_group_size"]
        return (i + 1) % g == 0 or i >= (self.L // g) * g

    def is_dense(self, i):
        return i < self.cfg["first_k_dense_replace"]

    def limit(self, key, i):
        lst = self.cfg.get(key) or []
        return float(lst[i]) if i < len(lst) and lst[i] else 0.0

    # Weights
    def vec(self, name, *shape):
        """A float tensor as float64, its shape checked when given."""
        v = self.ckpt.f64(name).astype(self.dtype)
        if shape and v.shape != shape:
            raise ValueError(f"{name}: shape {v.shape}, expected {list(shape)}")
        return v

    def lin(self, prefix, out, inp):
        """The linear `prefix` as float64 [out, in], from .weight or EXL3."""
        w = self._cache.get(prefix)
        if w is None:
            if exl3_np.is_exl3(self.ckpt, prefix):
                w = exl3_np.Linear(self.ckpt, prefix).weight()
                if w.shape[0] < out or w.shape[1] < inp:
                    raise ValueError(f"{prefix}: EXL3 shape {w.shape} < [{out}, {inp}]")
                w = w[:out, :inp]                  # drop the 128-padding
            else:
                w = self.vec(prefix + ".weight")
            if w.shape != (out, inp):
                raise ValueError(f"{prefix}: shape {w.shape}, expected [{out}, {inp}]")
            w = w.astype(self.dtype)
            self._cache[prefix] = w
        return w

    def linear(self, x, prefix, out):
        return x @ self.lin(prefix, out, x.shape[-1]).T

    def _note(self, **kv):
        if self.trace is not None:
            self.trace.append(kv)

    # Attention
    def delta_rule(self, q, k, v, g, beta):
        if q.shape[0] > self.long and q.dtype == np.float64:   # chunked is float64
            return kda_chunked(q, k, v, g, beta, chunk=32)
        return kda_recurrent(q, k, v, g, beta)

    def rope(self, x, pos):
        return rope_interleaved(x, pos, self.rope_inv_freq, self.rope_attn)

    def kda(self, x, p):
        """Spec 1.5: Ling KDA (safe gate), recurrent form."""
        c = self.cfg
        T = x.shape[0]
        nH, K = c["num_attention_heads"], c["head_dim"]
        P = nH * K
        W = c["short_conv_kernel_size"]
        q, k, v = (silu(causal_conv(self.linear(x, f"{p}.{n}_proj", P),
                                    self.vec(f"{p}.{n}_conv1d.weight", P, 1, W)))
                   for n in ("q", "k", "v"))
        graw = (self.linear(x, f"{p}.f_proj", P) + self.vec(f"{p}.dt_bias", P)).reshape(T, nH, K)
        a = np.exp(self.vec(f"{p}.A_log", nH))[None, :, None]
        if c.get("kda_safe_gate", True):
            g = c.get("kda_lower_bound", -5.0) * sigmoid(a * graw)
        else:
            g = -a * softplus(graw)
        beta = sigmoid(self.linear(x, f"{p}.b_proj", nH))
        qh = l2_norm(q.reshape(T, nH, K)) * K ** -0.5
        kh = l2_norm(k.reshape(T, nH, K))
        o, _ = self.delta_rule(qh, kh, v.reshape(T, nH, K), g, beta)
        gate = sigmoid(self.linear(x, f"{p}.g_proj", P)).reshape(T, nH, K)
        o = rms_norm(o, self.vec(f"{p}.o_norm.weight", K), self.eps) * gate
        return self.linear(o.reshape(T, P), f"{p}.o_proj", self.H)

    def qk_scale(self):
        """qk_head_dim^-0.5, times YaRN's mscale(mscale_all_dim)^2 as HF applies it."""
        c = self.cfg
        return (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5 * self.softmax_mult

    def mla_project(self, x, p, pos):
        """q, the latent c and roped k_pe of spec 1.6 (shared by both forms)."""
        c = self.cfg
        T = x.shape[0]
        nH, dn, dr = c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"]
        r = c["kv_lora_rank"]
        if c.get("q_lora_rank"):
            qa = rms_norm(self.linear(x, f"{p}.q_a_proj", c["q_lora_rank"]),
                          self.vec(f"{p}.q_a_layernorm.weight", c["q_lora_rank"]), self.eps)
            q = self.linear(qa, f"{p}.q_b_proj", nH * (dn + dr))
        else:
            q = self.linear(x, f"{p}.q_proj", nH * (dn + dr))
        q = q.reshape(T, nH, dn + dr)
        ckv = self.linear(x, f"{p}.kv_a_proj_with_mqa", r + dr)
        lat = rms_norm(ckv[:, :r], self.vec(f"{p}.kv_a_layernorm.weight", r), self.eps)
        q_pe = self.rope(q[..., dn:], pos)
        k_pe = self.rope(ckv[:, r:], pos)
        return q[..., :dn], q_pe, lat, k_pe

    def mla(self, x, p, pos, rows=None):
        """Spec 1.6 / 3.2: gated MLA, naive (expanded K and V) form.  With
        `rows` (ascending positions), the output of those rows only: keys and
        values of every position, queries of these."""
        c = self.cfg
        T = x.shape[0]
        nH, dn, dv = c["num_attention_heads"], c["qk_nope_head_dim"], c["v_head_dim"]
        q_nope, q_pe, lat, k_pe = self.mla_project(x, p, pos)
        kv = self.linear(lat, f"{p}.kv_b_proj", nH * (dn + dv)).reshape(T, nH, dn + dv)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        if rows is not None:
            o = self.mla_blocked(q_nope[rows], q_pe[rows], k_nope, k_pe, v, np.asarray(rows))
            x = x[rows]
        elif T > self.long:
            o = self.mla_blocked(q_nope, q_pe, k_nope, k_pe, v, np.arange(T))
        else:
            pr = causal_softmax((np.einsum("thd,shd->hts", q_nope, k_nope) +
                                 np.einsum("thd,sd->hts", q_pe, k_pe)) * self.qk_scale())
            o = np.einsum("hts,shd->thd", pr, v)
        o = o * sigmoid(self.linear(x, f"{p}.g_proj", nH))[:, :, None]
        return self.linear(o.reshape(x.shape[0], nH * dv), f"{p}.dense", self.H)

    def mla_blocked(self, q_nope, q_pe, k_nope, k_pe, v, qpos):
        """mla()'s attention a head and attn_block queries at a time, each
        query's softmax exact over keys 0..its position: the same sums as
        the whole [nH, T, T] square of causal_softmax (equal up to the order
        of float64 sums), in memory linear in T.  q_nope [N, nH, dn], q_pe
        [N, nH, dr] at ascending positions qpos [N]; k_nope [T, nH, dn],
        k_pe [T, dr], v [T, nH, dv]; returns o [N, nH, dv]."""
        N, nH, dv = q_nope.shape[0], v.shape[1], v.shape[2]
        kp = np.ascontiguousarray(k_pe)
        o = np.empty((N, nH, dv), dtype=v.dtype)
        for h in range(nH):
            qn, qp = np.ascontiguousarray(q_nope[:, h]), np.ascontiguousarray(q_pe[:, h])
            kn, vh = np.ascontiguousarray(k_nope[:, h]), np.ascontiguousarray(v[:, h])
            for b0 in range(0, N, self.attn_block):
                b1 = min(b0 + self.attn_block, N)
                qb = qpos[b0:b1]
                n = qb[-1] + 1                 # keys 0..n-1: all any query here sees
                s = qn[b0:b1] @ kn[:n].T
                s += qp[b0:b1] @ kp[:n].T
                s *= self.qk_scale()
                tail = s[:, qb[0] + 1:]        # keys after the block's first query
                tail[np.arange(qb[0] + 1, n)[None, :] > qb[:, None]] = -np.inf
                s -= s.max(axis=-1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(axis=-1, keepdims=True)
                o[b0:b1, h] = s @ vh[:n]
        return o

    def mla_absorbed(self, x, p, pos):
        """Spec 3.3: the same layer with W_UK / W_UV absorbed (MQA over the latent)."""
        c = self.cfg
        T = x.shape[0]
        nH, dn, dv, r = (c["num_attention_heads"], c["qk_nope_head_dim"],
                         c["v_head_dim"], c["kv_lora_rank"])
        q_nope, q_pe, lat, k_pe = self.mla_project(x, p, pos)
        wkvb = self.lin(f"{p}.kv_b_proj", nH * (dn + dv), r).reshape(nH, dn + dv, r)
        w_uk, w_uv = wkvb[:, :dn], wkvb[:, dn:]
        q_lat = np.einsum("thd,hdr->thr", q_nope, w_uk)
        pr = causal_softmax((np.einsum("thr,sr->hts", q_lat, lat) +
                             np.einsum("thd,sd->hts", q_pe, k_pe)) * self.qk_scale())
        o = np.einsum("thr,hdr->thd", np.einsum("hts,sr->thr", pr, lat), w_uv)
        o = o * sigmoid(self.linear(x, f"{p}.g_proj", nH))[:, :, None]
        return self.linear(o.reshape(T, nH * dv), f"{p}.dense", self.H)

    # FFN
    def swiglu(self, x, p, inter, limit):
        """Spec 1.8: down(min(silu(g), L) * clamp(u, -L, L)); no clamp when L == 0."""
        a = silu(self.linear(x, f"{p}.gate_proj", inter))
        u = self.linear(x, f"{p}.up_proj", inter)
        if limit:
            self._note(clamped=float(np.mean((a > limit) | (np.abs(u) > limit))))
            a, u = np.minimum(a, limit), np.clip(u, -limit, limit)
        return self.linear(a * u, f"{p}.down_proj", self.H)

    def route(self, x, p):
        """Spec 1.8 router: expert ids [T, k] and weights [T, k]."""
        c = self.cfg
        E, k = c["num_experts"], c["num_experts_per_tok"]
        ng, kg = c["n_group"], c["topk_group"]
        s = sigmoid(self.linear(x, f"{p}.gate", E))
        bias_name = f"{p}.gate.expert_bias"
        if not self.ckpt.has(bias_name):
            bias_name = f"{p}.gate.e_score_correction_bias"
        use_bias = c.get("moe_router_enable_expert_bias", True)
        sb = s + (self.vec(bias_name, E) if use_bias else 0.0)
        T = x.shape[0]
        grp = np.sort(sb.reshape(T, ng, E // ng), axis=-1)[..., -2:].sum(axis=-1)
        keep = np.argsort(-grp, axis=-1, kind="stable")[:, :kg]
        mask = np.zeros((T, ng), dtype=bool)
        np.put_along_axis(mask, keep, True, axis=-1)
        sb = np.where(np.repeat(mask, E // ng, axis=-1), sb, -np.inf)
        idx = np.argsort(-sb, axis=-1, kind="stable")[:, :k]
        w = np.take_along_axis(s, idx, axis=-1)
        if c.get("norm_topk_prob", True) and k > 1:
            w = w / (w.sum(axis=-1, keepdims=True) + 1e-20)
        return idx, w * c["routed_scaling_factor"]

    def moe(self, x, p, i):
        c = self.cfg
        idx, w = self.route(x, p)
        y = np.zeros_like(x)
        lim = self.limit("expert_swiglu_limit_list", i)
        for e in np.unique(idx):
            rows, slot = np.nonzero(idx == e)
            y[rows] += w[rows, slot][:, None] * self.swiglu(
                x[rows], f"{p}.experts.{e}", c["moe_intermediate_size"], lim)
        ns = c.get("num_shared_experts") or 0
        if ns:
            y += self.swiglu(x, f"{p}.shared_experts",
                             c["moe_shared_expert_intermediate_size"] * ns,
                             self.limit("share_expert_swiglu_limit_list", i))
        return y

    # Layers
    def layer(self, h, i, pos, rows=None):
        """Layer i on h [T, H]; with `rows` (ascending positions), returns
        the output of those rows only."""
        p = f"model.layers.{i}"
        x = rms_norm(h, self.vec(f"{p}.input_layernorm.weight", self.H), self.eps)
        if self.is_mla(i):
            a = (self.mla(x, f"{p}.attention", pos) if rows is None
                 else self.mla(x, f"{p}.attention", pos, rows))
        else:
            a = self.kda(x, f"{p}.attention")
            a = a if rows is None else a[rows]
        h = (h if rows is None else h[rows]) + a
        x = rms_norm(h, self.vec(f"{p}.post_attention_layernorm.weight", self.H), self.eps)
        if self.is_dense(i):
            h = h + self.swiglu(x, f"{p}.mlp", self.cfg["intermediate_size"], 0.0)
        else:
            h = h + self.moe(x, f"{p}.mlp", i)
        self._note(layer=i, rms=float(np.sqrt(np.mean(h * h))))
        return h

    def embed(self, tokens):
        tokens = np.asarray(tokens)
        if tokens.size == 0 or tokens.min() < 0 or tokens.max() >= self.V:
            raise ValueError(f"token ids must be in 0..{self.V - 1}")
        return self.vec("model.word_embeddings.weight", self.V, self.H)[tokens]

    def head(self, h):
        return self.linear(h, "lm_head", self.V)

    def forward(self, tokens, rows=None):
        """Spec 1.4: returns (logits [T, V], final-normed hidden [T, H]).
        With `rows` (ascending positions), those rows of both only: the last
        layer's queries, FFN and the head run for these rows alone, which
        nothing else reads (what a long input's sampled check needs)."""
        pos = np.arange(len(tokens), dtype=np.float64)
        h = self.embed(tokens)
        if rows is not None:
            rows = np.asarray(rows)
            if rows.ndim != 1 or np.any(np.diff(rows) <= 0) or \
                    (rows.size and (rows[0] < 0 or rows[-1] >= len(tokens))):
                raise ValueError("rows must be ascending positions of the input")
        for i in range(self.L):
            h = self.layer(h, i, pos, rows if i == self.L - 1 else None)
        hf = rms_norm(h, self.vec("model.norm.weight", self.H), self.eps)
        return self.head(hf), hf

    def mtp(self, hidden, next_tokens):
        """Spec 1.10: the MTP layer at index L.  Row t takes the final-normed
        hidden of position t and token t+1, at position t; returns the draft
        logits (predicting token t+2) and the MTP output hidden."""
        p = f"model.layers.{self.L}"
        pos = np.arange(len(next_tokens), dtype=np.float64)
        e = rms_norm(self.embed(next_tokens), self.vec(f"{p}.enorm.weight", self.H), self.eps)
        hh = rms_norm(hidden, self.vec(f"{p}.hnorm.weight", self.H), self.eps)
        z = self.linear(np.concatenate([e, hh], axis=-1), f"{p}.eh_proj", self.H)
        z = self.layer(z, self.L, pos)
        out = rms_norm(z, self.vec(f"{p}.final_layernorm.weight", self.H), self.eps)
        return self.head(out), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="checkpoint folder (config.json + safetensors)")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="logits output, float32 LE [T, vocab]")
    ap.add_argument("--mtp-out", help="MTP draft logits output, float32 LE [T-1, vocab]")
    ap.add_argument("--generate", type=int, default=0, metavar="N",
                    help="greedy-generate N tokens after the prompt and print their ids")
    ap.add_argument("--fp32", action="store_true",
                    help="compute in float32: the rounding error an fp32 implementation "
                         "of the same math has")
    ap.add_argument("--hidden-rms", action="store_true",
                    help="print the residual RMS after each layer and clamp hit rates")
    args = ap.parse_args(argv)
    try:
        tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        ap.error(f"--tokens: not a comma-separated list of ids: {args.tokens!r}")
    try:
        m = Model(args.model, np.float32 if args.fp32 else np.float64)
        if args.hidden_rms:
            m.trace = []
        logits, hf = m.forward(tokens)
        if args.generate > 0:
            new = []
            for _ in range(args.generate):
                new.append(int(np.argmax(logits[-1])))
                if len(new) < args.generate:
                    logits, hf = m.forward(tokens + new)
            print(",".join(map(str, new)))
            tokens = tokens + new[:-1]
        logits.astype("<f4").tofile(args.out)
        if args.mtp_out:
            if len(tokens) < 2:
                raise ValueError("--mtp-out needs at least 2 tokens")
            mlog, _ = m.mtp(hf[:-1], tokens[1:])
            mlog.astype("<f4").tofile(args.mtp_out)
    except (OSError, ValueError, KeyError, NotImplementedError) as e:
        print(f"ling_ref: {e}", file=sys.stderr)
        return 1
    if args.hidden_rms:
        emb = m.embed(tokens)
        print(f"embed   rms {np.sqrt(np.mean(emb * emb)):.4f}")
        clamp = []
        for t in m.trace:
            if "clamped" in t:
                clamp.append(t["clamped"])
            else:
                kind = "mla" if m.is_mla(t["layer"]) else "kda"
                extra = f"  clamp hits {np.mean(clamp):.4f}" if clamp else ""
                print(f"layer {t['layer']:2d} ({kind}) rms {t['rms']:.4f}{extra}")
                clamp = []
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        print(f"logits  std {logits.std():.4f}  mean top-1 prob {p.max(axis=-1).mean():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
