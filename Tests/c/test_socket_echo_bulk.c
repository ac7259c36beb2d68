/* test_socket_echo_bulk.c — writes through RLSocketSendData from a loop
 * that runs long (a server's RLRunLoopRun, not short runs whose ends
 * submit what is queued) reach the peer within the run, on both backends.
 * On io_uring a socket's writes are queued for the loop's ring (rl_txq.h)
 * and a send that can go at once is silent (no completion when whole):
 * the writes queued behind one must not wait for a completion that never
 * comes while the loop sleeps in the wait that submitted it (bench_echo's
 * ours-ur lost its 1-connection throughput row so: 960 KB left queued, the
 * loop asleep, the client waiting for them).
 *   - writes made one after another in a callout, and outside a run;
 *   - a Data-callback echo server (the shipped style: each callback's data
 *     sent back with RLSocketSendData) over TCP loopback, fed megabytes in
 *     64 KB writes by a client that keeps 1 MB in flight, as bench_echo's
 *     1-connection throughput row does: every byte comes back, in order,
 *     and no send fails.
 * Each runs on the process's backend (`make check-c`, `make check-uring`)
 * and once more with the loop forced onto io_uring (not where the kernel
 * refuses it: test_backend checks that every loop is on epoll then). */
#include "testutil.h"

#include <crunloop/RLRunLoop.h>
#include <crunloop/RLSocket.h>
#include <crunloop/RLData.h>
#include <crunloop/RLError.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "RLBase.h"
#include "rl_poll_backend.h" /* rl__poll_uring_usable */

#define MODE "ECHO"
/* On the server's and client's threads, where a cmocka assertion cannot
 * jump back to the test: a broken promise ends the process, loudly. */
#define need(x)                                                              \
    do {                                                                     \
        if (!(x)) {                                                          \
            fprintf(stderr, "%s:%d: not true: %s\n", __FILE__, __LINE__, #x); \
            abort();                                                         \
        }                                                                    \
    } while (0)
#define CHUNK 65536
#define WINDOW (1u << 20)

static uint8_t pat(uint64_t i) { return (uint8_t)((i * 7 + i / 65521) & 0xff); }

/* The server's side, on its loop's thread. */
typedef struct server {
    int fd;
    _Atomic bool client_done; /* the client has seen the end (or gave up) */
    _Atomic(RLRunLoopRef) loop; /* the server's, stopped by the client when it is done */
    int failures, err;        /* RLSocketSendData that failed; the first's errno */
    bool ended;               /* the empty Data callback came */
    char backend[32];
} server;

static void echo_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address;
    server *sv = info;
    if (type != kRLSocketDataCallBack)
        return;
    if (RLDataGetLength(data) == 0) {
        sv->ended = true;
        RLSocketInvalidate(s); /* closes the fd once what is queued is sent */
        return;
    }
    if (RLSocketSendData(s, NULL, data, 5) != kRLSocketSuccess) {
        if (sv->failures++ == 0)
            sv->err = RLErrorGetLast().systemErrno;
        if (getenv("T_DEBUG"))
            fprintf(stderr, "send failed: %s\n", RLErrorGetLast().message);
    }
}

static void *serve(void *arg) {
    server *sv = arg;
    const char *b = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    snprintf(sv->backend, sizeof sv->backend, "%s", b ? b : "?");
    RLSocketContext c = {0, sv, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv->fd, kRLSocketDataCallBack, echo_cb, &c);
    need(s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
    need(src);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE);
    RLRelease(src);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    /* One long run, as a server's (RLRunLoopRun): what the loop has to
     * do must be done within the run, not by a run's end. The client
     * stops it. */
    atomic_store(&sv->loop, RLRunLoopGetCurrent());
    while (!atomic_load(&sv->client_done))
        RLRunLoopRunInMode(MODE, 1e6, false);
    RLSocketInvalidate(s);
    RLRelease(s);
    rl_test_unkeep(keep);
    return NULL;
}

