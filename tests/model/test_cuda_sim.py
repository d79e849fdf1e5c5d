#!/usr/bin/python3
"""The whole model on cuda-sim: ling-tiny through the CUDA plugins built on
the SIMT harness (tests/simt), `[plugins] backend = cuda-sim`, so every
step of a forward runs in the kernels a GPU would run.

    Logits   test_reference.py's Bf16: the logits of every prompt position
             against the float64 reference, with the CPU path's
             tolerances: one prefill of 56 rows (MLA's naive form, KDA's
             chunked kernel), 30 rows in chunks of 17 and 13 (MLA's
             absorbed form; KDA chunked, then recurrent on the state it
             left), 6 rows one at a time (decode steps)
    Mtp      test_mtp.py's MtpLogits: the MTP layer's logits
             (--dump-mtp-logits) of 10 tokens against the float64 reference
    Greedy   greedy decoding gives the ids the CPU path gives, serially and
             with MTP drafts 2 deep (ling-tiny's random head has every draft
             rejected: each verify step rolls the device states back), every
             token picked by the backend's sampler (the stats line's count)
    Sample   seeded sampling (temperature, top-k, top-p, min-p) gives the
             CPU path's ids with the backend's sampler picking each token,
             and with MTP drafts (accept = exact: each verify's rows picked
             on the device too); a presence penalty (negative: it changes
             the draws), which the device sampler does not reproduce, falls
             back to the host (no token picked on the device) and still
             gives the CPU path's ids
    TensorParallel  two ranks (--tp-local 2: forked processes over loopback
             tcp, each with its own device), every layer's heads, features
             and lm_head rows split, the blocks' device outputs summed
             through the host: the prompt's logits against the float64
             reference, one rank on the device and the same two ranks on
             the CPU; the greedy ids the CPU's two ranks give
    Exl3     the fixture's EXL3 checkpoint (every linear a trellis, the
             experts through moe-cuda's grouped EXL3 MLPs): a 12-row prefill
             and 3 decode steps against the CPU path on the same checkpoint
             and against the float64 reference's bit-exact decode (the
             decode steps within the bf16 model's tolerance)
    Graph    one-row steps recorded and replayed as CUDA graphs
             ([runtime] cuda_graph) give the bits of launching each kernel by
             itself: a prompt fed a row at a time, then a decode
    GraphDrafts, GraphRanks, GraphRecipe, GraphRecipeShort
             the same with MTP drafts 2 deep (verifies of 3 rows, the MTP
             layer's drafts and catch-ups as graphs), over two ranks (each
             step in parts between its all-reduces) and both, the recipe's
             settings: the prompt's logits and the MTP layer's, and the
             generated ids, bit-equal with graphs off; every such step ran
             as graphs, the parts counted, and graphs were replayed
    UnifiedMemory  [runtime] unified_memory on a simulated integrated device:
             the logits of the bf16 and EXL3 checkpoints with the weights
             read in place are the bits of copying them, and the device
             memory drops by the weights mapped; bad settings name the key
    UnifiedMemoryParts  the same over two ranks (parts read in place or
             copied): the logits' bits
    TensorParallelExl3  an EXL3 checkpoint over two ranks, the experts'
             features split and, with [tp] moe = experts, the experts placed
             whole: the prompt's logits against the float64 reference's
             bit-exact decode and one rank on the device

TF_TFRUN is tests/tfrun_sim (tfrun linked with ASan, which the cuda-sim
modules need in the process); without the backend pin it is the CPU path.
TF_DEVICE_PLUGINS is the folder of the cuda-sim modules (added with
`plugins.path`).  scripts/gpu-check.sh runs the same tests on a GPU with
TF_DEVICE_BACKEND=cuda, the plain tfrun and no TF_DEVICE_PLUGINS.
The harness runs each thread as a fiber under ASan, about a second of CPU
per token here, so the prompts are short and each launch runs under one
thread schedule (TF_SIMT_SCHEDULES=forward, set by ctest): every kernel's
race check is in its own tests, and three schedules from saved device
memory per launch would take ten times as long.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

import test_mtp
import test_reference
import tfmodel as tm
from test_mtp import ids_only, run

# A harness run takes minutes where the CPU path takes a second.
tm.TIMEOUT_S = 600

# (tokens, seed, prefill chunk)
PROMPTS = [(56, 31, None), (30, 32, 17), (6, 33, 1)]

BACKEND = os.environ.get("TF_DEVICE_BACKEND", "cuda-sim")


def device_sets():
    """The INI overrides that run the model on the device backend."""
    path = os.environ.get("TF_DEVICE_PLUGINS")
    return ([f"plugins.path={path}"] if path else []) + [f"plugins.backend={BACKEND}"]


def device_args(*extra):
    """tfrun's --set arguments of device_sets() and `extra`."""
    return [a for kv in device_sets() + list(extra) for a in ("--set", kv)]


