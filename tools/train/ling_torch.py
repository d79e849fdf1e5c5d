"""Ling-3 (bailing_hybrid) in PyTorch, as the runtime runs it.

Written from spec ling-arch.md 1.3-1.10 and 2.4: KDA with the safe gate
(chunked WY form), gated MLA with interleaved RoPE, dense SwiGLU MLP, MoE
with the sigmoid router, expert bias, group-limited top-k and clamped
SwiGLU, shared expert, and the MTP layer at index num_hidden_layers.
Parameter and buffer names are the checkpoint's tensor names, so
state_dict() is the checkpoint.  tests/test_equiv.py proves this equals
tests/reference/ling_ref.py.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def l2_norm(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


class Norm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def linear(i, o):
    return nn.Linear(i, o, bias=False)


class Conv(nn.Module):
    """Depthwise causal conv, weight [C, 1, W] (zeros before position 0)."""

    def __init__(self, c, w):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(c, 1, w))

    def forward(self, x):                      # [B, T, C]
        w = self.weight.shape[-1]
        y = F.conv1d(F.pad(x.transpose(1, 2), (w - 1, 0)), self.weight,
                     groups=x.shape[-1])
        return y.transpose(1, 2)


def delta_rule_chunked(q, k, v, g, beta, chunk):
    """Spec 2.4 (WY form) over [B, h, T, K/V]; returns o [B, h, T, V].

    Relative decays exp(G_i - G_j) are factored around the chunk's middle
    token, so each factor stays within exp(chunk/2 * |lower bound|)."""
    B, h, T, K = k.shape
    V = v.shape[-1]
    pad = (-T) % chunk
    if pad:
        q, k, v, g = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v, g))
        beta = F.pad(beta, (0, pad))
    n = (T + pad) // chunk
    q, k, g = (t.reshape(B, h, n, chunk, K) for t in (q, k, g))
    v = v.reshape(B, h, n, chunk, V)
    beta = beta.reshape(B, h, n, chunk, 1)
    G = g.cumsum(-2)
    Gm = G[..., chunk // 2:chunk // 2 + 1, :]
    kpos, kneg = k * (G - Gm).exp(), k * (Gm - G).exp()
    eye = torch.eye(chunk, dtype=k.dtype, device=k.device)
    N = torch.tril(kpos @ kneg.transpose(-1, -2), -1) * beta
    rhs = torch.cat([G.exp() * k, v], -1) * beta
    WU = torch.linalg.solve_triangular(eye + N, rhs, upper=False, unitriangular=True)
    W, U = WU[..., :K], WU[..., K:]
    Aqk = torch.tril((q * (G - Gm).exp()) @ kneg.transpose(-1, -2))
    qg = q * G.exp()
    Glast = G[..., -1:, :]
    kl = (k * (Glast - G).exp()).transpose(-1, -2)      # [B, h, n, K, C]
    S = torch.zeros(B, h, K, V, dtype=v.dtype, device=v.device)
    out = []
    for c in range(n):
        Vn = U[:, :, c] - W[:, :, c] @ S
        out.append(qg[:, :, c] @ S + Aqk[:, :, c] @ Vn)
        S = Glast[:, :, c].transpose(-1, -2).exp() * S + kl[:, :, c] @ Vn
    return torch.stack(out, 2).reshape(B, h, n * chunk, V)[:, :, :T]


class KDA(nn.Module):
    """Spec 1.5: Ling KDA, full-rank f/g projections, safe gate."""

    def __init__(self, c):
        super().__init__()
        H, self.nh, self.K = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
        P = self.nh * self.K
        W = c["short_conv_kernel_size"]
        self.eps = c["rms_norm_eps"]
        self.lower = c.get("kda_lower_bound", -5.0)
        if not c.get("kda_safe_gate", True):
            raise NotImplementedError("only the safe KDA gate (kda_safe_gate true)")
        # exp(chunk / 2 * |lower|) must not overflow float32 (e^88).
        self.chunk = max(2, min(64, int(80 / abs(self.lower))) // 2 * 2)
        for n in ("q", "k", "v"):
            setattr(self, f"{n}_proj", linear(H, P))
            setattr(self, f"{n}_conv1d", Conv(P, W))
        self.f_proj, self.g_proj, self.b_proj = linear(H, P), linear(H, P), linear(H, self.nh)
        self.A_log = nn.Parameter(torch.zeros(self.nh))
        self.dt_bias = nn.Parameter(torch.zeros(P))
        self.o_norm = Norm(self.K, self.eps)
        self.o_proj = linear(P, H)

    def forward(self, x, pos):
        B, T, _ = x.shape
        nh, K = self.nh, self.K

        def heads(t):                                   # [B, T, P] -> [B, h, T, K]
            return t.reshape(B, T, nh, -1).transpose(1, 2)
        q, k, v = (heads(F.silu(getattr(self, f"{n}_conv1d")(getattr(self, f"{n}_proj")(x))))
                   for n in ("q", "k", "v"))
        a = self.A_log.exp()[None, :, None, None]
        g = self.lower * torch.sigmoid(a * heads(self.f_proj(x) + self.dt_bias))
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)
        o = delta_rule_chunked(l2_norm(q) * K ** -0.5, l2_norm(k), v, g, beta, self.chunk)
        o = o.transpose(1, 2)                           # [B, T, h, V]
        o = self.o_norm(o) * torch.sigmoid(self.g_proj(x)).reshape(B, T, nh, K)
        return self.o_proj(o.reshape(B, T, nh * K))


def rope_interleaved(x, cos, sin):
    """Rotate pairs (x_2j, x_2j+1) by pos * inv_freq[j]; cos/sin [T, d/2]."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)


