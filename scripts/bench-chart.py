#!/usr/bin/env python3
"""Charts of benchmark results: one chart per benchmark group, ours against
each peer, as bars of the time ratio ours/peer (below 1: ours is faster or
lighter) with the spread of the repetitions (min-max over rounds) as error
bars, on a log scale. The caption names the machine and its load.

    scripts/bench-chart.py OUTDIR RESULTS [RESULTS ...] [--expect NAME,NAME,...]

RESULTS is a results file (.csv) or a folder of them (every *.csv in it).
Every results file has the header

    group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit

(bench/bench_results.h writes it for the C benches, BENCH_CSV=; the NIO
bench with NIOB_CSV=, the Swift thread bench and scripts/bench-tricks.py
with BENCH_CSV=). Rows are grouped by their
`group` column, whichever file they come from: a new bench that writes such
a file gets its chart with no change here. An empty ratio means that peer
has no result for that row.

--expect names the benches that should have left results (NAME.csv or
NAME-*.csv in a RESULTS folder; `make bench-chart` passes every bench
target): one that has none is reported by name, with the command that
makes its results. A group whose peers lack results in some rows is drawn
with what there is, and the missing cells are named (on the terminal and in
the caption). A file that is not a results file is reported and skipped.

Writes OUTDIR/<group>.svg and OUTDIR/<group>.png and prints their paths.
"""
import csv
import glob
import math
import os
import platform
import re
import sys

HEADER = ["group", "row", "peer", "ratio", "ratio_min", "ratio_max", "ours", "peer_value", "unit"]


def say(message):
    print(f"bench-chart: {message}")


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


def number(text):
    """A positive finite float, or None for an empty or unusable cell."""
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def read_results(path):
    """The rows of one results file, or None (said why) if it is not one."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [h for h in HEADER[:4] if h not in (reader.fieldnames or [])]
            if missing:
                say(f"{path}: not a results file (no column {', '.join(missing)}); skipped")
                return None
            rows = []
            for n, r in enumerate(reader, start=2):
                if not r.get("group") or not r.get("row") or not r.get("peer"):
                    say(f"{path}:{n}: a line without group, row or peer; skipped")
                    continue
                rows.append(r)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        say(f"{path}: cannot be read ({e}); skipped")
        return None
    if not rows:
        say(f"{path}: no results in it (the bench stopped before its table?)")
    return rows


def chart(group, rows, outdir):
    """Draws one group; returns its paths, or [] if it has nothing to draw."""
    names, peers = [], []
    for r in rows:
        if r["row"] not in names:
            names.append(r["row"])
        if r["peer"] not in peers:
            peers.append(r["peer"])
    cells = {}  # (row, peer) -> (ratio, lo, hi)
    listed = set()  # (row, peer) with a line, ratio or not
    for r in rows:
        if (r["row"], r["peer"]) in listed:
            say(f"{group}: row '{r['row']}' appears twice for peer '{r['peer']}' "
                f"(the bench should name its rows apart); the last one is drawn")
        listed.add((r["row"], r["peer"]))
        x = number(r.get("ratio"))
        if x is None:
            continue
        lo = number(r.get("ratio_min")) or x
        hi = number(r.get("ratio_max")) or x
        cells[(r["row"], r["peer"])] = (x, min(lo, x), max(hi, x))

    # What is missing (a line with no usable ratio), said once per peer.
    # A peer a row has no line for is not missing there: some benches
    # compare each row with its own kind of peer.
    notes = []
    for peer in peers:
        mine = [n for n in names if (n, peer) in listed]
        lacking = [n for n in mine if (n, peer) not in cells]
        if not lacking:
            continue
        if len(lacking) == len(mine):
            notes.append(f"no result for {peer}")
            say(f"{group}: no result for peer '{peer}' in any row (not built, not installed or not run?)")
        else:
            notes.append(f"{peer}: no result in {len(lacking)} of {len(mine)} rows")
            shown = "; ".join(lacking[:4]) + (f"; and {len(lacking) - 4} more" if len(lacking) > 4 else "")
            say(f"{group}: peer '{peer}' has no result in {len(lacking)} of {len(mine)} rows: {shown}")
    if not cells:
        say(f"{group}: nothing to draw (every ratio is empty); no chart")
        return []

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Each row's bars side by side: as many slots as that row has peers.
    per_row = {n: [p for p in peers if (n, p) in cells] for n in names}
    widest = max(len(v) for v in per_row.values())
    height = 0.8 / widest
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) * widest ** 0.5 + 1.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = [p for p in peers if any(p in v for v in per_row.values())]
    for k, peer in enumerate(drawn):
        ys, xs, lo, hi = [], [], [], []
        for i, name in enumerate(names):
            cell = cells.get((name, peer))
            if cell is None:
                continue
            slot, slots = per_row[name].index(peer), len(per_row[name])
            x, a, b = cell
            ys.append(i + (slot - (slots - 1) / 2) * height)
            xs.append(x)
            lo.append(x - a)
            hi.append(b - x)
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
    caption = machine() + ("; " + "; ".join(notes) if notes else "")
    fig.text(0.01, 0.01, caption, fontsize=7, color="dimgray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    slug = re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-") or "group"
    paths = [os.path.join(outdir, f"{slug}.{ext}") for ext in ("svg", "png")]
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def main(argv):
    expect = []
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--expect" and i + 1 < len(argv):
            expect = [e for e in argv[i + 1].split(",") if e]
            i += 2
        elif argv[i].startswith("--expect="):
            expect = [e for e in argv[i].split("=", 1)[1].split(",") if e]
            i += 1
        else:
            args.append(argv[i])
            i += 1
    if len(args) < 2:
        sys.exit(__doc__)
    outdir, sources = args[0], args[1:]

    files, folders = [], []
    for s in sources:
        if os.path.isdir(s):
            folders.append(s)
            files.extend(sorted(glob.glob(os.path.join(s, "*.csv"))))
        elif os.path.exists(s):
            files.append(s)
        else:
            say(f"{s}: no results there (that bench did not run)")

    for name in expect:
        found = any(glob.glob(os.path.join(d, f"{name}.csv")) + glob.glob(os.path.join(d, f"{name}-*.csv"))
                    for d in folders)
        if not found:
            say(f"no results for '{name}' yet: run `make bench-{name}` (or `make bench`), then `make bench-chart`")

    groups = {}
    for path in files:
        for r in read_results(path) or []:
            groups.setdefault(r["group"], []).append(r)
    if not groups:
        say("no results to chart")
        return 0
    os.makedirs(outdir, exist_ok=True)
    for group, rows in groups.items():
        for p in chart(group, rows, outdir):
            print(f"chart: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