class Logits(test_reference.Bf16):
    PROMPTS = PROMPTS
    SETS = tuple(device_sets())
    TAG = BACKEND


class Mtp(test_mtp.MtpLogits):
    SETS = tuple(device_sets())
    TOKENS = 10


class Exl3(unittest.TestCase):
    """tests/model's EXL3 checkpoint (ling-tiny-q-exl3 at the recipe's bits:
    routed experts 3, the shared expert 5, dense and KDA 4, MLA and the head
    6) on the device: every linear through exl3-cuda, the routed and shared
    experts and the dense MLP through moe-cuda's EXL3 kernels.  The device
    decodes each weight to fp16 exactly, as the reference does; the CPU's
    fused decode skips that rounding (test_reference.Exl3: 4-5e-4 at the
    logits).  Decode rows run fp32 GEMVs only, so they are held to the
    reference within the bf16 model's tolerance; above 8 rows a prefill's
    linears and experts take the WMMA GEMM, fp16 activations
    (test_reference.Exl3's bound)."""

    # (tokens, seed, prefill chunk, max rel and KL against the reference)
    PROMPTS = [(12, 35, None, test_reference.Exl3.EXACT_MAX_REL,
                test_reference.Exl3.EXACT_MAX_KL),
               (3, 36, 1, tm.REF_MAX_REL, tm.REF_MAX_KL)]
    # Against the CPU path: the rounding the CPU skips, 4x over.
    MAX_REL = 2e-3
    MAX_KL = 1e-5

    def test_exl3_matches_cpu(self):
        _, model = tm.exl3_pair()
        # The CPU's float path: the device's activations are not integers.
        cpu = tm.Runtime(model, sets=["plugins.quant=exl3"])
        dev = tm.Runtime(model, sets=device_sets())
        ref = tm.Reference(model)
        self.addCleanup(cpu.close)
        self.addCleanup(dev.close)
        for n, seed, chunk, ref_rel, ref_kl in self.PROMPTS:
            toks = tm.prompt(n, seed, cpu.vocab)
            got = dev.logits(toks, chunk)
            what = f"{BACKEND} exl3 {n} tokens, chunk {chunk or 64}"
            tm.check(self, what + " vs cpu", got, cpu.logits(toks, chunk), self.MAX_REL,
                     self.MAX_KL, tm.REF_MIN_TOP1)
            tm.check(self, what + " vs reference", got, ref.logits(toks), ref_rel, ref_kl,
                     tm.REF_MIN_TOP1)


def device_samples(stderr):
    """The stats line's count of tokens the backend's sampler picked."""
    m = re.search(r"tokens sampled on the device: (\d+)", stderr)
    return int(m.group(1)) if m else 0


DRAFTS = ("mtp.enabled=true", "mtp.adaptive=false", "mtp.max_depth=2")


class Greedy(unittest.TestCase):
    def test_greedy_ids_equal_cpu(self):
        model = tm.model_dir("ling-tiny")
        toks = tm.prompt(6, 34, tm.vocab_of(model))
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")))
            want, cpu = run(ini, toks, "-n", "10")
            got, dev = run(ini, toks, "-n", "10", *device_args())
            drafted, dra = run(ini, toks, "-n", "10", *device_args(*DRAFTS))
        print(f"  greedy ids: cpu {want}, {BACKEND} {got}, with drafts {drafted}", flush=True)
        self.assertEqual(len(want), 10)
        self.assertEqual(got, want)
        self.assertEqual(drafted, want)
        self.assertEqual(device_samples(cpu), 0)
        self.assertEqual(device_samples(dev), 10)
        # The last token is sampled, never fed: 9 forwards; each verify
        # picks its draft rows too.
        self.assertGreater(device_samples(dra), 10)


