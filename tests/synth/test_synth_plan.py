#!/usr/bin/python3
"""The real model, planned: tfsynth --preset ling-3.1-flash --header-only and
tfrun conf/ling-3.1-flash-tp2.ini --check pointed at it.

    Sparse      the checkpoints have the model's apparent size (~1.1 TB bf16,
                ~0.2 TB EXL3) yet du counts only their headers
    Parameters  the plan of the bf16 checkpoint (2 bytes a parameter) against
                spec/ling-arch.md §1.12: ~564 G main stack + ~8.2 G MTP, and
                ~25 G active (the cards' 560 G / 25 G)
    Ranks       the EXL3 checkpoint at the recipe's bits on two ranks: each
                holds about half the weights (split and whole-expert MoE),
                its heads' KDA state, the whole MLA latent cache at 262144
                tokens, and fits the 128 GiB of a Spark; no GPU or RDMA
                device is needed although the INI names cuda and roce
    Refusal     a 64 GiB limit is refused naming the bytes, the rank and the
                limit; generating from a header-only checkpoint is refused

Run by ctest (tests/synth/CMakeLists.txt), which sets TF_TFSYNTH, TF_TFRUN,
TF_OUT (scratch folder) and TF_SOURCE_DIR.
"""
import json
import os
import shutil
import struct
import subprocess
import unittest

TIMEOUT_S = 240

# Spec §1.12's sums, from the shapes tfsynth writes; the cards round them
# to 560 G and 25 G.  The main stack and MTP layer are pure shape
# arithmetic, so 1% only absorbs the spec's rounding of each row (a wrong
# layer count or expert size is off by more); active is held to the cards'
# 25 G at 3%, since the spec's own rows add up to 24.5 G.
SPEC_MAIN = 564e9
SPEC_MTP = 8.2e9
SPEC_ACTIVE = 25e9
MAIN_REL, MTP_REL, ACTIVE_REL = 0.01, 0.03, 0.03

# A rank holds half of every split tensor plus the replicated ones
# (embeddings 1.3 GB, norms, routers, MLA's latent projections, eh_proj):
# under 1.5% of the EXL3 model on top of the half.
HALF = (0.50, 0.515)

# What du may count for a checkpoint whose data are holes: its headers and
# index (~40 MB for the EXL3 one's 420k tensors).
MAX_DISK = 128 << 20


def env(name):
    v = os.environ.get(name)
    if not v:
        raise unittest.SkipTest(f"{name} is not set (run through ctest)")
    return v


def run(args, ok=True):
    p = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
    if ok and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def synth(out, *args):
    shutil.rmtree(out, ignore_errors=True)
    run([env("TF_TFSYNTH"), "--preset", "ling-3.1-flash", "--header-only", "--out", out] +
        list(args))
    return out


