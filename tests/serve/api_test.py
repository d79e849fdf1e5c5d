#!/usr/bin/python3
"""api_test.py TFRUN INI [--set K=V ...] - the API surface clients lean on.

Against ling-nano (run with --set server.cors=http://ok.example): n choices
forked from one prefill, prompts as lists and token ids, prompt scoring
(echo with logprobs, as lm-eval sends it) held to `tfrun --perplexity`,
logit_bias and the penalties, top_p 0, refused and unknown fields, a
client that hangs up on a reply it waits for whole, and the HTTP details:
/v1/models/{id}, HEAD, 405, CORS, error codes, the context's limits;
structured output (response_format) and forced tool calls, every reply
that ends checked with jsonschema.
"""
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time

import jsonschema

from serve_test import KEY, TIMEOUT, chat, check_error, metric, run, sets_of, wait_idle

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grammar"))
import schema_check                     # noqa: E402 (its random schemas)

FORMATS = schema_check.format_checker()
ORIGIN = "http://ok.example"
FORCED, FORCED_TEXT = 300, " l"        # a ling-nano token, its text
TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models",
                         "ling-nano")


def call(srv, method, path, body=None, headers=None, auth=True):
    """(status, headers, parsed body) of one request."""
    status, h, data = srv.call(method, path, body, auth, headers)
    ctype = h.get("Content-Type") or ""
    return status, h, json.loads(data) if "json" in ctype and data else data


def ok(srv, path, body):
    status, _, got = call(srv, "POST", path, body)
    assert status == 200, (status, got)
    return got


def complete(srv, **kw):
    body = {"model": "x", "temperature": 0}
    body.update(kw)
    return ok(srv, "/v1/completions", body)


def t_choices(srv):
    """n choices: one prefill forked, choice 0 the n = 1 reply, each its own
    draws; usage counts the prompt once."""
    body = chat("And God said", max_tokens=24, temperature=1.0, seed=7)
    one = ok(srv, "/v1/chat/completions", body)
    body["n"] = 3
    three = ok(srv, "/v1/chat/completions", body)
    ch = three["choices"]
    assert [c["index"] for c in ch] == [0, 1, 2], ch
    assert ch[0]["message"] == one["choices"][0]["message"], (ch[0], one)
    assert len({c["message"]["content"] for c in ch}) > 1, ch
    u = three["usage"]
    assert u["prompt_tokens"] == one["usage"]["prompt_tokens"], u
    assert u["completion_tokens"] > one["usage"]["completion_tokens"], u
    greedy = ok(srv, "/v1/chat/completions", chat("And God said", max_tokens=12, n=2,
                                                   temperature=0))
    a, b = greedy["choices"]
    assert a["message"] == b["message"], greedy
    events = srv.stream("/v1/chat/completions", chat("And God said", max_tokens=12, n=2,
                                                     temperature=0, stream=True))
    ends = {e["choices"][0]["index"]: e["choices"][0]["finish_reason"] for e in events
            if e["choices"][0]["finish_reason"]}
    assert sorted(ends) == [0, 1], events
    text = ["".join(e["choices"][0]["delta"].get("content") or "" for e in events
                    if e["choices"][0]["index"] == i) for i in (0, 1)]
    assert text[0] == text[1] == a["message"]["content"], (text, a)


def t_prompts(srv):
    """A prompt as a string, a list of them, token ids, lists of ids: one
    choice each, in order; ids give what their text gives."""
    texts = ["In the beginning", "And the LORD spake unto Moses"]
    single = [complete(srv, prompt=t, max_tokens=8)["choices"][0]["text"] for t in texts]
    many = complete(srv, prompt=texts, max_tokens=8)
    assert [c["index"] for c in many["choices"]] == [0, 1], many
    assert [c["text"] for c in many["choices"]] == single, (many, single)
    ids = [tokenize(srv, t) for t in texts]
    by_ids = complete(srv, prompt=ids[0], max_tokens=8)
    assert by_ids["choices"][0]["text"] == single[0], (by_ids, single)
    both = complete(srv, prompt=ids, max_tokens=8, n=2)
    assert [c["index"] for c in both["choices"]] == [0, 1, 2, 3], both
    assert [c["text"] for c in both["choices"]] == [single[0]] * 2 + [single[1]] * 2, both
    assert both["usage"]["prompt_tokens"] == len(ids[0]) + len(ids[1]), both
    for bad in ([], [[]], [1, "x"], [-1], [10 ** 7], [[1], 2], {"a": 1}):
        check_error(srv, 400, "POST", "/v1/completions", {"prompt": bad, "max_tokens": 4})