class Sample(unittest.TestCase):
    """Seeded sampling picked by the backend's sampler, on the ids the CPU
    path's host sampler picks: the device sampler is bit-equal to core's
    on the harness (on a GPU, a draw within expf's last-bit difference of a
    boundary could differ: tests/simt/README.md)."""
    ARGS = ("--temp", "1.5", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.01",
            "--seed", "11", "-n", "5")

    def test_sampled_ids_equal_cpu(self):
        model = tm.model_dir("ling-tiny")
        toks = tm.prompt(4, 35, tm.vocab_of(model))
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")))
            want, _ = run(ini, toks, *self.ARGS)
            greedy, _ = run(ini, toks, "-n", "5")
            got, dev = run(ini, toks, *self.ARGS, *device_args())
            drafted, dra = run(ini, toks, *self.ARGS, *device_args(*DRAFTS))
            pen = ("--set", "sampling.presence_penalty=-20")
            want_pen, _ = run(ini, toks, *self.ARGS, *pen)
            got_pen, host = run(ini, toks, *self.ARGS, *pen, *device_args())
        print(f"  sampled ids: cpu {want}, {BACKEND} {got} ({device_samples(dev)} on the "
              f"device), with drafts {drafted} ({device_samples(dra)}); presence penalty: "
              f"cpu {want_pen}, {BACKEND} {got_pen} ({device_samples(host)})", flush=True)
        self.assertEqual(len(want), 5)
        self.assertNotEqual(want, greedy, "the draws must not be the greedy ids")
        self.assertEqual(got, want)
        self.assertEqual(device_samples(dev), 5)
        self.assertEqual(drafted, want)
        self.assertGreaterEqual(device_samples(dra), 5)
        self.assertNotEqual(want_pen, want, "the penalty must change the draws")
        self.assertEqual(got_pen, want_pen)
        self.assertEqual(device_samples(host), 0)


class TensorParallel(unittest.TestCase):
    TOKENS = 8
    LOGIT_TOL = 1e-4        # tests/tp: ranks' partial sums round apart, nothing more

    def test_two_ranks(self):
        model = tm.model_dir("ling-tiny")
        toks = tm.prompt(self.TOKENS, 35, tm.vocab_of(model))
        tp2 = ("--tp-local", "2")
        runs = {"tp2 " + BACKEND: tm.Runtime(model, device_sets(), tp2),
                "tp1 " + BACKEND: tm.Runtime(model, device_sets()),
                "tp2 cpu": tm.Runtime(model, (), tp2)}
        try:
            got = {k: r.logits(toks) for k, r in runs.items()}
        finally:
            for r in runs.values():
                r.close()
        dev = got["tp2 " + BACKEND]
        tm.check(self, f"tp2 {BACKEND} vs float64", dev, tm.Reference(model).logits(toks),
                 max_rel=2e-5, min_top1=1.0)
        for k in ("tp1 " + BACKEND, "tp2 cpu"):
            tm.check(self, f"tp2 {BACKEND} vs {k}", dev, got[k], max_rel=self.LOGIT_TOL,
                     min_top1=1.0)
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")))
            want, _ = run(ini, toks[:4], "-n", "4", *tp2)
            ids, _ = run(ini, toks[:4], "-n", "4", *tp2, *device_args())
        print(f"  greedy ids over two ranks: cpu {want}, {BACKEND} {ids}", flush=True)
        self.assertEqual(len(want), 4)
        self.assertEqual(ids, want)


