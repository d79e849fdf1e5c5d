"""Token streams for training and evaluation, encoded by the runtime's own
tokenizer (tfrun --tokenizer ... --encode-file), so training sees exactly
the ids tfrun will."""
import json
import os
import random
import subprocess
import tempfile

import torch

# The Ling-3 chat format as tfrun's "ling3" template renders one turn.
USER, CLOSE, REPLY = "<role>HUMAN</role>", "<|role_end|>", "<role>ASSISTANT</role>"


def encode_file(tfrun, tokenizer, path):
    out = subprocess.run([tfrun, "--tokenizer", tokenizer, "--encode-file", path],
                         check=True, capture_output=True, text=True).stdout
    return torch.tensor(json.loads(out), dtype=torch.long)


def encode_text(tfrun, tokenizer, text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
        f.write(text)
    try:
        return encode_file(tfrun, tokenizer, f.name)
    finally:
        os.unlink(f.name)


def chapters(text):
    """(title, [verses]) of corpus.py's format: a title paragraph, then a
    paragraph of verse lines, alternating."""
    paras = [p for p in text.split("\n\n") if p.strip()]
    if len(paras) % 2:
        raise ValueError("text is not title / verses paragraphs in pairs")
    return [(t.strip(), b.split("\n")) for t, b in zip(paras[0::2], paras[1::2])]


def training_text(text, chat_frac, seed):
    """The train text with a share of chapters as one chat turn: the human
    says the chapter's first verse, the assistant answers with the rest.
    Plain chapters keep the held-out file's format; chat ones teach the
    model the demo's prompt format."""
    rng = random.Random(seed)
    parts = []
    for title, verses in chapters(text):
        if len(verses) > 1 and rng.random() < chat_frac:
            parts.append(f"{USER}{verses[0]}{CLOSE}{REPLY}" + "\n".join(verses[1:]) + CLOSE)
        else:
            parts.append(f"{title}\n\n" + "\n".join(verses) + "\n\n")
    return "".join(parts)


def windows(stream, n):
    """Non-overlapping windows of n tokens [count, n] (the tail dropped)."""
    count = len(stream) // n
    return stream[:count * n].reshape(count, n)
