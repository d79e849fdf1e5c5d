"""Reading and writing Ling checkpoints (HF layout, one model.safetensors).

The layout is a template's: a checkpoint tfsynth wrote for the same shape
fixes every tensor name, shape and dtype and config.json, so what we write
is what the runtime reads.
"""
import json
import os
import shutil
import struct

import numpy as np
import torch

from ling_torch import Ling

SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} of a single safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[8 + n + b:8 + n + e])
    return out


def to_tensor(dtype, shape, raw):
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        a = bits.view(np.float32)
    elif dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4")
    else:
        raise ValueError(f"dtype {dtype} is not a float this tool reads")
    return torch.from_numpy(a.astype(np.float64).reshape(shape))


def to_bytes(t, dtype):
    t = t.detach().to(torch.float32).contiguous()
    if dtype == "F32":
        return t.numpy().astype("<f4").tobytes()
    if dtype == "BF16":            # round to nearest even, as torch does
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(f"dtype {dtype} is not a float this tool writes")


def load(folder, dtype=torch.float32):
    """(config, Ling) with the folder's weights in `dtype`."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "bailing_hybrid":
        raise ValueError(f"{folder}: model_type {cfg.get('model_type')!r} is not bailing_hybrid")
    model = Ling(cfg).to(dtype)
    tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    state = model.state_dict()
    if set(tensors) != set(state):
        missing, extra = set(state) - set(tensors), set(tensors) - set(state)
        raise ValueError(f"{folder}: tensors differ from the model: missing "
                         f"{sorted(missing)[:5]}, unexpected {sorted(extra)[:5]}")
    for name, (dt, shape, raw) in tensors.items():
        if list(state[name].shape) != shape:
            raise ValueError(f"{name}: shape {shape}, model has {list(state[name].shape)}")
        state[name].copy_(to_tensor(dt, shape, raw))
    return cfg, model


def save(model, template, out, config_update=None):
    """Writes model's weights in the template checkpoint's layout to `out`,
    with the template's config.json (updated by config_update) and side files."""
    tensors = read_safetensors(os.path.join(template, "model.safetensors"))
    state = model.state_dict()
    header, blobs, off = {}, [], 0
    for name, (dt, shape, _) in tensors.items():
        if list(state[name].shape) != shape:
            raise ValueError(f"{name}: model shape {list(state[name].shape)}, template {shape}")
        raw = to_bytes(state[name], dt)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((-len(head)) % 8)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for b in blobs:
            f.write(b)
    with open(os.path.join(template, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(config_update or {})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    for name in SIDE_FILES:
        src = os.path.join(template, name)
        if os.path.exists(src) and os.path.abspath(template) != os.path.abspath(out):
            shutil.copyfile(src, os.path.join(out, name))