class Graph(unittest.TestCase):
    """Every step of one row runs as a graph with cuda_graph on.  The first
    step takes the sequence's first MLA cache page and zeroes its KDA
    states: nodes the second step has not, so it builds a graph again (a
    re-capture); the rest replay that one with their own token, position
    and cache length.  Logits of each prompt row must be the bits of
    cuda_graph off, and the generated text (tokenizer.json kept: --json
    prints no ids) the same."""
    PROMPT, N = 5, 3

    def test_graphs_equal_launches(self):
        model = tm.model_dir("ling-tiny")
        vocab = tm.vocab_of(model)
        toks = tm.prompt(self.PROMPT, 35, vocab)
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, model, chunk=1)
            got = {}
            for graph in ("true", "false"):
                out = os.path.join(d, f"logits-{graph}.f32")
                p = tm.tfrun(ini, toks, "-n", str(self.N), "--dump-logits", out,
                             *device_args(f"runtime.cuda_graph={graph}"))
                self.assertEqual(p.returncode, 0, p.stderr)
                stats = json.loads(p.stdout.strip().splitlines()[-1])
                with open(out, "rb") as f:
                    got[graph] = (f.read(), stats)
        (on, son), (off, soff) = got["true"], got["false"]
        steps = self.PROMPT + self.N - 1        # the last id is not fed back
        print(f"  graphs on: {son['graph_steps']} steps, {son['graph_built']} built, "
              f"text {son['text']!r}; off: text {soff['text']!r}", flush=True)
        self.assertEqual(len(on), self.PROMPT * vocab * 4)
        self.assertEqual(on, off, "logits with graphs differ from launches one by one")
        self.assertTrue(son["text"])
        self.assertEqual(son["text"], soff["text"])
        self.assertEqual(son["generated_tokens"], self.N)
        self.assertEqual((son["graph_steps"], son["graph_built"]), (steps, 2))
        self.assertEqual((soff["graph_steps"], soff["graph_built"]), (0, 0))

def graph_line(stderr):
    """The stats line's device graphs: (steps, graphs run, built), zeros
    when there is none (graphs off)."""
    m = re.search(r"device graphs: (\d+) steps, (\d+) graphs run, (\d+) built", stderr)
    return tuple(int(g) for g in m.groups()) if m else (0, 0, 0)


def mtp_counts(stderr):
    """The stats line's drafts: (drafted, accepted, drafting steps, main-model
    passes); zeros without [mtp]."""
    m = re.search(r"drafter \S+: drafted (\d+), accepted (\d+),.* in (\d+) drafting steps, "
                  r"main-model passes (\d+)", stderr)
    return tuple(int(g) for g in m.groups()) if m else (0, 0, 0, 0)


class GraphParts(unittest.TestCase):
    """Steps recorded as graphs beyond one row of one sequence: with [mtp]
    the prompt goes a token a step, each followed by a teacher-forced draft
    (--dump-mtp-logits), then greedy decoding drafts 2 deep, each verify
    3 rows in one step (prefill_chunk 3) with its tape kept on the device;
    with two ranks every step comes in parts, one before each all-reduce
    and one after the last.  ling-tiny's random MTP head has every draft
    rejected, so the counts below are fixed:
      main steps  the prompt's rows and each main-model pass after it
      drafts      the teacher-forced ones (all prompt rows but the last)
                  and those drafted
      catch-ups   the MTP layer fed its kept rows before a draft: all but
                  the first two prompt rows' drafts, and each drafting step
    each a step run as graphs; a main step is 2 L + 1 graphs over two ranks
    (L layers), a draft 3 (the MTP layer's two all-reduces), a catch-up 1
    (no all-reduce: its output is not wanted).  With graphs off the
    logits, the MTP layer's logits and the ids must be the same bits."""
    SETS, ARGS = (), ()
    PROMPT, N = 4, 5

    def run_graphs(self):
        model = tm.model_dir("ling-tiny")
        toks = tm.prompt(self.PROMPT, 36, tm.vocab_of(model))
        mtp = "mtp.enabled=true" in self.SETS
        with open(os.path.join(model, "config.json")) as f:
            layers = json.load(f)["num_hidden_layers"]
        got = {}
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")), chunk=3 if mtp else 1)
            for graph in ("true", "false"):
                dumps = [os.path.join(d, f"logits-{graph}.f32")]
                if mtp:
                    dumps.append(os.path.join(d, f"mtp-{graph}.f32"))
                args = [a for k, f in zip(("--dump-logits", "--dump-mtp-logits"), dumps)
                        for a in (k, f)]
                ids, err = run(ini, toks, "-n", str(self.N), *args, *self.ARGS,
                               *device_args(*self.SETS, f"runtime.cuda_graph={graph}"))
                logits = []
                for f in dumps:
                    with open(f, "rb") as fh:
                        logits.append(fh.read())
                got[graph] = (ids, logits, graph_line(err), mtp_counts(err))
        (ids, logits, g_on, m_on), (ids_off, logits_off, g_off, m_off) = got["true"], got["false"]
        print(f"  graphs on: {g_on[0]} steps, {g_on[1]} graphs run, {g_on[2]} built; ids "
              f"{ids}, off {ids_off}; mtp (drafted, accepted, steps, passes) {m_on}",
              flush=True)
        self.assertEqual(len(ids), self.N)
        self.assertEqual(ids, ids_off)
        vocab = tm.vocab_of(model)
        self.assertEqual([len(x) for x in logits],
                         [self.PROMPT * vocab * 4] + ([(self.PROMPT - 1) * vocab * 4] if mtp else []))
        for k, (a, b) in enumerate(zip(logits, logits_off)):
            self.assertEqual(a, b, ("logits", "MTP logits")[k] + " with graphs differ from launches")
        self.assertEqual(m_on, m_off, "the drafts with graphs differ")
        self.assertEqual(g_off, (0, 0, 0))
        drafted, _, rounds, passes = m_on
        main = self.PROMPT + (passes if mtp else self.N - 1)
        drafts = self.PROMPT - 1 + drafted if mtp else 0
        catchups = self.PROMPT - 2 + rounds if mtp else 0
        parts = 2 * layers + 1 if "--tp-local" in self.ARGS else 1
        draft_parts = 3 if parts > 1 else 1
        self.assertEqual(g_on[0], main + drafts + catchups, "steps run as graphs")
        self.assertEqual(g_on[1], main * parts + drafts * draft_parts + catchups,
                         "graphs run: parts of those steps")
        self.assertLess(g_on[2], g_on[1], "no graph was replayed")
        if mtp and self.N > 1:
            self.assertGreater(passes, 1, "no verify step")


