#!/usr/bin/python3
"""The MTP layer (spec 1.10) and speculative decoding (spec 4.2).

    MtpLogits    tfrun --dump-mtp-logits on ling-tiny against ling_ref's
                 Model.mtp in float64: row t from the main model's hidden at
                 t and token t + 1, at position t
    Speculative  [mtp] enabled generates, token for token, what serial
                 decoding generates: greedy and seeded sampling, drafts 1..3
                 deep at a fixed depth, and adaptive with p_min (its budget
                 1, so that it drafts in replies this short), several
                 prompts, and drafts running into the end of the context; on
                 ling-tiny (its random MTP head is always rejected) and the
                 trained ling-nano (often accepted); accept = standard at
                 temperature 0 too
    PlainStretch adaptive depth that decodes plainly does not feed the MTP
                 layer past a step's rows, and gives [mtp] off's tokens
    BadInput     [mtp] enabled without an MTP layer, max_depth, p_min,
                 adaptive, accept or budget out of range
    Drafters     [plugins] drafter: ngram (prompt lookup) generates serial
                 decoding's tokens, greedy and seeded, drafting where the text
                 repeats; accept = standard at a temperature runs it; drafters
                 that break the contract (an id outside the vocabulary, more
                 drafts than asked for, an error, a depth past the most) fail
                 the step naming the plugin, one that proposes nothing or
                 junk gives serial's tokens; an ABI 1.11 drafter is refused;
                 [mtp] accept names [draft] accept; [ngram] keys out of range
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

import tfmodel as tm
import compare  # noqa: E402  (tests/reference, on the path tfmodel set)
import ling_ref  # noqa: E402

ROOT = os.path.join(tm.HERE, "..", "..")
NANO = os.path.join(ROOT, "models", "ling-nano")
NANO_INI = os.path.join(ROOT, "conf", "ling-nano.ini")
NANO_EXL3 = os.path.join(ROOT, "models", "ling-nano-exl3")
NANO_EXL3_INI = os.path.join(ROOT, "conf", "ling-nano-exl3.ini")
# --set overrides of each drafting configuration checked against serial.
DRAFTING = [(f"depth {k}", ("mtp.adaptive=false", f"mtp.max_depth={k}")) for k in (1, 2, 3, 8)] + [
    ("adaptive", ("mtp.adaptive=true", "mtp.max_depth=3", "mtp.p_min=0.2", "mtp.budget=1"))]
SEEDS = (1, 2, 3)


def run(ini, tokens, *extra):
    """tfrun's generated ids (a checkpoint without tokenizer.json prints
    ids) and its stderr."""
    cmd = [tm.env("TF_TFRUN"), ini, "--tokens", ",".join(map(str, tokens))] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=tm.TIMEOUT_S)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return [int(t) for t in p.stdout.strip().split(",") if t], p.stderr


def ids_only(model, d, config=None):
    """model's checkpoint in folder d (made), less tokenizer.json, so that
    tfrun takes and prints ids; with its config.json replaced by `config`
    when given."""
    os.mkdir(d)
    for f in os.listdir(model):
        if f != "tokenizer.json" and not (config and f == "config.json"):
            os.symlink(os.path.abspath(os.path.join(model, f)), os.path.join(d, f))
    if config:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
    return d


def nano_sets(d):
    """--set overrides running conf/ling-nano.ini on ids (in folder d)."""
    return (f"model.path={ids_only(NANO, os.path.join(d, 'nano'))}", "chat.template=raw")


def mtp_line(stderr):
    """The stats line's drafts: (drafted, accepted, tokens per pass)."""
    m = re.search(r"drafter \S+: drafted (\d+), accepted (\d+),.* tokens per pass ([0-9.]+)", stderr)
    if not m:
        raise AssertionError(f"no mtp stats line in: {stderr!r}")
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


