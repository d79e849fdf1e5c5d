#!/usr/bin/python3
"""The loss curve of a training run as a PNG.

    plot.py train-log.jsonl loss.png
"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    tok = [r["tokens"] / 1e6 for r in recs]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(tok, [r["loss"] for r in recs], lw=1, label="train: next token")
    ax.plot(tok, [r["mtp_loss"] for r in recs], lw=1, alpha=0.7, label="train: MTP (token after next)")
    held = [r for r in recs if "heldout_loss" in r]
    ax.plot([r["tokens"] / 1e6 for r in held], [r["heldout_loss"] for r in held], "o-",
            ms=3, label="held-out: next token")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_ylim(bottom=min(r["loss"] for r in recs) - 0.3, top=min(8.5, max(r["loss"] for r in recs)))
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("ling-nano training loss")
    fig.tight_layout()
    fig.savefig(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
