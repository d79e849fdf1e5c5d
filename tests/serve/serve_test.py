#!/usr/bin/python3
"""serve_test.py TFRUN INI SUITE [--set K=V ...] - tfrun serve over loopback.

Starts the server on a free port, runs SUITE against it with the standard
library's http.client, sends SIGTERM and checks it exits 0.  Every request
has a timeout, so a hung server fails the test instead of hanging it.

SUITE nano: the OpenAI endpoints, errors, batching, a client that leaves,
the prefix cache (run it with --set server.prefix_cache=2).
SUITE tiny: reasoning_content (the ling3 template thinks), 429, SIGTERM.
SUITE loading: the server listens while the engine opens, answering 503.
"""
import concurrent.futures
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

KEY = "sk-test-key"
TIMEOUT = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tfrun, ini, sets, wait=True, flags=()):
        self.port = free_port()
        self.tfrun, self.ini, self.overrides = tfrun, ini, list(sets)
        self.sets = [a for s in sets for a in ("--set", s)]
        args = [tfrun, "serve", ini, "--port", str(self.port), "--api-key", KEY] + self.sets + \
            list(flags)
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        if not wait:
            return
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit("server exited: %s" % self.proc.stderr.read())
            try:
                if self.request("GET", "/health", auth=False)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.proc.kill()
        sys.exit("server did not come up")

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)

    def request(self, method, path, body=None, auth=True, headers=None, raw=None):
        status, h, data = self.call(method, path, body, auth, headers, raw)
        return status, h.get("Content-Type") or "", data

    def call(self, method, path, body=None, auth=True, headers=None, raw=None):
        """(status, response headers, body bytes) of one request."""
        h = dict(headers or {})
        if auth:
            h["Authorization"] = "Bearer " + KEY
        if body is not None:
            raw = json.dumps(body).encode()
        if raw is not None:
            h["Content-Type"] = "application/json"
        c = self.conn()
        c.request(method, path, body=raw, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.headers, data

    def json(self, method, path, body=None, **kw):
        status, ctype, data = self.request(method, path, body, **kw)
        return status, json.loads(data) if "json" in ctype else data.decode()

    def stream(self, path, body):
        """The SSE events of a streamed reply, checked for framing."""
        c = self.conn()
        c.request("POST", path, body=json.dumps(body),
                  headers={"Authorization": "Bearer " + KEY,
                           "Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type") == "text/event-stream"
        text = r.read().decode()
        c.close()
        assert text.endswith("data: [DONE]\n\n"), text[-200:]
        events = text.split("\n\n")[:-1]
        for e in events:
            assert e.startswith("data: ") and "\n" not in e, repr(e)
        return [json.loads(e[6:]) for e in events[:-1]]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the server did not exit after SIGTERM")
        err = self.proc.stderr.read()
        assert rc == 0, "exit %d: %s" % (rc, err)


def chat(content, **kw):
    body = {"model": "x", "messages": [{"role": "user", "content": content}]}
    body.update(kw)
    return body


def check_error(srv, status, method, path, body=None, **kw):
    got, ctype, data = srv.request(method, path, body, **kw)
    assert got == status, (got, status, data)
    e = json.loads(data)["error"]
    assert isinstance(e["message"], str) and e["message"], e
    assert set(e) == {"message", "type", "param", "code"}, e
    return e


def wait_idle(srv):
    """Until no request is decoding: a client that left frees its slot."""
    deadline = time.time() + TIMEOUT
    while "\ntf_active_requests 0\n" not in srv.request("GET", "/metrics")[2].decode():
        assert time.time() < deadline, "a slot stayed taken"
        time.sleep(0.05)


def rendered_ids(srv, body):
    """The token ids `tfrun INI --render-chat` makes of a chat request."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(body, f)
        f.flush()
        out = subprocess.run([srv.tfrun, srv.ini] + srv.sets + ["--render-chat", f.name, "--json"],
                             capture_output=True, text=True, timeout=TIMEOUT, check=True)
    return json.loads(out.stdout)["tokens"]


def content_of(srv, body):
    status, r = srv.json("POST", "/v1/chat/completions", body)
    assert status == 200, r
    return r["choices"][0]["message"]["content"], r


# --- nano ---

def t_chat(srv):
    body = chat("In the beginning", max_tokens=16, temperature=0)
    text, r = content_of(srv, body)
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    ch = r["choices"][0]
    assert ch["message"]["role"] == "assistant" and text
    assert ch["finish_reason"] in ("stop", "length")
    u = r["usage"]
    assert u["completion_tokens"] <= 16 and u["prompt_tokens"] > 0
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert r["model"] == "ling-nano"
    # The server renders through the template --render-chat shows.
    assert u["prompt_tokens"] == len(rendered_ids(srv, body)), u


def t_stream(srv):
    body = chat("And God said", max_tokens=12, temperature=0, stream=True,
                stream_options={"include_usage": True})
    ev = srv.stream("/v1/chat/completions", body)
    assert ev[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(e["object"] == "chat.completion.chunk" for e in ev)
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in ev if e["choices"])
    last = ev[-2]["choices"][0]
    assert last["finish_reason"] in ("stop", "length") and last["delta"].keys() <= {"role"}
    assert ev[-1]["choices"] == [] and ev[-1]["usage"]["completion_tokens"] <= 12
    whole, _ = content_of(srv, chat("And God said", max_tokens=12, temperature=0))
    assert text == whole, (text, whole)


def t_completions(srv):
    status, r = srv.json("POST", "/v1/completions",
                         {"prompt": "In the beginning God", "max_tokens": 8, "temperature": 0})
    assert status == 200 and r["object"] == "text_completion", r
    text = r["choices"][0]["text"]
    assert text and r["usage"]["completion_tokens"] <= 8
    ev = srv.stream("/v1/completions", {"prompt": "In the beginning God", "max_tokens": 8,
                                        "temperature": 0, "stream": True})
    assert "".join(e["choices"][0]["text"] for e in ev) == text


def t_models_health_metrics(srv):
    status, r = srv.json("GET", "/v1/models")
    assert status == 200 and r["object"] == "list" and r["data"][0]["id"] == "ling-nano", r
    status, r = srv.json("GET", "/health", auth=False)
    assert status == 200 and r["status"] == "ok"
    status, ctype, text = srv.request("GET", "/metrics")
    text = text.decode()
    assert status == 200 and ctype.startswith("text/plain"), ctype
    for name in ("tf_requests_total", "tf_generation_tokens_total", "tf_queue_depth",
                 "tf_decode_tokens_per_second", "tf_time_to_first_token_seconds_count"):
        assert "\n" + name + " " in text, name


def t_seed(srv):
    body = chat("Blessed are", max_tokens=16, temperature=1.0, seed=7)
    a, _ = content_of(srv, body)
    b, _ = content_of(srv, body)
    assert a == b, (a, b)
    outs = {content_of(srv, chat("Blessed are", max_tokens=16, temperature=1.0,
                                 seed=s))[0] for s in range(1, 5)}
    assert len(outs) > 1, outs


def t_stop(srv):
    whole, _ = content_of(srv, chat("In the beginning", max_tokens=24, temperature=0))
    cut = whole[len(whole) // 2:len(whole) // 2 + 3]
    assert cut, whole
    text, r = content_of(srv, chat("In the beginning", max_tokens=24, temperature=0,
                                   stop=["\u2603", cut]))
    assert text == whole[:whole.index(cut)], (text, whole, cut)
    assert r["choices"][0]["finish_reason"] == "stop"


PROMPTS = ["In the beginning", "And the LORD spake", "Blessed are the meek",
           "The kings of the earth"]


def t_concurrent(srv):
    alone = [content_of(srv, chat(p, max_tokens=20, temperature=0))[0] for p in PROMPTS]
    got = [None] * len(PROMPTS)

    def run(i):
        body = chat(PROMPTS[i], max_tokens=20, temperature=0, stream=i % 2 == 1)
        if i % 2:
            ev = srv.stream("/v1/chat/completions", body)
            got[i] = "".join(e["choices"][0]["delta"].get("content", "") for e in ev)
        else:
            got[i] = content_of(srv, body)[0]
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert got == alone, (got, alone)


def t_errors(srv):
    check_error(srv, 400, "POST", "/v1/chat/completions", raw=b"{not json")
    check_error(srv, 400, "POST", "/v1/chat/completions", raw=b"[1, 2]")
    check_error(srv, 400, "POST", "/v1/chat/completions", {"messages": "hi"})
    check_error(srv, 400, "POST", "/v1/chat/completions", {"messages": []})
    check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", temperature="hot"))
    check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", max_tokens=0))
    check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", max_tokens=10 ** 6))
    check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", n=10 ** 4))
    check_error(srv, 400, "POST", "/v1/chat/completions",
                {"messages": [{"role": "wizard", "content": "x"}]})
    e = check_error(srv, 400, "POST", "/v1/chat/completions", {"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": "{not json"}}]},
        {"role": "user", "content": "y"}]})
    assert "tool_calls[0].function.arguments" in e["message"], e
    check_error(srv, 400, "POST", "/v1/completions", {"prompt": 3})
    check_error(srv, 400, "POST", "/v1/completions", {"prompt": "x", "logprobs": True})
    check_error(srv, 400, "POST", "/v1/completions", {"prompt": "x", "logprobs": 21})
    check_error(srv, 413, "POST", "/v1/chat/completions", chat("x" * 70000))
    check_error(srv, 404, "GET", "/v1/nothing")
    check_error(srv, 405, "POST", "/v1/models")
    check_error(srv, 401, "GET", "/v1/models", auth=False)
    check_error(srv, 401, "GET", "/v1/models", auth=False,
                headers={"Authorization": "Bearer sk-test-kez"})
    check_error(srv, 401, "POST", "/v1/chat/completions", chat("x"), auth=False)
    check_error(srv, 400, "POST", "/v1/chat/completions",
                {"messages": [{"role": "user", "content": "x"}] * 300})


def t_vanish(srv):
    """A client that leaves mid-stream: the others are still served and
    its slot comes free, its choice counted cancelled."""
    before = metric(srv, "tf_choices_cancelled_total")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT)
    body = json.dumps(chat("In the beginning", max_tokens=400, stream=True)).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
              b"Authorization: Bearer " + KEY.encode() + b"\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
              + body)
    got = b""
    while b"data: " not in got:
        got += s.recv(4096)
    s.close()
    text, _ = content_of(srv, chat("And God said", max_tokens=8, temperature=0))
    assert text
    wait_idle(srv)
    assert metric(srv, "tf_choices_cancelled_total") == before + 1


def metric(srv, name):
    for line in srv.request("GET", "/metrics")[2].decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no metric " + name)


def t_prefix(srv):
    """A conversation's second turn continues the first's sequence: its
    usage counts cached tokens, its reply is the one a server without the
    cache gives, token for token."""
    first = [{"role": "user", "content": "Remember the sabbath day"}]
    body = {"model": "x", "messages": first, "max_tokens": 20, "temperature": 0}
    text, r = content_of(srv, body)
    assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, r["usage"]
    n_first = r["usage"]["prompt_tokens"]
    before = metric(srv, "tf_prompt_tokens_cached_total")
    second = dict(body, messages=first + [{"role": "assistant", "content": text},
                                          {"role": "user", "content": "to keep it holy"}],
                  logprobs=True)
    text2, r2 = content_of(srv, second)
    cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
    # The first turn's prompt and reply: more than its prompt.
    assert n_first < cached < r2["usage"]["prompt_tokens"], (n_first, r2["usage"])
    assert metric(srv, "tf_prompt_tokens_cached_total") == before + cached
    # The same request again rolls back to its prompt's snapshot.
    text3, r3 = content_of(srv, second)
    assert r3["usage"]["prompt_tokens_details"]["cached_tokens"] == \
        r3["usage"]["prompt_tokens"] - 1, r3["usage"]
    assert text3 == text2, (text3, text2)
    # A fresh server that keeps nothing runs the whole prompt.
    fresh = Server(srv.tfrun, srv.ini, srv.overrides + ["server.prefix_cache=0"])
    try:
        text4, r4 = content_of(fresh, second)
        assert metric(fresh, "tf_prefix_cache_sequences") == 0
    finally:
        fresh.stop()
    assert r4["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, r4["usage"]
    ids = [[t["token"] for t in x["choices"][0]["logprobs"]["content"]] for x in (r2, r4)]
    assert ids[0] == ids[1] and text2 == text4, (ids, text2, text4)


def t_prefix_bound(srv):
    """Distinct prompts, one at a time and together: the cache never keeps
    more sequences than [server] prefix_cache, and keeps that many."""
    cap = int([x for x in srv.overrides if x.startswith("server.prefix_cache=")][-1].split("=")[1])
    for i in range(cap + 3):
        content_of(srv, chat("Psalm %d" % i, max_tokens=4, temperature=0))
        assert metric(srv, "tf_prefix_cache_sequences") <= cap
    threads = [threading.Thread(target=content_of, args=(srv, chat("Verse %d" % i,
                                                                  max_tokens=12)))
               for i in range(6)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        assert metric(srv, "tf_prefix_cache_sequences") <= cap
        time.sleep(0.02)
    assert metric(srv, "tf_prefix_cache_sequences") == cap


# --- tiny ---

def t_reasoning(srv):
    body = chat("Hi", max_tokens=8, temperature=0,
                chat_template_kwargs={"enable_thinking": True})
    status, r = srv.json("POST", "/v1/chat/completions", body)
    assert status == 200, r
    msg = r["choices"][0]["message"]
    assert msg.get("reasoning_content"), msg
    assert r["usage"]["prompt_tokens"] == len(rendered_ids(srv, body)), r["usage"]
    body["stream"] = True
    ev = srv.stream("/v1/chat/completions", body)
    deltas = [e["choices"][0]["delta"] for e in ev if e["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == msg["reasoning_content"]
    assert "".join(d.get("content", "") for d in deltas) == (msg["content"] or "")


def t_queue_full(srv):
    """One slot, no queue: a second request while the first decodes is 429."""
    c = srv.conn()
    c.request("POST", "/v1/chat/completions",
              body=json.dumps(chat("Hi", max_tokens=2000, stream=True,
                                   temperature=1.0)),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    r.readline()
    check_error(srv, 429, "POST", "/v1/chat/completions", chat("Hi", max_tokens=2))
    c2 = srv.conn()
    c2.request("POST", "/v1/chat/completions", body=json.dumps(chat("Hi", max_tokens=2)),
               headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    busy = c2.getresponse()
    busy.read()
    assert busy.status == 429 and busy.getheader("Retry-After") == "1", busy.getheaders()
    c2.close()
    c.close()


def t_sigterm(srv):
    """SIGTERM while a reply streams: the reply ends well, the server exits 0."""
    wait_idle(srv)
    c = srv.conn()
    c.request("POST", "/v1/chat/completions",
              body=json.dumps(chat("Hi", max_tokens=200, stream=True)),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    r.readline()
    srv.proc.send_signal(signal.SIGTERM)
    text = r.read().decode()
    assert text.endswith("data: [DONE]\n\n"), text[-200:]


# --- loading ---

def t_loading(tfrun, ini, sets):
    """A model folder whose config.json is a FIFO holds the engine's open
    until the test writes to it: meanwhile /health says loading and the
    API answers 503 in OpenAI's shape.  What the FIFO then gives is no
    regular file: the open fails, the server says why and exits 1."""
    src = os.path.join(os.path.dirname(os.path.abspath(ini)), "..", "models", "ling-nano")
    with tempfile.TemporaryDirectory() as tmp:
        for f in os.listdir(src):
            if f != "config.json":
                os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(tmp, f))
        fifo = os.path.join(tmp, "config.json")
        os.mkfifo(fifo)
        srv = Server(tfrun, ini, sets + ["model.path=" + tmp], wait=False)
        try:
            deadline = time.time() + TIMEOUT
            while True:
                assert srv.proc.poll() is None, srv.proc.stderr.read()
                try:
                    status, r = srv.json("GET", "/health", auth=False)
                    break
                except OSError:
                    assert time.time() < deadline, "the server did not listen"
                    time.sleep(0.05)
            assert status == 503 and r == {"status": "loading"}, (status, r)
            check_error(srv, 503, "GET", "/v1/models")
            check_error(srv, 503, "POST", "/v1/chat/completions", chat("x"))
            check_error(srv, 401, "GET", "/v1/models", auth=False)
            status, r = srv.json("POST", "/v1/completions", {"prompt": "x"})
            assert r["error"]["type"] == "service_unavailable", r
            try:
                with open(fifo, "w") as f:
                    f.write("{}")
            except BrokenPipeError:
                pass                    # the server closed it, unread
            rc = srv.proc.wait(timeout=TIMEOUT)
            err = srv.proc.stderr.read()
            assert rc == 1 and "config.json: not a regular file" in err, (rc, err)
        finally:
            if srv.proc.poll() is None:
                srv.proc.kill()


# --- device: srv runs on a device backend (--set plugins.backend=...) ---

def t_device(srv):
    """Seeded draws within the device sampler's reach (top_k 40), greedy
    replies, two requests batched in one step and a reply with logprobs
    (the logits written for the host) give the token ids of the CPU path's
    server; the backend's sampler picked every token but the logprobs
    reply's, which it picks too (only its logits are written); decode
    steps ran as device graphs, some replayed."""
    cpu = Server(srv.tfrun, srv.ini, [o for o in srv.overrides if not o.startswith("plugins.")])
    try:
        def ids(server, body):
            status, r = server.json("POST", "/v1/completions", body)
            assert status == 200, r
            return r["choices"][0]["text"], r["usage"]["completion_tokens"]
        bodies = [{"prompt": "In the beginning", "max_tokens": 4, "temperature": 1.0,
                   "top_k": 40, "seed": 3},
                  {"prompt": "And God said", "max_tokens": 4, "temperature": 0}]
        made = 0
        for b in bodies:
            want, _ = ids(cpu, b)
            got, n = ids(srv, b)
            assert got == want, (b, got, want)
            made += n
        assert metric(srv, "tf_device_sampled_tokens_total") >= made > 0
        graphs = metric(srv, "tf_device_graphs_total")
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            got = list(pool.map(lambda b: ids(srv, b)[0], bodies))
        assert got == [ids(cpu, b)[0] for b in bodies], got
        # Decode steps (a batch of the two among them) run as graphs, and replay.
        runs, built = metric(srv, "tf_device_graphs_total"), metric(srv, "tf_device_graphs_built_total")
        assert runs > graphs and runs > built > 0, (graphs, runs, built)
        lp = chat("In the beginning", max_tokens=3, temperature=0, logprobs=True,
                  top_logprobs=2)
        text, r = content_of(srv, lp)
        want, w = content_of(cpu, lp)
        assert text == want, (text, want)
        top = [[t["token"] for t in e["top_logprobs"]] for e in r["choices"][0]["logprobs"]["content"]]
        assert top == [[t["token"] for t in e["top_logprobs"]]
                       for e in w["choices"][0]["logprobs"]["content"]], top
        cpu.stop()
    finally:
        if cpu.proc.poll() is None:
            cpu.proc.kill()


def t_drafter_fails(srv):
    """A drafter that fails its step (bad-drafter, mode fail): a drafting
    request ends with an OpenAI-shaped error naming it, non-streamed (500)
    or as a streamed reply's last event; a request with logprobs, which
    decodes plainly beside them, is answered as usual."""
    def fails():
        e = check_error(srv, 500, "POST", "/v1/chat/completions",
                        chat("In the beginning", max_tokens=8))
        assert "drafter bad-drafter" in e["message"] and e["type"] == "server_error", e

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        bad = [pool.submit(fails) for _ in range(2)]
        status, r = srv.json("POST", "/v1/chat/completions",
                             chat("In the beginning", max_tokens=8, temperature=0,
                                  logprobs=True))
        for f in bad:
            f.result()
    assert status == 200 and r["choices"][0]["message"]["content"], r
    events = srv.stream("/v1/chat/completions", chat("In the beginning", max_tokens=8,
                                                      stream=True))
    assert "drafter bad-drafter" in events[-1]["error"]["message"], events[-1]


SUITES = {
    "nano": [t_chat, t_stream, t_completions, t_models_health_metrics, t_seed, t_stop,
             t_concurrent, t_errors, t_vanish, t_prefix, t_prefix_bound],
    "tiny": [t_reasoning, t_queue_full, t_sigterm],
    "device": [t_device],
    "baddrafter": [t_drafter_fails],
}


def run(tfrun, ini, sets, tests, flags=()):
    """Start the server (flags: more of tfrun serve's), run tests against
    it, stop it; exit 1 if one failed."""
    srv = Server(tfrun, ini, sets, flags=flags)
    failed = 0
    try:
        for t in tests:
            t0 = time.time()
            try:
                t(srv)
                print("ok   %s (%.2f s)" % (t.__name__, time.time() - t0), flush=True)
            except Exception as e:
                failed += 1
                print("FAIL %s: %r" % (t.__name__, e), flush=True)
        srv.stop()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
    sys.exit(1 if failed else 0)


def sets_of(argv):
    """The values of the --set options in argv."""
    return [a for i, a in enumerate(argv) if i and argv[i - 1] == "--set"]


if __name__ == "__main__":
    if sys.argv[3] == "loading":
        t_loading(sys.argv[1], sys.argv[2], sets_of(sys.argv[4:]))
        print("ok   t_loading")
    else:
        run(sys.argv[1], sys.argv[2], sets_of(sys.argv[4:]), SUITES[sys.argv[3]])
