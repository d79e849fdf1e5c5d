#!/usr/bin/python3
"""bench_serve.py TFRUN INI [options] [--set K=V ...] - tfrun serve under load, beside tfrun.

In each of R rounds, one after the other so that a change in the machine's
load falls on both alike:
  tfrun   `tfrun INI -p PROMPT -n N --temp 0 --json`: its decode tok/s;
  serve   the same prompt as one streamed chat request, N tokens, temperature
          0, to a server started once on the same INI (the same threads and
          sequences, [server] prefix_cache = 0):
          completion tokens over the time from the first content chunk to
          the one that ends the reply, as the client sees it (tfrun's decode
          tok/s is generated tokens over the time from the first to the last).
The two must give the same text.  Each round also times the second turn of
a conversation (the first turn's prompt and reply, then a new user
message) to first token, on that server and on one with the prefix cache
on (the INI's [server] prefix_cache, by default on), which runs only the
new tokens.  `outside steps` is the share of that
request's wall time (send to last byte) the server's scheduler spent out of
its steps (tf_step_seconds_total): HTTP, parsing, queueing, waking; a
share that machine load does not inflate the way it does the tok/s.  Then, in each of S sweeps after the
rounds, for each concurrency C, C clients each send REQS streamed requests
back to back: requests per second and
generated tokens per second over the wall time of the level, and the time
from sending to the first content chunk at p50 and p99.  The sweep's
server, started after the rounds with [runtime] sequences = the largest C,
keeps no finished sequences ([server] prefix_cache = 0): every request
prefills its whole prompt, as distinct users' would.

Prints a Markdown table (--json: one object); medians over the rounds and
sweeps, the TTFT percentiles over all the sweeps' requests.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "serve"))
from serve_test import KEY, Server, metric   # noqa: E402

PROMPT = "In the beginning God created the heaven and the earth."


def tfrun_alone(a):
    args = [a.tfrun, a.ini, "-p", PROMPT, "-n", str(a.tokens), "--temp", "0", "--json"]
    for s in a.set:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def streamed(srv, max_tokens, messages=None):
    """One streamed chat request: its text, usage and timings (seconds)."""
    messages = messages or [{"role": "user", "content": PROMPT}]
    body = {"model": "x", "messages": messages,
            "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    c = srv.conn()
    t0, cpu0 = time.monotonic(), time.process_time()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    text, first, last, usage = "", None, None, None
    for line in r:
        if not line.startswith(b"data: ") or line == b"data: [DONE]\n":
            continue
        ev = json.loads(line[6:])
        if not ev["choices"]:
            usage = ev["usage"]
            continue
        ch = ev["choices"][0]
        if ch["delta"].get("content"):
            first = first or time.monotonic()
            text += ch["delta"]["content"]
        if ch["finish_reason"]:
            last = time.monotonic()
    c.close()
    return {"text": text, "usage": usage, "ttft": first - t0, "first": first, "last": last,
            "wall": time.monotonic() - t0, "cpu": time.process_time() - cpu0}


def second_turn(srv, max_tokens, i):
    """Conversation i's second turn: its TTFT, prompt and cached tokens."""
    first = [{"role": "user", "content": "%s (%d)" % (PROMPT, i)}]
    one = streamed(srv, max_tokens, first)
    two = streamed(srv, max_tokens, first + [
        {"role": "assistant", "content": one["text"]},
        {"role": "user", "content": "And the earth was without form, and void."}])
    u = two["usage"]
    return {"ttft": two["ttft"], "prompt": u["prompt_tokens"],
            "cached": u["prompt_tokens_details"]["cached_tokens"]}


