#!/usr/bin/python3
"""Bad input end to end: tfrun on a broken copy of a good checkpoint exits
non-zero (not by a signal, not by the timeout) with a message naming the key
or tensor at fault.  What a checkpoint's tensors get wrong fails `tfrun
--check` already (it opens every layer without computing), not only a run.

Each case copies ling-tiny into a scratch folder, linking the files it
leaves alone, and breaks one thing.
"""
import json
import os
import struct
import subprocess
import tempfile
import unittest

import tfmodel as tm


def clone(src, dst, skip=()):
    """dst: a folder whose files are symlinks to src's, except `skip`."""
    os.makedirs(dst)
    for f in os.listdir(src):
        if f not in skip and not f.startswith("."):
            os.symlink(os.path.join(src, f), os.path.join(dst, f))


def edit_config(src, dst, fn):
    clone(src, dst, skip=("config.json",))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    fn(cfg)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def read_safetensors(src):
    """(header, data) of src's model.safetensors."""
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), f.read()


def write_safetensors(dst, hdr, data):
    """dst's model.safetensors: hdr (padded to 8) then data."""
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def drop_tensor(src, dst, name):
    """Rewrite src's model.safetensors into dst without tensor `name`: the
    other tensors back to back in their order."""
    clone(src, dst, skip=("model.safetensors",))
    hdr, data = read_safetensors(src)
    if name not in hdr:
        raise KeyError(f"{src}: no tensor {name} to drop")
    del hdr[name]
    meta = hdr.pop("__metadata__", None)
    out, blobs, off = {}, [], 0
    for k, e in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, end = e["data_offsets"]
        blobs.append(data[b:end])
        out[k] = dict(e, data_offsets=[off, off + end - b])
        off += end - b
    if meta is not None:
        out["__metadata__"] = meta
    write_safetensors(dst, out, b"".join(blobs))


def retype(src, dst, name, dtype):
    """src's checkpoint in dst with tensor `name` declared as `dtype` (one
    of the same element size, so the file stays consistent)."""
    clone(src, dst, skip=("model.safetensors",))
    hdr, data = read_safetensors(src)
    hdr[name]["dtype"] = dtype
    write_safetensors(dst, hdr, data)


