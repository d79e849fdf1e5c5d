#!/usr/bin/env python3
"""chat_prompt.py TFRUN INI MODEL - tfrun's chat feeds the prompt that
--render-chat shows for the same conversation: a one-shot prompt with
--system and --no-think, one with thinking on, and two -i turns."""
import json
import os
import subprocess
import sys
import tempfile


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=120)
    if r.returncode:
        sys.exit("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.decode()))
    return r.stdout.decode()


def main():
    tfrun, ini, model = sys.argv[1:4]
    base = [tfrun, ini, "--set", "model.path=" + model]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        def rendered(messages, think, gen_prompt=True):
            path = os.path.join(tmp, "request.json")
            with open(path, "w") as f:
                json.dump({"messages": messages, "add_generation_prompt": gen_prompt,
                           "chat_template_kwargs": {"enable_thinking": think}}, f)
            return json.loads(run(base + ["--render-chat", path, "--json"]))["tokens"]

        sys_user = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hello <|role_end|> there"}]
        for flags, messages, think in (
                (["--system", "Be brief.", "--no-think"], sys_user, False),
                (["--set", "chat.think=true"], sys_user[1:], True)):
            got = json.loads(run(base + flags + ["-p", sys_user[1]["content"], "-n", "1",
                                                 "--json"]))["prompt_tokens"]
            want = len(rendered(messages, think))
            if got != want:
                bad += 1
                print("%s: fed %d tokens, --render-chat has %d" % (flags, got, want))
        # -i: the second turn feeds what follows the first turn and its reply,
        # or, when the reply did not end with its stop token, all of it again
        out = run(base + ["-i", "-n", "2", "--json"], b"Hi\nMore\n").splitlines()
        turns = [json.loads(line) for line in out]
        first = [{"role": "user", "content": "Hi"}]
        n1 = len(rendered(first, False))
        if len(turns) != 2 or turns[0]["prompt_tokens"] != n1:
            bad += 1
            print("first -i turn: %s, want %d prompt tokens" % (out, n1))
        else:
            reply = {"role": "assistant", "content": turns[0]["text"],
                     "reasoning_content": turns[0]["thinking"]}
            both = len(rendered(first + [reply, {"role": "user", "content": "More"}], False))
            done = len(rendered(first + [reply], False, False))
            want = both - done if turns[0]["finish_reason"] == "eos" else both
            if turns[1]["prompt_tokens"] != want:
                bad += 1
                print("second -i turn fed %d tokens, want %d of %d" % (
                    turns[1]["prompt_tokens"], want, both))
    print("PASS" if not bad else "FAIL")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
