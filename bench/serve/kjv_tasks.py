#!/usr/bin/python3
"""kjv_tasks.py OUT_DIR - lm-eval task data from ling-nano's held-out chapters.

Every 20th chapter of the KJV (tools/train/corpus.py's held-out split, which
ling-nano never trained on), as three JSON-lines files the YAML task files
beside this script read: next_verse.jsonl (a verse and four candidates for
the one after it, multiple choice: loglikelihood requests), chapters.jsonl
(whole chapters: loglikelihood_rolling) and halves.jsonl (a verse's first
half, its second half the target: generate_until).  Needs Debian's
bible-kjv (scripts/deps.sh --train).
"""
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "train"))
import corpus                                   # noqa: E402

N = 100                                         # items per task


def main(out):
    text = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], check=True,
                          capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="100000")).stdout
    held = corpus.chapters(text)[::20]
    rng = random.Random(0)
    verses = [v for _, vs in held for v in vs]
    pairs = [(vs[i], vs[i + 1]) for _, vs in held for i in range(len(vs) - 1)]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "next_verse.jsonl"), "w") as f:
        for a, b in rng.sample(pairs, N):
            wrong = rng.sample([v for v in verses if v != b], 3)
            choices = wrong + [b]
            rng.shuffle(choices)
            f.write(json.dumps({"context": a, "choices": choices,
                                "label": choices.index(b)}) + "\n")
    with open(os.path.join(out, "chapters.jsonl"), "w") as f:
        for title, vs in held[:N // 4]:
            f.write(json.dumps({"text": title + "\n\n" + "\n".join(vs) + "\n"}) + "\n")
    with open(os.path.join(out, "halves.jsonl"), "w") as f:
        for v in rng.sample(verses, N):
            words = v.split()
            k = len(words) // 2
            f.write(json.dumps({"prompt": " ".join(words[:k]),
                                "target": " " + " ".join(words[k:])}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