class GraphDrafts(GraphParts):
    SETS = DRAFTS

    def test_graphs_equal_launches(self):
        self.run_graphs()


class GraphRanks(GraphParts):
    ARGS = ("--tp-local", "2")

    def test_graphs_equal_launches(self):
        self.run_graphs()


class GraphRecipe(GraphParts):
    SETS, ARGS = DRAFTS, ("--tp-local", "2")

    def test_graphs_equal_launches(self):
        self.run_graphs()


class GraphRecipeShort(GraphRecipe):
    """CI's: the prompt's 3 rows and 2 teacher-forced drafts, nothing
    generated past the first token; the third row replays the second's
    parts."""
    PROMPT, N = 3, 1


class TensorParallelExl3(unittest.TestCase):
    """tfsynth's random trellises (--exl3, the recipe's bits) on a ling-tiny
    variant whose every rank's share is whole Hadamard blocks of 128: the
    experts' and the shared expert's 256 features, MLA heads of 64 + 64
    query and 128 value features (the fixture's ling-tiny-q-exl3 has
    128-feature experts and 96-feature heads, which the CPU's EXL3
    linears refuse to split too).  8 rows: GEMVs only, which decode each
    weight as the reference does, so the bf16 model's tolerance holds."""

    SHAPE = ["hidden_size=128", "num_hidden_layers=4", "intermediate_size=256",
             "num_experts=8", "num_experts_per_tok=2", "moe_intermediate_size=256",
             "moe_shared_expert_intermediate_size=256", "qk_nope_head_dim=64",
             "qk_rope_head_dim=64", "v_head_dim=128"]
    TOKENS = 8
    LOGIT_TOL = 1e-4        # tests/tp: ranks' partial sums round apart, nothing more

    def test_two_ranks(self):
        tfsynth = tm.env("TF_TFSYNTH")
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            model = os.path.join(d, "ling-tiny-tp-exl3")
            p = subprocess.run([tfsynth, "--preset", "ling-tiny", "--exl3", "--out", model] +
                               [a for kv in self.SHAPE for a in ("--set", kv)],
                               capture_output=True, text=True, timeout=tm.TIMEOUT_S)
            self.assertEqual(p.returncode, 0, p.stderr)
            toks = tm.prompt(self.TOKENS, 37, tm.vocab_of(model))
            ref = tm.Reference(model).logits(toks)
            one = tm.Runtime(model, device_sets())
            self.addCleanup(one.close)
            tp1 = one.logits(toks)
            for moe in ("split", "experts"):
                two = tm.Runtime(model, device_sets() + [f"tp.moe={moe}"], ("--tp-local", "2"))
                self.addCleanup(two.close)
                got = two.logits(toks)
                what = f"tp2 {BACKEND} exl3 (moe {moe})"
                tm.check(self, what + " vs float64", got, ref, tm.REF_MAX_REL, tm.REF_MAX_KL,
                         tm.REF_MIN_TOP1)
                tm.check(self, what + f" vs tp1 {BACKEND}", got, tp1, self.LOGIT_TOL,
                         min_top1=1.0)


