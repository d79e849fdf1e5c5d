#!/usr/bin/python3
"""test_hf_config.py VENV - every checkpoint the project writes through
Hugging Face transformers' own loaders: AutoConfig gives its built-in
BailingHybridConfig (model_type bailing_hybrid, a strict dataclass: floats
where it types float, one clamp entry a decoder layer) and AutoTokenizer
the folder's tokenizer.  The folders are hf_config.py's.

transformers is pip-installed (no torch: configs and tokenizers need none)
into a venv at VENV (tests/support/pyvenv.py: the first run needs PyPI).
"""
import os
import sys
import tempfile


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import pyvenv                                            # noqa: E402

pyvenv.reexec(sys.argv[1], ["transformers"], "import transformers")

# Local folders only; no "PyTorch was not found" notice per load.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"

import transformers                                      # noqa: E402 (the venv's)
from transformers import AutoConfig, AutoTokenizer       # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

import hf_config                                         # noqa: E402

TEXT = "In the beginning God created the heaven and the earth."


def check(folder):
    want = hf_config.load(folder)
    c = AutoConfig.from_pretrained(folder)
    assert type(c) is CONFIG_MAPPING["bailing_hybrid"], type(c)
    for k in hf_config.FLOAT_KEYS:
        if k in want:
            # partial_rotary_factor moves into rope_parameters.
            v = getattr(c, k) if hasattr(c, k) else c.rope_parameters[k]
            assert isinstance(v, float) and v == want[k], (k, v, want[k])
    assert c.num_hidden_layers == want["num_hidden_layers"]
    assert len(c.expert_swiglu_limit_list) == c.num_hidden_layers
    t = AutoTokenizer.from_pretrained(folder)
    ids = t(TEXT)["input_ids"]
    assert ids and max(ids) < c.vocab_size, ids
    assert t.decode(ids, skip_special_tokens=True) == TEXT, t.decode(ids)
    assert t.convert_tokens_to_ids("<|role_end|>") == c.eos_token_id
    return type(c).__name__, type(t).__name__


def main():
    print("transformers", transformers.__version__)
    if "bailing_hybrid" not in CONFIG_MAPPING:
        sys.exit("FAIL: transformers %s has no built-in bailing_hybrid config class"
                 % transformers.__version__)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="tf-hfconfig-") as out:
        for d in hf_config.checkpoints(out):
            try:
                print("ok", d, *check(d))
            except Exception as e:          # noqa: BLE001 (report each folder)
                print("FAIL", d, "%s: %s" % (type(e).__name__, e))
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
