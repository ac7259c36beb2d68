/*
 * bench_echo_instr.c — the echo benchmark counted in instructions instead
 * of time. `bench_echo_instr PEER rt N` starts PEER's echo server (ours or
 * libuv: bench_echo.h, the same servers bench_echo times) on a thread of
 * its own and does N round trips of 64 bytes against it from this thread,
 * over loopback, then stops it. `bench_echo_instr PEER tp16 MB` echoes MB
 * megabytes over 16 connections instead, in 4 KB writes with 64 KB in
 * flight on each (bench_echo's 16-connection row, its client waiting in
 * epoll instead of timing). `rt16` and `rt256` do N round trips over 16
 * and 256 connections, one 64-byte message in flight on each.
 *
 * `make bench-echo-instr` runs it under callgrind for two values of N (of
 * MB) and divides the difference in the server thread's instructions by
 * the difference: the user-space instructions the server spends per round
 * trip (per MB), with start-up and shutdown cancelled out
 * (scripts/bench-echo-instr.sh). Unlike the timed rows of bench_echo,
 * whose spread on a shared machine hides a few per cent, the round trip
 * count is the same from run to run: it shows what a change to the event
 * path costs. The per-MB count moves by about a tenth between runs (how
 * the threads interleave under valgrind decides how much each read
 * finds), enough to show a change in what a read costs per byte (the
 * read buffer taken back, for one: about 356,000 to 239,000 per MB in a
 * first version of this client). It leaves out the kernel, where most of
 * the time goes.
 *
 * valgrind cannot run a loop on io_uring (3.19 holds its thread lock
 * through io_uring_enter, so the client thread never runs), and this
 * machine's virtual CPU has no instruction counter for perf. So with
 * BEI_STEP=1 the program counts for itself: a child process traces the
 * server's thread from its start to its end, one instruction at a time
 * (ptrace's single step: user space only; a system call is one step, a
 * string instruction one per repetition), and the count goes to stdout as
 * "server_instructions N". BEI_STEP_PROFILE=FILE also writes how often
 * each instruction address was stepped ("address count" lines, for
 * scripts/bench-echo-instr.sh's profile). Peers ours-ur and read-ur are
 * ours and ours-read on the io_uring backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_echo.h"

/* How long the client waits for a reply before it calls the server
 * stuck: 10 s, or 10 min when the server thread is single-stepped
 * (BEI_STEP=1, ~40 us a step: a server's first accepts and reads, libuv's
 * over 16 connections ~190,000 steps, take longer than 10 s there). */
static int quiet_ms = 10000;

/* A connection to the server on port, or -1 (said why). */
static int connect_to(unsigned port) {
    int fd = bec_connect(port, false);
    if (fd < 0)
        perror("connect");
    return fd;
}

/* MB megabytes out over 16 connections and back, every byte checked. */
static bool echo_16(unsigned port, long mb) {
    enum { NC = 16, CHUNK = 4096, WINDOW = 65536 };
    static char payload[CHUNK], buf[65536];
    memset(payload, 'e', sizeof payload);
    const uint64_t total = (uint64_t)mb << 20;
    int fds[NC];
    uint64_t sent[NC] = {0}, received[NC] = {0}, all_sent = 0, all_received = 0;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        perror("epoll_create1");
        return false;
    }
    for (int i = 0; i < NC; i++) {
        fds[i] = connect_to(port);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (fds[i] < 0 || fcntl(fds[i], F_SETFL, O_NONBLOCK) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0)
            return false;
    }
    bool ok = true;
    while (ok && all_received < total) {
        /* What each window allows (a socket's buffer holds its 64 KB). */
        for (int i = 0; i < NC && ok; i++) {
            while (all_sent < total && sent[i] - received[i] + CHUNK <= WINDOW) {
                size_t len = total - all_sent < CHUNK ? (size_t)(total - all_sent) : CHUNK;
                ssize_t r = send(fds[i], payload, len, MSG_NOSIGNAL);
                if (r <= 0) {
                    ok = r < 0 && errno == EAGAIN;
                    break;
                }
                sent[i] += (uint64_t)r;
                all_sent += (uint64_t)r;
            }
        }
        struct epoll_event evs[NC];
        int k = ok ? epoll_wait(ep, evs, NC, quiet_ms) : 0;
        if (ok && k <= 0) {
            fprintf(stderr, "nothing came back for %d s\n", quiet_ms / 1000);
            ok = false;
        }
        for (int j = 0; j < k && ok; j++) {
            int i = (int)evs[j].data.u32;
            for (;;) {
                ssize_t r = recv(fds[i], buf, sizeof buf, 0);
                if (r <= 0) {
                    ok = r < 0 && errno == EAGAIN;
                    break;
                }
                for (ssize_t b = 0; b < r; b++)
                    if (buf[b] != 'e') {
                        fprintf(stderr, "a byte came back changed\n");
                        return false;
                    }
                received[i] += (uint64_t)r;
                all_received += (uint64_t)r;
            }
        }
    }
    for (int i = 0; i < NC; i++)
        close(fds[i]);
    close(ep);
    if (!ok)
        fprintf(stderr, "the exchange failed after %llu bytes back\n", (unsigned long long)all_received);
    return ok;
}