class MtpLogits(unittest.TestCase):
    # INI overrides and prompt length: test_cuda_sim.py runs these cases
    # on a device backend, with a shorter prompt.
    SETS = ()
    TOKENS = 48

    def test_ling_tiny(self):
        model = tm.model_dir("ling-tiny")
        ref = ling_ref.Model(model)
        toks = tm.prompt(self.TOKENS, 5, ref.V)
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")))
            out = os.path.join(d, "mtp.f32")
            run(ini, toks, "-n", "1", "--set", "mtp.enabled=true", "--dump-mtp-logits", out,
                *[a for kv in self.SETS for a in ("--set", kv)])
            got = compare.load(out, ref.V).reshape(len(toks) - 1, ref.V)
        _, hidden = ref.forward(toks)
        want = ref.mtp(hidden[:-1], toks[1:])[0]
        tm.check(self, "ling-tiny MTP logits vs float64", got, want,
                 tm.REF_MAX_REL, tm.REF_MAX_KL, tm.REF_MIN_TOP1)

    def test_needs_mtp_enabled(self):
        model = tm.model_dir("ling-tiny")
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, model)
            p = tm.tfrun(ini, [1, 2, 3], "--dump-mtp-logits", os.path.join(d, "x"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("[mtp] enabled", p.stderr)


class VerifyRows(unittest.TestCase):
    """What `accept = exact` rests on: a verify's few rows get, bit for
    bit, the logits each row would get alone.  Prefilled one row at a
    time, then 2, 3, 8, 9 and 15 at a time (a verify at depth 8 is 9 rows),
    every position's logits alike, on bf16 weights and on EXL3 through
    each CPU path.  From 16 rows of one sequence KDA takes its chunked form
    (KDA_SUBCHUNK, plugins/kda/kda.c): a prefill's bits, not a verify's."""

    def test_rows_as_alone(self):
        bf16, exl3 = tm.exl3_pair()
        for tag, model, sets in (("bf16", bf16, ()), ("exl3", exl3, ()),
                                 ("exl3-int", exl3, ("plugins.quant=exl3-int",)),
                                 ("exl3-q8", exl3, ("plugins.quant=exl3-q8",))):
            rt = tm.Runtime(model, sets)
            try:
                toks = tm.prompt(24, 41, rt.vocab)
                alone = rt.logits(toks, chunk=1)
                for chunk in (2, 3, 8, 9, 15):
                    with self.subTest(tag=tag, chunk=chunk):
                        got = rt.logits(toks, chunk=chunk)
                        rows = [i for i in range(len(toks)) if (got[i] != alone[i]).any()]
                        self.assertEqual(rows, [], f"{tag}: rows whose logits in steps of "
                                         f"{chunk} differ from one at a time")
            finally:
                rt.close()


class Speculative(unittest.TestCase):
    """Each prompt, sampling and depth: the ids with drafts are the ids
    without."""

    def same(self, tag, ini, prompts, n, sets=(), seeds=SEEDS, drafting=DRAFTING,
             drafts=False):
        """drafts: every fixed depth must have drafted in every run (a head
        that predicts), adaptive (budget 1) in some: its depth follows the
        wall time, and p_min may cut all of one reply's few probes."""
        base = [a for kv in sets for a in ("--set", kv)]
        adaptive = 0
        for pi, toks in enumerate(prompts):
            for temp, seeds in (("0", (0,)), ("0.8", seeds)):
                for seed in seeds:
                    samp = base + ["-n", str(n), "--temp", temp, "--seed", str(seed)]
                    want, _ = run(ini, toks, *samp)
                    for how, sets in drafting:
                        with self.subTest(tag=tag, prompt=pi, temp=temp, seed=seed, how=how):
                            extra = [a for kv in ("mtp.enabled=true",) + sets
                                     for a in ("--set", kv)]
                            got, err = run(ini, toks, *samp, *extra)
                            self.assertEqual(got, want)
                            drafted, accepted, tpp = mtp_line(err)
                            if drafts and how != "adaptive":
                                self.assertGreater(drafted, 0, err)
                            adaptive += drafted if how == "adaptive" else 0
                            print(f"  {tag} prompt {pi} temp {temp} seed {seed} "
                                  f"{how}: accepted {accepted}/{drafted}, "
                                  f"tokens per pass {tpp:.2f}", flush=True)
        if drafts:
            self.assertGreater(adaptive, 0, "adaptive never drafted")

    def test_ling_tiny(self):
        """A random MTP head: every draft rejected."""
        model = tm.model_dir("ling-tiny")
        vocab = tm.vocab_of(model)
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")))
            self.same("ling-tiny", ini, [tm.prompt(n, s, vocab) for n, s in
                                         ((5, 11), (40, 13))], 32, seeds=SEEDS[:2])

    def test_ling_nano(self):
        """A trained MTP head: drafts accepted, some all the way."""
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            sets = nano_sets(d)
            vocab = tm.vocab_of(NANO)
            self.same("ling-nano", NANO_INI, [tm.prompt(8, 21, vocab),
                                              tm.prompt(24, 22, vocab)], 48, sets,
                      drafts=True)

    def test_nano_exl3_paths(self):
        """The trained head on EXL3 weights through each CPU path: a
        verify's rows take the kernels' multi-row forms, bit for bit the
        rows alone, so the drafted ids are serial's."""
        vocab = tm.vocab_of(NANO_EXL3)
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            for quant in ("exl3", "exl3-int", "exl3-q8"):
                sets = (f"model.path={ids_only(NANO_EXL3, os.path.join(d, quant))}",
                        "chat.template=raw", f"plugins.quant={quant}")
                self.same(f"ling-nano-exl3 {quant}", NANO_EXL3_INI, [tm.prompt(16, 23, vocab)],
                          48, sets, seeds=SEEDS[:1], drafting=DRAFTING[2:], drafts=True)

    def test_standard_greedy(self):
        """accept = standard at temperature 0: the drafts are greedy, the
        rule keeps one iff it is the argmax, so serial's tokens again."""
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            sets = nano_sets(d) + ("draft.accept=standard",)
            vocab = tm.vocab_of(NANO)
            self.same("ling-nano standard", NANO_INI, [tm.prompt(16, 24, vocab)], 48, sets,
                      seeds=(), drafting=DRAFTING[2:])

    def test_context_end(self):
        """The context fills mid-draft: the reply stops where serial
        decoding's does, drafts cut to the room left."""
        model = tm.model_dir("ling-tiny")
        vocab = tm.vocab_of(model)
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")), context=30)
            self.same("ling-tiny context 30", ini, [tm.prompt(20, 14, vocab)], 40,
                      seeds=SEEDS[:2])
            sets = nano_sets(d) + ("runtime.context=40",)
            self.same("ling-nano context 40", NANO_INI,
                      [tm.prompt(24, 23, tm.vocab_of(NANO))], 40, sets)


class PlainStretch(unittest.TestCase):
    """[mtp] adaptive while plain decoding is its choice (budget 0: it never
    drafts) leaves the MTP layer unfed past a step's rows: no eh_proj at all
    (the stage "other") over 40 tokens of 8-row steps, and the tokens of
    [mtp] off; at a fixed depth every row is fed."""

    def test_skips_the_mtp_layer(self):
        sets = ("chat.template=raw", "runtime.prefill_chunk=8")
        toks = tm.prompt(6, 25, tm.vocab_of(NANO))

        def go(*extra):
            p = tm.tfrun(NANO_INI, toks, "-n", "40",
                         *[a for kv in sets + extra for a in ("--set", kv)])
            self.assertEqual(p.returncode, 0, p.stderr)
            return json.loads(p.stdout.strip().splitlines()[-1])

        off = go()
        plain = go("mtp.enabled=true", "mtp.budget=0")
        fixed = go("mtp.enabled=true", "mtp.adaptive=false", "mtp.max_depth=1")
        self.assertEqual(plain["generated_tokens"], 40)
        self.assertTrue(off["text"])
        self.assertEqual(plain["text"], off["text"])
        self.assertEqual(fixed["text"], off["text"])
        self.assertEqual(plain["drafts"]["drafted"], 0)
        self.assertEqual(plain["stages_s"]["other"], 0.0)
        self.assertGreater(fixed["stages_s"]["other"], 0.0)


class BadInput(unittest.TestCase):
    def fails(self, ini, sets, want):
        p = tm.tfrun(ini, [1, 2, 3], *[a for kv in sets for a in ("--set", kv)])
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn(want, p.stderr)

    def test_no_mtp_layer(self):
        model = tm.model_dir("ling-tiny")
        with open(os.path.join(model, "config.json")) as f:
            cfg = json.load(f)
        n = cfg["num_hidden_layers"]
        cfg["num_nextn_predict_layers"] = 0
        for k, v in cfg.items():        # per-layer lists lose the MTP layer's entry
            if isinstance(v, list) and len(v) == n + 1:
                cfg[k] = v[:n]
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt"), cfg))
            self.fails(ini, ["mtp.enabled=true"], "[mtp] enabled")
            self.fails(ini, ["mtp.enabled=true"], "no MTP layer")

    def test_max_depth(self):
        model = tm.model_dir("ling-tiny")
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, model)
            for depth in ("0", "17", "two"):
                self.fails(ini, ["mtp.enabled=true", f"mtp.max_depth={depth}"],
                           "[mtp] max_depth")

    def test_policy_keys(self):
        model = tm.model_dir("ling-tiny")
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, model)
            for key, bad in (("p_min", "-0.1"), ("p_min", "1.5"), ("p_min", "high"),
                             ("adaptive", "sometimes"), ("accept", "greedy"),
                             ("budget", "-0.01"), ("budget", "1.5"), ("budget", "all"),
                             ("accept", "")):
                with self.subTest(key=key, value=bad):
                    self.fails(ini, ["mtp.enabled=true", f"mtp.{key}={bad}"], f"[mtp] {key}")



