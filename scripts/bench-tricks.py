#!/usr/bin/env python3
"""What each speed trick buys: the same benchmark rows measured with the
library as built (every trick on) and with one trick off (-DRL_TRICK_X=0),
and with all of them off (PLAIN=1), in one run, variants interleaved round
by round. A trick earns its keep where it improves a row a user would
notice by at least 10%; the table says which do.

  scripts/bench-tricks.py              (make bench-tricks)
  TRICKS_ROUNDS=5 scripts/bench-tricks.py
  TRICKS_ONLY=POOL,SPIN scripts/bench-tricks.py
  BENCH_CSV=file        also writes the rows for the charts (scripts/bench-chart.py):
                        peer "trick off", ratio = time with the trick / time without

Each variant is its own build folder (build/tricks/NAME); the benches are
bench_runloop, bench_thread, bench_sync, bench_ports and bench_echo, each run with its knobs set to
the rows a trick is for (the peers are skipped where the bench allows), and bench_echo_instr's
callgrind counts (scripts/bench-echo-instr.sh) for a trick that saves user-space instructions.
"""
import csv
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(ROOT)
ROUNDS = int(os.environ.get("TRICKS_ROUNDS", "3"))
MAKE = os.environ.get("MAKE", "make")

# One command per bench; rows are read from its table by their label.
BENCHES = {
    "perform": ("bench_runloop", {"BRL_ROUNDS": "1", "BRL_PEERS": "ours", "BRL_ONLY": "perform"}),
    "pingpong": ("bench_runloop", {"BRL_ROUNDS": "1", "BRL_PEERS": "ours", "BRL_ONLY": "pingpong"}),
    "guide": ("bench_runloop", {"BRL_ROUNDS": "1", "BRL_PEERS": "ours", "BRL_ONLY": "guide"}),
    "timers": ("bench_runloop", {"BRL_ROUNDS": "1", "BRL_PEERS": "ours", "BRL_ONLY": "timers"}),
    "thread": ("bench_thread", {"BTH_ROUNDS": "1", "BTH_QUICK": "1"}),
    "sync": ("bench_sync", {"RL_BENCH_RUNS": "15"}),
    "ports": ("bench_ports", {"BPO_ROUNDS": "3", "BPO_QUICK": "1", "BPO_ONLY": "local"}),
    "echo": ("bench_echo", {"BEC_ROUNDS": "3", "BEC_ONLY": "rt,tp16", "BEC_PEERS": "ours"}),
    # User-space instructions (callgrind, scripts/bench-echo-instr.sh): for
    # tricks that save work the kernel's time hides from the wall clock.
    # Only ours' line, its first column (instr/rt: callgrind per 64-byte
    # round trip on one connection).
    "echo-instr": ("bench_echo_instr", {"BEI_N1": "500", "BEI_N2": "1500", "BEI_PEERS": "ours", "BEI_TP": "0",
                                        "BEI_MANY": "0", "BEI_SYSCALLS": "0", "BEI_STEP": "0"}),
}
# Benches run through a script rather than on their own.
WRAPPERS = {"bench_echo_instr": ["scripts/bench-echo-instr.sh"]}

# How a row whose label is not its own text is shown (echo-instr's table
# has a line per peer: ours' first column is callgrind's per round trip).
SHOWN = {"ours": "echo server instructions per 64-byte round trip"}

# (trick, bench, row label as printed, higher is better)
ROWS = [
    ("POOL", "timers", "timer add, N=100k (ns/op)", False),
    ("POOL", "timers", "timer remove, N=100k (ns/op) [a]", False),
    ("SPIN", "pingpong", "v0 ping-pong round trip p50 (us)", False),
    ("SPIN", "thread", "round trip p50, 2 CPUs: RLWorkerThreadPerformSync", False),
    ("SPIN", "thread", "CPU per round trip, 2 CPUs: WorkerPerformSync", False),
    ("PACE", "perform", "perform queue form, other thread (M/s)", True),
    ("PACE", "perform", "perform block+WakeUp, other thread (M/s)", True),
    ("PACE", "thread", "round trip p50, 1 CPU: RLWorkerThreadPerformSync", False),
    ("PACE", "guide", "guide source, other thread (M/s) [i]", True),
    ("PACE", "pingpong", "v0 ping-pong round trip p50 (us)", False),
    ("YIELD", "thread", "round trip p50, 1 CPU: RLWorkerThreadPerformSync", False),
    ("YIELD", "thread", "round trip p50, 1 CPU: RLThreadPerform wait", False),
    ("BLOCK_COPY", "perform", "perform block+WakeUp, other thread (M/s)", True),
    ("PQ_SPIN", "perform", "perform queue form, other thread (M/s)", True),
    ("PQ_SPIN", "perform", "perform block+WakeUp, other thread (M/s)", True),
    ("PORT_REUSE", "ports", "RLPort send, 16-byte data, other thread's loop (M msg/s)", True),
    ("KEPT", "echo", "server CPU per round trip (us) [a]", False),
    ("KEPT", "echo", "  server CPU per MB, 16 conns (ms) [a]", False),
    ("COALESCE", "echo", "throughput, 16 conns, 4 KB writes (MB/s)", True),
    ("COALESCE", "echo", "  server CPU per MB, 16 conns (ms) [a]", False),
    ("SOCK_RECYCLE", "echo", "server CPU per round trip (us) [a]", False),
    ("SOCK_RECYCLE", "echo-instr", "ours", False),
]


