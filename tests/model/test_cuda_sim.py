#!/usr/bin/python3
"""The whole model on cuda-sim: ling-tiny through the CUDA plugins built on
the SIMT harness (tests/simt), `[plugins] backend = cuda-sim`, so every
step of a forward runs in the kernels a GPU would run.

    Logits   the logits of every prompt position against the float64
             reference, with the CPU path's tolerances: one prefill of 56
             rows (MLA's naive form, KDA's chunked kernel), 30 rows in
             chunks of 17 and 13 (MLA's absorbed form; KDA chunked, then
             recurrent on the state it left), 6 rows one at a time
             (decode steps)
    Greedy   greedy decoding gives the ids the CPU path gives

TF_TFRUN is tests/tfrun_sim (tfrun linked with ASan, which the cuda-sim
modules need in the process); without `plugins.path` and the backend pin
it is the CPU path.  TF_CUDA_SIM_PLUGINS is the folder of the modules.
The harness runs each thread as a fiber under ASan, about a second of CPU
per token here, so the prompts are short and each launch runs under one
thread schedule (TF_SIMT_SCHEDULES=forward, set by ctest): every kernel's
race check is in its own tests, and three schedules from saved device
memory per launch would take ten times as long.
"""
import os
import tempfile
import unittest

import tfmodel as tm
from test_mtp import ids_only, run

# A harness run takes minutes where the CPU path takes a second.
tm.TIMEOUT_S = 600

# (tokens, seed, prefill chunk)
PROMPTS = [(56, 31, None), (30, 32, 17), (6, 33, 1)]


def sim_sets():
    return [f"plugins.path={tm.env('TF_CUDA_SIM_PLUGINS')}", "plugins.backend=cuda-sim"]


class Logits(unittest.TestCase):
    def test_logits_match_reference(self):
        model = tm.model_dir("ling-tiny")
        rt, ref = tm.Runtime(model, sets=sim_sets()), tm.Reference(model)
        self.addCleanup(rt.close)
        for n, seed, chunk in PROMPTS:
            toks = tm.prompt(n, seed, rt.vocab)
            tm.check(self, f"cuda-sim {n} tokens, chunk {chunk or 64}", rt.logits(toks, chunk),
                     ref.logits(toks), tm.REF_MAX_REL, tm.REF_MAX_KL, tm.REF_MIN_TOP1)


class Greedy(unittest.TestCase):
    def test_greedy_ids_equal_cpu(self):
        model = tm.model_dir("ling-tiny")
        toks = tm.prompt(6, 34, tm.vocab_of(model))
        with tempfile.TemporaryDirectory(prefix="tf-sim-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")))
            want, _ = run(ini, toks, "-n", "10")
            got, _ = run(ini, toks, "-n", "10", *[a for kv in sim_sets() for a in ("--set", kv)])
        print(f"  greedy ids: cpu {want}, cuda-sim {got}", flush=True)
        self.assertEqual(len(want), 10)
        self.assertEqual(got, want)


if __name__ == "__main__":
    tm.main()