class Drafters(unittest.TestCase):
    """Drafters other than mtp, through tfrun on ling-nano and ling-tiny."""

    def test_ngram_is_exact(self):
        """A prompt that repeats: ngram drafts and is accepted, and the ids
        are serial decoding's at every depth and n-gram size, and with its
        depth chosen by the policy."""
        vocab = tm.vocab_of(NANO)
        rep = tm.prompt(12, 31, vocab)
        prompts = [rep * 3 + rep[:5], tm.prompt(24, 32, vocab)]
        ngram = [(f"ngram depth {k} n {lo}..{hi}",
                  ("plugins.drafter=ngram", f"ngram.max_depth={k}", f"ngram.min_n={lo}",
                   f"ngram.max_n={hi}")) for k, lo, hi in ((1, 1, 1), (4, 2, 4), (8, 1, 3))] + [
            ("ngram adaptive", ("plugins.drafter=ngram", "ngram.min_n=1", "ngram.adaptive=true",
                                "ngram.budget=1"))]
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            sets = nano_sets(d)
            base = [a for kv in sets for a in ("--set", kv)]
            drafted = 0
            for pi, toks in enumerate(prompts):
                for temp, seed in (("0", 0), ("0.8", 1), ("0.8", 2)):
                    samp = base + ["-n", "40", "--temp", temp, "--seed", str(seed)]
                    want, _ = run(NANO_INI, toks, *samp)
                    for how, extra in ngram:
                        with self.subTest(prompt=pi, temp=temp, seed=seed, how=how):
                            got, err = run(NANO_INI, toks, *samp,
                                           *[a for kv in extra for a in ("--set", kv)])
                            self.assertEqual(got, want)
                            n, kept, _ = mtp_line(err)
                            drafted += n if pi == 0 else 0
            self.assertGreater(drafted, 0, "ngram never drafted on a repeating prompt")

    def test_ngram_standard(self):
        """accept = standard at a temperature with drafts proposed without a
        distribution (counted as certain): it runs and keeps some."""
        vocab = tm.vocab_of(NANO)
        rep = tm.prompt(12, 33, vocab)
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            sets = nano_sets(d) + ("plugins.drafter=ngram", "ngram.min_n=1",
                                   "draft.accept=standard")
            _, err = run(NANO_INI, rep * 4, "-n", "48", "--temp", "0.7", "--seed", "3",
                         *[a for kv in sets for a in ("--set", kv)])
            drafted, _, _ = mtp_line(err)
            self.assertGreater(drafted, 0, err)

    def bad(self, mode):
        return ("--set", f"plugins.path={tm.env('TF_BAD_DRAFTERS')}", "--set",
                "plugins.drafter=bad-drafter", "--set", f"bad-drafter.mode={mode}")

    def test_contract_breaches_fail_naming_the_plugin(self):
        model = tm.model_dir("ling-tiny")
        vocab = tm.vocab_of(model)
        toks = tm.prompt(10, 34, vocab)
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, ids_only(model, os.path.join(d, "ckpt")))
            for mode, want in (("oov", f"proposed token {vocab}, outside the vocabulary"),
                               ("many", "proposed 4 drafts, asked for at most 3"),
                               ("fail", "bad-drafter: failing as asked"),
                               ("depth", "chose depth 4, outside 0..3")):
                with self.subTest(mode=mode):
                    p = tm.tfrun(ini, toks, "-n", "8", *self.bad(mode))
                    self.assertNotEqual(p.returncode, 0, p.stdout)
                    self.assertIn("drafter bad-drafter", p.stderr)
                    self.assertIn(want, p.stderr)
            want, _ = run(ini, toks, "-n", "16")
            for mode in ("none", "echo"):
                with self.subTest(mode=mode):
                    got, _ = run(ini, toks, "-n", "16", *self.bad(mode))
                    self.assertEqual(got, want)

    def test_old_abi_refused(self):
        model = tm.model_dir("ling-tiny")
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, model)
            p = tm.tfrun(ini, [1, 2, 3], "--set", f"plugins.path={tm.env('TF_OLD_DRAFTERS')}",
                         "--set", "plugins.drafter=old-drafter")
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("[plugins] drafter", p.stderr)
        self.assertIn("required slot 'max_depth'", p.stderr)

    def test_keys(self):
        model = tm.model_dir("ling-tiny")
        with tempfile.TemporaryDirectory(prefix="tf-mtp-") as d:
            ini = tm.write_ini(d, model)
            for sets, want in ((["mtp.enabled=true", "mtp.accept=exact"],
                                "[mtp] accept: moved: write [draft] accept"),
                               (["draft.accept=greedy"], "[draft] accept"),
                               (["plugins.drafter=ngram", "ngram.max_depth=0"],
                                "[ngram] max_depth"),
                               (["plugins.drafter=ngram", "ngram.max_depth=17"],
                                "[ngram] max_depth"),
                               (["plugins.drafter=ngram", "ngram.min_n=3", "ngram.max_n=2"],
                                "[ngram] min_n 3 is above [ngram] max_n 2"),
                               (["plugins.drafter=ngram", "mtp.enabled=true"],
                                "[plugins] drafter is 'ngram'")):
                with self.subTest(sets=sets):
                    p = tm.tfrun(ini, [1, 2, 3], *[a for kv in sets for a in ("--set", kv)])
                    self.assertNotEqual(p.returncode, 0, p.stdout)
                    self.assertIn(want, p.stderr)


if __name__ == "__main__":
    tm.main()
