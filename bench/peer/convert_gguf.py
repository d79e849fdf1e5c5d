#!/usr/bin/python3
"""Convert a Ling-3 (BailingMoeV3, "bailing_hybrid") safetensors checkpoint
to a GGUF file for ik_llama.cpp's `bailingmoe3` architecture.

    convert_gguf.py CHECKPOINT_DIR OUT.gguf [--outtype bf16|f16|f32]
                    [--ik IK_DIR] [--pre NAME] [--name NAME]

CHECKPOINT_DIR holds config.json, tokenizer.json (tokenizer_config.json and
chat_template.jinja optional) and the weights: model.safetensors, or the
shards a model.safetensors.index.json lists, or every *.safetensors there.
The writer is ik_llama.cpp's own gguf-py: --ik IK_DIR (or the environment
variable IK_DIR) names the ik_llama.cpp source tree and IK_DIR/gguf-py is
put on the module path.  Needs numpy; no torch.

--outtype (default bf16) is the type of the weight matrices.  Vectors (norms,
biases, A_log, dt_bias, expert bias), the short-conv kernels and the router
stay float32: they are small, and the router must rank experts exactly as
the checkpoint's fp32 router does.  f32 output is exact (bf16 -> f32) and is
what bench/peer/crosscheck.sh compares logits on.

Mapping (prefix model.layers.N. -> blk.N.; bench/peer/README.md has the
full table): KDA layers keep q/k/v as attn_q/k/v, the convs as
ssm_conv1d_{q,k,v}, f_proj/g_proj as ssm_f_a/ssm_g_a, b_proj as ssm_beta,
ssm_a = exp(A_log) (ik computes lower_bound * sigmoid(ssm_a * (f + dt_bias))),
dt_bias as ssm_dt.bias, o_norm as ssm_norm, o_proj as attn_output.  Gated
MLA layers: kv_b_proj is split per head into attn_k_b (the key half,
transposed to [kv_lora_rank, qk_nope] per head) and attn_v_b, g_proj is
attn_gate, dense is attn_output.  Routed experts are stacked per layer into
ffn_{gate,up,down}_exps; expert_bias is exp_probs_b.bias.  ik tells KDA
layers by attention.head_count_kv = 0 (1 on MLA layers).  The MTP layer
(index num_hidden_layers) is dropped: ik does not run it.

Run ik on these files with -ger (grouped expert routing; llama-bench: -ger 1):
without it ik picks the top-k experts over all groups, ignoring
n_group/topk_group.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

ARCH = "bailingmoe3"

# llama.cpp token types
TT_NORMAL, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED = 1, 3, 4, 5
# ik's llm_expert_gating_func_type
GATING = {"softmax": 1, "sigmoid": 2}


class ConvertError(Exception):
    pass


def fail(msg):
    raise ConvertError(msg)


# ---------------------------------------------------------------- safetensors

ST_DTYPES = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4),
             "F64": (np.float64, 8)}


class Checkpoint:
    """The tensors of a safetensors checkpoint, read lazily with numpy."""

    def __init__(self, folder):
        self.folder = folder
        self.entries = {}  # name -> (path, dtype, shape, begin, end)
        self.maps = {}
        index = os.path.join(folder, "model.safetensors.index.json")
        single = os.path.join(folder, "model.safetensors")
        if os.path.exists(index):
            with open(index, encoding="utf-8") as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        elif os.path.exists(single):
            files = ["model.safetensors"]
        else:
            files = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
        if not files:
            fail(f"{folder}: no model.safetensors, model.safetensors.index.json or *.safetensors")
        for name in files:
            self._read_header(os.path.join(folder, name))

    def _read_header(self, path):
        if not os.path.exists(path):
            fail(f"{path}: shard named by the index is missing")
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                fail(f"{path}: not a safetensors file (short header)")
            (n,) = struct.unpack("<Q", raw)
            header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] not in ST_DTYPES:
                fail(f"{path}: tensor {name} has dtype {info['dtype']}, expected BF16, F16 or F32")
            b, e = info["data_offsets"]
            self.entries[name] = (path, info["dtype"], tuple(info["shape"]), base + b, base + e)

    def __contains__(self, name):
        return name in self.entries

    def names(self):
        return self.entries.keys()

    def shape(self, name):
        if name not in self.entries:
            fail(f"tensor {name} is missing from the checkpoint")
        return self.entries[name][2]

    def get(self, name, shape=None):
        """The tensor as float32, its shape checked against `shape`."""
        if name not in self.entries:
            fail(f"tensor {name} is missing from the checkpoint")
        path, dt, shp, b, e = self.entries[name]
        if shape is not None and tuple(shape) != shp:
            fail(f"tensor {name} has shape {list(shp)}, expected {list(shape)}")
        if path not in self.maps:
            self.maps[path] = np.memmap(path, dtype=np.uint8, mode="r")
        np_dt, size = ST_DTYPES[dt]
        a = np.frombuffer(self.maps[path][b:e], dtype=np_dt)
        if a.size != int(np.prod(shp, dtype=np.int64)):
            fail(f"tensor {name}: {e - b} bytes do not hold shape {list(shp)} of {dt}")
        if dt == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        else:
            a = a.astype(np.float32)
        return a.reshape(shp)


# --------------------------------------------------------------- output types

def to_bf16(a):
    """float32 -> bf16 bits, round to nearest even (exact for bf16 sources)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        r[nan] = 0x7FC0
    return r


