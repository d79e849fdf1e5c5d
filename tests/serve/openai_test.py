#!/usr/bin/python3
"""openai_test.py VENV TFRUN INI [--set K=V ...] - tfrun serve with the openai client.

The official `openai` Python package is what most programs reach the server
with, so its parsing of our replies is tested, not only our JSON.  It is
pip-installed into a venv at VENV (tests/support/pyvenv.py: the first run
needs PyPI); the script runs again under the venv's Python and checks the
endpoints through the client against ling-nano.
With a drafter set (`--set plugins.drafter=...`), every check runs on the
drafting server, and t_drafts holds its replies to a plain server's (one
rank, even when `--tp-local N` shards the server under test).
"""
import concurrent.futures
import contextlib
import io
import json
import math
import os
import subprocess
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import pyvenv                                   # noqa: E402

pyvenv.reexec(sys.argv[1], ["openai"], "import openai")

import openai                                   # noqa: E402 (the venv's)
from serve_test import KEY, TIMEOUT, Server, run, sets_of   # noqa: E402

MODEL = "ling-nano"


def client(srv, key=KEY):
    return openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % srv.port, api_key=key,
                         timeout=TIMEOUT, max_retries=0)


def ask(srv, content, **kw):
    return client(srv).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": content}], **kw)


def t_chat(srv):
    r = ask(srv, "In the beginning", max_tokens=16, temperature=0)
    assert r.object == "chat.completion" and r.model == MODEL, r
    ch = r.choices[0]
    assert ch.message.role == "assistant" and ch.message.content, ch
    assert ch.finish_reason in ("stop", "length"), ch
    u = r.usage
    assert 0 < u.completion_tokens <= 16 and u.prompt_tokens > 0, u
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens, u


