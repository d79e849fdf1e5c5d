#!/usr/bin/python3
"""bench_batch_check.py BENCH_BATCH TFRUN IDEAL INI - bench_batch's rows and
bench/engine/ideal.py's arithmetic on them, on ling-nano (not its speed).

One run with every kind of row: the one_seq path, batches of 1 and 2
sequences, verifies of 2 and 4 rows of one sequence and MTP drafts of 2
tokens; each row says what it ran, a verify's experts per MoE pass lie
between one row's and its rows' top-k, and ideal.py prints, per batch and
verify row, the speed-up, both bounds and the cost in plain steps, all
recomputed here from the two JSON files.  Drafts without the MTP layer, and
bad options, are refused."""
import json
import re
import subprocess
import sys

BENCH, TFRUN, IDEAL, INI = sys.argv[1:5]


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300)


def main():
    out = run(BENCH, "-s", "1,2", "-k", "1,3", "-d", "2", "-p", "8", "-n", "4", "-r", "1",
              "--json", "--set", "mtp.enabled=true", INI)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    res = got["results"]
    assert [(r["path"], r["seqs"], r["rows"]) for r in res] == [
        ("one_seq", 1, 1), ("batch", 1, 1), ("batch", 2, 2), ("verify", 1, 2),
        ("verify", 1, 4), ("draft", 1, 2)], res
    assert all(r["tok_s"] > 0 and r["tok_s_min"] <= r["tok_s"] <= r["tok_s_max"]
               for r in res), res
    check = json.loads(run(TFRUN, INI, "--check", "--json").stdout)
    top_k = check["num_experts_per_tok"]
    assert res[1]["experts_per_moe_pass"] == top_k, res[1]
    for r in res[3:5]:
        assert top_k < r["experts_per_moe_pass"] <= r["rows"] * top_k, r

    with open("check.json", "w") as f:
        json.dump(check, f)
    with open("batch.json", "w") as f:
        f.write(out.stdout)
    table = run(IDEAL, "check.json", "batch.json")
    assert table.returncode == 0, table.stderr
    lines = [l for l in table.stdout.splitlines() if re.match(r"\| (batch|verify) ", l)]
    assert len(lines) == 4, table.stdout
    mem = check["memory"]
    p1 = mem["checkpoint_active_params"]
    q1 = mem["checkpoint_class_params"]["routed experts"] * top_k / check["num_experts"]
    base = res[1]["tok_s"]
    for line, r in zip(lines, res[1:5]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        s, x = r["rows"], r["experts_per_moe_pass"]
        dec = s * p1 / ((p1 - q1) + q1 * x / top_k)
        assert cells[0] == r["path"] and int(cells[2]) == s, (line, r)
        assert abs(float(cells[4]) - r["tok_s"] / base) < 0.006, (line, r)
        assert abs(float(cells[8]) - dec) < 0.006, (line, dec)
        cost = float(cells[10].split()[0])
        assert abs(cost - s * base / r["tok_s"]) < 0.006, (line, r)
    m = re.search(r"MTP draft of 2 tokens: ([0-9.]+) plain steps", table.stdout)
    assert m and abs(float(m.group(1)) - 2 * base / res[5]["tok_s"]) < 0.006, table.stdout

    # Drafts need the MTP layer; bad lists are usage errors.
    no_mtp = run(BENCH, "-s", "1", "-d", "1", "-p", "8", "-n", "2", "-r", "1", INI)
    assert no_mtp.returncode == 1 and "-d needs the MTP layer" in no_mtp.stderr, no_mtp
    for bad in (("-k", "0"), ("-d", "x"), ("-k",)):
        r = run(BENCH, *bad, INI) if len(bad) > 1 else run(BENCH, INI, *bad)
        assert r.returncode == 2 and "usage" in r.stderr, (bad, r)
    print("bench_batch rows and ideal.py: ok")


if __name__ == "__main__":
    main()
