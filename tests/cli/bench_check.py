#!/usr/bin/python3
"""bench_check.py TFRUN INI PLUGINS - `tfrun bench` and its A/B on ling-nano.

Against the planted router (tests/registry/plant_router.c, [plugins] router
= plant in PLUGINS): B = A reports bit-equal numbers and no speed change
beyond noise; B sleeping in each routing call is reported slower, exit 1;
B with skewed weights fails the tolerance, exit 1; B with a drafter decodes
in drafting steps; the same A/Bs in alternating processes (--processes:
each round a process for A and one for B, the numbers compared through
files that go with the run); the tables come as Markdown, JSON and CSV; bad
options fail with exit 2 naming them.
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

TFRUN, INI, PLUGINS = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
BASE = [TFRUN, "bench", INI, "-p", "32", "-n", "8", "-r", "5",
        "--set", "plugins.path=" + PLUGINS, "--set", "plugins.router=plant"]


def bench(*args, env=None):
    out = subprocess.run(BASE + list(args), capture_output=True, text=True, timeout=300,
                         env=env)
    return out.returncode, out.stdout, out.stderr


def ab(*vs, extra=(), env=None):
    rc, out, err = bench("--json", *extra, *[a for v in vs for a in ("--vs-set", v)], env=env)
    assert rc in (0, 1), (rc, err)
    got = json.loads(out)
    slower = any(t["hi"] < 1 for t in got["ab"])
    inexact = got["exact"]["max_rel"] > got["exact"]["tolerance"]
    assert got["regression"] == (slower or inexact) and rc == int(got["regression"]), got
    return rc, got


def main():
    # B = A: the same numbers, bit for bit; speed within noise.  Nine
    # rounds: a ling-nano round takes milliseconds, and with five one
    # hiccup of the machine moved the interval past the bounds below.
    rc, same = ab("plant.sleep_us=0", extra=("-r", "9"))
    x = same["exact"]
    assert x["max_rel"] == 0 and x["mean_kl"] == 0 and x["top1"] == 1, x
    # Each label names what its side ran with: the shared --set on A's.
    assert same["a"] == f"{INI} with plugins.path={PLUGINS} plugins.router=plant", same["a"]
    assert same["b"] == "A with plant.sleep_us=0", same["b"]
    assert x["greedy"] == x["greedy_of"] == 8 and x["positions"] == 32, x
    for t in same["ab"]:       # wide: other tests may share the machine
        assert t["lo"] < 1.3 and t["hi"] > 0.77, t
        assert {s["stage"] for s in t["stages"]} >= {"moe", "kda", "mla"}, t
    assert [r["test"] for r in same["rows"]] == ["pp32", "tg8"] * 2, same["rows"]
    # A slow kernel: 20 ms a routing call (8 a prompt, 72 a round) is far past
    # any noise: a ling-nano prompt takes 30 ms under ASan, a round 0.1 s.
    rc, slow = ab("plant.sleep_us=20000")
    assert rc == 1, slow
    assert all(t["verdict"] == "slower" and t["hi"] < 0.5 for t in slow["ab"]), slow["ab"]
    moe = [s for t in slow["ab"] for s in t["stages"] if s["stage"] == "moe"]
    assert all(s["lo"] > 2 for s in moe), moe
    assert slow["exact"]["max_rel"] == 0, slow["exact"]
    # An inexact kernel: the tolerance catches it.
    rc, skew = ab("plant.skew=0.2")
    assert rc == 1 and skew["exact"]["max_rel"] > 1e-3 and skew["exact"]["mean_kl"] > 0, skew
    # A drafter's steps (MTP, drafting every step): B decodes through tf_engine_step.
    rc, drafts = ab("mtp.enabled=true", "mtp.adaptive=false")
    assert drafts["exact"]["max_rel"] == 0 and all(r["tps"] > 0 for r in drafts["rows"]), drafts
    kept = {r["config"] + r["test"]: r["drafts_kept"] for r in drafts["rows"]}
    assert kept["Atg8"] is None and 0 <= kept["Btg8"] <= 1, kept
    # Apart: each round a process per configuration; the logits through
    # files in a folder of TMPDIR that is gone after.
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TMPDIR=tmp)
        rc, same = ab("plant.sleep_us=0", extra=("--processes",), env=env)
        x = same["exact"]
        assert x["max_rel"] == 0 and x["top1"] == 1 and x["greedy"] == 8, x
        # Wider than in one process: each round's processes start cold.
        assert all(t["lo"] < 1.5 and t["hi"] > 0.6 for t in same["ab"]), same["ab"]
        rc, slow = ab("plant.sleep_us=20000", extra=("--processes",), env=env)
        assert rc == 1 and all(t["verdict"] == "slower" for t in slow["ab"]), slow["ab"]
        rc, skew = ab("plant.skew=0.2", extra=("--processes",), env=env)
        assert rc == 1 and skew["exact"]["max_rel"] > 1e-3, skew["exact"]
        assert os.listdir(tmp) == [], os.listdir(tmp)
    rc, out, err = bench("--processes", "--vs-set", "plant.nope=1")
    assert rc == 2 and "[plant] nope" in err and "B" in err, (rc, err)
    # A B short of memory on its own is its error, not a reason to go apart.
    rc, out, err = bench("--vs-set", "runtime.memory_limit=1M")
    assert rc == 2 and "memory_limit allows" in err and "apart" not in err, (rc, err)
    assert "alternating" not in err, err
    # Markdown by default, CSV on request; one configuration alone.
    rc, out, err = bench()
    assert rc == 0 and "| A | pp32 |" in out and "| A | tg8 |" in out, (out, err)
    assert "read bandwidth" in out and "B/A" not in out, out
    rc, out, err = bench("--csv", "--vs-set", "plant.sleep_us=0")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["config"] for r in rows] == ["A", "A", "B", "B", "B/A", "B/A"], rows
    assert float(rows[4]["ratio"]) > 0 and float(rows[0]["tps"]) > 0, rows
    # Bad options: exit 2, named.
    for args, named in ((["--vs-set", "plant.nope=1"], "[plant] nope"),
                        (["--vs", "/nonexistent/b.ini"], "/nonexistent/b.ini"),
                        (["-p", "abc"], "-p abc"), (["-r", "0"], "-r 0"),
                        (["--vs", INI, "--vs-set", "plant.skew=0"], "--vs and --vs-set"),
                        (["-p", "0", "-n", "0"], "nothing to time")):
        rc, out, err = bench(*args)
        assert rc == 2 and named in err, (args, rc, err)
    print("ok")


if __name__ == "__main__":
    main()