def truncate(src, dst, keep):
    clone(src, dst, skip=("model.safetensors",))
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        head = f.read(keep)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(head)


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tf-bad-")
        cls.good = tm.model_dir("ling-tiny")
        cls.exl3 = tm.exl3_pair()[1]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def folder(self):
        return os.path.join(self.tmp.name, self.id().rsplit(".", 1)[-1])

    def expect_error(self, model, tokens, wants, *extra):
        """tfrun on `tokens`, or with tokens None `tfrun --check`."""
        ini = tm.write_ini(self.tmp.name, model)
        if tokens is None:
            p = subprocess.run([tm.env("TF_TFRUN"), ini, "--check", *extra],
                               capture_output=True, text=True, timeout=tm.TIMEOUT_S)
        else:
            p = tm.tfrun(ini, tokens, *extra)
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "(no message)"
        print(f"  rc {p.returncode}: {last}", flush=True)
        self.assertGreater(p.returncode, 0, "a non-zero exit, not a signal")
        self.assertLess(p.returncode, 128, "a non-zero exit, not a signal")
        for w in wants:
            self.assertIn(w, p.stderr + p.stdout)

    def test_router_out_of_range_expert(self):
        path = f"plugins.path={tm.env('TF_BAD_ROUTERS')}"
        self.expect_error(self.good, [1, 2, 3], ["router bad-range", "expert ids must be distinct", "layer "],
                          "--set", path, "--set", "plugins.router=bad-range")

    def test_router_non_finite_weight(self):
        path = f"plugins.path={tm.env('TF_BAD_ROUTERS')}"
        self.expect_error(self.good, [1, 2, 3], ["router bad-nan", "weight nan", "layer "],
                          "--set", path, "--set", "plugins.router=bad-nan")

    def test_router_pinned_for_one_layer(self):
        # [plugins] layer.5.router beats router: only layer 5 routes badly.
        path = f"plugins.path={tm.env('TF_BAD_ROUTERS')}"
        self.expect_error(self.good, [1, 2, 3], ["layer 5 (moe): router bad-range"],
                          "--set", path, "--set", "plugins.router=ling",
                          "--set", "plugins.layer.5.router=bad-range")

    def test_router_pinned_on_a_dense_layer(self):
        # Layer 0 is dense: a router pin there would do nothing.
        self.expect_error(self.good, [1, 2, 3], ["[plugins] layer.0.router",
                                                 "layer 0 (dense) opened no router"],
                          "--set", "plugins.layer.0.router=ling-ref")

    def test_layer_type_nobody_serves(self):
        self.expect_error(self.good, None, ["layer 2", "layer type warp"],
                          "--set", "model.layer.2.attention=warp")

    def test_router_unknown(self):
        self.expect_error(self.good, None, ["plugins", "router", "no router plugin named 'nope'"],
                          "--set", "plugins.router=nope")

    def test_config_missing_key(self):
        d = self.folder()
        edit_config(self.good, d, lambda c: c.pop("num_experts"))
        self.expect_error(d, [1, 2, 3], ["config.json", "num_experts"])

    def test_config_wrong_type(self):
        d = self.folder()
        edit_config(self.good, d, lambda c: c.update(hidden_size="256"))
        self.expect_error(d, [1, 2, 3], ["config.json", "hidden_size"])

    def test_heads_inconsistent_with_tensors(self):
        # 4 heads x head_dim 128 = 512 q_proj rows; the checkpoint has 256.
        d = self.folder()
        edit_config(self.good, d, lambda c: c.update(num_attention_heads=4))
        wants = ["model.layers.0.attention.q_proj.weight", "256", "num_attention_heads"]
        self.expect_error(d, [1, 2, 3], wants)
        self.expect_error(d, None, wants)

    def test_exl3_heads_inconsistent_with_tensors(self):
        d = self.folder()
        edit_config(self.exl3, d, lambda c: c.update(num_attention_heads=4))
        self.expect_error(d, None, ["model.layers.0.attention.q_proj.trellis",
                                    "num_attention_heads"])

    def test_mla_rank_inconsistent_with_tensors(self):
        # kv_lora_rank feeds kv_a_proj_with_mqa's rows in the MLA layers only.
        d = self.folder()
        edit_config(self.good, d, lambda c: c.update(kv_lora_rank=2 * c["kv_lora_rank"]))
        self.expect_error(d, None, ["attention.kv_a_proj_with_mqa", "kv_lora_rank"])

    def test_moe_width_inconsistent_with_tensors(self):
        d = self.folder()
        edit_config(self.good, d,
                    lambda c: c.update(moe_intermediate_size=2 * c["moe_intermediate_size"]))
        self.expect_error(d, None, ["mlp.experts.0.gate_proj", "moe_intermediate_size"])

    def test_checkpoint_missing_layer_tensor(self):
        name = "model.layers.5.mlp.experts.3.up_proj.weight"
        d = self.folder()
        drop_tensor(self.good, d, name)
        self.expect_error(d, [1, 2, 3], ["model.layers.5.mlp.experts.3.up_proj"])
        self.expect_error(d, None, ["model.layers.5.mlp.experts.3.up_proj"])

    def test_checkpoint_missing_norm(self):
        name = "model.layers.2.post_attention_layernorm.weight"
        d = self.folder()
        drop_tensor(self.good, d, name)
        self.expect_error(d, [1, 2, 3], [name])
        self.expect_error(d, None, [name])

    def test_checkpoint_missing_head(self):
        d = self.folder()
        drop_tensor(self.good, d, "lm_head.weight")
        self.expect_error(d, None, ["lm_head"])

    def test_checkpoint_wrong_dtype(self):
        """A tensor of a type its reader cannot take fails --check, named
        with its dtype.  The embedding used to pass --check and fail at the
        first prefill."""
        for name in ("model.layers.0.attention.q_proj.weight",
                     "model.layers.2.post_attention_layernorm.weight",
                     "model.word_embeddings.weight"):
            d = os.path.join(self.folder(), name)
            retype(self.good, d, name, "I16")                  # the size of BF16
            self.expect_error(d, None, [name, "I16"])
        self.expect_error(d, [1, 2, 3], ["model.word_embeddings.weight", "I16"])

    def test_exl3_missing_trellis(self):
        name = "model.layers.0.attention.q_proj.trellis"
        d = self.folder()
        drop_tensor(self.exl3, d, name)
        self.expect_error(d, [1, 2, 3], ["model.layers.0.attention.q_proj"])
        self.expect_error(d, None, ["model.layers.0.attention.q_proj"])

    def test_check_json_names_the_failure(self):
        d = self.folder()
        edit_config(self.good, d, lambda c: c.update(num_attention_heads=4))
        self.expect_error(d, None, ['"ok":\tfalse', "num_attention_heads"], "--json")

    def test_checkpoint_truncated(self):
        d = self.folder()
        truncate(self.good, d, 1 << 20)
        self.expect_error(d, [1, 2, 3], ["model.safetensors"])

    def test_prompt_longer_than_context(self):
        toks = tm.prompt(9, 41, 2048)
        self.expect_error(self.good, toks, ["9 tokens", "context of 8", "[runtime] context"],
                          "--set", "runtime.context=8")

    def test_sequences_over_memory(self):
        """Every sequence counts full: 4096 of 4096 tokens cannot fit in
        the INI's 1G, and the refusal names both numbers."""
        self.expect_error(self.good, None, ["memory plan needs", "x 4096 sequences",
                                            "context of 4096 tokens", "memory_limit allows"],
                          "--set", "runtime.sequences=4096")

    def test_token_outside_vocabulary(self):
        self.expect_error(self.good, [1, 2, 5000], ["token id 5000", "vocabulary"])


if __name__ == "__main__":
    tm.main()