def tokenize(srv, text):
    """The ids the server encodes a string prompt to (with --add-special)."""
    out = subprocess.run([srv.tfrun, "--tokenizer", TOKENIZER, "--encode", text,
                          "--add-special"], capture_output=True, text=True, timeout=TIMEOUT,
                         check=True)
    return json.loads(out.stdout)


def t_echo(srv):
    """echo with logprobs scores the prompt: its tokens first, the first
    without a logprob, then the reply's."""
    text = "And God said, Let there be light: and there was light."
    got = complete(srv, prompt=text, max_tokens=0, echo=True, logprobs=2)
    ch = got["choices"][0]
    lp = ch["logprobs"]
    n = got["usage"]["prompt_tokens"]
    assert ch["text"] == text and ch["finish_reason"] == "length", ch
    assert got["usage"]["completion_tokens"] == 0, got
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == n, lp
    assert "".join(lp["tokens"]) == text, lp
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
    assert all(x < 0 for x in lp["token_logprobs"][1:]), lp
    assert all(len(t) >= 1 for t in lp["top_logprobs"][1:]), lp
    offs = lp["text_offset"]
    assert offs[0] == 0 and offs == sorted(offs), offs
    assert all(text[o:].startswith(t) for o, t in zip(offs, lp["tokens"])), (offs, lp)
    # lm-eval's shape: max_tokens 1, the reply's token after the prompt's.
    one = complete(srv, prompt=text, max_tokens=1, echo=True, logprobs=1)["choices"][0]
    assert one["logprobs"]["token_logprobs"][:n] == lp["token_logprobs"], (one, lp)
    assert len(one["logprobs"]["tokens"]) == n + 1 and one["text"].startswith(text), one
    # Streamed: the prompt's text and entries first.
    events = srv.stream("/v1/completions", {"prompt": text, "max_tokens": 4, "echo": True,
                                            "logprobs": 0, "temperature": 0, "stream": True})
    first = events[0]["choices"][0]
    assert first["text"] == text, first
    assert first["logprobs"]["token_logprobs"] == lp["token_logprobs"], first
    # Without logprobs the text alone; in chat, refused.
    assert complete(srv, prompt=text, max_tokens=0, echo=True)["choices"][0]["text"] == text
    check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", echo=True))
    check_error(srv, 400, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 0})


def t_perplexity(srv):
    """lm-eval's loglikelihood request (token-id prompts in a batch, echo,
    logprobs, max_tokens 0): the sum of a text's echoed logprobs is what
    --perplexity scores it."""
    text = ("In the beginning God created the heaven and the earth. And the earth was "
            "without form, and void; and darkness was upon the face of the deep.")
    ids = tokenize(srv, text)
    got = complete(srv, prompt=[ids, tokenize(srv, "And God said")], max_tokens=0, echo=True,
                   logprobs=1)
    assert [c["index"] for c in got["choices"]] == [0, 1], got
    n = len(ids)
    lps = got["choices"][0]["logprobs"]["token_logprobs"]
    assert len(lps) == n and lps[0] is None, lps
    total = sum(lps[1:])
    by_text = complete(srv, prompt=text, max_tokens=0, echo=True, logprobs=0)
    assert by_text["choices"][0]["logprobs"]["token_logprobs"] == lps, by_text
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(text)
        f.flush()
        out = subprocess.run([srv.tfrun, srv.ini] + srv.sets +
                             ["--set", "runtime.context=%d" % n, "--perplexity", f.name,
                              "--json"], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    ppl = json.loads(out.stdout)
    assert ppl["tokens"] == n and ppl["scored"] == n - 1, (ppl, n)
    want = -ppl["nll"] * ppl["scored"]
    assert math.isclose(total, want, rel_tol=1e-4), (total, want)


def t_bias_penalties(srv):
    """logit_bias bans and forces; presence and frequency penalties change
    a greedy reply, the frequency one cutting its repeats."""
    body = chat("And the LORD said unto Moses", max_tokens=48, temperature=0)
    plain = ok(srv, "/v1/chat/completions", body)["choices"][0]
    first = complete(srv, prompt="And the LORD", max_tokens=1, logprobs=0)
    top = tokenize(srv, first["choices"][0]["text"])[0]
    banned = complete(srv, prompt="And the LORD", max_tokens=1, logprobs=0,
                      logit_bias={str(top): -100})
    assert banned["choices"][0]["text"] != first["choices"][0]["text"], banned
    forced = complete(srv, prompt="And the LORD", max_tokens=3, logprobs=0,
                      logit_bias={str(FORCED): 100})
    assert forced["choices"][0]["logprobs"]["tokens"] == [FORCED_TEXT] * 3, forced
    words = plain["message"]["content"].split()
    for key in ("presence_penalty", "frequency_penalty"):
        body[key] = 2.0
        got = ok(srv, "/v1/chat/completions", body)["choices"][0]
        assert got["message"]["content"] != plain["message"]["content"], (key, got)
        del body[key]
    body["frequency_penalty"] = 2.0
    pen = ok(srv, "/v1/chat/completions", body)["choices"][0]["message"]["content"].split()
    assert len(set(pen)) / len(pen) > len(set(words)) / len(words), (pen, words)
    for bad in ({"x": 1}, {"-1": 1}, {"1": 101}, {"1": "a"}, [1]):
        check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", logit_bias=bad))
    check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", presence_penalty=3))


def t_top_p_zero(srv):
    """top_p 0 is greedy, streamed or not."""
    want = ok(srv, "/v1/chat/completions", chat("In the beginning", max_tokens=12,
                                                temperature=0))["choices"][0]["message"]
    got = ok(srv, "/v1/chat/completions", chat("In the beginning", max_tokens=12,
                                               temperature=0.8, top_p=0))["choices"][0]
    assert got["message"] == want, (got, want)
    events = srv.stream("/v1/chat/completions", chat("In the beginning", max_tokens=12,
                                                     top_p=0, stream=True))
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events)
    assert text == want["content"], (text, want)


