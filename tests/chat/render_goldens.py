#!/usr/bin/env python3
"""render_goldens.py TFRUN GOLDENS [--ini INI] [--set K=V]... [--string-args]
                     [--json TOKENIZER.json]

Runs `tfrun [INI] --render-chat REQUEST.json` on every golden's request and
compares its stdout, byte for byte, with the golden prompt.  --string-args
sends tool-call arguments as JSON strings, as OpenAI clients do.  --json
checks `--render-chat --json` instead: the prompt, and token ids that decode
(with TOKENIZER.json) to it, with the template's markup as special tokens.
Also checks that a bad request fails with a message and prints nothing.
"""
import json
import os
import subprocess
import sys
import tempfile


def render(cmd, request, tmp):
    path = os.path.join(tmp, "request.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(request if isinstance(request, str) else json.dumps(request, ensure_ascii=False))
    return subprocess.run(cmd + ["--render-chat", path], capture_output=True, timeout=60)


def byte_decoder():
    """GPT-2's byte-level alphabet, character back to byte."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + len(cs) - 188)
    return {chr(c): b for b, c in zip(bs, cs)}


def decoder(path):
    tok = json.load(open(path, encoding="utf-8"))
    pieces = {i: t for t, i in tok["model"]["vocab"].items()}
    special = {a["id"]: a["content"] for a in tok["added_tokens"]}
    bd = byte_decoder()

    def decode(ids):
        out = b""
        for i in ids:
            out += special[i].encode() if i in special else bytes(bd[c] for c in pieces[i])
        return out
    return decode, {a["content"]: a["id"] for a in tok["added_tokens"] if a["special"]}


def check_json(out, want, decode, specials):
    """The --json output: the prompt, ids that spell it, markup as special ids."""
    got = json.loads(out)
    if got["prompt"].encode("utf-8") != want or decode(got["tokens"]) != want:
        return False
    role_end = sum(1 for i in got["tokens"] if i == specials["<|role_end|>"])
    return role_end == want.count(b"<|role_end|>")


def stringify(request):
    for m in request["messages"]:
        for tc in m.get("tool_calls") or []:
            tc["function"]["arguments"] = json.dumps(tc["function"]["arguments"], ensure_ascii=False)
    return request


def main():
    args = sys.argv[1:]
    tfrun, goldens = args[0], args[1]
    cmd, string_args, json_tok, i = [tfrun], False, None, 2
    while i < len(args):
        if args[i] == "--ini":
            cmd.append(args[i + 1])
            i += 2
        elif args[i] == "--set":
            cmd += ["--set", args[i + 1]]
            i += 2
        elif args[i] == "--json":
            json_tok = args[i + 1]
            cmd.append("--json")
            i += 2
        elif args[i] == "--string-args":
            string_args = True
            i += 1
        else:
            sys.exit("unknown argument " + args[i])
    cases = [json.loads(line) for line in open(goldens, encoding="utf-8")]
    bad = 0
    decode, specials = decoder(json_tok) if json_tok else (None, None)
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            req = stringify(c["request"]) if string_args else c["request"]
            r = render(cmd, req, tmp)
            want = c["prompt"].encode("utf-8")
            ok = r.returncode == 0 and (check_json(r.stdout, want, decode, specials)
                                        if json_tok else r.stdout == want)
            if not ok:
                bad += 1
                if bad <= 3:
                    print("%s: exit %d, stderr %r\n got  %r\n want %r" % (
                        c["case"], r.returncode, r.stderr.decode(), r.stdout, want))
        for request, why in ((('{"messages": [{"role": "bot", "content": "x"}]}'),
                              "unknown role 'bot'"),
                             ('{"messages": [', "line 1 column 15")):
            r = render(cmd, request, tmp)
            if r.returncode != 1 or r.stdout or why not in r.stderr.decode():
                bad += 1
                print("bad request %s: exit %d, stdout %r, stderr %r" % (
                    request, r.returncode, r.stdout, r.stderr.decode()))
    print("%d of %d goldens match" % (len(cases) - min(bad, len(cases)), len(cases)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
