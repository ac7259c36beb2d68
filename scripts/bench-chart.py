#!/usr/bin/env python3
"""Charts of benchmark results: one chart per benchmark group, ours against
each peer, as bars of the time ratio ours/peer (below 1: ours is faster or
lighter) with the spread of the repetitions (min-max over rounds) as error
bars, on a log scale. The caption names the machine and its load.

    scripts/bench-chart.py OUTDIR FILE.csv [FILE.csv ...]

Each CSV has the header group,row,peer,ratio,ratio_min,ratio_max,ours,
peer_value,unit (bench_runloop with BRL_CSV=, the NIO bench with NIOB_CSV=).
Writes OUTDIR/<group>.svg and OUTDIR/<group>.png and prints their paths.
"""
import csv
import os
import platform
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def machine():
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()
    return f"{model}, {os.cpu_count()} CPUs, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} when charted"


def chart(group, rows, outdir):
    names = []
    for r in rows:
        if r["row"] not in names:
            names.append(r["row"])
    peers = []
    for r in rows:
        if r["peer"] not in peers:
            peers.append(r["peer"])
    height = 0.8 / max(len(peers), 1)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) * max(len(peers), 1) ** 0.5 + 1.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, peer in enumerate(peers):
        ys, xs, lo, hi = [], [], [], []
        for i, name in enumerate(names):
            for r in rows:
                if r["row"] == name and r["peer"] == peer and r["ratio"]:
                    x = float(r["ratio"])
                    if x <= 0:
                        continue
                    ys.append(i + (k - (len(peers) - 1) / 2) * height)
                    xs.append(x)
                    lo.append(max(x - float(r["ratio_min"] or x), 0))
                    hi.append(max(float(r["ratio_max"] or x) - x, 0))
        if xs:
            ax.barh(ys, xs, height=height * 0.9, xerr=[lo, hi], capsize=2,
                    color=colors[k % len(colors)], label=f"ours / {peer}")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time ratio ours / peer (log scale; below 1: ours is faster or lighter); bars: median, "
                  "whiskers: min-max over rounds", fontsize=8)
    ax.set_title(f"{group}: ours against each peer")
    ax.legend(fontsize=8, loc="best")
    fig.text(0.01, 0.01, machine(), fontsize=7, color="dimgray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    slug = re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-")
    paths = [os.path.join(outdir, f"{slug}.{ext}") for ext in ("svg", "png")]
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    groups = {}
    for path in sys.argv[2:]:
        if not os.path.exists(path):
            print(f"bench-chart: {path}: no results (that bench did not run)")
            continue
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                groups.setdefault(r["group"], []).append(r)
    for group, rows in groups.items():
        for p in chart(group, rows, outdir):
            print(f"chart: {p}")


if __name__ == "__main__":
    main()
