#!/usr/bin/python3
"""The model benchmark's table, from what bench/model/run.sh collected.

    report.py --name NAME --check CHECK.txt --bw BW.txt --prefill P.jsonl
              --decode D.jsonl --threads N [--backend cpu|cuda]

CHECK.txt is `tfrun INI --check` (its memory plan's "total" and
"active/token" lines), BW.txt the output of bw (cpu: read bandwidth on N
threads) or cuda_bw (cuda: the device's copy bandwidth), and each JSONL line one
`tfrun --json` run: the prefill runs generate one token, the decode runs
the benchmark's count.  Prints a llama-bench-like table with the decode
roofline (read bandwidth / active weight bytes per token) and the ratio,
the load time and resident peak beside the memory plan's weights, then
where the time goes, per pipeline stage.  Medians over the runs.
"""
import argparse
import json
import re
import statistics
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


def runs(path):
    with open(path) as f:
        out = [json.loads(line) for line in f if line.strip()]
    if not out:
        raise ValueError(f"{path}: no runs")
    return out


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for a in ("--name", "--check", "--bw", "--prefill", "--decode"):
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
        pre, dec = runs(a.prefill), runs(a.decode)
    except (OSError, ValueError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 1

    med = statistics.median
    n_prompt = pre[0]["prompt_tokens"]
    n_gen = min(r["generated_tokens"] for r in dec)
    pp = med(r["prefill_tps"] for r in pre)
    tg = med(r["decode_tps"] for r in dec)
    roof = bwn * 1e9 / active
    threads = a.threads if a.backend == "cpu" else "-"
    row = f"| {a.name} EXL3 | {mib(total)} | {mib(active)} | {a.backend} | {threads} |"
    print("| model | weights | active/token | backend | threads | test | t/s "
          "| decode roofline t/s | of roofline |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"{row} pp{n_prompt} | {pp:.2f} | | |")
    print(f"{row} tg{n_gen} | {tg:.2f} | {roof:.1f} | {100 * tg / roof:.0f}% |")
    print(f"\n{bw_line}; decode at {tg:.2f} t/s reads "
          f"{tg * active / 1e9:.2f} GB/s of weights")
    print(f"load {med(r['load_s'] for r in pre):.2f} s, resident peak "
          f"{med(r['peak_rss_mib'] for r in dec):.0f} MiB after decoding (memory plan "
          f"{mib(total)} of weights)")

    # Decode's stage times: each decode run's minus its own prefill's, split
    # as the prefill runs split theirs.  Scaling by the run's own prefill
    # time, not subtracting another run's seconds, keeps a machine that
    # slowed down between runs from showing up as time in some stage.
    stages = list(pre[0]["stages_s"])
    p_s = {s: med(r["stages_s"][s] for r in pre) for s in stages}
    p_frac = {s: med(r["stages_s"][s] / r["prefill_s"] for r in pre) for s in stages}
    d_s = {s: med(r["stages_s"][s] - p_frac[s] * r["prefill_s"] for r in dec) for s in stages}
    p_tot, d_tot = med(r["prefill_s"] for r in pre), med(r["decode_s"] for r in dec)
    p_s["untimed"] = p_tot - sum(p_s.values())
    d_s["untimed"] = d_tot - sum(d_s.values())
    print("\n| stage | prefill s | prefill % | decode s | decode % | decode ms/token |")
    print("|---|---|---|---|---|---|")
    for s in stages + ["untimed"]:
        print(f"| {s} | {p_s[s]:.4f} | {100 * p_s[s] / p_tot:.1f} | {d_s[s]:.4f} "
              f"| {100 * d_s[s] / d_tot:.1f} | {1e3 * d_s[s] / max(n_gen, 1):.3f} |")
    print(f"| total | {p_tot:.4f} | 100 | {d_tot:.4f} | 100 | {1e3 * d_tot / max(n_gen, 1):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
