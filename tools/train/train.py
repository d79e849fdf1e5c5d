#!/usr/bin/python3
"""Trains a Ling-3 model on the corpus and writes it as a checkpoint.

    train.py --template DIR --data DIR --out DIR [--steps N] [--seed S] ...

--template is a checkpoint tfsynth wrote for the wanted shape (config.json,
tokenizer.json, the tensor layout); its weights are ignored.  --data holds
corpus.py's train.txt and heldout.txt.  Loss: next-token cross-entropy plus
--mtp-weight times the MTP layer's token-after-next cross-entropy
(DeepSeek-V3's MTP objective); the routers' expert bias moves by
--bias-rate per step toward equal expert load (aux-loss-free balancing).
Every --save-every steps and at the end, OUT gets the bf16 checkpoint and
the float32 training state (train-state.pt); OUT/train-log.jsonl has one
line per logged step.  --minutes or --stop-step stops early, still writing
both.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint  # noqa: E402
import data  # noqa: E402
from ling_torch import Ling  # noqa: E402


def losses(model, batch):
    """(main, mtp) mean cross-entropies of a [B, T+1] token batch."""
    x, y = batch[:, :-1], batch[:, 1:]
    logits, hf = model(x)
    main = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    mlog, _ = model.mtp(hf[:, :-1], x[:, 1:])           # row t predicts t+2
    mtp = F.cross_entropy(mlog.flatten(0, 1), y[:, 1:].flatten())
    return main, mtp


def param_groups(model, wd):
    """Weight decay on matrices only (not norms, conv taps, gates' biases)."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim == 2 and "embeddings" not in name else rest).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def heldout_loss(model, wins):
    model.eval()
    main, mtp = losses(model, wins)
    model.train()
    return main.item(), mtp.item()


def load_balance(model):
    """Max over MoE layers of (busiest expert's load / mean load)."""
    worst = 0.0
    for m in model.moes():
        if m.load is not None:
            load = m.load.float()
            worst = max(worst, (load.max() / load.mean()).item())
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tfrun", default="build/bin/tfrun", help="encodes the text")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256, help="tokens per training window")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-rate", type=float, default=1e-2)
    ap.add_argument("--chat-frac", type=float, default=0.25,
                    help="share of chapters written as a chat turn")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--eval-windows", type=int, default=16,
                    help="held-out windows for the logged held-out loss")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: never)")
    ap.add_argument("--stop-step", type=int, default=0,
                    help="stop after this many steps of the --steps schedule (0: run it all)")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tok = os.path.join(args.template, "tokenizer.json")
    with open(os.path.join(args.data, "train.txt"), encoding="utf-8") as f:
        text = data.training_text(f.read(), args.chat_frac, args.seed)
    stream = data.encode_text(args.tfrun, tok, text)
    held = data.encode_file(args.tfrun, tok, os.path.join(args.data, "heldout.txt"))
    held = data.windows(held, args.seq + 1)[:args.eval_windows]
    with open(os.path.join(args.template, "config.json")) as f:
        cfg = json.load(f)
    model = Ling(cfg)
    model.init_weights(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"train: {len(stream)} tokens, {n_params / 1e6:.2f} M parameters", flush=True)

    opt = torch.optim.AdamW(param_groups(model, args.wd), lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train-log.jsonl"), "w")
    update = {"mtp_loss_scaling_factor": args.mtp_weight}
    t0 = time.time()
    step = 0
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        start = torch.randint(0, len(stream) - args.seq - 1, (args.batch,), generator=gen)
        batch = torch.stack([stream[s:s + args.seq + 1] for s in start.tolist()])
        main_loss, mtp_loss = losses(model, batch)
        opt.zero_grad(set_to_none=True)
        (main_loss + args.mtp_weight * mtp_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        for m in model.moes():
            m.balance(args.bias_rate)
        last = step + 1 == args.steps
        late = ((args.minutes and time.time() - t0 > 60 * args.minutes) or
                step + 1 == args.stop_step)
        if step % args.log_every == 0 or last or late:
            rec = {"step": step, "tokens": (step + 1) * args.batch * args.seq,
                   "seconds": round(time.time() - t0, 1), "lr": lr_at(step, args),
                   "loss": main_loss.item(), "mtp_loss": mtp_loss.item(),
                   "max_load": load_balance(model)}
            if step % (5 * args.log_every) == 0 or last or late:
                rec["heldout_loss"], rec["heldout_mtp_loss"] = heldout_loss(model, held)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                           for k, v in rec.items()), flush=True)
        if (step + 1) % args.save_every == 0 or last or late:
            checkpoint.save(model, args.template, args.out, update)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1},
                       os.path.join(args.out, "train-state.pt"))
        if late:
            print(f"train: stopped at step {step + 1} of {args.steps}", flush=True)
            break
    print(f"train: {step + 1} steps in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