/* N round trips of 64 bytes on one connection, every byte checked. */
static bool round_trips(unsigned port, long n) {
    int fd = connect_to(port);
    if (fd < 0)
        return false;
    char msg[64], back[64];
    memset(msg, 'e', sizeof msg);
    for (long i = 0; i < n; i++) {
        if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) != (ssize_t)sizeof msg) {
            perror("send");
            return false;
        }
        for (size_t got = 0; got < sizeof back;) {
            ssize_t r = recv(fd, back + got, sizeof back - got, 0);
            if (r <= 0) {
                fprintf(stderr, "the server closed or failed after %ld round trips\n", i);
                return false;
            }
            got += (size_t)r;
        }
        if (memcmp(msg, back, sizeof msg) != 0) {
            fprintf(stderr, "round trip %ld came back changed\n", i);
            return false;
        }
    }
    close(fd);
    return true;
}

/* N round trips of 64 bytes spread over `nc` connections, each with one
 * message in flight (bench_echo's 16- and 256-connection rows), every
 * byte checked. */
static bool round_trips_many(unsigned port, long n, int nc) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int *fds = calloc((size_t)nc, sizeof *fds);
    if (ep < 0 || !fds) {
        perror("epoll_create1");
        return false;
    }
    char msg[64], back[64];
    memset(msg, 'e', sizeof msg);
    long started = 0, done = 0;
    bool ok = true;
    for (int i = 0; i < nc && ok; i++) {
        fds[i] = connect_to(port);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        ok = fds[i] >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0;
    }
    for (int i = 0; i < nc && ok && started < n; i++, started++)
        ok = send(fds[i], msg, sizeof msg, MSG_NOSIGNAL) == (ssize_t)sizeof msg;
    while (ok && done < n) {
        struct epoll_event evs[256];
        int k = epoll_wait(ep, evs, 256, quiet_ms);
        if (k <= 0) {
            fprintf(stderr, "nothing came back for %d s\n", quiet_ms / 1000);
            ok = false;
        }
        for (int j = 0; j < k && ok; j++) {
            int i = (int)evs[j].data.u32;
            for (size_t got = 0; got < sizeof back && ok;) {
                ssize_t r = recv(fds[i], back + got, sizeof back - got, 0);
                ok = r > 0;
                got += r > 0 ? (size_t)r : 0;
            }
            ok = ok && memcmp(msg, back, sizeof msg) == 0;
            done++;
            if (ok && started < n) {
                ok = send(fds[i], msg, sizeof msg, MSG_NOSIGNAL) == (ssize_t)sizeof msg;
                started++;
            }
        }
    }
    if (!ok)
        fprintf(stderr, "the exchange failed after %ld round trips\n", done);
    for (int i = 0; i < nc; i++)
        if (fds[i] > 0)
            close(fds[i]);
    free(fds);
    close(ep);
    return ok;
}

/* The thread of this process that is not `self` (the server's: started
 * last, the only other one); 0: none or several. */
static pid_t other_thread(pid_t self) {
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    pid_t found = 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        pid_t t = (pid_t)atoi(e->d_name);
        if (t > 0 && t != self) {
            found = t;
            n++;
        }
    }
    closedir(d);
    return n == 1 ? found : 0;
}

/* Address counts for the profile: an open-addressing table. */
enum { PROF_SLOTS = 1 << 20 };
typedef struct { unsigned long long ip, n; } prof_slot;

static void prof_add(prof_slot *t, unsigned long long ip) {
    size_t i = (size_t)((ip * 0x9E3779B97F4A7C15ull) >> 44) & (PROF_SLOTS - 1);
    while (t[i].ip && t[i].ip != ip)
        i = (i + 1) & (PROF_SLOTS - 1);
    t[i].ip = ip;
    t[i].n++;
}

int main(int argc, char **argv);

/* The tracer (a child process): steps thread `tid` to its end; its count
 * written to `out`. Exits. */
