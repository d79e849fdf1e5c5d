#!/usr/bin/python3
"""Prefill/decode consistency: the logits of position t do not depend on
how the runtime got there.

The same prompt runs in one prefill (one chunk holding it all), in chunks
of 64, 7 and 3 (ragged last chunks) and token by token (chunk 1: the
one-row paths decode uses: KDA's recurrence, MLA's absorbed attention,
per-token experts, the EXL3 one-row product).  Every run must give every
row within tfmodel.PATH_MAX_REL of the one-shot run, in bf16 and in EXL3.
"""
import unittest

import tfmodel as tm

N_TOKENS = 100
CHUNKS = [64, 7, 3, 1]


class Chunks(unittest.TestCase):
    def run_chunks(self, tag, model):
        rt = tm.Runtime(model)
        self.addCleanup(rt.close)
        toks = tm.prompt(N_TOKENS, 31, rt.vocab)
        whole = rt.logits(toks, chunk=N_TOKENS)
        for c in CHUNKS:
            tm.check(self, f"{tag} chunk {c} vs one-shot", rt.logits(toks, chunk=c), whole,
                     tm.PATH_MAX_REL, tm.PATH_MAX_KL, 1.0)

    def test_bf16(self):
        self.run_chunks("bf16", tm.model_dir("ling-tiny"))

    def test_exl3(self):
        self.run_chunks("exl3", tm.exl3_pair()[1])


if __name__ == "__main__":
    tm.main()