def t_stream(srv):
    chunks = list(ask(srv, "And God said", max_tokens=12, temperature=0, stream=True,
                      stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    with_choice = [c for c in chunks if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in with_choice)
    assert with_choice[0].choices[0].delta.role == "assistant"
    assert with_choice[-1].choices[0].finish_reason in ("stop", "length")
    last = chunks[-1]
    assert last.choices == [] and 0 < last.usage.completion_tokens <= 12, last
    whole = ask(srv, "And God said", max_tokens=12, temperature=0)
    assert text == whole.choices[0].message.content, (text, whole)
    u, w = last.usage, whole.usage
    assert (u.prompt_tokens, u.completion_tokens) == (w.prompt_tokens, w.completion_tokens)
    # The same prompt again starts from the first's kept sequence.
    assert w.prompt_tokens_details.cached_tokens == w.prompt_tokens - 1, w


def t_stop(srv):
    whole = ask(srv, "In the beginning", max_tokens=24, temperature=0).choices[0]
    text = whole.message.content
    cut = text[len(text) // 2:len(text) // 2 + 3]
    assert cut, text
    r = ask(srv, "In the beginning", max_tokens=24, temperature=0, stop=["\u2603", cut])
    assert r.choices[0].message.content == text[:text.index(cut)], (r, text, cut)
    assert r.choices[0].finish_reason == "stop"


def t_seed(srv):
    def once(seed):
        return ask(srv, "Blessed are", max_tokens=16, temperature=1.0,
                   seed=seed).choices[0].message.content
    assert once(7) == once(7)
    assert len({once(s) for s in range(1, 5)}) > 1


def t_completions(srv):
    c = client(srv)
    r = c.completions.create(model=MODEL, prompt="In the beginning God", max_tokens=8,
                             temperature=0)
    assert r.object == "text_completion" and r.choices[0].text, r
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 8, r.usage
    parts = c.completions.create(model=MODEL, prompt="In the beginning God", max_tokens=8,
                                 temperature=0, stream=True)
    assert "".join(p.choices[0].text for p in parts) == r.choices[0].text


def t_models(srv):
    models = list(client(srv).models.list())
    assert [m.id for m in models] == [MODEL], models
    assert models[0].object == "model"


def t_logprobs(srv):
    """One entry a completion token, streamed or not; at temperature 0 the
    token is its own likeliest alternative."""
    r = ask(srv, "In the beginning", max_tokens=12, temperature=0, logprobs=True,
            top_logprobs=3)
    ch = r.choices[0]
    lp = ch.logprobs.content
    assert len(lp) == r.usage.completion_tokens, (lp, r.usage)
    for e in lp:
        alts = [a.logprob for a in e.top_logprobs]
        assert e.logprob <= 0 and len(alts) == 3 and alts == sorted(alts, reverse=True), e
        assert alts[0] == e.logprob, e
        assert e.token.encode() == bytes(e.bytes) or "\ufffd" in e.token, e
    assert b"".join(bytes(e.bytes) for e in lp).decode() == ch.message.content
    chunks = ask(srv, "In the beginning", max_tokens=12, temperature=0, logprobs=True,
                 top_logprobs=3, stream=True)
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs
                for e in c.choices[0].logprobs.content]
    assert streamed == lp, (streamed, lp)
    assert ask(srv, "In the beginning", max_tokens=2).choices[0].logprobs is None


def t_completion_logprobs(srv):
    """Legacy logprobs=N: columns of tokens, their logprobs, N alternatives
    each as a {token: logprob} dict, and where each token starts in the text."""
    c = client(srv)
    kw = dict(model=MODEL, prompt="In the beginning God", max_tokens=10, temperature=0)
    r = c.completions.create(logprobs=3, **kw)
    text, lp = r.choices[0].text, r.choices[0].logprobs
    n = r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n, lp
    assert "".join(lp.tokens) == text, (lp.tokens, text)
    assert lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(n)], lp.text_offset
    for tok, own, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 3 and own <= 0 and sum(math.exp(v) for v in top.values()) <= 1, top
        assert top[tok] == own == max(top.values()), (tok, own, top)   # greedy: the best
    parts = list(c.completions.create(logprobs=3, stream=True, **kw))
    cols = [p.choices[0].logprobs for p in parts if p.choices[0].logprobs]
    assert sum((x.tokens for x in cols), []) == lp.tokens
    assert sum((x.text_offset for x in cols), []) == lp.text_offset
    assert sum((x.token_logprobs for x in cols), []) == lp.token_logprobs
    none = c.completions.create(logprobs=0, **kw).choices[0].logprobs
    assert none.token_logprobs == lp.token_logprobs and none.top_logprobs == [{}] * n, none
    assert c.completions.create(**kw).choices[0].logprobs is None


def t_retrieve_and_n(srv):
    """models.retrieve; n choices in one request."""
    c = client(srv)
    assert c.models.retrieve(MODEL).id == MODEL
    try:
        c.models.retrieve("gpt-5")
        raise AssertionError("an unknown model was found")
    except openai.NotFoundError as e:
        assert e.code == "model_not_found", e
    r = ask(srv, "In the beginning", max_tokens=8, n=3, temperature=0.9, seed=3)
    assert [ch.index for ch in r.choices] == [0, 1, 2], r


def t_scoring(srv):
    """lm-eval's loglikelihood request: token ids, echo, logprobs, max_tokens
    0 or 1, several prompts at once; the scores of a prompt alone."""
    c = client(srv)
    text = "And God said, Let there be light"
    one = c.completions.create(model=MODEL, prompt=text, echo=True, logprobs=1, max_tokens=0,
                               temperature=0)
    lp = one.choices[0].logprobs
    assert one.choices[0].text == text and lp.token_logprobs[0] is None, one
    tok = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models",
                       "ling-nano")
    ids = [json.loads(subprocess.run([srv.tfrun, "--tokenizer", tok, "--encode", t,
                                      "--add-special"], capture_output=True, check=True,
                                     text=True).stdout) for t in (text, "In the beginning")]
    batch = c.completions.create(model=MODEL, prompt=ids, echo=True, logprobs=1,
                                 max_tokens=1, temperature=0)
    assert [ch.index for ch in batch.choices] == [0, 1], batch
    n = len(lp.tokens)
    assert n == len(ids[0]), (lp.tokens, ids)
    assert batch.choices[0].logprobs.token_logprobs[:n] == lp.token_logprobs, batch
    assert batch.choices[0].text.startswith(text), batch