class MLA(nn.Module):
    """Spec 1.6: gated MLA (plain q_proj), naive form, head-wise sigmoid gate."""

    def __init__(self, c):
        super().__init__()
        H, self.nh = c["hidden_size"], c["num_attention_heads"]
        self.dn, self.dr, self.dv = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.r = c["kv_lora_rank"]
        if c.get("q_lora_rank") or c.get("rope_scaling"):
            raise NotImplementedError("q_lora_rank and rope_scaling must be null")
        self.q_proj = linear(H, self.nh * (self.dn + self.dr))
        self.kv_a_proj_with_mqa = linear(H, self.r + self.dr)
        self.kv_a_layernorm = Norm(self.r, c["rms_norm_eps"])
        self.kv_b_proj = linear(self.r, self.nh * (self.dn + self.dv))
        self.g_proj = linear(H, self.nh)
        self.dense = linear(self.nh * self.dv, H)
        self.theta = c["rope_theta"]
        self.scale = (self.dn + self.dr) ** -0.5

    def forward(self, x, pos):
        B, T, _ = x.shape
        nh, dn, dr = self.nh, self.dn, self.dr
        inv = self.theta ** (-torch.arange(0, dr, 2, dtype=torch.float64) / dr)
        ang = pos.to(torch.float64)[:, None] * inv[None]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        q = self.q_proj(x).reshape(B, T, nh, dn + dr).transpose(1, 2)
        ckv = self.kv_a_proj_with_mqa(x)
        lat = self.kv_a_layernorm(ckv[..., :self.r])
        q_pe = rope_interleaved(q[..., dn:], cos, sin)
        k_pe = rope_interleaved(ckv[..., self.r:], cos, sin)[:, None]
        kv = self.kv_b_proj(lat).reshape(B, T, nh, dn + self.dv).transpose(1, 2)
        s = (q[..., :dn] @ kv[..., :dn].transpose(-1, -2) +
             q_pe @ k_pe.transpose(-1, -2)) * self.scale
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), -1)
        o = (p @ kv[..., dn:]) * torch.sigmoid(self.g_proj(x)).transpose(1, 2)[..., None]
        return self.dense(o.transpose(1, 2).reshape(B, T, nh * self.dv))


class SwiGLU(nn.Module):
    """down(min(silu(g), L) * clamp(u, -L, L)); no clamp when L == 0."""

    def __init__(self, H, inter, limit):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = linear(H, inter), linear(H, inter), linear(inter, H)
        self.limit = limit

    def forward(self, x):
        a, u = F.silu(self.gate_proj(x)), self.up_proj(x)
        if self.limit:
            a, u = a.clamp(max=self.limit), u.clamp(-self.limit, self.limit)
        return self.down_proj(a * u)


class Gate(nn.Module):
    """Router weight [E, H] and the load-balancing expert_bias [E] (a buffer:
    selection only, moved by MoE.balance, never by the gradient)."""

    def __init__(self, H, E):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(E, H))
        self.register_buffer("expert_bias", torch.zeros(E))