class UnifiedMemory(unittest.TestCase):
    """[runtime] unified_memory on a simulated integrated device
    (TF_SIMT_INTEGRATED=1): the device plugins read the checkpoint's
    weights in place (plain-cuda's weights, exl3-cuda's and moe-cuda's
    trellises; moe-cuda widens bf16 MLPs to fp32, which stay copies), so the
    logits are the bits of copying them (the kernels read the same bytes),
    and the harness's peak of device memory (TF_SIMT_STATS) drops by at
    least the most bytes the backend reports mapped at once; the bytes it
    mapped in all must cover every weight those linears read (MLA's
    kv_b_proj is opened, read into its absorbed form and closed: mapped,
    but not all at once).  `on` on a device that is not integrated,
    and a value not of the key's choices, fail naming the key; auto maps
    on an integrated device only, and `tfrun --check` says so.  On a GPU
    (scripts/gpu-check.sh) the device is what it is: the in-place runs
    need an integrated one (GB10) and skip elsewhere (an H200), and the
    harness's memory count is not there."""
    TOKENS = 5
    SIM = BACKEND == "cuda-sim"

    @staticmethod
    def _check_says(ini, integrated):
        """Whether `tfrun --check` (auto) reports the weights read in place."""
        env = dict(os.environ, TF_SIMT_INTEGRATED=integrated)
        p = subprocess.run([tm.env("TF_TFRUN"), ini, "--check"] + device_args(),
                           capture_output=True, text=True, timeout=tm.TIMEOUT_S, env=env)
        if p.returncode != 0:
            raise AssertionError(f"tfrun --check exited {p.returncode}: {p.stderr.strip()}")
        return "(unified memory: weights read in place)" in p.stdout

    @staticmethod
    def _run(ini, toks, integrated, *sets, args=()):
        """tfrun's (process, logits, harness's device memory peak, (bytes
        mapped, at most at once)); args are more of its arguments."""
        env = dict(os.environ, TF_SIMT_STATS="1", TF_SIMT_INTEGRATED=integrated)
        out = ini + ".f32"
        cmd = [tm.env("TF_TFRUN"), ini, "--tokens", ",".join(map(str, toks)), "--json", "-n",
               "1", "--dump-logits", out] + list(args) + device_args("runtime.log_level=info",
                                                                        *sets)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=tm.TIMEOUT_S, env=env)
        logits = b""
        if p.returncode == 0:
            with open(out, "rb") as f:
                logits = f.read()
        peak = re.search(r"simt: device memory peak (\d+) bytes", p.stderr)
        mapped = re.search(r"(\d+) bytes of weights read in place, not copied "
                           r"\((\d+) at most at once\)", p.stderr)
        return (p, logits, int(peak.group(1)) if peak else None,
                tuple(map(int, mapped.groups())) if mapped else (0, 0))

    def _check(self, model, lin_bytes):
        toks = tm.prompt(self.TOKENS, 38, tm.vocab_of(model))
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, model)
            if not self.SIM and not self._check_says(ini, "1"):
                self.skipTest(f"{BACKEND}: the device is not integrated (auto copies)")
            p_on, on, peak_on, (mapped, at_once) = self._run(ini, toks, "1",
                                                             "runtime.unified_memory=on")
            p_off, off, peak_off, none = self._run(ini, toks, "1", "runtime.unified_memory=off")
        name = os.path.basename(model)
        print(f"  {name}: device memory peak {peak_off} bytes copying, {peak_on} mapping "
              f"{mapped} bytes of weights ({at_once} at once; {lin_bytes} in the linears)",
              flush=True)
        self.assertEqual(p_on.returncode, 0, p_on.stderr)
        self.assertEqual(p_off.returncode, 0, p_off.stderr)
        self.assertIn("unified memory (on): weights read in place", p_on.stderr)
        self.assertIn("unified memory (off): weights copied", p_off.stderr)
        self.assertEqual(len(on), self.TOKENS * tm.vocab_of(model) * 4)
        self.assertEqual(on, off, f"{name}: logits reading weights in place differ from copies")
        self.assertEqual(none, (0, 0))
        self.assertGreaterEqual(mapped, lin_bytes)
        self.assertGreater(at_once, 0)
        if self.SIM:
            self.assertGreaterEqual(peak_off - peak_on, at_once)

    def test_bf16_in_place(self):
        model = tm.model_dir("ling-tiny")
        self._check(model, linear_bytes(model, ".weight", False))

    def test_exl3_in_place(self):
        _, model = tm.exl3_pair()
        self._check(model, linear_bytes(model, ".trellis", True))

    def test_settings(self):
        model = tm.model_dir("ling-tiny")
        toks = tm.prompt(2, 39, tm.vocab_of(model))
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, model)
            if not self.SIM and self._check_says(ini, "0"):
                self.skipTest(f"{BACKEND}: the device is integrated (nothing refuses `on`)")
            p, _, _, _ = self._run(ini, toks, "0", "runtime.unified_memory=on")
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("[runtime] unified_memory = on: device 0 is not integrated", p.stderr)
            p, _, _, _ = self._run(ini, toks, "1", "runtime.unified_memory=always")
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("unified_memory", p.stderr)
            self.assertIn("always", p.stderr)
            p, _, _, mapped = self._run(ini, toks, "0")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("unified memory (auto): weights copied", p.stderr)
            self.assertEqual(mapped, (0, 0))
            # --check says which, auto deciding by the device.
            self.assertFalse(self._check_says(ini, "0"))
            if self.SIM:
                self.assertTrue(self._check_says(ini, "1"))