class Plan:
    """The tensors to write, in order, each produced when it is written."""

    def __init__(self, outtype, gguf):
        self.outtype = outtype
        self.gguf = gguf
        self.items = []  # (name, shape, kind, producer)
        self.used = set()

    def add(self, name, shape, producer, force_f32=False):
        vector = sum(1 for d in shape if d > 1) < 2
        kind = "f32" if force_f32 or vector or self.outtype == "f32" else self.outtype
        self.items.append((name, tuple(int(s) for s in shape), kind, producer))

    def nbytes(self, shape, kind):
        return int(np.prod(shape, dtype=np.int64)) * (4 if kind == "f32" else 2)

    def encode(self, a, kind):
        if kind == "f32":
            return np.ascontiguousarray(a, dtype=np.float32)
        if kind == "f16":
            big = np.abs(a) > 65504
            if big.any():
                fail(f"{int(big.sum())} values exceed the float16 range; use --outtype bf16")
            return np.ascontiguousarray(a, dtype=np.float16)
        return to_bf16(a)

    def raw_type(self, kind):
        q = self.gguf.GGMLQuantizationType
        return {"f32": q.F32, "f16": q.F16, "bf16": q.BF16}[kind]


# --------------------------------------------------------------------- config

def cfg_get(cfg, key, default=KeyError):
    v = cfg.get(key, None)
    if v is None:
        if default is KeyError:
            fail(f"config.json: required key \"{key}\" is missing or null")
        return default
    return v


def layer_limits(cfg, key, n_layer):
    """The first n_layer entries of a SwiGLU clamp list, or None if unset."""
    v = cfg.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or len(v) < n_layer:
        fail(f"config.json: \"{key}\" must be a list of at least {n_layer} numbers")
    vals = [float(x or 0.0) for x in v[:n_layer]]
    return vals if any(vals) else None


# ------------------------------------------------------------------ tokenizer

