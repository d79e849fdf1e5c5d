#!/usr/bin/python3
"""json_schema_check.py TFRUN INI - `tfrun --json-schema` and `--grammar` on ling-nano.

Sampled replies under a JSON Schema each parse and validate (python3-
jsonschema), with and without a drafter (constrained steps draft nothing);
a GBNF grammar's replies are its documents; a schema the grammar cannot
follow fails naming the keyword and the file; --json-schema needs a
tokenizer.
"""
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

SCHEMA = {"type": "object", "properties": {
    "book": {"type": "string", "maxLength": 10},
    "chapter": {"type": "integer", "minimum": 1, "maximum": 150},
    "words": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
    "holy": {"type": "boolean"}},
    "required": ["book", "chapter", "holy"], "additionalProperties": False}


def tfrun(*args):
    return subprocess.run([sys.argv[1], sys.argv[2]] + list(args), capture_output=True,
                          text=True, timeout=120)


def main():
    with tempfile.TemporaryDirectory() as d:
        schema = os.path.join(d, "s.json")
        with open(schema, "w") as f:
            json.dump(SCHEMA, f)
        for extra in ([], ["--set", "plugins.drafter=ngram"]):
            for seed in range(1, 5):
                out = tfrun("-p", "A verse as JSON", "-n", "800", "--temp", "0.8", "--seed",
                            str(seed), "--json-schema", schema, "--json", *extra)
                assert out.returncode == 0, out.stderr
                got = json.loads(out.stdout)
                assert got["finish_reason"] == "eos", got
                jsonschema.validate(json.loads(got["text"]), SCHEMA)
        gbnf = os.path.join(d, "g.gbnf")
        with open(gbnf, "w") as f:
            f.write('root ::= ("Amen" | "Selah") (", " ("Amen" | "Selah")){0,2} "."\n')
        for seed in range(1, 4):
            out = tfrun("-p", "Say it", "-n", "64", "--temp", "1", "--seed", str(seed),
                        "--grammar", gbnf, "--json")
            text = json.loads(out.stdout)["text"]
            words = text.rstrip(".").split(", ")
            assert text.endswith(".") and set(words) <= {"Amen", "Selah"}, text
        with open(schema, "w") as f:
            json.dump({"type": "object", "patternProperties": {"^a": {}}}, f)
        out = tfrun("-p", "x", "--json-schema", schema)
        assert out.returncode != 0, out
        assert "patternProperties" in out.stderr and schema in out.stderr, out.stderr
        out = tfrun("--tokens", "1,2", "--json-schema", schema)
        assert out.returncode != 0, out
    print("ok")


if __name__ == "__main__":
    main()