class UnifiedMemoryParts(unittest.TestCase):
    """Two ranks (--tp-local 2) on a simulated integrated device: a rank's
    part of a linear's output rows is a view of the checkpoint, read in
    place; a part of its inputs, packed on the host, is copied.  The
    logits are the bits of copying every weight."""

    def test_two_ranks_in_place(self):
        if BACKEND != "cuda-sim":
            self.skipTest("the harness's simulated integrated device")
        model = tm.model_dir("ling-tiny")
        toks = tm.prompt(4, 40, tm.vocab_of(model))
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, model)
            runs = {um: UnifiedMemory._run(ini, toks, "1", f"runtime.unified_memory={um}",
                                           args=("--tp-local", "2")) for um in ("on", "off")}
        (p_on, on, _, (mapped, _)), (p_off, off, _, none) = runs["on"], runs["off"]
        print(f"  two ranks: rank 0 read {mapped} bytes of weights in place "
              f"({linear_bytes(model, '.weight', False)} in the whole linears)", flush=True)
        self.assertEqual(p_on.returncode, 0, p_on.stderr)
        self.assertEqual(p_off.returncode, 0, p_off.stderr)
        self.assertEqual(len(on), len(toks) * tm.vocab_of(model) * 4)
        self.assertEqual(on, off, "two ranks' logits reading weights in place differ")
        self.assertGreater(mapped, 0)
        self.assertEqual(none, (0, 0))


def linear_bytes(model, suffix, mlps):
    """The bytes of the checkpoint's tensors named *<suffix> of two
    dimensions or more, outside the embeddings and the MTP layer (off in
    write_ini's INI), and outside the MLPs unless `mlps`: the weights the
    device linears (plain-cuda, exl3-cuda) and, with `mlps`, moe-cuda's
    EXL3 MLPs read."""
    with open(os.path.join(model, "config.json")) as f:
        layers = json.load(f)["num_hidden_layers"]
    total = 0
    for name in sorted(os.listdir(model)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(model, name), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            head = json.loads(f.read(n))
        for k, v in head.items():
            m = re.match(r"model\.layers\.(\d+)\.", k)
            if (k.endswith(suffix) and (mlps or ".mlp." not in k) and "embeddings" not in k and
                    len(v["shape"]) >= 2 and (not m or int(m.group(1)) < layers)):
                total += v["data_offsets"][1] - v["data_offsets"][0]
    return total

if __name__ == "__main__":
    tm.main()
