/*
 * bench_echo_instr.c — the echo benchmark's round trip counted in
 * instructions instead of time: `bench_echo_instr PEER N` starts PEER's
 * echo server (ours or libuv: bench_echo.h, the same servers bench_echo
 * times) on a thread of its own and does N round trips of 64 bytes
 * against it from this thread, over loopback, then stops it.
 *
 * `make bench-echo-instr` runs it under callgrind for two values of N and
 * divides the difference in the server thread's instructions by the
 * difference in N: the user-space instructions the server spends per
 * round trip, with start-up and shutdown cancelled out
 * (scripts/bench-echo-instr.sh). Unlike the timed rows of bench_echo,
 * whose spread on a shared machine hides a few per cent, the count is the
 * same from run to run: it shows what a change to the event path costs.
 * It leaves out the kernel, where most of a round trip's time goes.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_echo.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ours|libuv ROUND_TRIPS\n", argv[0]);
        return 2;
    }
    const bec_peer *peer = strcmp(argv[1], "ours") == 0 ? &bec_peer_rl : strcmp(argv[1], "libuv") == 0 ? &bec_peer_uv : NULL;
    long n = atol(argv[2]);
    if (!peer || n < 1) {
        fprintf(stderr, "%s: unknown peer '%s' or bad count '%s'\n", argv[0], argv[1], argv[2]);
        return 2;
    }
    char note[160] = "";
    unsigned port = 0;
    void *server = peer->start(&port, note);
    if (!server) {
        fprintf(stderr, "%s\n", note);
        return 1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
        perror("connect");
        return 1;
    }
    char msg[64], back[64];
    memset(msg, 'e', sizeof msg);
    for (long i = 0; i < n; i++) {
        if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) != (ssize_t)sizeof msg) {
            perror("send");
            return 1;
        }
        for (size_t got = 0; got < sizeof back;) {
            ssize_t r = recv(fd, back + got, sizeof back - got, 0);
            if (r <= 0) {
                fprintf(stderr, "the server closed or failed after %ld round trips\n", i);
                return 1;
            }
            got += (size_t)r;
        }
        if (memcmp(msg, back, sizeof msg) != 0) {
            fprintf(stderr, "round trip %ld came back changed\n", i);
            return 1;
        }
    }
    close(fd);
    peer->stop(server);
    return 0;
}