def load_tokenizer(folder, cfg, pre_override):
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.exists(path):
        fail(f"{path} is missing (the vocabulary and merges come from it)")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    model = tok.get("model") or {}
    if model.get("type") != "BPE":
        fail(f"{path}: model.type is {model.get('type')!r}; only byte-level BPE is supported")
    if tok.get("normalizer") is not None:
        fail(f"{path}: a normalizer is set; ik's gpt2 tokenizer has none")
    pre = tok.get("pre_tokenizer") or {}
    if pre_override:
        pre_name = pre_override
    elif pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        pre_name = "gpt-2"  # the GPT-2 split regex, then byte-level
    else:
        fail(f"{path}: pre_tokenizer {json.dumps(pre)[:200]} is not plain ByteLevel; "
             "pass --pre NAME with the ik pre-tokenizer whose regex it uses "
             "(names in ik's src/llama-vocab.cpp, e.g. bailingmoe2)")

    n_vocab = int(cfg_get(cfg, "vocab_size"))
    tokens = [None] * n_vocab
    types = [TT_UNUSED] * n_vocab
    for text, i in model["vocab"].items():
        if i >= n_vocab:
            fail(f"{path}: token {text!r} has id {i} >= vocab_size {n_vocab}")
        tokens[i], types[i] = text, TT_NORMAL
    for t in tok.get("added_tokens", []):
        i = t["id"]
        if i >= n_vocab:
            fail(f"{path}: added token {t['content']!r} has id {i} >= vocab_size {n_vocab}")
        tokens[i] = t["content"]
        types[i] = TT_CONTROL if t.get("special") else TT_USER_DEFINED
    n_pad = 0
    for i in range(n_vocab):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
            n_pad += 1
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    tcfg = {}
    tcfg_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(tcfg_path):
        with open(tcfg_path, encoding="utf-8") as f:
            tcfg = json.load(f)
    ids = {t: i for i, t in enumerate(tokens)}

    def tok_id(key_cfg, key_tcfg):
        v = cfg.get(key_cfg)
        if isinstance(v, list):
            v = v[0] if v else None
        if v is None:
            s = tcfg.get(key_tcfg)
            if isinstance(s, dict):
                s = s.get("content")
            v = ids.get(s) if s is not None else None
        return v

    special = {"bos": tok_id("bos_token_id", "bos_token"),
               "eos": tok_id("eos_token_id", "eos_token"),
               "pad": tok_id("pad_token_id", "pad_token")}
    template = None
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja):
        with open(jinja, encoding="utf-8") as f:
            template = f.read()
    elif isinstance(tcfg.get("chat_template"), str):
        template = tcfg["chat_template"]
    return {"tokens": tokens, "types": types, "merges": merges, "pre": pre_name,
            "special": special, "n_pad": n_pad, "template": template,
            "add_bos": bool(tcfg.get("add_bos_token", False)),
            "add_eos": bool(tcfg.get("add_eos_token", False))}


# ---------------------------------------------------------------- the mapping

