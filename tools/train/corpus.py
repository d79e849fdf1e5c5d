#!/usr/bin/python3
"""The training text: the King James Bible from Debian's bible-kjv-text.

    corpus.py OUT_DIR [--every 20]

writes OUT_DIR/train.txt and OUT_DIR/heldout.txt.  The text comes from the
`bible` program (package bible-kjv) reading bible-kjv-text's data file; the
KJV translation (1611) is public domain (the package's copyright file).
One chapter is a paragraph: its title line ("Genesis 1"), a blank line, one
verse per line without its number, a blank line.  Every `--every`-th chapter
goes to the held-out file, the rest to train: both parts cover every book.
"""
import argparse
import os
import re
import subprocess
import sys

VERSE = re.compile(r"^\s+(\d+) (.*)$")


def chapters(text):
    """(title, [verse text]) for each chapter of `bible -l...` output."""
    out = []
    for line in text.splitlines():
        m = VERSE.match(line)
        if m:
            if not out:
                raise ValueError("verse before the first chapter title")
            out[-1][1].append(m.group(2).strip())
        elif line.strip():
            out.append((line.strip(), []))
    return out


def render(chs):
    return "".join(f"{t}\n\n" + "\n".join(v) + "\n\n" for t, v in chs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="folder for train.txt and heldout.txt")
    ap.add_argument("--every", type=int, default=20,
                    help="hold out every N-th chapter (default 20)")
    args = ap.parse_args(argv)
    try:
        text = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], check=True,
                              capture_output=True, text=True,
                              env=dict(os.environ, COLUMNS="100000")).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"corpus: running bible (Debian package bible-kjv): {e}", file=sys.stderr)
        return 1
    chs = chapters(text)
    if len(chs) != 1189 or sum(len(v) for _, v in chs) != 31102:
        print(f"corpus: {len(chs)} chapters, expected the KJV's 1189 with 31102 verses",
              file=sys.stderr)
        return 1
    held = [c for i, c in enumerate(chs) if i % args.every == args.every - 1]
    train = [c for i, c in enumerate(chs) if i % args.every != args.every - 1]
    os.makedirs(args.out, exist_ok=True)
    for name, part in (("train.txt", train), ("heldout.txt", held)):
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            f.write(render(part))
    print(f"corpus: {len(train)} chapters to train.txt, {len(held)} to heldout.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
