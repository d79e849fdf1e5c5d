#!/usr/bin/python3
"""load_test.py TFRUN INI [--set K=V ...] - a bounded load on tfrun serve.

REQUESTS chat completions, CONCURRENCY at a time from as many client
threads, half of them streamed, over loopback.  Short replies (MAX_TOKENS)
keep it well under a minute on two cores.  Every reply must be complete
and well formed: status 200, the reply's fields, an SSE stream that ends
with [DONE], usage, and at temperature 0 the very text the prompt gets
alone (batching must not change what a request decodes).  None may be
lost: the server's own count of requests grows by REQUESTS and none is
left decoding.  Prints the latency and the time to the first token
(streamed replies) at p50, p90 and p99.
"""
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from serve_test import KEY, PROMPTS, Server, chat, content_of, metric, sets_of, wait_idle

REQUESTS = 200
CONCURRENCY = 8
MAX_TOKENS = 12


def check_reply(r, stream):
    assert r["id"].startswith("chatcmpl-"), r
    obj = "chat.completion.chunk" if stream else "chat.completion"
    assert r["object"] == obj and r["model"] == "ling-nano", r


def streamed(srv, body, t0):
    """The text, id, usage and time to the first token of a streamed reply."""
    c = srv.conn()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    text, ttft, finish, usage, ids = "", None, None, None, set()
    while True:
        line = r.readline().decode()
        assert line.startswith("data: ") and r.readline() == b"\n", repr(line)
        if line == "data: [DONE]\n":
            break
        ev = json.loads(line[6:])
        check_reply(ev, True)
        ids.add(ev["id"])
        if not ev["choices"]:
            usage = ev["usage"]
            continue
        ch = ev["choices"][0]
        if ch["delta"].get("content"):
            ttft = ttft or time.monotonic() - t0
            text += ch["delta"]["content"]
        finish = ch["finish_reason"] or finish
    assert r.read() == b"" and len(ids) == 1, ids
    c.close()
    assert finish in ("stop", "length") and usage, (finish, usage)
    return text, ids.pop(), usage, ttft


def one(srv, i):
    """Request i: its checked text and id, latency and time to first token."""
    body = chat(PROMPTS[i % len(PROMPTS)], max_tokens=MAX_TOKENS, temperature=0,
                stream=i % 2 == 0, stream_options={"include_usage": True})
    t0 = time.monotonic()
    if body["stream"]:
        text, rid, usage, ttft = streamed(srv, body, t0)
    else:
        text, r = content_of(srv, body)
        check_reply(r, False)
        assert r["choices"][0]["finish_reason"] in ("stop", "length"), r
        rid, usage, ttft = r["id"], r["usage"], None
    assert 0 < usage["completion_tokens"] <= MAX_TOKENS, usage
    return text, rid, usage["completion_tokens"], time.monotonic() - t0, ttft


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    srv = Server(sys.argv[1], sys.argv[2], sets_of(sys.argv[3:]))
    try:
        alone = [content_of(srv, chat(p, max_tokens=MAX_TOKENS, temperature=0))[0]
                 for p in PROMPTS]
        before = metric(srv, "tf_requests_total")
        failures = []
        lock = threading.Lock()

        def job(i):
            try:
                return one(srv, i)
            except Exception as e:
                with lock:
                    failures.append("request %d: %r" % (i, e))
                return None
        t0 = time.monotonic()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            got = list(pool.map(job, range(REQUESTS)))
        wall = time.monotonic() - t0
        for i, g in enumerate(got):
            if g and g[0] != alone[i % len(PROMPTS)]:
                failures.append("request %d: %r, alone %r" % (i, g[0],
                                                               alone[i % len(PROMPTS)]))
        done = [g for g in got if g]
        if len({g[1] for g in done}) != len(done):
            failures.append("two replies share an id")
        wait_idle(srv)
        if metric(srv, "tf_requests_total") - before != REQUESTS:
            failures.append("the server counted %d requests, not %d" %
                            (metric(srv, "tf_requests_total") - before, REQUESTS))
        srv.stop()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
    lat = [g[3] for g in done]
    ttft = [g[4] for g in done if g[4] is not None]
    print("%d requests, concurrency %d, max_tokens %d: %.1f s, %.1f req/s, %.1f tok/s"
          % (len(done), CONCURRENCY, MAX_TOKENS, wall, len(done) / wall,
             sum(g[2] for g in done) / wall))
    for name, xs in (("latency", lat), ("ttft", ttft)):
        if xs:
            print("%-8s p50 %6.1f ms  p90 %6.1f ms  p99 %6.1f ms" %
                  (name, *(1e3 * pct(xs, p) for p in (50, 90, 99))))
    for f in failures[:20]:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


main()
