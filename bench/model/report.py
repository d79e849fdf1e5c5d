#!/usr/bin/python3
"""The model benchmark's table, from what bench/model/run.sh collected.

    report.py --name NAME --check CHECK.txt --bw BW.txt --prefill P.json
              --decode D.json --run RUN.json --threads N [--backend cpu|cuda]

CHECK.txt is `tfrun INI --check` (its memory plan's "total" and
"active/token" lines), BW.txt the output of bw (cpu: read bandwidth on N
threads) or cuda_bw (cuda: the device's copy bandwidth), P.json and D.json
`tfrun bench --json` of the prefill test and of the decode test, RUN.json
one `tfrun --json` run (its load time and resident peak).  Prints a
llama-bench-like table with the decode roofline (read bandwidth / active
weight bytes per token) and the ratio, the load time and resident peak
beside the memory plan's weights, then where the time goes, per pipeline
stage: tfrun bench's medians over its rounds.
"""
import argparse
import json
import re
import sys


def plan_bytes(path, label):
    with open(path) as f:
        for line in f:
            m = re.match(rf"\s*{re.escape(label)}\s+(\d+)\s", line)
            if m:
                return int(m.group(1))
    raise ValueError(f"{path}: no '{label}' line in the memory plan")


def bandwidth(path, threads):
    with open(path) as f:
        for line in f:
            m = re.match(r"threads (\d+)\s+read GB/s ([\d.]+)", line)
            if m and int(m.group(1)) == threads:
                return float(m.group(2))
    raise ValueError(f"{path}: no read bandwidth for {threads} threads")


def device_bandwidth(path):
    """(device, GB/s) from cuda_bw's line."""
    with open(path) as f:
        for line in f:
            m = re.match(r"device (.*) copy GB/s ([\d.]+)", line)
            if m:
                return m.group(1), float(m.group(2))
    raise ValueError(f"{path}: no device copy bandwidth")


def bench_row(path):
    """The one row of a single-test `tfrun bench --json`."""
    with open(path) as f:
        rows = json.load(f)["rows"]
    if len(rows) != 1:
        raise ValueError(f"{path}: {len(rows)} rows, want one test")
    return rows[0]


def tokens_of(row):
    return int(re.match(r"(pp|tg)(\d+)", row["test"]).group(2))


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for a in ("--name", "--check", "--bw", "--prefill", "--decode", "--run"):
        ap.add_argument(a, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    a = ap.parse_args(argv)
    try:
        total = plan_bytes(a.check, "total")
        active = plan_bytes(a.check, "active/token")
        if a.backend == "cpu":
            bw1, bwn = bandwidth(a.bw, 1), bandwidth(a.bw, a.threads)
            bw_line = (f"read bandwidth (bw, 1 GiB): {bw1:.2f} GB/s on 1 thread, "
                       f"{bwn:.2f} GB/s on {a.threads}")
        else:
            dev, bwn = device_bandwidth(a.bw)
            bw_line = f"device {dev}: copy bandwidth (cuda_bw, 1 GiB) {bwn:.1f} GB/s"
        pre, dec = bench_row(a.prefill), bench_row(a.decode)
        with open(a.run) as f:
            run = json.load(f)
    except (OSError, ValueError, KeyError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 1

    n_prompt, n_gen = tokens_of(pre), tokens_of(dec)
    pp, tg = pre["tps"], dec["tps"]
    roof = bwn * 1e9 / active
    threads = a.threads if a.backend == "cpu" else "-"
    row = f"| {a.name} EXL3 | {mib(total)} | {mib(active)} | {a.backend} | {threads} |"
    print("| model | weights | active/token | backend | threads | test | t/s "
          "| decode roofline t/s | of roofline |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"{row} pp{n_prompt} | {pp:.2f} ± {pre['mad']:.2f} | | |")
    print(f"{row} tg{n_gen} after {n_prompt} | {tg:.2f} ± {dec['mad']:.2f} | {roof:.1f} "
          f"| {100 * tg / roof:.0f}% |")
    print(f"\n{bw_line}; decode at {tg:.2f} t/s reads "
          f"{tg * active / 1e9:.2f} GB/s of weights")
    print(f"load {run['load_s']:.2f} s, resident peak {run['peak_rss_mib']:.0f} MiB after "
          f"decoding (memory plan {mib(total)} of weights)")

    # Where a token's time goes: tfrun bench's stage medians, ms per token;
    # "untimed" is the rest of the token's time (sampling, the step's own work).
    print("\n| stage | prefill ms/token | prefill % | decode ms/token | decode % |")
    print("|---|---|---|---|---|")
    p_tot, d_tot = 1e3 / pp, 1e3 / tg
    p_s, d_s = dict(pre["stages_ms"]), dict(dec["stages_ms"])
    p_s["untimed"] = p_tot - sum(p_s.values())
    d_s["untimed"] = d_tot - sum(d_s.values())
    for s in p_s:
        print(f"| {s} | {p_s[s]:.4f} | {100 * p_s[s] / p_tot:.1f} | {d_s[s]:.4f} "
              f"| {100 * d_s[s] / d_tot:.1f} |")
    print(f"| total | {p_tot:.4f} | 100 | {d_tot:.4f} | 100 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
