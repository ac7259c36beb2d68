/*
 * bench_echo.h — the TCP echo benchmark: one interface, an echo server on
 * a thread of its own, that every peer implements in its own translation
 * unit (bench_echo_cf.c, built three times: CoreFoundation's CFSocket from
 * the Swift toolchain with -DBEC_CF, our RLSocket through cf_compat.h
 * without, and ours with Read callbacks with -DBEC_READCB; bench_echo_uv.c:
 * libuv's uv_tcp; bench_echo_epoll.c: raw epoll by hand), because CoreFoundation's headers and
 * ours cannot share one file. bench_echo.c drives every server with the
 * same plain-socket clients, in one process, and prints one table.
 *
 * Every server does the same work: listen on 127.0.0.1 (any port), accept
 * every connection with TCP_NODELAY, send back what arrives at once with a
 * non-blocking send, keep what the kernel does not take and send it when
 * the socket is writable, stop reading from a client while more than
 * BEC_HIGH_WATER bytes wait for it, close a connection when its client
 * has finished and everything was sent.
 */
#ifndef BENCH_ECHO_H
#define BENCH_ECHO_H

#include <stdbool.h>
#include <stddef.h>

/* Above this many unsent bytes for one client, its server stops reading
 * from it until they are sent. */
#define BEC_HIGH_WATER (256 * 1024)

typedef struct bec_peer {
    const char *name;
    /* Starts the server on a new thread; returns once it listens, with its
     * port in *port, or NULL (why in note, sizeof note >= 120). */
    void *(*start)(unsigned *port, char *note);
    /* Stops it: every connection closed, the thread joined, all freed. */
    void (*stop)(void *server);
    /* Threads the server uses besides its loop's own (CF: its select()
     * helper), for the table's notes. */
    const char *threads;
} bec_peer;

extern const bec_peer bec_peer_rl;
extern const bec_peer bec_peer_rl_read; /* RLSocket with Read callbacks, recv in the callback */
extern const bec_peer bec_peer_rl_ur;      /* bec_peer_rl on the io_uring backend */
extern const bec_peer bec_peer_rl_read_ur; /* bec_peer_rl_read on the io_uring backend */
extern const bec_peer bec_peer_epoll;   /* by hand on raw epoll, edge-triggered: the floor */
extern const bec_peer bec_peer_cf;
extern const bec_peer bec_peer_uv;

/* The connection buffer every peer's server uses: bytes not yet sent. */
typedef struct bec_buf {
    unsigned char *bytes;
    size_t start, len, cap;
} bec_buf;

#include <stdlib.h>
#include <string.h>

/* Keeps n more bytes; false: no memory. */
static inline bool bec_buf_append(bec_buf *b, const void *bytes, size_t n) {
    if (b->start > 0 && b->start + b->len + n > b->cap) {
        memmove(b->bytes, b->bytes + b->start, b->len);
        b->start = 0;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *p = realloc(b->bytes, cap);
        if (!p) return false;
        b->bytes = p;
        b->cap = cap;
    }
    memcpy(b->bytes + b->start + b->len, bytes, n);
    b->len += n;
    return true;
}

static inline void bec_buf_consume(bec_buf *b, size_t n) {
    b->start += n;
    b->len -= n;
    if (b->len == 0) b->start = 0;
}

/* A client's TCP connection to 127.0.0.1:port with TCP_NODELAY, for the
 * programs that drive the servers (bench_echo.c, bench_echo_instr.c); -1
 * on failure (errno). Non-blocking: the connect may still be under way. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int bec_connect(unsigned port, bool nonblocking) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    int one = 1;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        (connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0 && !(nonblocking && errno == EINPROGRESS))) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

#endif /* BENCH_ECHO_H */
