#!/usr/bin/env python3
"""schema_check.py - documents that JSON Schema grammars allow, checked by jsonschema.

    schema_check.py GRAMMAR_WALK TOKENIZER

Gives grammar_walk 200 random schemas (seeded, within what
tf_grammar_schema_gbnf supports) and a hand case for each supported
feature; grammar_walk compiles each and makes documents by random walks
over the tokens the grammar allows.  Each document must parse with
json.loads and validate with jsonschema (Draft 2020-12, formats checked;
"time" and "date-time" by RFC 3339's grammar here, as jsonschema needs a
module Debian lacks for them).  Then each refused feature must fail with a
non-zero exit and a message naming the keyword and its path.
"""
import datetime
import json
import random
import re
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    sys.exit("schema_check.py: cannot import jsonschema: install python3-jsonschema")

DOCS = 3
RANDOM_SCHEMAS = 200

KEYS = ["name", "age", "a", "ab", "b", "x y", "\u00e9t\u00e9", 'q"t', "back\\slash", "tab\t",
        "\u65e5\u672c", "emoji\U0001F600", "", "id", "items", "type"]
PATTERNS = [
    "^[a-z]+$", "^[A-Z]{2}-\\d{3}$", "^(ab|cd)*$", "^\\w+@\\w+\\.com$", "a.c", "^x", "y$",
    "^[^ ]{1,5}$", "^(\\+|-)?\\d+(\\.\\d+)?$", "colou?r", "^[\\u00e9\\u4e00-\\u4e10]+$",
    "^.{2,4}$", '^"q"$', "^a\\\\b$", "^\\t?[ab]$", "^(?:x|y)+z?$", "^(?P<n>[0-9])+$",
    "^[\\s\\d]*$", "^\\x41\\u00e9[]a]$",
]
FORMATS = ["date", "time", "date-time", "uuid"]
TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$")


def is_time(s):
    """RFC 3339 full-time."""
    m = TIME.match(s)
    if not m:
        return False
    h, mi, sec = int(m[1]), int(m[2]), int(m[3])
    ok = h < 24 and mi < 60 and sec < 61
    return ok and (m[6] is None or (int(m[7]) < 24 and int(m[8]) < 60))


def is_date_time(s):
    """RFC 3339 date-time: full-date "T" full-time."""
    if len(s) < 11 or s[10] not in "Tt" or not re.match(r"^\d{4}-\d{2}-\d{2}$", s[:10]):
        return False
    try:
        datetime.date.fromisoformat(s[:10])
    except ValueError:
        return False
    return is_time(s[11:])


def format_checker():
    fc = jsonschema.FormatChecker(formats=list(jsonschema.draft202012_format_checker.checkers))
    fc.checks("time")(lambda s: not isinstance(s, str) or is_time(s))
    fc.checks("date-time")(lambda s: not isinstance(s, str) or is_date_time(s))
    return fc