def level(srv, conc, reqs, max_tokens):
    """conc clients, reqs requests each: req/s, tok/s and the TTFTs."""
    done, lock = [], threading.Lock()

    def client():
        for _ in range(reqs):
            got = streamed(srv, max_tokens)
            with lock:
                done.append(got)
    threads = [threading.Thread(target=client) for _ in range(conc)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    tokens = sum(d["usage"]["completion_tokens"] for d in done)
    return {"req_s": len(done) / wall, "tok_s": tokens / wall,
            "ttft": [d["ttft"] for d in done]}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tfrun")
    ap.add_argument("ini")
    ap.add_argument("-n", "--tokens", type=int, default=64, help="tokens a request decodes")
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("-s", "--sweeps", type=int, default=3)
    ap.add_argument("-c", "--conc", default="1,2,4,8")
    ap.add_argument("--reqs", type=int, default=4, help="requests per client per level")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    conc = [int(x) for x in a.conc.split(",")]
    rounds, sweep = [], {c: [] for c in conc}
    srv = Server(a.tfrun, a.ini, a.set + ["server.prefix_cache=0"])
    kept = Server(a.tfrun, a.ini, a.set)
    try:
        for i in range(a.rounds):
            alone = tfrun_alone(a)
            busy = metric(srv, "tf_step_seconds_total")
            one = streamed(srv, a.tokens)
            busy = metric(srv, "tf_step_seconds_total") - busy
            assert one["text"] == alone["text"], (one["text"], alone["text"])
            n = one["usage"]["completion_tokens"]
            assert n == alone["generated_tokens"], (n, alone)
            served = n / (one["last"] - one["first"])
            rounds.append({"tfrun": alone["decode_tps"], "serve": served,
                           "ratio": served / alone["decode_tps"], "ttft": one["ttft"],
                           "outside": 1 - busy / one["wall"],
                           "client": one["cpu"] / one["wall"],
                           "cold": second_turn(srv, a.tokens, i),
                           "kept": second_turn(kept, a.tokens, i)})
        kept.stop()
        srv.stop()
        srv = Server(a.tfrun, a.ini, a.set + ["runtime.sequences=%d" % max(conc),
                                              "server.prefix_cache=0"])
        for _ in range(a.sweeps):
            for c in conc:
                sweep[c].append(level(srv, c, a.reqs, a.tokens))
        srv.stop()
    finally:
        for x in (srv, kept):
            if x.proc.poll() is None:
                x.proc.kill()

    med = statistics.median
    res = {
        "ini": a.ini, "tokens": a.tokens, "rounds": a.rounds, "sweeps": a.sweeps,
        "reqs_per_client": a.reqs,
        "load_avg": os.getloadavg(),
        "tfrun_decode_tok_s": med(r["tfrun"] for r in rounds),
        "serve_decode_tok_s": med(r["serve"] for r in rounds),
        "serve_vs_tfrun": med(r["ratio"] for r in rounds),
        "ratios": [round(r["ratio"], 3) for r in rounds],
        "outside_steps": med(r["outside"] for r in rounds),
        "client_cpu": med(r["client"] for r in rounds),
        "turn2": {k: {"ttft_ms": 1e3 * med(r[k]["ttft"] for r in rounds),
                      "prompt_tokens": rounds[0][k]["prompt"],
                      "cached_tokens": rounds[0][k]["cached"]} for k in ("cold", "kept")},
        "levels": [{"conc": c,
                    "req_s": med(x["req_s"] for x in sweep[c]),
                    "tok_s": med(x["tok_s"] for x in sweep[c]),
                    "ttft_p50_ms": 1e3 * pct(sum((x["ttft"] for x in sweep[c]), []), 50),
                    "ttft_p99_ms": 1e3 * pct(sum((x["ttft"] for x in sweep[c]), []), 99),
                    "requests": sum(len(x["ttft"]) for x in sweep[c])} for c in conc],
    }
    if a.json:
        print(json.dumps(res))
        return
    print("decode at one request, %d tokens, %d rounds: tfrun %.1f tok/s, serve %.1f tok/s, "
          "serve/tfrun %.3f (rounds: %s); outside steps %.2f%%; client CPU %.1f%% of the "
          "wall" % (
              a.tokens, a.rounds, res["tfrun_decode_tok_s"], res["serve_decode_tok_s"],
              res["serve_vs_tfrun"], ", ".join("%.3f" % x for x in res["ratios"]),
              100 * res["outside_steps"], 100 * res["client_cpu"]))
    t = res["turn2"]
    print("second turn to first token: %.1f ms without the prefix cache, %.1f ms with it "
          "(%d prompt tokens, %d of them cached)" % (
              t["cold"]["ttft_ms"], t["kept"]["ttft_ms"], t["kept"]["prompt_tokens"],
              t["kept"]["cached_tokens"]))
    print()
    print("| conc | req/s | gen tok/s | vs conc 1 | TTFT p50 ms | TTFT p99 ms | requests |")
    print("| ---: | ----: | --------: | --------: | ----------: | ----------: | -------: |")
    base = res["levels"][0]["tok_s"]
    for lv in res["levels"]:
        print("| %4d | %5.2f | %9.1f | %9.2f | %11.1f | %11.1f | %8d |" % (
            lv["conc"], lv["req_s"], lv["tok_s"], lv["tok_s"] / base, lv["ttft_p50_ms"],
            lv["ttft_p99_ms"], lv["requests"]))


if __name__ == "__main__":
    main()