/* The client's side: what it sent, got back, and whether it was right. */
typedef struct client {
    int fd;
    uint64_t total;          /* bytes to send */
    uint64_t sent, received;
    uint64_t bad_at;         /* the first wrong byte's offset (UINT64_MAX: none) */
    bool eof, stalled;
    server *sv;
} client;

static void *drive(void *arg) {
    client *c = arg;
    static uint8_t out[CHUNK];
    uint8_t in[CHUNK];
    c->bad_at = UINT64_MAX;
    double give_up = rl_test_now() + 60;
    bool shut = false;
    while (!c->eof) {
        if (rl_test_now() > give_up) {
            c->stalled = true;
            break;
        }
        /* Write while the window allows (64 KB writes, as bench_echo). */
        while (c->sent < c->total && c->sent - c->received + CHUNK <= WINDOW) {
            size_t n = c->total - c->sent < CHUNK ? (size_t)(c->total - c->sent) : CHUNK;
            for (size_t k = 0; k < n; k++)
                out[k] = pat(c->sent + k);
            ssize_t r = send(c->fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (r > 0) {
                c->sent += (uint64_t)r;
                continue;
            }
            need(r < 0 && (errno == EAGAIN || errno == EINTR));
            break;
        }
        if (c->sent == c->total && c->received == c->total && !shut) {
            need(shutdown(c->fd, SHUT_WR) == 0); /* the server's end: it closes */
            shut = true;
        }
        struct pollfd p = {c->fd, POLLIN | (c->sent < c->total && c->sent - c->received + CHUNK <= WINDOW ? POLLOUT : 0), 0};
        int k = poll(&p, 1, 100);
        if (k < 0 && errno == EINTR)
            continue;
        need(k >= 0);
        for (;;) {
            ssize_t r = recv(c->fd, in, sizeof in, MSG_DONTWAIT);
            if (r > 0) {
                for (ssize_t i = 0; i < r && c->bad_at == UINT64_MAX; i++)
                    if (in[i] != pat(c->received + (uint64_t)i))
                        c->bad_at = c->received + (uint64_t)i;
                c->received += (uint64_t)r;
                continue;
            }
            if (r == 0)
                c->eof = true;
            else
                need(errno == EAGAIN || errno == EINTR);
            break;
        }
    }
    atomic_store(&c->sv->client_done, true);
    RLRunLoopRef rl;
    while (!(rl = atomic_load(&c->sv->loop)))
        usleep(1000);
    RLRunLoopStop(rl);
    return NULL;
}

/* A connected TCP pair over loopback: fds[0] the server's, fds[1] the client's. */
static void tcp_pair(int fds[2]) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 1), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fds[1] >= 0);
    assert_int_equal(connect(fds[1], (struct sockaddr *)&a, sizeof a), 0);
    fds[0] = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    assert_true(fds[0] >= 0);
    close(l);
    int one = 1;
    assert_int_equal(setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
    assert_int_equal(setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
}

static void echo_megabytes(uint64_t megabytes) {
    int fds[2];
    tcp_pair(fds);
    server sv = {.fd = fds[0]};
    client c = {.fd = fds[1], .total = megabytes << 20, .sv = &sv};
    pthread_t st, ct;
    assert_int_equal(pthread_create(&st, NULL, serve, &sv), 0);
    assert_int_equal(pthread_create(&ct, NULL, drive, &c), 0);
    assert_int_equal(pthread_join(ct, NULL), 0);
    assert_int_equal(pthread_join(st, NULL), 0);
    close(fds[1]);
    if (c.stalled || c.received != c.total || c.bad_at != UINT64_MAX || sv.failures)
        fail_msg("echo on %s: sent %llu of %llu, got back %llu (first wrong byte at %lld)%s; %d sends failed "
                 "(first: %s)",
                 sv.backend, (unsigned long long)c.sent, (unsigned long long)c.total,
                 (unsigned long long)c.received, c.bad_at == UINT64_MAX ? -1LL : (long long)c.bad_at,
                 c.stalled ? ", stalled" : "", sv.failures, sv.failures ? strerror(sv.err) : "none");
    if (getenv("T_DEBUG"))
        fprintf(stderr, "echo on %s: %llu bytes back\n", sv.backend, (unsigned long long)c.received);
    assert_true(c.eof);
    assert_true(sv.ended);
}

/* ---- writes queued behind a send the ring has in flight ---- */

#if !RL_PLAIN
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_sends; /* sends the ring completed */
#endif

static unsigned long ring_sends(void) {
#if !RL_PLAIN
    return atomic_load(&rl__poll_uring_sends);
#else
    return 0;
#endif
}

enum { SMALL = 1000 }; /* each write: the socket's buffer takes it whole */

typedef struct pair_run {
    bool outside;  /* the two writes made outside a run (the loop's thread, after a callout's first) */
    int fd, peer;
    int calls;
    bool go, done;
    int failures;
    RLSocketRef s;
} pair_run;

static void send_pat(pair_run *pr, size_t from, size_t n) {
    uint8_t b[SMALL];
    for (size_t k = 0; k < n; k++)
        b[k] = pat(from + k);
    RLDataRef d = RLDataCreate(NULL, b, (RLIndex)n);
    need(d);
    if (RLSocketSendData(pr->s, NULL, d, 5) != kRLSocketSuccess)
        pr->failures++;
    RLRelease(d);
}

static void pair_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)address;
    pair_run *pr = info;
    if (type != kRLSocketDataCallBack || RLDataGetLength(data) == 0)
        return;
    if (pr->calls++ == 0) {
        /* "go": the first write (the ring's from now on), then the two
         * more, here or once the run has ended */
        pr->go = true;
        send_pat(pr, 0, SMALL);
        if (pr->outside)
            return; /* the run returns after this callout (no stop: it would wake the next run's wait) */
        send_pat(pr, SMALL, SMALL);
        send_pat(pr, 2 * SMALL, SMALL);
        return;
    }
    pr->done = true; /* the peer has all three */
    RLRunLoopStop(RLRunLoopGetCurrent());
}

