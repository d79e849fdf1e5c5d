#!/usr/bin/python3
"""Held-out perplexity and MTP agreement of a checkpoint, in PyTorch.

    eval.py MODEL_DIR TEXT [--window 128] [--tfrun build/bin/tfrun] [--json]
            [--state train-state.pt]

Perplexity is defined as `tfrun --perplexity` defines it (the same tokens,
non-overlapping windows, each scoring every token but its first), so the
two figures compare directly.  MTP agreement: over every window position t
with t + 2 inside it, the share where the MTP layer's greedy guess of token
t+2 (from the hidden of t and the true token t+1) equals the main model's
greedy prediction at t+1, the token a 1-token draft must match to be kept.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint  # noqa: E402
import data  # noqa: E402


@torch.no_grad()
def evaluate(model, wins, batch=16):
    nll, n, agree, n_mtp = 0.0, 0, 0, 0
    for i in range(0, len(wins), batch):
        x = wins[i:i + batch]
        logits, hf = model(x)
        lp = torch.log_softmax(logits[:, :-1].double(), -1)
        nll -= lp.gather(-1, x[:, 1:, None]).sum().item()
        n += x[:, 1:].numel()
        mlog, _ = model.mtp(hf[:, :-1], x[:, 1:])        # row t guesses token t+2
        draft = mlog[:, :-1].argmax(-1)
        agree += (draft == logits[:, 1:-1].argmax(-1)).sum().item()
        n_mtp += draft.numel()
    return {"perplexity": math.exp(nll / n), "nll": nll / n, "scored": n,
            "mtp_agreement": agree / n_mtp, "mtp_positions": n_mtp}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--tfrun", default="build/bin/tfrun", help="encodes the text")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--state", help="train.py's float32 state instead of the bf16 weights")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    _, model = checkpoint.load(args.model, torch.float32)
    if args.state:
        model.load_state_dict(torch.load(args.state)["model"])
    model.eval()
    ids = data.encode_file(args.tfrun, os.path.join(args.model, "tokenizer.json"), args.text)
    wins = data.windows(ids, args.window)
    if not len(wins):
        print(f"eval: {args.text}: {len(ids)} tokens, shorter than one window", file=sys.stderr)
        return 1
    r = evaluate(model, wins)
    r.update(tokens=len(ids), window=args.window, windows=len(wins))
    if args.json:
        print(json.dumps(r))
    else:
        print(f"perplexity {r['perplexity']:.4f} ({r['windows']} windows of {args.window}, "
              f"{r['scored']} scored); MTP agreement {r['mtp_agreement']:.4f} "
              f"over {r['mtp_positions']} positions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
