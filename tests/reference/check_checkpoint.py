#!/usr/bin/python3
"""Checks that a generated checkpoint is a valid Ling-3 (bailing_hybrid) model.

    check_checkpoint.py MODEL_DIR [--same DIR] [--differ DIR]

The expected tensor set is derived here from config.json and spec
ling-arch.md 1.3-1.10 (names, shapes, dtypes), independently of tfsynth.
Also checks config keys, tokenizer files, value sanity, that activations stay
in a realistic range through every layer (via ling_ref), and optionally that
another folder holds the same tensor values (same seed, other sharding) or
different ones (other seed).  Exits non-zero listing every problem.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ling_ref  # noqa: E402
from safetensors_np import Checkpoint  # noqa: E402

F32_SUFFIXES = (".A_log", ".dt_bias", ".gate.expert_bias")


def expected_tensors(c):
    """name -> shape for every tensor the spec puts in a checkpoint."""
    H, L, nH = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    P = nH * c["head_dim"]
    dn, dr, dv, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    E, Ie = c["num_experts"], c["moe_intermediate_size"]
    Is = c["moe_shared_expert_intermediate_size"] * c["num_shared_experts"]
    W = c["short_conv_kernel_size"]
    g = c["layer_group_size"]
    t = {"model.word_embeddings.weight": (c["vocab_size"], H),
         "model.norm.weight": (H,), "lm_head.weight": (c["vocab_size"], H)}

    def mlp(p, inter):
        t[f"{p}.gate_proj.weight"] = (inter, H)
        t[f"{p}.up_proj.weight"] = (inter, H)
        t[f"{p}.down_proj.weight"] = (H, inter)

    for i in range(L + c["num_nextn_predict_layers"]):
        p = f"model.layers.{i}"
        a = f"{p}.attention"
        t[f"{p}.input_layernorm.weight"] = (H,)
        t[f"{p}.post_attention_layernorm.weight"] = (H,)
        if (i + 1) % g == 0 or i >= (L // g) * g:
            if c.get("q_lora_rank"):
                t[f"{a}.q_a_proj.weight"] = (c["q_lora_rank"], H)
                t[f"{a}.q_a_layernorm.weight"] = (c["q_lora_rank"],)
                t[f"{a}.q_b_proj.weight"] = (nH * (dn + dr), c["q_lora_rank"])
            else:
                t[f"{a}.q_proj.weight"] = (nH * (dn + dr), H)
            t[f"{a}.kv_a_proj_with_mqa.weight"] = (r + dr, H)
            t[f"{a}.kv_a_layernorm.weight"] = (r,)
            t[f"{a}.kv_b_proj.weight"] = (nH * (dn + dv), r)
            t[f"{a}.g_proj.weight"] = (nH, H)
            t[f"{a}.dense.weight"] = (H, nH * dv)
        else:
            for n in "qkv":
                t[f"{a}.{n}_proj.weight"] = (P, H)
                t[f"{a}.{n}_conv1d.weight"] = (P, 1, W)
            t[f"{a}.f_proj.weight"] = (P, H)
            t[f"{a}.g_proj.weight"] = (P, H)
            t[f"{a}.b_proj.weight"] = (nH, H)
            t[f"{a}.A_log"] = (nH,)
            t[f"{a}.dt_bias"] = (P,)
            t[f"{a}.o_norm.weight"] = (c["head_dim"],)
            t[f"{a}.o_proj.weight"] = (H, P)
        if i < c["first_k_dense_replace"]:
            mlp(f"{p}.mlp", c["intermediate_size"])
        else:
            t[f"{p}.mlp.gate.weight"] = (E, H)
            t[f"{p}.mlp.gate.expert_bias"] = (E,)
            for e in range(E):
                mlp(f"{p}.mlp.experts.{e}", Ie)
            if Is:
                mlp(f"{p}.mlp.shared_experts", Is)
        if i >= L:
            t[f"{p}.enorm.weight"] = (H,)
            t[f"{p}.hnorm.weight"] = (H,)
            t[f"{p}.eh_proj.weight"] = (H, 2 * H)
            t[f"{p}.final_layernorm.weight"] = (H,)
    return t


def check_config(folder, c, errs):
    need = {
        "architectures": list, "model_type": str, "vocab_size": int, "hidden_size": int,
        "intermediate_size": int, "num_hidden_layers": int, "num_attention_heads": int,
        "num_key_value_heads": int, "head_dim": int, "layer_group_size": int,
        "first_k_dense_replace": int, "num_experts": int, "num_experts_per_tok": int,
        "num_shared_experts": int, "moe_intermediate_size": int,
        "moe_shared_expert_intermediate_size": int, "n_group": int, "topk_group": int,
        "routed_scaling_factor": float, "norm_topk_prob": bool,
        "moe_router_enable_expert_bias": bool, "kv_lora_rank": int, "qk_nope_head_dim": int,
        "qk_rope_head_dim": int, "v_head_dim": int, "qk_head_dim": int,
        "rope_theta": float, "rope_interleave": bool, "max_position_embeddings": int,
        "gated_attention_proj_granularity_type": str, "short_conv_kernel_size": int,
        "no_kda_lora": bool, "kda_safe_gate": bool, "kda_lower_bound": float,
        "rms_norm_eps": float, "use_qkv_bias": bool, "use_bias": bool,
        "tie_word_embeddings": bool, "num_nextn_predict_layers": int,
        "expert_swiglu_limit_list": list, "share_expert_swiglu_limit_list": list,
        "eos_token_id": int, "pad_token_id": int,
    }
    for k, ty in need.items():
        if k not in c:
            errs.append(f"config.json: missing {k}")
        elif not isinstance(c[k], ty) or (ty is int and isinstance(c[k], bool)):
            errs.append(f"config.json: {k} = {c[k]!r} has the wrong type")
    if errs:
        return
    if c["architectures"] != ["BailingMoeV3ForCausalLM"] or c["model_type"] != "bailing_hybrid":
        errs.append("config.json: not a BailingMoeV3ForCausalLM / bailing_hybrid model")
    if "q_lora_rank" not in c:
        errs.append("config.json: missing q_lora_rank (null for a plain q_proj)")
    if c["num_nextn_predict_layers"] != 1:
        errs.append("config.json: num_nextn_predict_layers is not 1")
    if c["vocab_size"] % 128:
        errs.append(f"config.json: vocab_size {c['vocab_size']} is not a multiple of 128")
    if c["qk_head_dim"] != c["qk_nope_head_dim"] + c["qk_rope_head_dim"]:
        errs.append("config.json: qk_head_dim != qk_nope_head_dim + qk_rope_head_dim")
    n = c["num_hidden_layers"]         # one a decoder layer, as transformers wants
    for key in ("expert_swiglu_limit_list", "share_expert_swiglu_limit_list"):
        lst = c[key]
        if len(lst) != n:
            errs.append(f"config.json: {key} has {len(lst)} entries, expected {n}")
        elif not (lst[-1] > 0 and lst[-2] > 0 and lst[0] == 0):
            errs.append(f"config.json: {key} does not clamp the last layers")
    if c["expert_swiglu_limit_list"] == c["share_expert_swiglu_limit_list"]:
        errs.append("config.json: the two clamp lists are equal (a mix-up would go unseen)")
    if c["num_experts"] % c["n_group"] or c["topk_group"] > c["n_group"]:
        errs.append("config.json: inconsistent n_group / topk_group")
    with open(os.path.join(folder, "generation_config.json")) as f:
        gen = json.load(f)
    if c["eos_token_id"] not in gen.get("eos_token_id", []):
        errs.append("generation_config.json: eos_token_id lacks config.json's eos")
    with open(os.path.join(folder, "tokenizer.json")) as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [a["id"] for a in tok.get("added_tokens", [])]
    if max(ids) >= c["vocab_size"] or c["vocab_size"] - max(ids) > 128:
        errs.append(f"tokenizer.json: highest id {max(ids)} does not fit "
                    f"vocab_size {c['vocab_size']}")
    special = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
    if (special.get("<|role_end|>") != c["eos_token_id"] or
            special.get("<|endoftext|>") != c["pad_token_id"]):
        errs.append("config.json: eos/pad ids are not <|role_end|> / <|endoftext|>")


def check_tensors(ck, c, errs):
    want = expected_tensors(c)
    have = set(ck.names())
    for n in sorted(set(want) - have):
        errs.append(f"missing tensor {n}")
    for n in sorted(have - set(want)):
        errs.append(f"unexpected tensor {n}")
    for n in sorted(set(want) & have):
        dt = "F32" if n.endswith(F32_SUFFIXES) else "BF16"
        raw = ck.get(n)
        if ck.dtype(n) != dt:
            errs.append(f"{n}: dtype {ck.dtype(n)}, expected {dt}")
        if raw.shape != want[n]:
            errs.append(f"{n}: shape {raw.shape}, expected {want[n]}")
            continue
        v = ck.f64(n)
        if not np.all(np.isfinite(v)) or not np.any(v):
            errs.append(f"{n}: non-finite or all-zero values")
        elif n.endswith("norm.weight") and not 0.8 < v.mean() < 1.2:
            errs.append(f"{n}: a norm weight with mean {v.mean():.3f}, not about 1")


def check_activations(folder, c, errs):
    m = ling_ref.Model(folder)
    m.trace = []
    tokens = [(7 * i + 3) % c["vocab_size"] for i in range(12)]
    logits, hf = m.forward(tokens)
    m.mtp(hf[:-1], tokens[1:])
    rms = [t["rms"] for t in m.trace if "rms" in t]
    clamps = [t["clamped"] for t in m.trace if "clamped" in t]
    if not all(0.3 < r < 10.0 for r in rms):
        errs.append(f"residual RMS out of [0.3, 10] in some layer: {np.round(rms, 3)}")
    if not clamps or not 0.002 < np.mean(clamps) < 0.2:
        errs.append(f"clamps hit {np.mean(clamps) if clamps else 0:.4f} of activations, "
                    "not a few percent")
    top = np.exp(logits - logits.max(axis=-1, keepdims=True))
    top = (top / top.sum(axis=-1, keepdims=True)).max(axis=-1)
    if not (1.0 < logits.std() < 10.0 and 0.05 < top.mean() < 0.95):
        errs.append(f"logits flat or one-hot: std {logits.std():.3f}, top-1 prob {top.mean():.3f}")


def same_values(a, b):
    return set(a.names()) == set(b.names()) and all(
        a.dtype(n) == b.dtype(n) and np.array_equal(a.get(n), b.get(n)) for n in a.names())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--same", help="a folder that must hold identical tensors")
    ap.add_argument("--differ", help="a folder whose tensors must differ")
    args = ap.parse_args(argv)
    errs = []
    try:
        with open(os.path.join(args.model, "config.json")) as f:
            c = json.load(f)
        check_config(args.model, c, errs)
        if not errs:
            ck = Checkpoint(args.model)
            check_tensors(ck, c, errs)
        if not errs:
            check_activations(args.model, c, errs)
        if args.same and not same_values(ck, Checkpoint(args.same)):
            errs.append(f"{args.same}: tensors differ from {args.model} (same seed expected)")
        if args.differ and same_values(ck, Checkpoint(args.differ)):
            errs.append(f"{args.differ}: tensors equal {args.model} (another seed expected)")
    except (OSError, ValueError, KeyError) as e:
        errs.append(str(e))
    for e in errs:
        print(f"check_checkpoint: {e}", file=sys.stderr)
    if not errs:
        print(f"check_checkpoint: {args.model}: valid")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