/* The peer: "go", then the three writes, checked, then "k". */
static void *pair_peer(void *arg) {
    pair_run *pr = arg;
    need(write(pr->peer, "go", 2) == 2);
    uint8_t b[3 * SMALL];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = read(pr->peer, b + got, sizeof b - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL; /* the server went: the test says what was missing */
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof b; i++)
        need(b[i] == pat(i));
    need(write(pr->peer, "k", 1) == 1);
    return NULL;
}

static void *pair_main(void *arg) {
    pair_run *pr = arg;
    int sv[2];
    need(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    pr->fd = sv[0];
    pr->peer = sv[1];
    RLSocketContext c = {0, pr, NULL, NULL, NULL};
    pr->s = RLSocketCreateWithNative(NULL, pr->fd, kRLSocketDataCallBack, pair_cb, &c);
    need(pr->s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, pr->s, 0);
    need(src);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE);
    RLRelease(src);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    const char *b = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    bool ring = b && strcmp(b, "io_uring") == 0;
    unsigned long before = ring_sends();
    pthread_t t;
    need(pthread_create(&t, NULL, pair_peer, pr) == 0);
    /* One long run for the writes (in a callout: the one that made them):
     * they must go out within it (a run's end is not what sends them), so
     * the peer answers and the callout stops it. */
    RLRunLoopRunInMode(MODE, 10, pr->outside); /* outside: it returns after the first callout */
    if (pr->outside && pr->go) {
        send_pat(pr, SMALL, SMALL);
        send_pat(pr, 2 * SMALL, SMALL);
        RLRunLoopRunInMode(MODE, 10, false);
    }
    bool done = pr->done;
    if (!done)
        shutdown(pr->peer, SHUT_RDWR); /* the peer's read ends */
    need(pthread_join(t, NULL) == 0);
    RLSocketInvalidate(pr->s);
    RLRelease(pr->s);
    rl_test_unkeep(keep);
    close(pr->peer);
    if (ring && done && ring_sends() <= before)
        return "the ring did not send";
    return done && pr->failures == 0 ? NULL : "the peer did not get the writes within one run";
}

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define ON_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#else
#define ON_VALGRIND() false
#endif