class MoE(nn.Module):
    """Spec 1.8: sigmoid router, expert bias, group-limited top-k, routed
    scaling, clamped SwiGLU experts and the shared expert."""

    def __init__(self, c, limit, shared_limit):
        super().__init__()
        H, E = c["hidden_size"], c["num_experts"]
        self.E, self.k = E, c["num_experts_per_tok"]
        self.ng, self.kg = c["n_group"], c["topk_group"]
        self.scale = c["routed_scaling_factor"]
        self.norm = c.get("norm_topk_prob", True) and self.k > 1
        self.use_bias = c.get("moe_router_enable_expert_bias", True)
        if c.get("score_function", c.get("scoring_func", "sigmoid")) != "sigmoid":
            raise NotImplementedError("only the sigmoid router")
        self.gate = Gate(H, E)
        self.experts = nn.ModuleList(SwiGLU(H, c["moe_intermediate_size"], limit)
                                     for _ in range(E))
        ns = c.get("num_shared_experts") or 0
        self.shared_experts = (SwiGLU(H, c["moe_shared_expert_intermediate_size"] * ns,
                                      shared_limit) if ns else None)
        self.load = None                    # tokens per expert of the last forward

    def route(self, x):
        s = torch.sigmoid(x @ self.gate.weight.t())
        with torch.no_grad():
            sb = s + self.gate.expert_bias.to(s.dtype) if self.use_bias else s.clone()
            N = sb.shape[0]
            grp = sb.reshape(N, self.ng, -1).topk(2, -1).values.sum(-1)
            keep = torch.zeros(N, self.ng, dtype=torch.bool, device=x.device)
            keep.scatter_(1, grp.topk(self.kg, -1).indices, True)
            sb = sb.masked_fill(~keep.repeat_interleave(self.E // self.ng, 1), float("-inf"))
            idx = sb.topk(self.k, -1).indices
        w = s.gather(1, idx)
        if self.norm:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * self.scale

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        idx, w = self.route(x)
        self.load = torch.bincount(idx.flatten(), minlength=self.E)
        y = torch.zeros_like(x)
        for e in range(self.E):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel():
                y = y.index_add(0, rows, w[rows, slot, None] * self.experts[e](x[rows]))
        if self.shared_experts is not None:
            y = y + self.shared_experts(x)
        return y.reshape(shape)

    @torch.no_grad()
    def balance(self, rate):
        """Aux-loss-free balancing (DeepSeek-V3): raise the bias of experts
        under the mean load, lower it over."""
        if self.load is not None:
            load = self.load.to(self.gate.expert_bias.dtype)
            self.gate.expert_bias += rate * torch.sign(load.mean() - load)


class Layer(nn.Module):
    def __init__(self, c, i, mtp=False):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        L, g = c["num_hidden_layers"], c["layer_group_size"]

        def limit(key):
            lst = c.get(key) or []
            return float(lst[i]) if i < len(lst) and lst[i] else 0.0
        self.input_layernorm = Norm(H, eps)
        mla = (i + 1) % g == 0 or i >= (L // g) * g
        self.attention = MLA(c) if mla else KDA(c)
        self.post_attention_layernorm = Norm(H, eps)
        if i < c["first_k_dense_replace"]:
            self.mlp = SwiGLU(H, c["intermediate_size"], 0.0)
        else:
            self.mlp = MoE(c, limit("expert_swiglu_limit_list"),
                           limit("share_expert_swiglu_limit_list"))
        if mtp:
            self.enorm, self.hnorm = Norm(H, eps), Norm(H, eps)
            self.eh_proj = linear(2 * H, H)
            self.final_layernorm = Norm(H, eps)

    def forward(self, h, pos):
        h = h + self.attention(self.input_layernorm(h), pos)
        return h + self.mlp(self.post_attention_layernorm(h))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        L, H = c["num_hidden_layers"], c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], H)
        self.layers = nn.ModuleList([Layer(c, i) for i in range(L)] + [Layer(c, L, mtp=True)])
        self.norm = Norm(H, c["rms_norm_eps"])


class Ling(nn.Module):
    """The whole model; state_dict() names are the checkpoint's."""

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        self.L = c["num_hidden_layers"]
        self.model = Body(c)
        self.lm_head = linear(c["hidden_size"], c["vocab_size"])

    def forward(self, tokens):
        """tokens [B, T] -> (logits [B, T, V], final-normed hidden [B, T, H])."""
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        h = self.model.word_embeddings(tokens)
        for layer in self.model.layers[:self.L]:
            h = layer(h, pos)
        hf = self.model.norm(h)
        return self.lm_head(hf), hf

    def mtp(self, hidden, next_tokens):
        """Spec 1.10: row t takes hidden t and token t+1 at position t and
        predicts token t+2; returns (logits, MTP output hidden)."""
        m = self.model.layers[self.L]
        pos = torch.arange(next_tokens.shape[1], device=next_tokens.device)
        e = m.enorm(self.model.word_embeddings(next_tokens))
        z = m.eh_proj(torch.cat([e, m.hnorm(hidden)], -1))
        out = m.final_layernorm(m(z, pos))
        return self.lm_head(out), out

    def moes(self):
        return [m for m in self.modules() if isinstance(m, MoE)]

    @torch.no_grad()
    def init_weights(self, seed):
        """Training init: N(0, 0.02) linears and embedding, residual outputs
        scaled by 1/sqrt(2 * layers), KDA decay as in fla (A in [1, 16],
        dt in [1e-3, 0.1] through softplus^-1), norms 1, expert bias 0."""
        gen = torch.Generator().manual_seed(seed)
        resid = 0.02 / math.sqrt(2 * (self.L + 1))
        for name, p in self.named_parameters():
            leaf = name.split(".")[-2] if name.endswith(".weight") else name.split(".")[-1]
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif leaf.endswith("conv1d"):
                w = p.shape[-1]
                p.uniform_(-w ** -0.5, w ** -0.5, generator=gen)
            elif leaf == "A_log":
                p.uniform_(1.0, 16.0, generator=gen).log_()
            elif leaf == "dt_bias":
                dt = torch.empty(p.shape).uniform_(math.log(1e-3), math.log(0.1),
                                                   generator=gen).exp()
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif leaf in ("o_proj", "dense", "down_proj"):
                p.normal_(0.0, resid, generator=gen)
            else:
                p.normal_(0.0, 0.02, generator=gen)
        for m in self.moes():
            m.gate.expert_bias.zero_()