def t_responses(srv):
    """/v1/responses through the client: text, instructions, streamed events."""
    c = client(srv)
    r = c.responses.create(model=MODEL, input="In the beginning", max_output_tokens=10,
                           temperature=0)
    assert r.object == "response" and r.status == "incomplete", r
    assert r.output_text and r.usage.output_tokens == 10, r
    assert r.incomplete_details.reason == "max_output_tokens", r
    want = ask(srv, "In the beginning", max_tokens=10, temperature=0).choices[0].message.content
    assert r.output_text == want, (r.output_text, want)
    events = list(c.responses.create(model=MODEL, input=[{"role": "user",
                                                           "content": "In the beginning"}],
                                     max_output_tokens=10, temperature=0, stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"], types
    assert types[-1] == "response.incomplete", types
    assert [e.sequence_number for e in events] == list(range(len(events))), types
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == want == events[-1].response.output_text, (deltas, want)
    r = c.responses.create(model=MODEL, input="In the beginning", instructions="Be brief.",
                           max_output_tokens=4)
    assert r.output_text, r
    schema = {"type": "object", "properties": {"book": {"type": "string", "maxLength": 8},
                                               "chapter": {"type": "integer"}},
              "required": ["book", "chapter"], "additionalProperties": False}
    r = c.responses.create(model=MODEL, input="A verse as JSON", max_output_tokens=300,
                           temperature=0.8, extra_body={"seed": 1}, text={"format": {
                               "type": "json_schema", "name": "v", "schema": schema}})
    got = json.loads(r.output_text)
    assert set(got) == {"book", "chapter"} and isinstance(got["chapter"], int), got
    tool = {"type": "function", "name": "count", "parameters": {
        "type": "object", "properties": {"text": {"type": "string", "maxLength": 10}},
        "required": ["text"]}}
    r = c.responses.create(model=MODEL, input="Count the words", max_output_tokens=300,
                           temperature=0.8, extra_body={"seed": 1}, tools=[tool],
                           tool_choice="required",
                           parallel_tool_calls=False)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "count", r.output
    assert r.tool_choice == "required" and r.tools[0].name == "count", r   # echoed back
    assert r.parallel_tool_calls is False, r
    assert set(json.loads(calls[0].arguments)) == {"text"}, calls
    try:
        c.responses.create(model=MODEL, input="x", previous_response_id="resp_1")
        raise AssertionError("previous_response_id was taken")
    except openai.BadRequestError as e:
        assert e.param == "previous_response_id", e


def t_readme(srv):
    """README.md's openai snippet, as printed there, against this server."""
    readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
    text = open(readme, encoding="utf-8").read()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "127.0.0.1:8080" in code and "sk-local" in code, code
    code = code.replace("127.0.0.1:8080", "127.0.0.1:%d" % srv.port).replace("sk-local", KEY)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, readme, "exec"), {})
    # What it printed is what the same requests get (the INI's seed).
    one = ask(srv, "In the beginning", max_tokens=24)
    two = ask(srv, "And God said", max_tokens=24).choices[0].message.content
    want = "%s %d\n%s" % (one.choices[0].message.content, one.usage.completion_tokens, two)
    assert out.getvalue() == want and two, (out.getvalue(), want)


def t_errors(srv):
    try:
        client(srv, key="sk-wrong").models.list()
        raise AssertionError("a wrong key was let in")
    except openai.AuthenticationError as e:
        assert e.status_code == 401, e
    try:
        ask(srv, "x", max_tokens=0)
        raise AssertionError("max_tokens=0 was taken")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.param == "max_tokens", (e, e.param)
        assert e.type == "invalid_request_error", e.type
    try:
        ask(srv, "x", top_logprobs=2)
        raise AssertionError("top_logprobs without logprobs was taken")
    except openai.BadRequestError as e:
        assert e.param == "top_logprobs", e


DRAFTING = ("plugins.drafter", "ngram.", "mtp.")


def t_drafts(srv):
    """A drafting server's replies are a plain server's, greedy and seeded,
    chat and completions, streamed, one at a time and four at once (one
    verify for all of them); /metrics counts its drafts."""
    plain = Server(srv.tfrun, srv.ini, [s for s in srv.overrides if not s.startswith(DRAFTING)])
    verse = "And God said, Let there be light: and there was light. "
    prompts = [verse * 3 + "And God said", "In the beginning God created",
               "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"]
    cases = [(p, {"temperature": 0}) for p in prompts] + \
            [(p, {"temperature": 0.8, "seed": k}) for k, p in enumerate(prompts)]

    def go(s, case):
        p, kw = case
        chat = ask(s, p, max_tokens=40, **kw).choices[0].message.content
        text = client(s).completions.create(model=MODEL, prompt=p, max_tokens=40,
                                            **kw).choices[0].text
        parts = client(s).completions.create(model=MODEL, prompt=p, max_tokens=40,
                                             stream=True, **kw)
        return chat, text, "".join(c.choices[0].text for c in parts)

    try:
        want = [go(plain, c) for c in cases]
    finally:
        plain.stop()
    assert [go(srv, c) for c in cases] == want
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda c: go(srv, c), cases)) == want
    _, _, text = srv.request("GET", "/metrics")
    counts = dict(line.rsplit(" ", 1) for line in text.decode().splitlines()
                  if line.startswith("tf_draft"))
    assert float(counts["tf_drafted_tokens_total"]) > 0, counts
    assert float(counts["tf_draft_accepted_tokens_total"]) > 0, counts
    assert counts['tf_draft_position_tokens_total{position="1",outcome="drafted"}'], counts


if __name__ == "__main__":
    sets = sets_of(sys.argv[4:])
    drafts = [t_drafts] if any(s.startswith(DRAFTING) for s in sets) else []
    tp = sys.argv[sys.argv.index("--tp-local"):][:2] if "--tp-local" in sys.argv else []
    run(sys.argv[2], sys.argv[3], sets,
        [t_chat, t_stream, t_stop, t_seed, t_completions, t_models, t_logprobs,
         t_completion_logprobs, t_retrieve_and_n, t_scoring, t_responses, t_readme,
         t_errors] + drafts, flags=tp)