/* Whether loops here may be on io_uring: not where the kernel refuses it,
 * nor in a build without the backend (PLAIN=1), nor under valgrind, which
 * holds its one thread lock through io_uring_enter (it does not know the
 * call blocks): a loop asleep on io_uring would stop the peer's thread,
 * and the test would wait out its bounds (`make check-leak` runs on epoll). */
static bool ring_usable(void) {
#if RL_TRICK_URING
    return rl__poll_uring_usable() != 0 && !ON_VALGRIND();
#else
    return false;
#endif
}

/* fn on a new thread whose loop is on the process's backend, then on one
 * forced onto io_uring (where the kernel allows it). */
static void on_each_backend(void *(*fn)(void *), void *arg, size_t size) {
    void *copy = malloc(size);
    assert_non_null(copy);
    memcpy(copy, arg, size);
    const char *why = rl_test_on_other_thread(fn, copy);
    if (why)
        fail_msg("on the process's backend: %s", why);
    if (ring_usable()) {
        const char *was = getenv("RL_BACKEND");
        char *saved = was ? strdup(was) : NULL;
        setenv("RL_BACKEND", "io_uring", 1);
        memcpy(copy, arg, size);
        why = rl_test_on_other_thread(fn, copy);
        if (saved) {
            setenv("RL_BACKEND", saved, 1);
            free(saved);
        } else {
            unsetenv("RL_BACKEND");
        }
        if (why)
            fail_msg("on io_uring: %s", why);
    }
    free(copy);
}

/* Writes made in a callout one after another: the first (silent: it
 * makes no completion when whole) is submitted by the loop's wait; the
 * ones queued behind it must still go out while the loop sleeps. */
static void test_writes_queued_in_a_callout_go_out_while_the_loop_waits(void **state) {
    (void)state;
    pair_run pr = {.outside = false};
    on_each_backend(pair_main, &pr, sizeof pr);
}

/* Writes made outside a run, behind one the ring already has: they go
 * out in the next run, without waiting for that run's end. */
static void test_writes_made_outside_a_run_go_out_in_the_next_run(void **state) {
    (void)state;
    pair_run pr = {.outside = true};
    on_each_backend(pair_main, &pr, sizeof pr);
}

static void test_bulk_echo_in_64k_writes(void **state) {
    (void)state;
    echo_megabytes((uint64_t)rl_test_iters(64));
}

static void test_bulk_echo_in_64k_writes_on_ring(void **state) {
    (void)state;
    if (!ring_usable())
        skip(); /* refused here, not built (PLAIN=1), or valgrind (ring_usable): the echo ran on epoll just before */
    const char *was = getenv("RL_BACKEND");
    char *saved = was ? strdup(was) : NULL;
    setenv("RL_BACKEND", "io_uring", 1);
    echo_megabytes((uint64_t)rl_test_iters(64));
    if (saved) {
        setenv("RL_BACKEND", saved, 1);
        free(saved);
    } else {
        unsetenv("RL_BACKEND");
    }
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_queued_in_a_callout_go_out_while_the_loop_waits),
        cmocka_unit_test(test_writes_made_outside_a_run_go_out_in_the_next_run),
        cmocka_unit_test(test_bulk_echo_in_64k_writes),
        cmocka_unit_test(test_bulk_echo_in_64k_writes_on_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