class Gen:
    """Random schemas of the supported features; satisfiable, finite."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.defs = {}

    def value(self, depth=0):
        r = self.r
        k = r.randrange(9 if depth < 2 else 6)
        if k == 0:
            return r.choice(["", "x", 'say "hi"', "back\\slash", "new\nline", "\u00e9\U0001F600"])
        if k == 1:
            return r.randrange(-1000, 1000)
        if k == 2:
            return r.choice([0.5, -2.25, 1e-05, 3.0, 1.5e300])
        if k == 3:
            return r.choice([True, False])
        if k in (4, 5):
            return None
        if k in (6, 7):
            return [self.value(depth + 1) for _ in range(r.randrange(3))]
        return {r.choice(KEYS): self.value(depth + 1) for _ in range(r.randrange(3))}

    def integer(self):
        r = self.r
        s = {"type": "integer"}
        lo = r.randrange(-1000, 1000)
        hi = lo + r.randrange(0, 3000)
        if r.random() < 0.7:
            if r.random() < 0.5:
                s["minimum"] = lo
            else:
                s["exclusiveMinimum"] = lo - 1 if r.random() < 0.5 else lo - 0.5
        if r.random() < 0.7:
            if r.random() < 0.5:
                s["maximum"] = hi
            else:
                s["exclusiveMaximum"] = hi + 1 if r.random() < 0.5 else hi + 0.5
        return s

    def string(self):
        r = self.r
        k = r.randrange(4)
        if k == 0:
            return {"type": "string"}
        if k == 1:
            lo = r.randrange(0, 4)
            s = {"type": "string", "minLength": lo}
            if r.random() < 0.7:
                s["maxLength"] = lo + r.randrange(0, 6)
            return s
        if k == 2:
            return {"type": "string", "pattern": r.choice(PATTERNS)}
        return {"type": "string", "format": r.choice(FORMATS)}

    def leaf(self):
        r = self.r
        k = r.randrange(12)
        if k < 3:
            return self.string()
        if k < 5:
            return self.integer()
        if k == 5:
            return {"type": r.choice(["number", "boolean", "null"])}
        if k == 6:
            return {"enum": [self.value() for _ in range(r.randrange(1, 5))]}
        if k == 7:
            return {"const": self.value()}
        if k == 8:
            return {"type": r.sample(["string", "null", "boolean", "integer", "number"], r.randrange(2, 4))}
        if k == 9:
            return {}
        if k == 10:
            return {"type": "object"}
        return {"type": "string", "enum": ["a", "b\u00e9", "c\"d"]}

    def object(self, depth):
        r = self.r
        keys = r.sample(KEYS, r.randrange(0, 5))
        s = {"type": "object", "properties": {k: self.schema(depth + 1) for k in keys}}
        req = [k for k in keys if r.random() < 0.5]
        if req:
            s["required"] = req
        k = r.randrange(4)
        if k == 1:
            s["additionalProperties"] = False
        elif k == 2:
            s["additionalProperties"] = True
        elif k == 3:
            s["additionalProperties"] = self.schema(depth + 1)
        if not keys and r.random() < 0.3:
            del s["properties"]
            s["additionalProperties"] = self.leaf()
        return s

    def array(self, depth):
        r = self.r
        s = {"type": "array"}
        k = r.randrange(3)
        n_prefix = r.randrange(1, 3) if k >= 1 else 0
        if k >= 1:
            s["prefixItems"] = [self.schema(depth + 1) for _ in range(n_prefix)]
        if k != 1:
            s["items"] = self.schema(depth + 1)
        elif r.random() < 0.5:
            s["items"] = False
        if r.random() < 0.5:
            s["minItems"] = r.randrange(0, 3 if s.get("items") is not False else n_prefix + 1)
        if r.random() < 0.5:
            s["maxItems"] = s.get("minItems", 0) + r.randrange(0, 4)
        return s

    def one_of(self):
        """Branches of distinct types, so that no value matches two."""
        r = self.r
        branches = {"string": self.string(), "integer": self.integer(), "boolean": {"type": "boolean"},
                    "null": {"const": None}, "object": {"type": "object"},
                    "array": {"type": "array", "items": {"type": "integer"}}}
        return {"oneOf": [branches[t] for t in r.sample(sorted(branches), r.randrange(2, 4))]}

    def ref(self, depth):
        name = "d%d" % len(self.defs)
        self.defs[name] = None
        self.defs[name] = self.schema(depth + 1)
        return {"$ref": "#/$defs/" + name}

    def tree(self):
        self.defs["tree"] = {
            "type": "object", "required": ["v"],
            "properties": {"v": {"type": "integer"},
                           "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2}}}
        return {"$ref": "#/$defs/tree"}

    def schema(self, depth=0):
        r = self.r
        if depth >= 3:
            return self.leaf()
        k = r.randrange(10)
        if k < 3:
            return self.object(depth)
        if k < 5:
            return self.array(depth)
        if k == 5:
            return {"anyOf": [self.schema(depth + 1) for _ in range(r.randrange(2, 4))]}
        if k == 6:
            return self.one_of()
        if k == 7:
            return {"allOf": [self.schema(depth + 1)], "description": "one schema"}
        if k == 8:
            return self.ref(depth) if r.random() < 0.8 else self.tree()
        return self.leaf()

    def root(self):
        self.defs = {}
        s = self.schema()
        if self.defs:
            s = dict(s, **{"$defs": self.defs})
        return s


# One schema per supported feature.
HAND = [
    None, {}, True, {"type": "object"},
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
    {"type": ["integer", "string", "null"]},
    {"enum": ["a", 1, 2.5, None, True, [1, "x"], {"k": "v\u00e9"}]}, {"const": 'q"uote\\'},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
     "required": ["c", "a"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {}}, "additionalProperties": {"type": "null"}},
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"n": {"type": "object", "properties": {"m": {"type": "array"}}}}},
    {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 2, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
    {"type": "array", "prefixItems": [{"const": 0}], "items": {"type": "boolean"}, "minItems": 3},
    {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
    {"oneOf": [{"type": "string"}, {"type": "null"}]},
    {"allOf": [{"type": "integer", "maximum": -5}]},
    {"$defs": {"p": {"type": "string", "minLength": 1}}, "type": "array", "items": {"$ref": "#/$defs/p"}},
    {"definitions": {"p": {"type": "boolean"}}, "$ref": "#/definitions/p"},
    {"$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"},
                                                      "c": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                     "required": ["v"]}}, "$ref": "#/$defs/t"},
    {"type": "string", "minLength": 3, "maxLength": 5},
    {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}, {"type": "string", "pattern": "b.d"},
    {"type": "string", "format": "date"}, {"type": "string", "format": "time"},
    {"type": "string", "format": "date-time"}, {"type": "string", "format": "uuid"},
    {"type": "integer", "minimum": -20, "maximum": 300},
    {"type": "integer", "exclusiveMinimum": 7.5, "exclusiveMaximum": 12},
    {"title": "t", "description": "d", "default": 1, "examples": [1], "$schema":
     "https://json-schema.org/draft/2020-12/schema", "$comment": "c", "type": "integer"},
]

# Refused schemas, each with what its message must name.
REFUSED = [
    ({"properties": {"a": {"patternProperties": {"x": {}}}}}, ["'patternProperties' at /properties/a"]),
    ({"type": "object", "minProperties": 1}, ["'minProperties' at the root"]),
    ({"type": "number", "multipleOf": 2, "maximum": 3}, ["'multipleOf' at the root", "'maximum' at the root"]),
    ({"items": {"uniqueItems": True}}, ["'uniqueItems' at /items"]),
    ({"if": {}, "then": {}}, ["'if' at the root", "'then' at the root"]),
    ({"not": {"type": "null"}}, ["'not' at the root"]),
    ({"allOf": [{"type": "string"}, {"minLength": 1}]}, ["'allOf' at the root"]),
    ({"type": "string", "format": "email"}, ["'format' 'email' at the root"]),
    ({"type": "string", "pattern": "(?=x)"}, ["'pattern' at the root", "(?="]),
    ({"properties": {"s": {"pattern": "^a$", "minLength": 1}}}, ["'minLength' beside 'pattern' at /properties/s"]),
    ({"$ref": "https://example.com/s.json"}, ["'$ref' 'https://example.com/s.json' at the root"]),
    ({"prefixItems": [{"type": "integer"}, False]}, ["the schema 'false' at /prefixItems/1"]),
    ({"dependentRequired": {"a": ["b"]}}, ["'dependentRequired' at the root"]),
    ({"contains": {"type": "integer"}, "type": "array"}, ["'contains' at the root"]),
    ({"anyOf": [{}], "properties": {}}, ["'properties' beside 'anyOf' at the root"]),
]


def run_walk(walk, tok, lines, seed):
    p = subprocess.run([walk, tok, "-n", str(DOCS), "-s", str(seed)], input="".join(lines),
                       capture_output=True, text=True, timeout=540)
    out = [json.loads(line) for line in p.stdout.splitlines()]
    return p.returncode, out, p.stderr


def main():
    walk, tok = sys.argv[1], sys.argv[2]
    gen = Gen(20240601)
    schemas = HAND + [gen.root() for _ in range(RANDOM_SCHEMAS)]
    lines = [json.dumps(s) + "\n" for s in schemas]
    rc, out, err = run_walk(walk, tok, lines, 1)
    failures = []
    if len(out) != len(schemas):
        sys.exit("grammar_walk answered %d of %d schemas (exit %d): %s" % (len(out), len(schemas), rc, err))
    fc = format_checker()
    n_docs = 0
    for i, (schema, res) in enumerate(zip(schemas, out)):
        if "docs" not in res:
            failures.append("schema %d %s: %s" % (i, json.dumps(schema), res.get("error")))
            continue
        vschema = {} if schema is None else schema
        validator = jsonschema.Draft202012Validator(vschema, format_checker=fc)
        for doc in res["docs"]:
            n_docs += 1
            try:
                value = json.loads(doc)
            except ValueError as e:
                failures.append("schema %d %s: not JSON (%s): %r" % (i, json.dumps(schema), e, doc))
                continue
            errors = list(validator.iter_errors(value))
            if errors:
                failures.append("schema %d %s: %r invalid: %s" % (i, json.dumps(schema), doc, errors[0].message))
    if rc != 0 and not failures:
        failures.append("grammar_walk exited %d: %s" % (rc, err))

    refused = 0
    for schema, names in REFUSED:
        rc, out, err = run_walk(walk, tok, [json.dumps(schema) + "\n"], 1)
        msg = out[0].get("error", "") if out else ""
        if rc == 0 or not out or out[0].get("status") != -7:
            failures.append("refused %s: exit %d, %s" % (json.dumps(schema), rc, out))
            continue
        for name in names:
            if name not in msg:
                failures.append("refused %s: %r lacks %r" % (json.dumps(schema), msg, name))
        refused += 1

    for f in failures[:40]:
        print(f)
    print("%d schemas (%d by hand), %d documents validated; %d refusals checked; %d failures"
          % (len(schemas), len(HAND), n_docs, refused, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