static void step_thread(pid_t tid, int out, int go, const char *profile) {
    prof_slot *prof = profile ? calloc(PROF_SLOTS, sizeof *prof) : NULL;
    unsigned long long steps = 0;
    int st;
    if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACEEXIT) != 0 || ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
        perror("ptrace(SEIZE)");
        _exit(1);
    }
    if (waitpid(tid, &st, __WALL) != tid) {
        perror("waitpid");
        _exit(1);
    }
    char one = 1;
    if (write(go, &one, 1) != 1) /* attached: the client may start */
        _exit(1);
    for (;;) {
        if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) != 0)
            break;
        if (waitpid(tid, &st, __WALL) != tid || WIFEXITED(st) || WIFSIGNALED(st))
            break;
        if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8)))
            break;
        if (WIFSTOPPED(st) && WSTOPSIG(st) != SIGTRAP) {
            /* a signal for the thread: let it have it on the next step */
            continue;
        }
        steps++;
        if (prof) {
            struct user_regs_struct r;
            if (ptrace(PTRACE_GETREGS, tid, 0, &r) == 0)
                prof_add(prof, r.rip);
        }
    }
    (void)ptrace(PTRACE_DETACH, tid, 0, 0);
    if (prof) {
        FILE *f = fopen(profile, "w");
        if (f) {
            fprintf(f, "# main %llx\n", (unsigned long long)(uintptr_t)&main); /* where the program is loaded */
            FILE *maps = fopen("/proc/self/maps", "r"); /* and the libraries */
            char line[512];
            while (maps && fgets(line, sizeof line, maps))
                fprintf(f, "# map %s", line);
            if (maps)
                fclose(maps);
            for (size_t i = 0; i < PROF_SLOTS; i++)
                if (prof[i].ip)
                    fprintf(f, "%llx %llu\n", prof[i].ip, prof[i].n);
            fclose(f);
        }
    }
    if (write(out, &steps, sizeof steps) != (ssize_t)sizeof steps)
        _exit(1);
    _exit(0);
}

int main(int argc, char **argv) {
    const bec_peer *peer = NULL;
    if (argc == 4)
        peer = strcmp(argv[1], "ours") == 0        ? &bec_peer_rl
               : strcmp(argv[1], "ours-read") == 0 ? &bec_peer_rl_read
               : strcmp(argv[1], "ours-ur") == 0   ? &bec_peer_rl_ur
               : strcmp(argv[1], "read-ur") == 0   ? &bec_peer_rl_read_ur
               : strcmp(argv[1], "epoll") == 0     ? &bec_peer_epoll
               : strcmp(argv[1], "libuv") == 0     ? &bec_peer_uv
                                                   : NULL;
    bool tp16 = argc == 4 && strcmp(argv[2], "tp16") == 0;
    int conns = argc != 4 || tp16 ? 0 : strcmp(argv[2], "rt") == 0 ? 1 : strcmp(argv[2], "rt16") == 0 ? 16
                                       : strcmp(argv[2], "rt256") == 0                             ? 256
                                                                                                   : 0;
    long n = argc == 4 ? atol(argv[3]) : 0;
    if (!peer || (!tp16 && !conns) || n < 1) {
        fprintf(stderr, "usage: %s PEER rt|rt16|rt256 ROUND_TRIPS | PEER tp16 MEGABYTES (PEER: ours, ours-read, ours-ur, read-ur, epoll, libuv)\n",
                argv[0]);
        return 2;
    }
    bool step = getenv("BEI_STEP") && strcmp(getenv("BEI_STEP"), "1") == 0;
    if (step)
        quiet_ms = 600000;
    char note[160] = "";
    unsigned port = 0;
    void *server = peer->start(&port, note);
    if (!server) {
        fprintf(stderr, "%s\n", note);
        return 1;
    }
    int res[2] = {-1, -1}, go[2] = {-1, -1};
    pid_t tracer = -1;
    if (step) {
        pid_t tid = other_thread((pid_t)gettid());
        /* Yama's restriction, where there is one, lifted for the tracer. */
        (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
        if (tid == 0 || pipe(res) != 0 || pipe(go) != 0) {
            fprintf(stderr, "BEI_STEP: no server thread to trace, or no pipe\n");
            return 1;
        }
        tracer = fork();
        if (tracer == 0)
            step_thread(tid, res[1], go[1], getenv("BEI_STEP_PROFILE"));
        char c;
        if (tracer < 0 || read(go[0], &c, 1) != 1) {
            fprintf(stderr, "BEI_STEP: the tracer did not attach\n");
            return 1;
        }
    }
    bool ok = tp16 ? echo_16(port, n) : conns == 1 ? round_trips(port, n) : round_trips_many(port, n, conns);
    peer->stop(server);
    if (step) {
        unsigned long long steps = 0;
        int st = 0;
        bool got = read(res[0], &steps, sizeof steps) == (ssize_t)sizeof steps;
        if (waitpid(tracer, &st, 0) != tracer || !got) {
            fprintf(stderr, "BEI_STEP: the tracer failed\n");
            return 1;
        }
        printf("server_instructions %llu\n", steps);
    }
    return ok ? 0 : 1;
}