def t_fields(srv):
    """Refused fields are named; unknown ones are ignored and named in a
    header."""
    for key, val in (("suffix", "x"), ("best_of", 3), ("functions", [{"name": "f"}]),
                     ("modalities", ["audio"])):
        e = check_error(srv, 400, "POST", "/v1/completions" if key == "suffix" else
                        "/v1/chat/completions", dict(chat("x"), prompt="x", **{key: val}))
        assert key in e["message"] and e["param"] == key, e
    status, h, _ = call(srv, "POST", "/v1/chat/completions",
                        chat("x", max_tokens=2, best_of=1, frobnicate=1, zork={"a": 1}))
    assert status == 200 and h["X-TensorFold-Ignored"] == "frobnicate, zork", dict(h)
    status, h, _ = call(srv, "POST", "/v1/chat/completions", chat("x", max_tokens=2))
    assert status == 200 and "X-TensorFold-Ignored" not in h, dict(h)
    got = ok(srv, "/v1/chat/completions", {"messages": [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": "In the beginning"}], "max_tokens": 4})
    assert got["choices"][0]["message"]["content"], got


def t_http(srv):
    """/v1/models/{id}, HEAD, 405 with Allow, CORS, error codes."""
    status, _, m = call(srv, "GET", "/v1/models/ling-nano")
    assert status == 200 and m["id"] == "ling-nano" and m["object"] == "model", m
    e = check_error(srv, 404, "GET", "/v1/models/gpt-5")
    assert e["code"] == "model_not_found" and "gpt-5" in e["message"], e
    status, h, body = call(srv, "HEAD", "/v1/models")
    assert status == 200 and body == b"", (status, body)
    status, h, body = call(srv, "DELETE", "/v1/chat/completions")
    assert status == 405 and "POST" in h["Allow"], (status, dict(h))
    assert body["error"]["code"] == "method_not_allowed", body
    assert check_error(srv, 401, "GET", "/v1/models", auth=False)["code"] == "invalid_api_key"
    # CORS: the preflight needs no key; an allowed origin is echoed back.
    status, h, _ = call(srv, "OPTIONS", "/v1/chat/completions", auth=False,
                        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert status == 204 and h["Access-Control-Allow-Origin"] == ORIGIN, dict(h)
    assert "POST" in h["Access-Control-Allow-Methods"], dict(h)
    assert "Authorization" in h["Access-Control-Allow-Headers"], dict(h)
    status, h, _ = call(srv, "GET", "/v1/models", headers={"Origin": ORIGIN})
    assert h["Access-Control-Allow-Origin"] == ORIGIN, dict(h)
    status, h, _ = call(srv, "GET", "/v1/models", headers={"Origin": "http://evil.example"})
    assert "Access-Control-Allow-Origin" not in h, dict(h)


def t_context(srv):
    """A prompt the context cannot hold is refused with its code; max_tokens
    past the context is clipped, and the reply says so."""
    ctx = call(srv, "GET", "/v1/models/ling-nano")[2]["max_model_len"]
    long = [5] * (ctx + 1)
    e = check_error(srv, 400, "POST", "/v1/completions", {"prompt": long, "max_tokens": 4})
    assert e["code"] == "context_length_exceeded", e
    near = [5] * (ctx - 3)
    status, h, got = call(srv, "POST", "/v1/completions",
                          {"prompt": near, "max_tokens": 100, "temperature": 0})
    assert status == 200 and got["usage"]["completion_tokens"] <= 3, got
    assert "clipped to 3" in h["X-TensorFold-Notice"], dict(h)


def t_hangup(srv):
    """A client that hangs up on a reply it waits for whole cancels it:
    its slot comes free within a step, counted."""
    before = metric(srv, "tf_choices_cancelled_total")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT)
    body = json.dumps(chat("In the beginning", max_tokens=500, n=2)).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
              b"Authorization: Bearer " + KEY.encode() + b"\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
              + body)
    deadline = time.time() + TIMEOUT
    while metric(srv, "tf_active_requests") < 2:
        assert time.time() < deadline, "the request never started"
        time.sleep(0.01)
    t0 = time.time()
    s.close()
    wait_idle(srv)
    assert time.time() - t0 < 5, time.time() - t0
    assert metric(srv, "tf_choices_cancelled_total") == before + 2
    gen = metric(srv, "tf_generation_tokens_total")
    time.sleep(0.3)
    assert metric(srv, "tf_generation_tokens_total") == gen


def bound(s):
    """s with every free string, array, object and value bounded: ling-nano,
    a model of the KJV alone, never ends a string of its own accord."""
    if s is True or s == {}:
        return {"type": "integer"}
    if isinstance(s, list):
        return [bound(x) for x in s]
    if not isinstance(s, dict):
        return s
    s = {k: (v if k in ("enum", "const", "required") else
             {p: bound(x) for p, x in v.items()} if k in ("properties", "$defs") else
             bound(v)) for k, v in s.items()}
    t = s.get("type")
    if t == "string" and not {"enum", "const", "pattern", "format", "maxLength"} & set(s):
        s["maxLength"] = 6
    if t == "array" and "maxItems" not in s:
        s["maxItems"] = max(3, s.get("minItems", 0))
    if t == "object" or "properties" in s:
        s["additionalProperties"] = False
    return s


def structured(srv, schema, seed, **kw):
    body = chat("Answer in JSON.", max_tokens=700, temperature=0.8, seed=seed,
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "x", "schema": schema}}, **kw)
    return ok(srv, "/v1/chat/completions", body)["choices"][0]


