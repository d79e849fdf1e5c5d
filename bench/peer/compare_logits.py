#!/usr/bin/python3
"""Compare tfrun's logits with ik_llama.cpp's on the same token ids.

    compare_logits.py --tfrun BIN --ini INI --ids IDS.json --ik IK.f32
                      [--window 128] [--windows N] [--set K=V ...]
                      [--max-rel X] [--max-kl X] [--max-ppl-rel X]

IK.f32 is `ik_logits logits` output: float32 [windows * window, vocab] for
the non-overlapping windows of IDS.json.  Each window is run through
`tfrun INI --tokens ... --dump-logits` as a fresh sequence and compared:

  rel     per position max|ours - ik| / max|ours| (the row's scale): its
          median, 99.9th percentile and largest, and how many positions
          are over 1e-3 (an expert choice that flips on a near-tie of the
          router, as fp32 rounding may do, moves a few positions by more)
  KL      KL(ours || ik) of the softmaxes, nats: mean and max over positions
  top-1   share of positions whose argmax agrees
  ppl     perplexity of each side over every position but the window's
          first (tfrun --perplexity's count) and over the second half of
          each window only (llama-perplexity's count with -c WINDOW)

Prints one JSON object; exits 1 if the 99.9th percentile of rel, the share
of positions with rel over 1e-3, the mean KL or the relative perplexity
difference is over its limit.  Only tfrun runs here; ik's side is the file.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tfrun", required=True)
    ap.add_argument("--ini", required=True)
    ap.add_argument("--ids", required=True, help="token ids (a JSON array)")
    ap.add_argument("--ik", required=True, help="ik_logits output, float32")
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--windows", type=int, default=0, help="at most this many (0: all)")
    ap.add_argument("--set", action="append", default=[], help="tfrun --set KEY=VALUE")
    ap.add_argument("--max-rel", type=float, default=1e-3,
                    help="limit on the 99.9th percentile of rel")
    ap.add_argument("--max-over", type=float, default=1e-3,
                    help="limit on the share of positions with rel over 1e-3")
    ap.add_argument("--max-kl", type=float, default=1e-6)
    ap.add_argument("--max-ppl-rel", type=float, default=5e-4)
    args = ap.parse_args()

    with open(args.ids, encoding="utf-8") as f:
        ids = json.load(f)
    W = args.window
    n_win = len(ids) // W
    ik_all = np.memmap(args.ik, dtype=np.float32, mode="r")
    if args.windows:
        n_win = min(n_win, args.windows)
    vocab = None

    rels, kl_sum, kl_max, top1, n_pos = [], 0.0, 0.0, 0, 0
    nll = {"ours": [0.0, 0.0], "ik": [0.0, 0.0]}  # [all but first, second half]
    cnt = [0, 0]
    half = W // 2
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "ours.f32")
        for w in range(n_win):
            win = ids[w * W:(w + 1) * W]
            cmd = [args.tfrun, args.ini, "--tokens", ",".join(map(str, win)),
                   "--dump-logits", dump, "-n", "1", "--temp", "0"]
            for s in args.set:
                cmd += ["--set", s]
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                sys.exit(f"compare_logits: tfrun failed on window {w}: {r.stderr.strip()}")
            ours = np.fromfile(dump, dtype=np.float32)
            if vocab is None:
                vocab = ours.size // W
                if ik_all.size < n_win * W * vocab:
                    sys.exit(f"compare_logits: {args.ik} is shorter than {n_win} windows "
                             f"of {W} x {vocab} logits")
            ours = ours.reshape(W, vocab)
            ik = np.asarray(ik_all[w * W * vocab:(w + 1) * W * vocab]).reshape(W, vocab)
            scale = np.abs(ours).max(axis=1)
            rels.append(np.abs(ours - ik).max(axis=1) / scale)
            lo, li = log_softmax(ours), log_softmax(ik)
            kl = (np.exp(lo) * (lo - li)).sum(axis=1)
            kl_sum += float(kl.sum())
            kl_max = max(kl_max, float(kl.max()))
            top1 += int((ours.argmax(axis=1) == ik.argmax(axis=1)).sum())
            n_pos += W
            nxt = np.asarray(win[1:])
            for name, lp in (("ours", lo), ("ik", li)):
                tok_lp = lp[np.arange(W - 1), nxt]
                nll[name][0] -= float(tok_lp.sum())
                nll[name][1] -= float(tok_lp[half:].sum())
            cnt[0] += W - 1
            cnt[1] += W - 1 - half

    rel = np.concatenate(rels)
    worst = int(rel.argmax())
    res = {
        "windows": n_win, "window": W, "positions": n_pos, "vocab": vocab,
        "rel_err_median": float(np.median(rel)), "rel_err_p999": float(np.percentile(rel, 99.9)),
        "max_rel_err": float(rel.max()), "max_rel_at": [worst // W, worst % W],
        "rel_over_1e-3": int((rel > 1e-3).sum()),
        "kl_mean": kl_sum / n_pos, "kl_max": kl_max,
        "top1_agree": top1 / n_pos,
        "ppl_ours": float(np.exp(nll["ours"][0] / cnt[0])),
        "ppl_ik": float(np.exp(nll["ik"][0] / cnt[0])),
        "scored": cnt[0],
        "ppl_half_ours": float(np.exp(nll["ours"][1] / cnt[1])),
        "ppl_half_ik": float(np.exp(nll["ik"][1] / cnt[1])),
        "scored_half": cnt[1],
    }
    ppl_rel = abs(res["ppl_ik"] - res["ppl_ours"]) / res["ppl_ours"]
    print(json.dumps(res))
    bad = []
    if res["rel_err_p999"] > args.max_rel:
        bad.append(f"99.9th percentile of the relative logit error "
                   f"{res['rel_err_p999']:.3g} > {args.max_rel:g}")
    if res["rel_over_1e-3"] > args.max_over * n_pos:
        bad.append(f"{res['rel_over_1e-3']} of {n_pos} positions have a relative "
                   f"logit error over 1e-3 (limit {args.max_over:g} of them)")
    if res["kl_mean"] > args.max_kl:
        bad.append(f"mean KL {res['kl_mean']:.3g} > {args.max_kl:g}")
    if ppl_rel > args.max_ppl_rel:
        bad.append(f"perplexities differ by {ppl_rel:.3g} (relative) > {args.max_ppl_rel:g}")
    for b in bad:
        print(f"compare_logits: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
