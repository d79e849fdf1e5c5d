#!/usr/bin/python3
"""The training tool (tools/train) against the runtime's model.

    Equiv  the PyTorch model in float64 equals tests/reference/ling_ref.py
           on ling-tiny: logits and MTP logits to 1e-10
    Smoke  a few training steps on a tiny Ling: the loss falls, and the
           exported checkpoint loads in tfrun with the PyTorch logits
    Repro  the same seed trains the same weights, byte for byte; another
           seed does not
"""
import json
import os
import tempfile
import unittest

import numpy as np
import torch

import trainutil as tu
import checkpoint  # noqa: E402  (tools/train, via trainutil)
import ling_ref  # noqa: E402  (tests/reference)

TINY_SHAPE = ("hidden_size=64 intermediate_size=128 num_hidden_layers=4 layer_group_size=2 "
              "first_k_dense_replace=1 num_attention_heads=2 head_dim=16 num_experts=16 "
              "num_experts_per_tok=2 n_group=4 topk_group=2 moe_intermediate_size=16 "
              "moe_shared_expert_intermediate_size=32 kv_lora_rank=16 qk_nope_head_dim=8 "
              "qk_rope_head_dim=8 v_head_dim=8 clamp_layers=1").split()


def synth(out, *sets):
    args = [tu.TFSYNTH, "--preset", "ling-tiny", "--out", out]
    for s in sets:
        args += ["--set", s]
    tu.run(args)


class Equiv(unittest.TestCase):
    def test_torch_equals_reference(self):
        with tempfile.TemporaryDirectory() as d:
            synth(d)
            toks = [(11 * i + 5) % 2048 for i in range(40)]   # > 2 KDA chunks
            _, model = checkpoint.load(d, torch.float64)
            with torch.no_grad():
                lg, hf = model(torch.tensor([toks]))
                ml, _ = model.mtp(hf[:, :-1], torch.tensor([toks[1:]]))
            ref = ling_ref.Model(d)
            rl, rh = ref.forward(toks)
            rm, _ = ref.mtp(rh[:-1], toks[1:])
            self.assertLess(tu.max_rel(lg[0].numpy(), rl), 1e-10)
            self.assertLess(tu.max_rel(ml[0].numpy(), rm), 1e-10)


def chaptered(text, lines_per=8):
    """Plain text in corpus.py's format: title, blank, lines, blank."""
    lines = [s for s in text.split("\n") if s.strip()]
    return "".join(f"Part {i // lines_per + 1}\n\n" + "\n".join(lines[i:i + lines_per]) + "\n\n"
                   for i in range(0, len(lines), lines_per))


def tiny_run(d):
    """The template and data of a tiny training run in d."""
    corpus = os.path.join(tu.ROOT, "text", "toktrain", "corpus")
    tpl, data = os.path.join(d, "tpl"), os.path.join(d, "data")
    synth(tpl, *TINY_SHAPE)
    os.makedirs(data)
    for src, dst in (("lighthouse.txt", "train.txt"), ("almanac.txt", "heldout.txt")):
        with open(os.path.join(corpus, src)) as f, open(os.path.join(data, dst), "w") as g:
            g.write(chaptered(f.read()))
    return tpl, data


def train(tpl, data, out, *args):
    tu.run([tu.PYTHON, os.path.join(tu.ROOT, "tools", "train", "train.py"),
            "--template", tpl, "--data", data, "--out", out, "--tfrun", tu.TFRUN,
            "--batch", "4", "--seq", "32", "--warmup", "5", "--log-every", "1",
            "--eval-windows", "4", "--save-every", "1000", *args],
           env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))


class Smoke(unittest.TestCase):
    def test_loss_falls_and_export_runs(self):
        with tempfile.TemporaryDirectory() as d:
            tpl, data = tiny_run(d)
            out = os.path.join(d, "out")
            train(tpl, data, out, "--steps", "40")
            with open(os.path.join(out, "train-log.jsonl")) as f:
                loss = [json.loads(line)["loss"] for line in f]
            self.assertLess(np.mean(loss[-5:]), np.mean(loss[:3]) - 1.0, loss)

            toks = [(7 * i + 3) % 2000 for i in range(40)]
            ini = os.path.join(d, "tiny.ini")
            with open(ini, "w") as f:
                f.write(f"[model]\npath = {out}\n[runtime]\ncontext = 256\nthreads = 1\n")
            got = tu.tfrun_logits(ini, toks, os.path.join(d, "rt.f32"))
            _, model = checkpoint.load(out, torch.float64)
            with torch.no_grad():
                want = model(torch.tensor([toks]))[0][0].numpy()
            self.assertLess(tu.max_rel(got, want), 1e-4)
            self.assertEqual(tu.top1(got, want), 1.0)


class Repro(unittest.TestCase):
    def test_seed_fixes_the_weights(self):
        with tempfile.TemporaryDirectory() as d:
            tpl, data = tiny_run(d)
            weights = []
            for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
                out = os.path.join(d, name)
                train(tpl, data, out, "--steps", "4", "--seed", seed)
                with open(os.path.join(out, "model.safetensors"), "rb") as f:
                    weights.append(f.read())
            self.assertEqual(weights[0], weights[1])
            self.assertNotEqual(weights[0], weights[2])


if __name__ == "__main__":
    unittest.main()
