#!/usr/bin/python3
"""Compare two logits files (float32 LE [n_tokens, vocab]).

    compare.py A.f32 B.f32 --vocab V [--max-rel X] [--min-top1 Y] [--max-kl Z]

B is the reference.  Prints, over all rows:
  max rel err  max_t ||a_t - b_t||_inf / ||b_t||_inf (per row, so a token
               with small logits is not drowned by one with large ones)
  top-1        fraction of rows whose argmax agrees
  mean KL      mean_t KL(softmax(b_t) || softmax(a_t)) in nats
and exits 1 when a given tolerance is exceeded, 2 on unusable input.
"""
import argparse
import os
import sys

import numpy as np


def load(path, vocab):
    size = os.path.getsize(path)
    if size == 0 or size % (4 * vocab):
        raise ValueError(f"{path}: {size} bytes is not a whole number of rows of {vocab} float32")
    x = np.fromfile(path, dtype="<f4").astype(np.float64).reshape(-1, vocab)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{path}: non-finite logits")
    return x


def log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def metrics(a, b):
    rel = np.max(np.abs(a - b), axis=-1) / np.maximum(np.max(np.abs(b), axis=-1), 1e-30)
    top1 = np.mean(a.argmax(axis=-1) == b.argmax(axis=-1))
    lb, la = log_softmax(b), log_softmax(a)
    kl = np.sum(np.exp(lb) * (lb - la), axis=-1)
    return float(rel.max()), float(top1), float(kl.mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="logits under test")
    ap.add_argument("b", help="reference logits")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--max-rel", type=float, help="fail above this max relative error")
    ap.add_argument("--min-top1", type=float, help="fail below this top-1 agreement")
    ap.add_argument("--max-kl", type=float, help="fail above this mean KL (nats)")
    args = ap.parse_args(argv)
    try:
        if args.vocab <= 0:
            raise ValueError("--vocab must be > 0")
        a, b = load(args.a, args.vocab), load(args.b, args.vocab)
        if a.shape != b.shape:
            raise ValueError(f"{args.a} has {a.shape[0]} rows, {args.b} has {b.shape[0]}")
    except (OSError, ValueError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    rel, top1, kl = metrics(a, b)
    print(f"rows {a.shape[0]}  max rel err {rel:.3e}  top-1 {top1:.4f}  mean KL {kl:.3e}")
    bad = []
    if args.max_rel is not None and not rel <= args.max_rel:
        bad.append(f"max rel err {rel:.3e} > {args.max_rel:.3e}")
    if args.min_top1 is not None and not top1 >= args.min_top1:
        bad.append(f"top-1 {top1:.4f} < {args.min_top1:.4f}")
    if args.max_kl is not None and not kl <= args.max_kl:
        bad.append(f"mean KL {kl:.3e} > {args.max_kl:.3e}")
    for m in bad:
        print(f"compare: FAIL {m}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