def build(ck, cfg, plan):
    """Queue every output tensor; returns the per-layer facts for the keys."""
    H = int(cfg_get(cfg, "hidden_size"))
    L = int(cfg_get(cfg, "num_hidden_layers"))
    V = int(cfg_get(cfg, "vocab_size"))
    nH = int(cfg_get(cfg, "num_attention_heads"))
    hd = int(cfg_get(cfg, "head_dim"))
    P = nH * hd
    g = int(cfg_get(cfg, "layer_group_size"))
    k_dense = int(cfg_get(cfg, "first_k_dense_replace", 0))
    conv = int(cfg_get(cfg, "short_conv_kernel_size"))
    E = int(cfg_get(cfg, "num_experts"))
    I_d = int(cfg_get(cfg, "intermediate_size"))
    I_e = int(cfg_get(cfg, "moe_intermediate_size"))
    I_s = int(cfg_get(cfg, "moe_shared_expert_intermediate_size", I_e)) * \
        int(cfg_get(cfg, "num_shared_experts", 1))
    r = int(cfg_get(cfg, "kv_lora_rank"))
    rq = int(cfg_get(cfg, "q_lora_rank", 0))
    dn = int(cfg_get(cfg, "qk_nope_head_dim"))
    dr = int(cfg_get(cfg, "qk_rope_head_dim"))
    dv = int(cfg_get(cfg, "v_head_dim"))
    dq = dn + dr
    get = ck.get

    def take(name, shape=None):
        plan.used.add(name)
        ck.shape(name)  # fail now, before anything is written, if it is missing
        if shape is not None and tuple(ck.shape(name)) != tuple(shape):
            fail(f"tensor {name} has shape {list(ck.shape(name))}, expected {list(shape)}")
        return name

    def copy(out, name, shape, force_f32=False):
        take(name, shape)
        plan.add(out, shape, lambda: get(name), force_f32)

    copy("token_embd.weight", "model.word_embeddings.weight", (V, H))
    copy("output_norm.weight", "model.norm.weight", (H,))
    if "lm_head.weight" in ck:
        copy("output.weight", "lm_head.weight", (V, H))
    elif cfg.get("tie_word_embeddings"):
        plan.add("output.weight", (V, H), lambda: get("model.word_embeddings.weight"))
    else:
        fail("tensor lm_head.weight is missing from the checkpoint "
             "(and tie_word_embeddings is not set)")

    head_kv = []
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "attention."
        b = f"blk.{i}."
        kda = a + "q_conv1d.weight" in ck
        mla = a + "kv_a_proj_with_mqa.weight" in ck
        if kda == mla:
            fail(f"layer {i}: expected either {a}q_conv1d.weight (KDA) or "
                 f"{a}kv_a_proj_with_mqa.weight (gated MLA), found "
                 + ("both" if kda else "neither"))
        want_mla = (i + 1) % g == 0 or i >= (L // g) * g
        if mla != want_mla:
            print(f"note: layer {i} is {'MLA' if mla else 'KDA'} by its tensors, "
                  f"{'MLA' if want_mla else 'KDA'} by layer_group_size {g}; the tensors win",
                  file=sys.stderr)
        head_kv.append(1 if mla else 0)
        copy(b + "attn_norm.weight", p + "input_layernorm.weight", (H,))
        copy(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", (H,))
        if kda:
            for x in "qkv":
                copy(b + f"attn_{x}.weight", a + f"{x}_proj.weight", (P, H))
                copy(b + f"ssm_conv1d_{x}.weight", a + f"{x}_conv1d.weight", (P, 1, conv),
                     force_f32=True)
            copy(b + "ssm_f_a.weight", a + "f_proj.weight", (P, H))
            copy(b + "ssm_g_a.weight", a + "g_proj.weight", (P, H))
            copy(b + "ssm_beta.weight", a + "b_proj.weight", (nH, H))
            alog = take(a + "A_log")
            n_alog = int(np.prod(ck.shape(alog)))
            if n_alog != nH:
                fail(f"tensor {alog} has {n_alog} values, expected {nH} (one per head)")
            plan.add(b + "ssm_a", (nH, 1),
                     lambda alog=alog: np.exp(get(alog).astype(np.float64))
                     .astype(np.float32).reshape(nH, 1))
            copy(b + "ssm_dt.bias", a + "dt_bias", (P,))
            copy(b + "ssm_norm.weight", a + "o_norm.weight", (hd,))
            copy(b + "attn_output.weight", a + "o_proj.weight", (H, P))
        else:
            if rq:
                copy(b + "attn_q_a.weight", a + "q_a_proj.weight", (rq, H))
                copy(b + "attn_q_a_norm.weight", a + "q_a_layernorm.weight", (rq,))
                copy(b + "attn_q_b.weight", a + "q_b_proj.weight", (nH * dq, rq))
            else:
                copy(b + "attn_q.weight", a + "q_proj.weight", (nH * dq, H))
            copy(b + "attn_kv_a_mqa.weight", a + "kv_a_proj_with_mqa.weight", (r + dr, H))
            copy(b + "attn_kv_a_norm.weight", a + "kv_a_layernorm.weight", (r,))
            kvb = take(a + "kv_b_proj.weight", (nH * (dn + dv), r))
            # per head: rows [0, dn) are W_UK (q_nope -> latent, used transposed),
            # rows [dn, dn + dv) are W_UV (latent -> value)
            plan.add(b + "attn_k_b.weight", (nH, r, dn),
                     lambda kvb=kvb: get(kvb).reshape(nH, dn + dv, r)[:, :dn, :]
                     .transpose(0, 2, 1))
            plan.add(b + "attn_v_b.weight", (nH, dv, r),
                     lambda kvb=kvb: get(kvb).reshape(nH, dn + dv, r)[:, dn:, :])
            gate = take(a + "g_proj.weight")
            if tuple(ck.shape(gate)) != (nH, H):
                fail(f"tensor {gate} has shape {list(ck.shape(gate))}, expected {[nH, H]}: "
                     "ik supports only the head-wise MLA output gate")
            copy(b + "attn_gate.weight", gate, (nH, H))
            copy(b + "attn_output.weight", a + "dense.weight", (H, nH * dv))
        m = p + "mlp."
        moe = m + "gate.weight" in ck
        if moe == (i < k_dense):
            fail(f"layer {i}: {'has' if moe else 'lacks'} {m}gate.weight (router) but "
                 f"first_k_dense_replace = {k_dense} makes it "
                 f"{'dense' if i < k_dense else 'MoE'}")
        if not moe:
            copy(b + "ffn_gate.weight", m + "gate_proj.weight", (I_d, H))
            copy(b + "ffn_up.weight", m + "up_proj.weight", (I_d, H))
            copy(b + "ffn_down.weight", m + "down_proj.weight", (H, I_d))
            continue
        copy(b + "ffn_gate_inp.weight", m + "gate.weight", (E, H), force_f32=True)
        bias = m + "gate.expert_bias"
        if bias not in ck and m + "gate.e_score_correction_bias" in ck:
            bias = m + "gate.e_score_correction_bias"
        copy(b + "exp_probs_b.bias", bias, (E,))
        for proj, out, shape in (("gate_proj", "ffn_gate_exps", (I_e, H)),
                                 ("up_proj", "ffn_up_exps", (I_e, H)),
                                 ("down_proj", "ffn_down_exps", (H, I_e))):
            names = [take(f"{m}experts.{e}.{proj}.weight", shape) for e in range(E)]
            plan.add(f"{b}{out}.weight", (E,) + shape,
                     lambda names=names: np.stack([get(n) for n in names]))
        s = m + "shared_experts."
        copy(b + "ffn_gate_shexp.weight", s + "gate_proj.weight", (I_s, H))
        copy(b + "ffn_up_shexp.weight", s + "up_proj.weight", (I_s, H))
        copy(b + "ffn_down_shexp.weight", s + "down_proj.weight", (H, I_s))
    return {"head_kv": head_kv}


def write_keys(w, gguf, cfg, facts, tok, name, file_type):
    A = ARCH
    L = int(cfg["num_hidden_layers"])
    u32, f32 = w.add_uint32, w.add_float32
    VT = gguf.GGUFValueType
    w.add_string("general.name", name)
    u32("general.file_type", file_type)
    u32("general.quantization_version", 2)
    u32(f"{A}.block_count", L)
    u32(f"{A}.vocab_size", int(cfg["vocab_size"]))
    u32(f"{A}.context_length", int(cfg_get(cfg, "max_position_embeddings")))
    u32(f"{A}.embedding_length", int(cfg["hidden_size"]))
    u32(f"{A}.feed_forward_length", int(cfg["intermediate_size"]))
    u32(f"{A}.attention.head_count", int(cfg["num_attention_heads"]))
    w.add_key_value(f"{A}.attention.head_count_kv", facts["head_kv"], VT.ARRAY, VT.UINT32)
    f32(f"{A}.attention.layer_norm_rms_epsilon", float(cfg_get(cfg, "rms_norm_eps")))
    u32(f"{A}.leading_dense_block_count", int(cfg_get(cfg, "first_k_dense_replace", 0)))
    # MLA
    u32(f"{A}.attention.kv_lora_rank", int(cfg["kv_lora_rank"]))
    if cfg.get("q_lora_rank"):
        u32(f"{A}.attention.q_lora_rank", int(cfg["q_lora_rank"]))
    u32(f"{A}.attention.key_length_mla",
        int(cfg["qk_nope_head_dim"]) + int(cfg["qk_rope_head_dim"]))
    u32(f"{A}.attention.value_length_mla", int(cfg["v_head_dim"]))
    # rotary: GPT-J pairs on the whole qk_rope_head_dim slice (ik: LLAMA_ROPE_TYPE_NORM)
    u32(f"{A}.rope.dimension_count", int(cfg["qk_rope_head_dim"]))
    f32(f"{A}.rope.freq_base", float(cfg_get(cfg, "rope_theta")))
    rs = cfg.get("rope_scaling")
    if rs and (rs.get("rope_type") or rs.get("type")) not in (None, "default"):
        kind = rs.get("rope_type") or rs.get("type")
        if kind != "yarn":
            fail(f"config.json: rope_scaling type {kind!r} is not supported")
        w.add_string(f"{A}.rope.scaling.type", "yarn")
        f32(f"{A}.rope.scaling.factor", float(rs["factor"]))
        u32(f"{A}.rope.scaling.original_context_length",
            int(rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]))
        f32(f"{A}.rope.scaling.yarn_log_multiplier", 0.1 * float(rs.get("mscale_all_dim") or 0))
        f32(f"{A}.rope.scaling.yarn_beta_fast", float(rs.get("beta_fast") or 32))
        f32(f"{A}.rope.scaling.yarn_beta_slow", float(rs.get("beta_slow") or 1))
        print("warning: YaRN rope_scaling written but not cross-checked against ik "
              "(crosscheck.sh covers rope_scaling null only)", file=sys.stderr)
    # KDA
    u32(f"{A}.ssm.conv_kernel", int(cfg["short_conv_kernel_size"]))
    u32(f"{A}.kda.head_dim", int(cfg["head_dim"]))
    w.add_bool(f"{A}.kda.safe_gate", bool(cfg.get("kda_safe_gate", True)))
    f32(f"{A}.kda.gate_lower_bound", float(cfg_get(cfg, "kda_lower_bound")))
    # MoE
    u32(f"{A}.expert_count", int(cfg["num_experts"]))
    u32(f"{A}.expert_used_count", int(cfg_get(cfg, "num_experts_per_tok")))
    u32(f"{A}.expert_feed_forward_length", int(cfg["moe_intermediate_size"]))
    u32(f"{A}.expert_shared_feed_forward_length",
        int(cfg_get(cfg, "moe_shared_expert_intermediate_size", cfg["moe_intermediate_size"])))
    u32(f"{A}.expert_shared_count", int(cfg_get(cfg, "num_shared_experts", 1)))
    u32(f"{A}.expert_group_count", int(cfg_get(cfg, "n_group", 1)))
    u32(f"{A}.expert_group_used_count", int(cfg_get(cfg, "topk_group", 1)))
    f32(f"{A}.expert_weights_scale", float(cfg_get(cfg, "routed_scaling_factor", 1.0)))
    w.add_bool(f"{A}.expert_weights_norm", bool(cfg.get("norm_topk_prob", True)))
    score = cfg.get("score_function") or cfg.get("scoring_func") or "sigmoid"
    if score not in GATING:
        fail(f"config.json: score_function {score!r} is not sigmoid or softmax")
    u32(f"{A}.expert_gating_func", GATING[score])
    u32(f"{A}.nextn_predict_layers", 0)
    for key, out in (("expert_swiglu_limit_list", "swiglu_clamp_exp"),
                     ("share_expert_swiglu_limit_list", "swiglu_clamp_shexp")):
        lim = layer_limits(cfg, key, L)
        if lim is not None:
            w.add_key_value(f"{A}.{out}", lim, VT.ARRAY, VT.FLOAT32)
    # tokenizer
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", tok["pre"])
    w.add_key_value("tokenizer.ggml.tokens", tok["tokens"], VT.ARRAY, VT.STRING)
    w.add_key_value("tokenizer.ggml.token_type", tok["types"], VT.ARRAY, VT.INT32)
    if tok["merges"]:
        w.add_key_value("tokenizer.ggml.merges", tok["merges"], VT.ARRAY, VT.STRING)
    for k, v in tok["special"].items():
        if v is not None:
            key = "padding" if k == "pad" else k
            u32(f"tokenizer.ggml.{key}_token_id", int(v))
    w.add_bool("tokenizer.ggml.add_bos_token", tok["add_bos"])
    w.add_bool("tokenizer.ggml.add_eos_token", tok["add_eos"])
    if tok["template"]:
        w.add_string("tokenizer.chat_template", tok["template"])


def check_config(cfg):
    mt = cfg.get("model_type")
    if mt not in (None, "bailing_hybrid"):
        fail(f"config.json: model_type {mt!r}, expected \"bailing_hybrid\" (BailingMoeV3)")
    if cfg.get("rope_interleave") is False:
        fail("config.json: rope_interleave is false; ik's bailingmoe3 rotates GPT-J "
             "(interleaved) pairs only")
    if cfg.get("use_qkv_bias") or cfg.get("use_bias"):
        fail("config.json: use_qkv_bias/use_bias set; ik's bailingmoe3 has no such biases")
    if cfg.get("no_kda_lora") is False:
        fail("config.json: no_kda_lora is false (low-rank f/g gates); not supported")
    if cfg.get("kda_safe_gate") is False:
        fail("config.json: kda_safe_gate is false; ik implements only the safe gate")
    gran = cfg.get("gated_attention_proj_granularity_type", "head_wise")
    if gran != "head_wise":
        fail(f"config.json: gated_attention_proj_granularity_type {gran!r}; ik has head_wise only")
    hd, dv = cfg.get("head_dim"), cfg.get("v_head_dim")
    if hd is not None and dv is not None and hd != dv:
        fail(f"config.json: v_head_dim {dv} != head_dim {hd}; ik's bailingmoe3 sizes the MLA "
             "output projection by num_attention_heads * head_dim and cannot load this model")
    if not cfg.get("num_experts"):
        fail("config.json: num_experts is not set; ik's bailingmoe3 needs MoE layers")


def import_gguf(ik_dir):
    if ik_dir:
        py = os.path.join(ik_dir, "gguf-py")
        if not os.path.isdir(os.path.join(py, "gguf")):
            fail(f"{py}/gguf not found: --ik / IK_DIR must name the ik_llama.cpp source tree")
        sys.path.insert(0, py)
    try:
        import gguf  # noqa: E402
    except ImportError as e:
        fail(f"cannot import gguf ({e}); pass --ik IK_DIR or set IK_DIR to the "
             "ik_llama.cpp tree (its gguf-py is used)")
    return gguf


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Ling-3 (BailingMoeV3) safetensors -> GGUF for ik_llama.cpp (bailingmoe3)")
    ap.add_argument("checkpoint", help="folder with config.json, tokenizer.json, *.safetensors")
    ap.add_argument("out", help="the GGUF file to write")
    ap.add_argument("--outtype", choices=("bf16", "f16", "f32"), default="bf16",
                    help="type of the weight matrices (default bf16)")
    ap.add_argument("--ik", default=os.environ.get("IK_DIR"),
                    help="ik_llama.cpp source tree (its gguf-py is used; default $IK_DIR)")
    ap.add_argument("--pre", help="tokenizer.ggml.pre (default: gpt-2 for a plain "
                    "ByteLevel pre-tokenizer; required otherwise)")
    ap.add_argument("--name", help="general.name (default: the checkpoint folder's name)")
    args = ap.parse_args(argv)
    opened = False
    try:
        gguf = import_gguf(args.ik)
        cfg_path = os.path.join(args.checkpoint, "config.json")
        if not os.path.exists(cfg_path):
            fail(f"{cfg_path} is missing")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        check_config(cfg)
        tok = load_tokenizer(args.checkpoint, cfg, args.pre)
        ck = Checkpoint(args.checkpoint)
        plan = Plan(args.outtype, gguf)
        facts = build(ck, cfg, plan)
        L = int(cfg["num_hidden_layers"])
        dropped = [n for n in ck.names() if n not in plan.used]
        n_mtp = int(cfg.get("num_nextn_predict_layers") or 0)
        mtp_prefixes = tuple(f"model.layers.{L + k}." for k in range(n_mtp))
        mtp = [n for n in dropped if n.startswith(mtp_prefixes)]
        other = sorted(set(dropped) - set(mtp))
        if other:
            fail(f"{len(other)} checkpoint tensors have no GGUF name, e.g. "
                 + ", ".join(other[:5]))

        file_type = {"f32": 0, "f16": 1, "bf16": 32}[args.outtype]
        name = args.name or os.path.basename(os.path.normpath(args.checkpoint))
        w = gguf.GGUFWriter(args.out, ARCH)
        write_keys(w, gguf, cfg, facts, tok, name, file_type)
        total = 0
        counts = {}
        for tname, shape, kind, _ in plan.items:
            nb = plan.nbytes(shape, kind)
            np_type = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[kind]
            w.add_tensor_info(tname, shape, np.dtype(np_type), nb, raw_dtype=plan.raw_type(kind))
            total += nb
            counts[kind] = counts.get(kind, 0) + 1
        w.write_header_to_file()
        opened = True
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for tname, shape, kind, produce in plan.items:
            a = produce()
            if tuple(a.shape) != shape:
                fail(f"internal: {tname} came out {list(a.shape)}, planned {list(shape)}")
            w.write_tensor_data(plan.encode(a, kind))
        w.close()
    except ConvertError as e:
        print(f"convert_gguf: {e}", file=sys.stderr)
        if opened:  # no half-written file left behind
            w.close()
            os.remove(args.out)
        return 1
    size = os.path.getsize(args.out)
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"convert_gguf: wrote {args.out}: arch {ARCH}, {len(plan.items)} tensors ({kinds}), "
          f"{human(total)} of tensor data, file {human(size)}")
    print(f"convert_gguf: {L} layers ({sum(facts['head_kv'])} gated MLA, "
          f"{L - sum(facts['head_kv'])} KDA), vocab {len(tok['tokens'])}"
          f" ({tok['n_pad']} padding ids), pre-tokenizer {tok['pre']}, "
          f"{len(mtp)} MTP-layer tensors left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