FEATURES = [
    {"type": "object", "properties": {
        "book": {"type": "string", "enum": ["Genesis", "Exodus", "Job"]},
        "chapter": {"type": "integer", "minimum": 1, "maximum": 50},
        "score": {"type": "number"}, "holy": {"type": "boolean"}, "none": {"type": "null"},
        "tag": {"const": "kjv"}, "opt": {"type": "string", "maxLength": 3}},
     "required": ["book", "chapter", "score", "holy", "none", "tag"],
     "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
     "minItems": 2, "maxItems": 4},
    {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[a-c]{2}$"}]},
    {"type": "object", "properties": {"who": {"$ref": "#/$defs/name"},
                                      "kids": {"type": "array", "maxItems": 2,
                                               "items": {"$ref": "#/$defs/name"}}},
     "required": ["who", "kids"], "additionalProperties": False,
     "$defs": {"name": {"type": "string", "maxLength": 5}}},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                      "id": {"type": "string", "format": "uuid"}},
     "required": ["when", "id"], "additionalProperties": False},
]


def t_structured(srv):
    """response_format json_schema: each feature's replies parse and validate;
    json_object gives an object; streamed, the same."""
    for schema in FEATURES:
        for seed in (1, 2):
            ch = structured(srv, schema, seed)
            assert ch["finish_reason"] == "stop", (schema, ch)
            jsonschema.validate(json.loads(ch["message"]["content"]), schema,
                                format_checker=FORMATS)
    got = ok(srv, "/v1/chat/completions", chat("Answer in JSON.", max_tokens=64,
                                               response_format={"type": "json_object"}))
    assert got["choices"][0]["message"]["content"].startswith("{"), got
    body = chat("Answer in JSON.", max_tokens=700, temperature=0.8, seed=1, stream=True,
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "x", "schema": FEATURES[0]}})
    events = srv.stream("/v1/chat/completions", body)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events)
    assert text == structured(srv, FEATURES[0], 1)["message"]["content"], text


