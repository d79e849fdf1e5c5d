"""The config.json keys transformers' BailingHybridConfig types float, and
the checkpoints the project writes, for test_config_types.py and
test_hf_config.py.

transformers' config class is a strict dataclass: an int where it wants a
float (`"kda_lower_bound": -5`) refuses the whole folder, tokenizer too.
The writers' list is float_keys in tools/lib/outdir.c.
"""
import glob
import json
import os
import subprocess

# Float-typed keys, at the top level and in rope_scaling / rope_parameters.
FLOAT_KEYS = ("routed_scaling_factor", "rope_theta", "partial_rotary_factor",
              "kda_lower_bound", "rms_norm_eps", "initializer_range",
              "attention_dropout", "mtp_loss_scaling_factor")
ROPE_FLOAT_KEYS = ("rope_theta", "factor", "attention_factor", "beta_fast",
                   "beta_slow", "mscale", "mscale_all_dim")
# Per-layer lists: transformers wants one entry a decoder layer.
LAYER_LISTS = ("expert_swiglu_limit_list", "share_expert_swiglu_limit_list")

SRC = os.environ.get("TF_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# Whole values of float keys and a YaRN rope_scaling: what an int-printing
# JSON writer gets wrong.
VARIANT = ["rope_yarn_factor=4", "routed_scaling_factor=2", "kda_lower_bound=-4",
           "rope_theta=10000"]


def load(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)


def float_errors(folder):
    """What in folder/config.json transformers' config class would refuse
    for its type: a float key holding a JSON int, a list of the wrong length."""
    c, errs = load(folder), []

    def check(obj, keys, where):
        for k in keys:
            v = obj.get(k)
            if v is not None and not isinstance(v, float):
                errs.append(f"{folder}/config.json: {where}{k} = {v!r} is not a JSON float")
    check(c, FLOAT_KEYS, "")
    for sub in ("rope_scaling", "rope_parameters"):
        if isinstance(c.get(sub), dict):
            check(c[sub], ROPE_FLOAT_KEYS, sub + ".")
    for k in LAYER_LISTS:
        if c.get(k) is not None and len(c[k]) != c["num_hidden_layers"]:
            errs.append(f"{folder}/config.json: {k} has {len(c[k])} entries for "
                        f"{c['num_hidden_layers']} layers")
    return errs


def checkpoints(out):
    """Every checkpoint folder to check: the committed models (the trainer's
    and tfquant's), the test fixtures' tfsynth and tfquant outputs, and a
    tfsynth variant written into `out` now."""
    dirs = [os.path.join(SRC, "models", m) for m in ("ling-nano", "ling-nano-exl3")]
    dirs.append(os.environ["TF_CORE_MODEL"])
    models = sorted(os.path.dirname(p) for p in
                    glob.glob(os.path.join(os.environ["TF_MODELS"], "*", "config.json")))
    if not any("quantization_config" in load(d) for d in models):
        raise SystemExit(f"FAIL: no tfquant output under {os.environ['TF_MODELS']}")
    variant = os.path.join(out, "ling-tiny-variant")
    cmd = [os.environ["TF_TFSYNTH"], "--preset", "ling-tiny", "--out", variant]
    for s in VARIANT:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return dirs + models + [variant]
