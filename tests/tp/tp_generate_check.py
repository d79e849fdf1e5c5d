#!/usr/bin/python3
"""tp_generate_check.py TFRUN INI CHECK [--set K=V ...] [--logit-tol X] - tfrun tensor parallel, end to end.

Each CHECK runs the model INI on one rank (TP1) and sharded over two ranks
(TP2) and holds them to each other:

  loopback  `--tp-local 2`: the prompt's logits (--dump-logits) within
            LOGIT_TOL of TP1's, and the greedy continuation of CONT_TOKENS
            tokens the same text
  ranks     two `tfrun --set tp.rank=R` processes started apart, as on two
            hosts, over loopback: the same
  netns     each rank in its own network namespace, joined by a veth pair
            this script makes (exit 77 when namespaces cannot be made)
  kill      rank 1 SIGKILLed mid-decode: rank 0 exits non-zero within
            [tp] timeout (+ slack), naming the peer and the step; with
            --tp-local no rank outlives rank 0
  kill0     rank 0 SIGKILLed mid-decode: rank 1 exits the same way
  stop      rank 1 SIGSTOPped mid-decode: rank 0 exits the same way once
            [tp] timeout passes
  mtp       speculative decoding ([mtp] enabled, fixed depth 2) sharded:
            the greedy continuation TP1 decodes without it, and TP1's
            drafts and acceptance counts; the same with the ngram drafter
            (rank 0 drafts alone)
  mtp_adaptive  [mtp] adaptive with p_min 0.3, and fixed depth 3 with
            p_min 0.2 (rank 0 tells the followers each MTP row's token;
            rejected drafts undone from each rank's tape): TP1's greedy
            continuation token for token, the fixed depth's drafts and
            undoings TP1's; sampled drafts (accept = standard, a
            temperature) under TP2 end without a hang
  idle      a chat (-i) whose user waits three [tp] timeouts between turns:
            rank 0's heartbeat keeps rank 1 waiting, both turns answered
  overrides ranks with different --set values are refused at the handshake
  uneven    [tp] size 3 on a model whose heads do not split in three: a
            refusal naming the tensor and the config.json key
  tile      [tp] size 2 on an EXL3 model whose shares would cut a 128-feature
            Hadamard block: a refusal naming the trellis

LOGIT_TOL is the largest relative error of a prompt row's logits,
||TP2 - TP1|| / ||TP1||: the ranks' sums of partial products round
differently from one rank's sums (float32), nothing more.  --logit-tol
sets it for a path that rounds its activations (EXL3's integer paths:
an activation a float32 rounding apart lands in the next quantum).
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

LOGIT_TOL = 1e-4
CONT_TOKENS = 64
PROMPT = "In the beginning God created the heaven and the earth."
TIMEOUT_S = 3           # [tp] timeout of the fault checks
SLACK_S = 10            # what a loaded machine may add to it


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Run:
    def __init__(self, tfrun, ini, sets, tmp):
        self.tfrun, self.ini, self.sets, self.tmp = tfrun, ini, sets, tmp

    def argv(self, *extra, n=CONT_TOKENS, prefix=()):
        sets = [a for kv in self.sets for a in ("--set", kv)]
        return [*prefix, self.tfrun, self.ini, "-p", PROMPT, "--temp", "0", "-n", str(n),
                "--set", "runtime.threads=1", *sets, *extra]

    def generate(self, name, *extra):
        """Text and prompt logits of one run (TP1, or rank 0 with --tp-local)."""
        dump = os.path.join(self.tmp, name + ".bin")
        p = subprocess.run(self.argv("--dump-logits", dump, *extra), capture_output=True,
                           text=True, timeout=300)
        if p.returncode:
            fail(f"{name}: exit {p.returncode}: {p.stderr}")
        return p.stdout, np.fromfile(dump, dtype=np.float32)

    def spawn(self, rank, peers, *extra, n=CONT_TOKENS, prefix=(), dump=True):
        sets = ["--set", "tp.size=2", "--set", f"tp.rank={rank}", "--set",
                "tp.peers=" + ",".join(peers), "--set", "tp.transport=tcp"]
        d = os.path.join(self.tmp, f"rank{rank}.bin")
        dump_args = ["--dump-logits", d] if dump else []
        p = subprocess.Popen(self.argv(*sets, *dump_args, *extra, n=n, prefix=prefix),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return p, d


def compare(name, ref, got):
    text0, l0 = ref
    text, l = got
    if l.size != l0.size or l.size == 0:
        fail(f"{name}: {l.size} logits against TP1's {l0.size}")
    l = l.reshape(l0.shape)
    rel = np.linalg.norm(l - l0, axis=1) / np.linalg.norm(l0, axis=1)
    print(f"{name}: prompt logits max row rel err {rel.max():.3g} (tolerance {LOGIT_TOL})")
    if not np.isfinite(l).all() or rel.max() > LOGIT_TOL:
        fail(f"{name}: logits differ from TP1 by {rel.max():.3g}")
    if text != text0 or not text.strip():
        fail(f"{name}: continuation differs:\nTP1: {text0!r}\nTP2: {text!r}")
    print(f"{name}: the {CONT_TOKENS}-token greedy continuation is TP1's")


def reference(run):
    """TP1's text and prompt logits [rows, vocab_size]."""
    out, logits = run.generate("tp1")
    with open(os.path.join(model_dir(run), "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    return out, logits.reshape(-1, vocab)


def model_dir(run):
    """[model] path: a --set model.path, else the INI's, relative to it."""
    for kv in run.sets:
        if kv.startswith("model.path="):
            return kv.split("=", 1)[1]
    base = os.path.dirname(os.path.abspath(run.ini))
    with open(run.ini) as f:
        for line in f:
            key, _, value = line.partition("=")
            if key.strip() == "path":
                return os.path.normpath(os.path.join(base, value.strip()))
    fail(f"{run.ini}: no [model] path")


def check_pair(name, ranks):
    outs = [p.communicate(timeout=300) for p, _ in ranks]
    for r, ((p, _), (out, err)) in enumerate(zip(ranks, outs)):
        if p.returncode:
            fail(f"{name}: rank {r} exit {p.returncode}: {err}")
    if outs[1][0]:
        fail(f"{name}: rank 1 printed {outs[1][0]!r}; only rank 0 prints")
    return outs[0][0], np.fromfile(ranks[0][1], dtype=np.float32)


def check_loopback(run):
    ref = reference(run)
    compare("tp-local 2", ref, run.generate("tp2", "--tp-local", "2"))


def check_ranks(run):
    ref = reference(run)
    peers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    ranks = [run.spawn(r, peers) for r in (1, 0)][::-1]
    compare("tp.rank=0,1", ref, check_pair("tp.rank=0,1", ranks))


def sh(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check_netns(run):
    if sh("ip", "netns", "list").returncode:
        print("SKIP: no ip(8) netns")
        sys.exit(77)
    pid = os.getpid()
    a, b, va, vb = f"tfpa{pid}", f"tfpb{pid}", f"tpva{pid}", f"tpvb{pid}"
    net = f"10.{200 + pid % 50}.{(pid // 50) % 256}"
    if sh("ip", "netns", "add", a).returncode:
        print("SKIP: ip netns add failed (no permission or no namespace support)")
        sys.exit(77)
    try:
        for cmd in (["ip", "netns", "add", b],
                    ["ip", "link", "add", va, "type", "veth", "peer", "name", vb],
                    ["ip", "link", "set", va, "netns", a], ["ip", "link", "set", vb, "netns", b],
                    ["ip", "-n", a, "addr", "add", net + ".1/24", "dev", va],
                    ["ip", "-n", b, "addr", "add", net + ".2/24", "dev", vb],
                    ["ip", "-n", a, "link", "set", "lo", "up"],
                    ["ip", "-n", b, "link", "set", "lo", "up"],
                    ["ip", "-n", a, "link", "set", va, "up"],
                    ["ip", "-n", b, "link", "set", vb, "up"]):
            r = sh(*cmd)
            if r.returncode:
                fail(f"{' '.join(cmd)}: {r.stderr}")
        ref = reference(run)
        peers = [net + ".1:29511", net + ".2:29511"]
        ranks = [run.spawn(1, peers, prefix=("ip", "netns", "exec", b))]
        ranks.insert(0, run.spawn(0, peers, prefix=("ip", "netns", "exec", a)))
        compare(f"netns {net}.1 / {net}.2", ref, check_pair("netns", ranks))
    finally:
        sh("ip", "netns", "del", a)
        sh("ip", "netns", "del", b)


def wait_for_decode(p, what):
    """Block until p has printed a piece of the continuation, then a little more."""
    os.set_blocking(p.stdout.fileno(), True)
    if not p.stdout.read(1):
        fail(f"{what}: rank 0 printed nothing before it ended: {p.stderr.read()}")
    time.sleep(0.2)


def check_kill(run, victim, sig=signal.SIGKILL):
    """Kill (or stop) one rank mid-decode; the survivor must fail naming the
    peer and the step."""
    peers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    sets = ("--set", f"tp.timeout={TIMEOUT_S}", "--set", "runtime.context=1024")
    ranks = [run.spawn(r, peers, *sets, n=1000, dump=False) for r in (0, 1)]
    wait_for_decode(ranks[0][0], "kill")
    t0 = time.monotonic()
    ranks[victim][0].send_signal(sig)
    survivor = ranks[1 - victim][0]
    try:
        _, err = survivor.communicate(timeout=TIMEOUT_S + SLACK_S)
    except subprocess.TimeoutExpired:
        survivor.kill()
        fail(f"rank {1 - victim} still running {TIMEOUT_S + SLACK_S} s after rank {victim} died")
    took = time.monotonic() - t0
    ranks[victim][0].kill()
    ranks[victim][0].wait()
    print(f"rank {victim} killed: rank {1 - victim} exit {survivor.returncode} after "
          f"{took:.2f} s: {err.strip()}")
    if survivor.returncode == 0:
        fail(f"rank {1 - victim} exited 0 after its peer died")
    if f"rank {victim}" not in err or "step" not in err:
        fail(f"rank {1 - victim}'s error names neither rank {victim} nor the step: {err}")


def check_kill_local(run):
    """--tp-local: the child rank killed, rank 0 fails and no rank is left."""
    p = subprocess.Popen(run.argv("--tp-local", "2", "--set", f"tp.timeout={TIMEOUT_S}",
                                  "--set", "runtime.context=1024", n=1000),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_decode(p, "tp-local kill")
    kids = sh("pgrep", "-P", str(p.pid)).stdout.split()
    if len(kids) != 1:
        fail(f"--tp-local 2 runs {len(kids)} child ranks, expected 1")
    os.kill(int(kids[0]), signal.SIGKILL)
    try:
        _, err = p.communicate(timeout=TIMEOUT_S + SLACK_S)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("--tp-local rank 0 still running after its child rank died")
    print(f"--tp-local: child rank killed, rank 0 exit {p.returncode}: {err.strip()}")
    if p.returncode == 0 or "rank 1" not in err:
        fail(f"--tp-local: rank 0 exit {p.returncode}, its error: {err}")
    if os.path.exists(f"/proc/{kids[0]}"):
        fail(f"--tp-local: rank 1 (pid {kids[0]}) outlived rank 0")


def mtp_runs(run, *extra):
    """(stdout, its drafts' stats lines) of TP1 and of TP2, each with extra."""
    outs = []
    for name, tp in (("mtp, TP1", ()), ("mtp, TP2", ("--tp-local", "2"))):
        p = subprocess.run(run.argv(*tp, *extra), capture_output=True, text=True, timeout=300)
        if p.returncode:
            fail(f"{name}: exit {p.returncode}: {p.stderr}")
        stats = [line for line in p.stderr.splitlines() if line.startswith("drafter ")]
        outs.append((p.stdout, stats))
        print(f"{name}: {stats}")
    return outs


def check_mtp(run):
    plain = reference(run)[0]
    run.sets += ["mtp.enabled=true", "mtp.max_depth=2", "mtp.adaptive=false"]
    outs = mtp_runs(run)
    if outs[0][0] != plain or outs[1][0] != plain:
        fail(f"speculative continuations differ from serial TP1's:\n{plain!r}\n"
             f"{outs[0][0]!r}\n{outs[1][0]!r}")
    if not outs[0][1] or outs[0][1] != outs[1][1]:
        fail(f"TP2 drafted and accepted otherwise than TP1: {outs[0][1]} / {outs[1][1]}")
    print("mtp: TP2's speculative tokens, drafts and acceptance are TP1's")
    # A drafter without the MTP layer runs on rank 0 alone.
    run.sets = [kv for kv in run.sets if not kv.startswith("mtp.")] + [
        "plugins.drafter=ngram", "ngram.min_n=1"]
    outs = mtp_runs(run)
    if outs[0][0] != plain or outs[1][0] != plain or outs[0][1] != outs[1][1]:
        fail(f"ngram: TP2's tokens or drafts are not TP1's:\n{plain!r}\n{outs[0]!r}\n"
             f"{outs[1]!r}")
    print(f"ngram: TP2's tokens and drafts are TP1's: {outs[1][1]}")


def check_mtp_adaptive(run):
    """Adaptive depths follow wall time, which differs between runs: their
    tokens are compared, not their counts.  Fixed depth with p_min cuts
    and undoes drafts on every run, so there the counts are TP1's too."""
    plain = reference(run)[0]
    base = run.sets + ["mtp.enabled=true", "mtp.max_depth=3"]
    for name, sets in (("adaptive, p_min 0.3", ["mtp.adaptive=true", "mtp.p_min=0.3",
                                                "mtp.budget=1"]),
                       ("depth 3, p_min 0.2", ["mtp.adaptive=false", "mtp.p_min=0.2"])):
        run.sets = base + sets
        outs = mtp_runs(run)
        for (out, _), tp in zip(outs, ("TP1", "TP2")):
            if out != plain:
                fail(f"{name}: {tp}'s continuation differs from serial TP1's:\n"
                     f"{plain!r}\n{out!r}")
    undone = [int(m) for line in outs[1][1] for m in re.findall(r"\((\d+) undoing", line)]
    if not undone or not undone[0] or outs[0][1] != outs[1][1]:
        fail(f"depth 3, p_min 0.2: TP2 undid no drafts, or drafted otherwise than TP1: "
             f"{outs[0][1]} / {outs[1][1]}")
    p = subprocess.run(run.argv("--tp-local", "2", "--set", "draft.accept=standard", "--temp",
                                "0.8"), capture_output=True, text=True, timeout=300)
    stats = [line for line in p.stderr.splitlines() if line.startswith("drafter ")]
    if p.returncode or not stats:
        fail(f"standard, sampled drafts, TP2: exit {p.returncode}: {p.stderr}")
    print(f"standard, sampled drafts, TP2: {stats}")
    print("mtp_adaptive: TP2's tokens are TP1's with adaptive depth and p_min; sampled drafts run")


def check_idle(run):
    argv = [run.tfrun, run.ini, "-i", "-n", "6", "--json", "--tp-local", "2", "--set",
            "tp.timeout=1"]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdin.write("In the beginning\n")
    p.stdin.flush()
    time.sleep(3)
    out, err = p.communicate("And God said\n", timeout=120)
    replies = [line for line in out.splitlines() if '"generated_tokens"' in line]
    print(f"idle chat: exit {p.returncode}, {len(replies)} replies")
    if p.returncode or len(replies) != 2:
        fail(f"a chat idle for 3 s with [tp] timeout 1: exit {p.returncode}, "
             f"{len(replies)} replies: {err}")


def check_overrides(run):
    peers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    ranks = [run.spawn(0, peers, "--set", "tp.timeout=10", dump=False),
             run.spawn(1, peers, "--set", "tp.timeout=10", "--set", "runtime.prefill_chunk=32",
                       dump=False)]
    for r, (p, _) in enumerate(ranks):
        _, err = p.communicate(timeout=60)
        print(f"rank {r} exit {p.returncode}: {err.strip()}")
        if p.returncode == 0:
            fail(f"rank {r} ran with a peer whose overrides differ")
        if "fingerprint" not in err or "settings differ" not in err:
            fail(f"rank {r}'s refusal does not say the settings differ: {err}")


def expect_refusal(run, ranks, what, needles):
    """--tp-local `ranks` must fail before decoding, its message naming all of needles."""
    p = subprocess.run(run.argv("--tp-local", str(ranks), n=4), capture_output=True,
                       text=True, timeout=120)
    print(f"--tp-local {ranks}: exit {p.returncode}: {p.stderr.strip()}")
    if p.returncode == 0:
        fail(f"{ranks} ranks ran {what}")
    missing = [n for n in needles if n not in p.stderr]
    if missing:
        fail(f"the refusal does not name {missing}: {p.stderr}")


def check_uneven(run):
    expect_refusal(run, 3, "a model whose heads do not split in three",
                   ["num_attention_heads", "model.layers.0.attention"])


def check_tile(run):
    expect_refusal(run, 2, "an EXL3 model whose shares cut its Hadamard blocks",
                   [".trellis", "Hadamard block of 128"])


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        sys.exit(2)
    tfrun, ini, check = sys.argv[1:4]
    rest = sys.argv[4:]
    sets = [rest[i + 1] for i in range(0, len(rest) - 1, 2) if rest[i] == "--set"]
    global LOGIT_TOL
    LOGIT_TOL = next((float(rest[i + 1]) for i in range(0, len(rest) - 1, 2)
                      if rest[i] == "--logit-tol"), LOGIT_TOL)
    checks = {
        "loopback": check_loopback, "ranks": check_ranks, "netns": check_netns,
        "kill": lambda r: (check_kill(r, 1), check_kill_local(r)),
        "kill0": lambda r: check_kill(r, 0),
        "stop": lambda r: check_kill(r, 1, signal.SIGSTOP),
        "mtp": check_mtp, "mtp_adaptive": check_mtp_adaptive, "idle": check_idle, "overrides": check_overrides,
        "uneven": check_uneven, "tile": check_tile,
    }
    if check not in checks:
        fail(f"no check named {check}")
    with tempfile.TemporaryDirectory(prefix="tfrun-tp-") as tmp:
        checks[check](Run(tfrun, ini, sets, tmp))
    print("PASS")


if __name__ == "__main__":
    main()
