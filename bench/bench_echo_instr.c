/*
 * bench_echo_instr.c — the echo benchmark counted in instructions instead
 * of time. `bench_echo_instr PEER rt N` starts PEER's echo server (ours or
 * libuv: bench_echo.h, the same servers bench_echo times) on a thread of
 * its own and does N round trips of 64 bytes against it from this thread,
 * over loopback, then stops it. `bench_echo_instr PEER tp16 MB` echoes MB
 * megabytes over 16 connections instead, in 4 KB writes with 64 KB in
 * flight on each (bench_echo's 16-connection row, its client waiting in
 * epoll instead of timing).
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
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_echo.h"

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
        int k = ok ? epoll_wait(ep, evs, NC, 10000) : 0;
        if (ok && k <= 0) {
            fprintf(stderr, "nothing came back for 10 s\n");
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

int main(int argc, char **argv) {
    const bec_peer *peer = NULL;
    if (argc == 4)
        peer = strcmp(argv[1], "ours") == 0        ? &bec_peer_rl
               : strcmp(argv[1], "ours-read") == 0 ? &bec_peer_rl_read
               : strcmp(argv[1], "epoll") == 0     ? &bec_peer_epoll
               : strcmp(argv[1], "libuv") == 0     ? &bec_peer_uv
                                                   : NULL;
    bool tp16 = argc == 4 && strcmp(argv[2], "tp16") == 0;
    long n = argc == 4 ? atol(argv[3]) : 0;
    if (!peer || (!tp16 && strcmp(argv[2], "rt") != 0) || n < 1) {
        fprintf(stderr, "usage: %s PEER rt ROUND_TRIPS | PEER tp16 MEGABYTES (PEER: ours, ours-read, epoll, libuv)\n",
                argv[0]);
        return 2;
    }
    char note[160] = "";
    unsigned port = 0;
    void *server = peer->start(&port, note);
    if (!server) {
        fprintf(stderr, "%s\n", note);
        return 1;
    }
    bool ok = tp16 ? echo_16(port, n) : round_trips(port, n);
    peer->stop(server);
    return ok ? 0 : 1;
}