def t_structured_random(srv):
    """Random schemas (tests/grammar's generator, bounded): every reply that
    ends validates, and most end."""
    done = 0
    for i in range(30):
        schema = bound(schema_check.Gen(1000 + i).root())
        ch = structured(srv, schema, i)
        if ch["finish_reason"] == "stop":
            done += 1
            jsonschema.validate(json.loads(ch["message"]["content"]), schema,
                                format_checker=FORMATS)
    assert done >= 24, done


def t_tool_choice(srv):
    """tool_choice required or named: the reply is calls of the tools, each
    call's arguments valid under its parameters."""
    params = {"type": "object", "properties": {
        "book": {"type": "string", "maxLength": 8},
        "chapter": {"type": "integer", "minimum": 1, "maximum": 150},
        "verse": {"type": "integer", "minimum": 1, "maximum": 99}},
        "required": ["book", "chapter"]}
    count = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 10}},
             "required": ["text"]}
    tools = [{"type": "function", "function": {"name": "get_verse", "parameters": params}},
             {"type": "function", "function": {"name": "count", "parameters": count}}]
    for choice in ("required", {"type": "function", "function": {"name": "count"}}):
        for seed in (1, 2, 3):
            got = ok(srv, "/v1/chat/completions", chat(
                "Which verse?", max_tokens=400, temperature=0.8, seed=seed, tools=tools,
                tool_choice=choice, parallel_tool_calls=False))["choices"][0]
            calls = got["message"].get("tool_calls")
            assert got["finish_reason"] == "tool_calls" and len(calls) == 1, got
            for c in calls:
                name = c["function"]["name"]
                assert choice == "required" or name == "count", c
                jsonschema.validate(json.loads(c["function"]["arguments"]),
                                    params if name == "get_verse" else count)
    for bad, param in (({"response_format": {"type": "json_schema", "json_schema": {
            "schema": {"type": "object", "patternProperties": {"^a": {}}}}}}, "patternProperties"),
            ({"response_format": {"type": "yaml"}}, "response_format"),
            ({"tools": tools, "tool_choice": {"type": "function",
                                              "function": {"name": "nope"}}}, "nope"),
            ({"tool_choice": "required"}, "tools"),
            ({"tools": tools, "tool_choice": "required",
              "response_format": {"type": "json_object"}}, "response_format")):
        e = check_error(srv, 400, "POST", "/v1/chat/completions", chat("x", **bad))
        assert param in e["message"], (bad, e)


def t_responses_refused(srv):
    """/v1/responses: what it cannot take is a 400 naming the field."""
    for body, param in (({"input": 5}, "input"), ({"input": []}, "input"),
                        ({"input": [{"type": "input_image", "image_url": "x"}]}, "input"),
                        ({"input": [{"role": "user", "content": [{"type": "input_file"}]}]},
                         "input"),
                        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools"),
                        ({"input": "x", "text": {"format": {}}}, "text"),
                        ({"input": "x", "background": True}, "background"),
                        ({"input": "x", "include": ["reasoning.encrypted_content"]}, "include"),
                        ({"input": [{"type": "function_call", "name": "f"}]}, "input")):
        e = check_error(srv, 400, "POST", "/v1/responses", body)
        assert e["param"] == param, (body, e)
    status, h, got = call(srv, "POST", "/v1/responses", {"input": "x", "max_output_tokens": 2,
                                                         "frobnicate": 1})
    assert status == 200 and h["X-TensorFold-Ignored"] == "frobnicate", (got, dict(h))


TESTS = [t_choices, t_prompts, t_echo, t_perplexity, t_bias_penalties, t_top_p_zero,
         t_fields, t_http, t_context, t_hangup, t_structured, t_structured_random,
         t_tool_choice, t_responses_refused]

if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], sets_of(sys.argv[3:]), TESTS)