def tricks_in_source():
    text = open("Sources/CRunLoop/base/internal.h").read()
    for name in sorted(set(re.findall(r"RL_TRICK_(\w+)", text))):
        yield name
    # A trick defined elsewhere (its own private header) counts too.
    for root, _, files in os.walk("Sources/CRunLoop"):
        for f in files:
            for name in re.findall(r"#define RL_TRICK_(\w+)", open(os.path.join(root, f)).read()):
                yield name


def build(variant, defs):
    folder = f"build/tricks/{variant}"
    args = [MAKE, "--no-print-directory", "-s", f"BUILD={folder}", "VARIANT=", "SAN=", "PLAIN=",
            f"RL_DEFS={defs}", "BENCH_THREAD_SWIFT=0"]
    targets = [f"{folder}/bench/{b}" for b in ("bench_runloop", "bench_thread", "bench_sync", "bench_ports", "bench_echo",
                                               "bench_echo_instr")]
    r = subprocess.run(args + targets, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        sys.exit(f"bench-tricks: building {variant} failed:\n{r.stdout[-2000:]}")
    return folder


def value(text, label):
    for line in text.splitlines():
        if line.startswith(label):
            rest = line[len(label):]
            m = re.search(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", rest)
            if m and (rest.lstrip().startswith("|") or rest[:1].isspace()):
                return float(m.group(0))
    return None


def run(folder, bench):
    binary, env = BENCHES[bench]
    e = dict(os.environ)
    e.pop("BENCH_CSV", None)  # this script's own results file, not theirs
    e.update(env)
    r = subprocess.run(WRAPPERS.get(binary, []) + [f"{folder}/bench/{binary}"], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return r.stdout


def main():
    known = set(tricks_in_source())
    only = os.environ.get("TRICKS_ONLY")
    tricks = [t for t in dict.fromkeys(t for t, *_ in ROWS) if t in known and (not only or t in only.split(","))]
    variants = {"fast": ""}
    for t in tricks:
        variants["no-" + t] = f"-DRL_TRICK_{t}=0"
    print(f"bench-tricks: building {len(variants)} variants (fast, " + ", ".join(list(variants)[1:]) + ")",
          file=sys.stderr)
    folders = {v: build(v, d) for v, d in variants.items()}
    # Which benches each variant runs: fast runs every bench any trick uses.
    needs = {v: set() for v in variants}
    for t, bench, _, _ in ROWS:
        if t in tricks:
            needs["fast"].add(bench)
            needs["no-" + t].add(bench)
    samples = {}  # (variant, label) -> [values]
    order = list(variants)
    for r in range(ROUNDS):
        rot = order[r % len(order):] + order[:r % len(order)]
        for v in rot:
            for bench in sorted(needs[v]):
                print(f"\r\033[Kbench-tricks: round {r + 1}/{ROUNDS}: {v} {bench}", end="", file=sys.stderr)
                text = run(folders[v], bench)
                for t, b, label, _ in ROWS:
                    if b == bench:
                        x = value(text, label)
                        if x is not None:
                            samples.setdefault((v, label), []).append(x)
    print("\r\033[K", end="", file=sys.stderr)
    load = os.getloadavg()[0]
    print(f"\nSpeed tricks: each row with the trick on and off (-DRL_TRICK_X=0), same run, median of "
          f"{ROUNDS} rounds; {os.cpu_count()} CPUs, load {load:.1f}\n")
    print(f"{'trick':<12} | {'row':<52} | {'on':>9} | {'off':>9} | {'gain':>7} | verdict")
    print("-" * 12 + "-+-" + "-" * 52 + "-+-" + "-" * 9 + "-+-" + "-" * 9 + "-+-" + "-" * 7 + "-+--------")
    best = {}
    chart_rows = []
    for t, bench, label, higher in ROWS:
        if t not in tricks:
            continue
        shown = SHOWN.get(label, label)
        on = samples.get(("fast", label))
        off = samples.get(("no-" + t, label))
        if not on or not off:
            print(f"{t:<12} | {shown:<52} | {'-':>9} | {'-':>9} | {'-':>7} | row not printed by the bench")
            continue
        a, b = statistics.median(on), statistics.median(off)
        gain = (a / b - 1) if higher else (b / a - 1 if a > 0 else 0)
        best[t] = max(best.get(t, -1e9), gain)
        # Per round, paired: the time ratio on/off (for a rate, off/on).
        ratios = [(y / x if higher else x / y) for x, y in zip(on, off) if x > 0 and y > 0]
        chart_rows.append(["speed tricks", f"{t}: {shown}", "trick off",
                           *((statistics.median(ratios), min(ratios), max(ratios)) if ratios else ("", "", "")),
                           a, b, ""])
        verdict = "buys >= 10%" if gain >= 0.10 else ("costs" if gain < -0.05 else "< 10%")
        print(f"{t:<12} | {shown:<52} | {a:9.2f} | {b:9.2f} | {gain * 100:+6.0f}% | {verdict}")
    print("\ngain: how much better the row is with the trick (rates: on/off - 1; times: off/on - 1).")
    print("A trick is kept where one of its rows gains >= 10%:")
    for t in tricks:
        g = best.get(t)
        state = "not measured" if g is None else ("keep" if g >= 0.10 else "REVIEW: below 10% on every row")
        print(f"  {t:<12} {state}" + ("" if g is None else f" (best row {g * 100:+.0f}%)"))
    path = os.environ.get("BENCH_CSV")
    if path:
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["group", "row", "peer", "ratio", "ratio_min", "ratio_max", "ours", "peer_value", "unit"])
            w.writerows(chart_rows)


if __name__ == "__main__":
    main()
