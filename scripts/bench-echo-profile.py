#!/usr/bin/env python3
"""bench-echo-profile.py -- where an echo server's CPU goes, by kind of work.

    bench-echo-profile.py BENCH_ECHO_INSTR [WORKLOAD [N [PEER ...]]]

Runs bench_echo_instr (bench/bench_echo_instr.c) for each PEER under
`perf record -g` (cpu-clock) and sorts the server thread's samples by what
their call stack shows:

    tcp send   the kernel's TCP send (tcp_sendmsg): over loopback it also
               delivers to the client's socket and wakes the client;
    tcp recv   the kernel's TCP receive into the server (tcp_recvmsg);
    wait       epoll_wait's own work (ep_poll), or the ring's wait
               (io_cqring_wait) short of the sleep;
    sleep      switching out and back in (schedule);
    ring       io_uring's own work outside the TCP calls (submission,
               task work, completions);
    syscall    the rest of the kernel (system call entry and exit, fd
               lookups, ...);
    user       user space.

and prints each kind's CPU per unit of work (us per round trip, or per MB)
and its share. Then, against the last peer (the reference, raw epoll by
default): the CPU a server would use if it kept only the reference's TCP
work and user space, and no wait, sleep or system call cost at all, as a
fraction of the reference's -- the lowest server CPU per unit any event
loop can reach on this machine for this workload, whatever its kernel
interface.

WORKLOAD and N as bench_echo_instr takes them (default rt16 300000: round
trips over 16 connections); PEERs default to ours-ur epoll. Needs perf
(Debian: linux-perf); says so and stops without it. The server thread is
the busiest thread of the process other than its main one (the client).
"""
import os
import shutil
import subprocess
import sys
import tempfile

KINDS = ["tcp send", "tcp recv", "wait", "sleep", "ring", "syscall", "user"]


def kind_of(frames):
    """frames: the stack's symbols, innermost first, kernel ones marked."""
    names = {name for name, _ in frames}
    if names & {"tcp_sendmsg", "tcp_sendmsg_locked"}:
        return "tcp send"
    if names & {"tcp_recvmsg", "tcp_recvmsg_locked"}:
        return "tcp recv"
    if names & {"__schedule", "schedule"}:
        return "sleep"
    if names & {"ep_poll", "do_epoll_wait", "io_cqring_wait"}:
        return "wait"
    if not frames or not frames[0][1]:
        return "user"
    if any(name.startswith("io_") or name.startswith("__io_") for name, kernel in frames if kernel):
        return "ring"
    return "syscall"


def samples(data):
    """(pid, tid, period, frames) for each sample in a perf.data file."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,period,ip,sym"],
                         capture_output=True, text=True, check=True).stdout
    return parse(out)


def parse(out):
    """perf script's `pid/tid period` lines, each followed by its stack
    (`address symbol`, innermost first) and a blank line."""
    head, frames = None, []
    for line in out.splitlines() + [""]:
        if not line.strip():
            if head:
                yield head + (frames,)
            head, frames = None, []
            continue
        parts = line.split()
        if head is None:
            pid, tid = parts[0].split("/") if "/" in parts[0] else (parts[0], parts[1])
            head = (int(pid), int(tid), int(parts[-1]))
            continue
        addr = parts[0]
        name = parts[1] if len(parts) > 1 else "?"
        frames.append((name.split("+")[0], addr.startswith("ffff")))


def profile(binary, peer, workload, n):
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        run = subprocess.run(["perf", "record", "-q", "-g", "-e", "cpu-clock", "-o", data, binary, peer,
                              workload, str(n)], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit("bench-echo-profile: %s %s failed:\n%s" % (peer, workload, run.stderr))
        by_thread = {}
        for pid, tid, period, frames in samples(data):
            if tid == pid:
                continue  # the client
            kinds = by_thread.setdefault(tid, dict.fromkeys(KINDS, 0))
            kinds[kind_of(frames)] += period
    if not by_thread:
        sys.exit("bench-echo-profile: no samples of %s's server thread" % peer)
    return max(by_thread.values(), key=lambda k: sum(k.values()))


SELF_TEST = """\
7/7     250000
\t    4c3 main

7/9     250000
\tffffffff81a0 tcp_sendmsg_locked
\tffffffff81b0 tcp_sendmsg
\tffffffff81c0 io_send
\t    51a io_uring_enter

7/9     500000
\tffffffff82a0 io_poll_task_func
\tffffffff82b0 __io_run_local_work
\t    51a io_uring_enter

7/9     250000
\tffffffff83a0 finish_task_switch.isra.0
\tffffffff83b0 __schedule
\tffffffff83c0 io_cqring_wait

7/9     250000
\tffffffff84a0 fdget
\tffffffff84b0 __sys_recvfrom
\tffffffff84c0 do_syscall_64
\t    61a recv

7/9     250000
\t    71a sock_fd_callout
"""


def self_test():
    """The parser and the sorting on a made-up perf script output."""
    got = [(pid, tid, period, kind_of(frames)) for pid, tid, period, frames in parse(SELF_TEST)]
    want = [(7, 7, 250000, "user"), (7, 9, 250000, "tcp send"), (7, 9, 500000, "ring"),
            (7, 9, 250000, "sleep"), (7, 9, 250000, "syscall"), (7, 9, 250000, "user")]
    if got != want:
        sys.exit("bench-echo-profile self-test: got %r, want %r" % (got, want))
    print("bench-echo-profile self-test: ok (%d samples sorted)" % len(got))


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    if not shutil.which("perf"):
        sys.exit("bench-echo-profile: perf is not installed (Debian: apt-get install linux-perf)")
    binary = argv[1]
    workload = argv[2] if len(argv) > 2 else "rt16"
    n = int(argv[3]) if len(argv) > 3 else 300000
    peers = argv[4:] or ["ours-ur", "epoll"]
    per_mb = workload.startswith("tp")
    unit = "MB" if per_mb else "round trip"
    scale, shown = (1e-6, "ms") if per_mb else (1e-3, "us")  # from ns
    rows = {p: profile(binary, p, workload, n) for p in peers}
    print("server CPU per %s by kind of work, %s, %d %s (perf cpu-clock samples of the server thread)" %
          (unit, workload, n, "MB" if per_mb else "round trips"))
    print("%-10s" % "kind" + "".join("%20s" % p for p in peers))
    for k in KINDS + ["total"]:
        cells = []
        for p in peers:
            total = sum(rows[p].values())
            v = total if k == "total" else rows[p][k]
            cells.append("%11.3f %s %5.1f%%" % (v * scale / n, shown, 100.0 * v / total if total else 0))
        print("%-10s" % k + "".join("%20s" % c for c in cells))
    ref = peers[-1]
    r = rows[ref]
    total = sum(r.values())
    if total:
        floor = (r["tcp send"] + r["tcp recv"] + r["user"]) / total
        print("\nagainst %s: a server that kept only its TCP work and user space, with no wait, sleep or "
              "system call cost, would use %.2fx its CPU per %s" % (ref, floor, unit))
        for p in peers[:-1]:
            print("%s: %.2fx %s's CPU per %s" % (p, sum(rows[p].values()) / total, ref, unit))


if __name__ == "__main__":
    main(sys.argv)