def headers(folder):
    """Every tensor's (dtype, shape, bytes) from the safetensors headers."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, name), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            h = json.loads(f.read(n))
        for k, v in h.items():
            if k != "__metadata__":
                b, e = v["data_offsets"]
                out[k] = (v["dtype"], v["shape"], e - b)
    return out


def disk_bytes(folder):
    return sum(os.stat(os.path.join(folder, n)).st_blocks * 512 for n in os.listdir(folder))


def apparent_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))


def check(model, *sets, ok=True, json_out=True):
    ini = os.path.join(env("TF_SOURCE_DIR"), "conf", "ling-3.1-flash-tp2.ini")
    args = [env("TF_TFRUN"), ini, "--check", "--set", f"model.path={model}"]
    for s in sets:
        args += ["--set", s]
    p = run(args + (["--json"] if json_out else []), ok)
    return (json.loads(p.stdout) if json_out and ok else None), p


class SynthPlan(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = env("TF_OUT")
        cls.bf16 = synth(os.path.join(out, "ling-3.1-flash-header"))
        cls.exl3 = synth(os.path.join(out, "ling-3.1-flash-exl3-header"), "--exl3")

    @classmethod
    def tearDownClass(cls):
        # Sparse, but 1.3 TB apparent: gone before a copy of the build
        # folder that does not keep holes could meet them.
        shutil.rmtree(cls.bf16, ignore_errors=True)
        shutil.rmtree(cls.exl3, ignore_errors=True)

    def test_sparse(self):
        for folder, apparent in [(self.bf16, 1.0e12), (self.exl3, 1.8e11)]:
            self.assertGreater(apparent_bytes(folder), apparent, folder)
            self.assertLess(disk_bytes(folder), MAX_DISK, folder)

    def test_exl3_layout_at_the_recipe_bits(self):
        h = headers(self.exl3)
        k = {name: h[name + ".trellis"][1][2] // 16 for name in (
            "model.layers.10.mlp.experts.511.up_proj", "model.layers.10.mlp.shared_experts.up_proj",
            "model.layers.0.attention.q_proj", "model.layers.0.mlp.down_proj",
            "model.layers.7.attention.q_proj", "lm_head", "model.layers.72.eh_proj")}
        self.assertEqual(list(k.values()), [3, 5, 4, 4, 6, 6, 4])
        self.assertEqual(h["model.layers.10.mlp.experts.511.down_proj.trellis"][1],
                         [1280 // 16, 4096 // 16, 48])
        self.assertEqual(h["model.word_embeddings.weight"][:2], ("BF16", [157184, 4096]))

    def test_plan_holds_the_spec_parameter_counts(self):
        plan, _ = check(self.bf16, "runtime.memory_limit=4T")
        mem = plan["memory"]
        h = headers(self.bf16)
        self.assertTrue(plan["header_only"])
        self.assertEqual(mem["checkpoint_bytes"], sum(b for _, _, b in h.values()))
        # bf16 but for a few fp32 vectors (A_log, dt_bias, expert_bias).
        f32 = sum(b for d, _, b in h.values() if d == "F32")
        params = (mem["checkpoint_bytes"] - f32) / 2 + f32 / 4
        mtp = sum(b for n, (d, _, b) in h.items() if n.startswith("model.layers.72.")) / 2
        self.assertLess(abs(params - mtp - SPEC_MAIN) / SPEC_MAIN, MAIN_REL, params - mtp)
        self.assertLess(abs(mtp - SPEC_MTP) / SPEC_MTP, MTP_REL, mtp)
        active = mem["checkpoint_active_bytes"] / 2
        self.assertLess(abs(active - SPEC_ACTIVE) / SPEC_ACTIVE, ACTIVE_REL, active)
        # the classes bench/engine/ideal.py splits the active bytes by
        cls = mem["checkpoint_class_bytes"]
        self.assertEqual(sum(cls.values()), mem["checkpoint_bytes"])
        routed = sum(b for n, (_, _, b) in h.items()
                     if ".mlp.experts." in n and not n.startswith("model.layers.72."))
        self.assertEqual(cls["routed experts"], routed)
        self.assertEqual(cls["MTP layer"], mtp * 2)
        self.assertEqual((plan["num_experts"], plan["num_experts_per_tok"]), (512, 8))

    def test_plan_counts_a_trellis_as_the_weights_it_encodes(self):
        # ideal.py's "decoded once" bound: elements by class, a trellis
        # [in/16, out/16, 16K] counted as its in x out weights.
        pb = check(self.bf16, "runtime.memory_limit=4T")[0]["memory"]
        pe = check(self.exl3, "runtime.memory_limit=4T")[0]["memory"]
        h = headers(self.exl3)

        def params(name, shape):
            n = 1
            for d in shape:
                n *= d
            return shape[0] * shape[1] * 256 if name.endswith(".trellis") else n

        def routed(hs, count):
            return sum(count(n, s) for n, (_, s, _) in hs.items()
                       if ".mlp.experts." in n and not n.startswith("model.layers.72."))
        cls = pe["checkpoint_class_params"]
        self.assertEqual(sum(cls.values()), sum(params(n, s) for n, (_, s, _) in h.items()))
        self.assertEqual(cls["routed experts"], routed(h, params))
        # the experts' matrices are the bf16 checkpoint's, element for element
        self.assertEqual(routed({n: v for n, v in h.items() if n.endswith(".trellis")}, params),
                         pb["checkpoint_class_params"]["routed experts"])
        # bf16: two bytes an element but for the fp32 vectors
        self.assertLess(abs(pb["checkpoint_active_params"] - pb["checkpoint_active_bytes"] / 2),
                        1e-3 * pb["checkpoint_active_params"])
        # the EXL3 plan decodes about what the bf16 one multiplies, at fewer bytes
        self.assertLess(abs(pe["checkpoint_active_params"] / pb["checkpoint_active_params"] - 1),
                        0.01)
        self.assertLess(pe["checkpoint_active_bytes"], pb["checkpoint_active_bytes"] / 3)

    def test_each_rank_holds_half_and_fits_a_spark(self):
        total = sum(b for _, _, b in headers(self.exl3).values())
        for moe in ("split", "experts"):
            plan, _ = check(self.exl3, f"tp.moe={moe}")     # the INI's 128G
            mem = plan["memory"]
            self.assertEqual(mem["checkpoint_bytes"], total)
            ranks = mem["ranks"]
            self.assertEqual(len(ranks), 2)
            self.assertGreaterEqual(sum(r["weights_bytes"] for r in ranks), total)
            for r in ranks:
                share = r["weights_bytes"] / total
                self.assertTrue(HALF[0] <= share <= HALF[1], (moe, share))
                # 63 KDA layers x 32 of the 64 heads x 128 x 128 float32.
                self.assertEqual(r["kda_state_bytes"], 63 * 32 * 128 * 128 * 4)
                self.assertLessEqual(r["total_bytes"], 128 << 30)
            # 576 bf16 latents a token on 9 MLA layers + MTP, every rank.
            self.assertEqual(mem["mla_cache_bytes"], 576 * 2 * 262144 * 10)
            self.assertEqual(mem["total_bytes"], max(r["total_bytes"] for r in ranks))
        _, p = check(self.exl3, json_out=False)
        for line in ("rank 0 ", "rank 1 ", "MLA cache", "KDA state", "scratch", "limit per rank",
                     "header-only checkpoint"):
            self.assertIn(line, p.stdout)

    def test_too_small_a_limit_is_refused(self):
        plan, _ = check(self.exl3)
        _, p = check(self.exl3, "runtime.memory_limit=64G", ok=False, json_out=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"needs {plan['memory']['total_bytes']} bytes", p.stderr)
        self.assertIn("of 2 for a context of 262144 tokens", p.stderr)
        self.assertIn(f"allows {64 << 30} bytes", p.stderr)

    def test_generate_refuses_a_header_only_checkpoint(self):
        ini = os.path.join(env("TF_SOURCE_DIR"), "conf", "ling-3.1-flash-tp2.ini")
        p = run([env("TF_TFRUN"), ini, "--set", f"model.path={self.exl3}", "--set",
                 "runtime.memory_limit=1T", "--set", "tp.size=1", "--set",
                 "runtime.context=4096", "-p", "hi"], ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("header-only checkpoint", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
