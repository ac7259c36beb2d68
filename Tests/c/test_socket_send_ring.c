/* test_socket_send_ring.c — RLSocketSendData on a stream from a callout
 * of its socket: on the io_uring backend the bytes are queued for the
 * loop's ring (IORING_OP_SEND, submitted with the loop's next enter), on
 * epoll sent at once; either way the peer gets every byte in order. Many
 * writes on one socket keep their order, a short send is continued, a
 * send's error is reported (on io_uring by the socket's next send: the
 * one that found it was already queued), a socket invalidated with sends
 * still queued loses nothing and closes its fd once they are sent. Every
 * test runs on both backends (`make check-c`, `make check-uring`); on
 * io_uring each also checks that the ring did the sending. */
#include "testutil.h"

#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopTimer.h>
#include <crunloop/RLSocket.h>
#include <crunloop/RLData.h>
#include <crunloop/RLError.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "RLBase.h" /* rl__faults */

#if !RL_PLAIN
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_sends;       /* sends the ring completed */
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_short_sends; /* of them, short ones continued */
#endif

#define MODE "SEND"

static bool on_ring(void) {
    const char *b = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    return b && strcmp(b, "io_uring") == 0;
}

static unsigned long ring_sends(void) {
#if !RL_PLAIN
    return atomic_load(&rl__poll_uring_sends);
#else
    return 0;
#endif
}

static unsigned long ring_short_sends(void) {
#if !RL_PLAIN
    return atomic_load(&rl__poll_uring_short_sends);
#else
    return 0;
#endif
}

static char pat(size_t i) { return (char)('a' + (i * 7 + i / 251) % 26); }

/* The peer's side: reads until the end, checks every byte. */
typedef struct reader {
    int fd;
    _Atomic size_t len; /* read by the loop's thread as it goes */
    bool in_order, ended; /* read after the join */
} reader;

static void *read_all(void *p) {
    reader *r = p;
    char buf[8192];
    size_t len = 0;
    r->in_order = true;
    for (;;) {
        ssize_t n = read(r->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r->ended = n == 0;
            return NULL;
        }
        for (ssize_t i = 0; i < n; i++)
            r->in_order = r->in_order && buf[i] == pat(len + (size_t)i);
        len += (size_t)n;
        atomic_store(&r->len, len);
    }
}

/* What the server's Data callback does on its first call. */
typedef struct plan {
    size_t writes, each; /* writes of `each` bytes (varying: each + i % 7) */
    size_t sent;         /* bytes handed to RLSocketSendData */
    bool invalidate;     /* then invalidates the socket (it closes its fd) */
    bool done;
    int failures;        /* sends that returned kRLSocketError */
    int err;             /* the first failure's errno */
} plan;

static void send_bytes(RLSocketRef s, plan *p, size_t n) {
    char *b = malloc(n);
    assert_non_null(b);
    for (size_t k = 0; k < n; k++)
        b[k] = pat(p->sent + k);
    RLDataRef d = RLDataCreate(NULL, (const uint8_t *)b, (RLIndex)n);
    memset(b, '!', n); /* the data holds its own copy; the caller's buffer is free at once */
    free(b);
    RLSocketError r = RLSocketSendData(s, NULL, d, 5);
    RLRelease(d);
    if (r == kRLSocketSuccess) {
        p->sent += n;
    } else {
        if (p->failures++ == 0)
            p->err = RLErrorGetLast().systemErrno;
        if (getenv("T_DEBUG"))
            fprintf(stderr, "send failed: %s\n", RLErrorGetLast().message);
    }
}

static void plan_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address, (void)data;
    plan *p = info;
    if (type != kRLSocketDataCallBack || p->done)
        return;
    p->done = true;
    for (size_t i = 0; i < p->writes; i++)
        send_bytes(s, p, p->each + i % 7);
    if (p->invalidate)
        assert_true(RLSocketInvalidate(s));
}

/* A Data-callback socket on fd, calling cb with info, in MODE of this
 * thread's loop. */
static RLSocketRef make_with(int fd, RLSocketCallBack cb, void *info) {
    RLSocketContext c = {0, info, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, fd, kRLSocketDataCallBack, cb, &c);
    assert_non_null(s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    return s;
}

static RLSocketRef make(int fd, plan *p) { return make_with(fd, plan_cb, p); }

static void noop_timer(RLRunLoopTimerRef t, void *info) { (void)t, (void)info; }

/* Keeps the mode alive (a run of a mode with nothing in it ends at once). */
static RLRunLoopTimerRef keep_mode(void) {
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1e6, 0, 0, 0, noop_timer, NULL);
    assert_non_null(t);
    RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, MODE);
    return t;
}

/* Runs the loop until the reader is done (or `until` is true), 20 s at most. */
static void run_until(_Atomic bool *until) {
    double end = rl_test_now() + 20;
    while (!atomic_load(until) && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.02, false);
}

typedef struct joiner {
    reader *r;
    _Atomic bool done;
} joiner;

static void *join_reader(void *p) {
    joiner *j = p;
    read_all(j->r);
    atomic_store(&j->done, true);
    return NULL;
}

/* A unix stream pair whose first end (the server's, non-blocking) has a
 * 4 KB send buffer: large writes find no room and wait in the ring. */
static void small_pair(int sv[2]) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
}

/* Many writes from one callout, some larger than the socket's buffer:
 * the peer gets them all, in order; the end comes once the server closes. */
static void run_plan(plan *p, size_t expect) {
    int sv[2];
    small_pair(sv);
    RLRunLoopTimerRef keep = keep_mode();
    RLSocketRef s = make(sv[0], p);
    reader r = {.fd = sv[1]};
    joiner j = {.r = &r};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, join_reader, &j), 0);
    unsigned long before = ring_sends();
    /* The loop the writes are made on: a default loop is on epoll until a
     * socket's callout asks for the ring, so this one's (the plan's
     * writes) may be the one that moves it. */
    bool ring_first = on_ring();
    assert_int_equal(write(sv[1], "go", 2), 2); /* the server's first Data callback */
    double end = rl_test_now() + 20;
    while (!p->done && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.02, true);
    assert_true(p->done);
    if (!p->invalidate) {
        /* Every byte out, then the server's end closed. */
        while (atomic_load(&r.len) < expect && rl_test_now() < end)
            RLRunLoopRunInMode(MODE, 0.02, false);
        assert_true(RLSocketInvalidate(s));
    }
    run_until(&j.done);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(r.ended);
    assert_true(r.in_order);
    assert_int_equal(atomic_load(&r.len), expect);
    if (ring_first)
        assert_true(ring_sends() > before);
    else if (!on_ring())
        assert_int_equal(ring_sends(), before);
    RLRelease(s);
    RLRunLoopTimerInvalidate(keep);
    RLRelease(keep);
    close(sv[1]);
}

static size_t plan_total(const plan *p) {
    size_t t = 0;
    for (size_t i = 0; i < p->writes; i++)
        t += p->each + i % 7;
    return t;
}

static void test_many_writes_keep_their_order(void **state) {
    (void)state;
    plan p = {.writes = 2000, .each = 61};
    run_plan(&p, plan_total(&p));
    assert_int_equal(p.failures, 0);
}

static void test_large_writes_beyond_the_buffer_keep_their_order(void **state) {
    (void)state;
    plan p = {.writes = 40, .each = 20000};
    run_plan(&p, plan_total(&p));
    assert_int_equal(p.failures, 0);
}

static void test_short_send_is_continued(void **state) {
    (void)state;
    unsigned long before = ring_short_sends();
    bool ring_before = on_ring(); /* as run_plan's ring_first */
    atomic_store(&rl__faults, RL_FAULT_URING_SHORT_SEND);
    plan p = {.writes = 3, .each = 50000};
    run_plan(&p, plan_total(&p));
    atomic_store(&rl__faults, 0);
    assert_int_equal(p.failures, 0);
    if (ring_before)
        assert_true(ring_short_sends() > before);
}

static void test_invalidated_with_sends_queued_loses_nothing(void **state) {
    (void)state;
    plan p = {.writes = 30, .each = 30000, .invalidate = true};
    run_plan(&p, plan_total(&p));
    assert_int_equal(p.failures, 0);
}

/* The socket, its mode's only source, sends more than its buffer takes
 * and invalidates itself: the run ends (its mode is empty), and the loop
 * never runs again. As on epoll (and with CFSocketSendData), whose send
 * returns only once the kernel has every byte, the peer gets them all and
 * then the end: the ring's queued sends are seen through before the run
 * returns, not left for a run that never comes. */
static void test_a_run_that_ends_leaves_no_bytes_queued(void **state) {
    (void)state;
    int sv[2];
    small_pair(sv);
    plan p = {.writes = 8, .each = 40000, .invalidate = true};
    RLSocketRef s = make(sv[0], &p);
    reader r = {.fd = sv[1]};
    joiner j = {.r = &r};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, join_reader, &j), 0);
    assert_int_equal(write(sv[1], "go", 2), 2); /* the server's Data callback */
    for (int i = 0; i < 100 && !p.done; i++)
        (void)RLRunLoopRunInMode(MODE, 0.1, false); /* ends once the socket is gone */
    assert_true(p.done);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0, false), kRLRunLoopRunFinished); /* nothing left to run */
    /* No run from here on: the reader must get everything regardless. */
    double end = rl_test_now() + 10;
    while (!atomic_load(&j.done) && rl_test_now() < end)
        usleep(1000);
    assert_true(atomic_load(&j.done));
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(p.failures, 0);
    assert_true(r.ended);
    assert_true(r.in_order);
    assert_int_equal(atomic_load(&r.len), plan_total(&p));
    RLRelease(s);
    close(sv[1]);
}

/* The program takes the fd back (close-on-invalidate cleared) with bytes
 * still queued in the ring for want of room, invalidates the socket and
 * closes the fd at once, and the number is reused by a new socket: the
 * peer still gets every byte, then the end (the queue sent them on a
 * duplicate of its own, closed once it was empty), and the new socket's
 * peer gets none of them. */
typedef struct taken {
    plan p;
    int fd, reused[2];
} taken;

static void taken_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address, (void)data;
    taken *t = info;
    if (type != kRLSocketDataCallBack || t->p.done)
        return;
    t->p.done = true;
    for (size_t i = 0; i < t->p.writes; i++)
        send_bytes(s, &t->p, t->p.each + i % 7);
    assert_true(RLSocketSetSocketFlags(s, RLSocketGetSocketFlags(s) & ~(RLOptionFlags)kRLSocketCloseOnInvalidate));
    assert_true(RLSocketInvalidate(s));
    assert_int_equal(close(t->fd), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, t->reused), 0);
}

static void test_an_fd_taken_back_and_closed_loses_no_queued_bytes(void **state) {
    (void)state;
    int sv[2];
    small_pair(sv);
    taken t = {.p = {.writes = 6, .each = 40000}, .fd = sv[0]};
    RLRunLoopTimerRef keep = keep_mode();
    RLSocketRef s = make_with(sv[0], taken_cb, &t);
    reader r = {.fd = sv[1]};
    joiner j = {.r = &r};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, join_reader, &j), 0);
    assert_int_equal(write(sv[1], "go", 2), 2);
    double end = rl_test_now() + 20;
    while (!t.p.done && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.02, true);
    assert_true(t.p.done);
    run_until(&j.done);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.p.failures, 0);
    assert_true(r.ended);
    assert_true(r.in_order);
    assert_int_equal(atomic_load(&r.len), plan_total(&t.p));
    char c;
    assert_int_equal(recv(t.reused[1], &c, 1, MSG_DONTWAIT), -1); /* nothing came to the number's new socket */
    assert_int_equal(errno, EAGAIN);
    RLRelease(s);
    RLRunLoopTimerInvalidate(keep);
    RLRelease(keep);
    close(t.reused[0]);
    close(t.reused[1]);
    close(sv[1]);
}

/* A write of more than 4 KB is sent from the data itself on io_uring: the
 * ring holds the data (a reference) until its bytes are sent, and lets go
 * then; a shorter one is copied (the data is not held). On epoll neither
 * is held (sent at once). */
typedef struct held {
    RLDataRef big, small;
    RLIndex big_count, small_count; /* their retain counts right after the sends */
    bool done;
    bool ring; /* the callout's loop was on io_uring */
} held;

static void held_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address, (void)data;
    held *h = info;
    if (type != kRLSocketDataCallBack || h->done)
        return;
    h->done = true;
    h->ring = on_ring();
    assert_int_equal(RLSocketSendData(s, NULL, h->big, 5), kRLSocketSuccess);
    assert_int_equal(RLSocketSendData(s, NULL, h->small, 5), kRLSocketSuccess);
    h->big_count = RLGetRetainCount(h->big);
    h->small_count = RLGetRetainCount(h->small);
}

static void test_large_write_is_sent_from_its_data(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    size_t nbig = 20000, nsmall = 100;
    uint8_t *b = malloc(nbig + nsmall);
    assert_non_null(b);
    for (size_t k = 0; k < nbig + nsmall; k++)
        b[k] = (uint8_t)pat(k);
    held h = {.big = RLDataCreate(NULL, b, (RLIndex)nbig), .small = RLDataCreate(NULL, b + nbig, (RLIndex)nsmall)};
    assert_non_null(h.big);
    assert_non_null(h.small);
    RLRunLoopTimerRef keep = keep_mode();
    RLSocketRef s = make_with(sv[0], held_cb, &h);
    assert_int_equal(write(sv[1], "x", 1), 1);
    double end = rl_test_now() + 10;
    while (!h.done && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.02, true);
    assert_true(h.done);
    assert_int_equal(h.big_count, h.ring ? 2 : 1);
    assert_int_equal(h.small_count, 1);
    /* Every byte comes, in order; then the ring has let go of the data. */
    uint8_t *got = malloc(nbig + nsmall);
    assert_non_null(got);
    size_t len = 0;
    assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
    while (len < nbig + nsmall && rl_test_now() < end) {
        RLRunLoopRunInMode(MODE, 0.01, false);
        ssize_t n = read(sv[1], got + len, nbig + nsmall - len);
        if (n > 0)
            len += (size_t)n;
    }
    assert_int_equal(len, nbig + nsmall);
    assert_memory_equal(got, b, nbig + nsmall);
    while (RLGetRetainCount(h.big) != 1 && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.01, false);
    assert_int_equal(RLGetRetainCount(h.big), 1);
    assert_true(RLSocketInvalidate(s));
    RLRelease(s);
    RLRelease(h.big);
    RLRelease(h.small);
    RLRunLoopTimerInvalidate(keep);
    RLRelease(keep);
    close(sv[1]);
    free(got);
    free(b);
}

/* The peer gone: a send fails with EPIPE, as a send on epoll does (on
 * io_uring the failure is found by the ring and told by the next send). */
static void err_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address;
    plan *p = info;
    if (type != kRLSocketDataCallBack || RLDataGetLength(data) == 0)
        return;
    send_bytes(s, p, 100);
    p->done = true;
}

static void test_send_error_is_reported(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLRunLoopTimerRef keep = keep_mode();
    plan p = {0};
    RLSocketRef s = make_with(sv[0], err_cb, &p);
    assert_int_equal(write(sv[1], "x", 1), 1);
    double end = rl_test_now() + 10;
    while (!p.done && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.02, true);
    assert_true(p.done);
    assert_int_equal(p.failures, 0);
    close(sv[1]); /* the peer goes: a send breaks */
    /* From the loop's thread, outside a run now (a run would deliver the
     * end, and the socket invalidates itself): on io_uring the ring that
     * took the socket's first send takes these too, submitted at once;
     * the first may be queued before the ring finds the peer gone, the
     * next says so. */
    int tries = 0;
    while (p.failures == 0 && tries++ < 3)
        send_bytes(s, &p, 100);
    assert_int_equal(p.failures, 1);
    assert_int_equal(p.err, EPIPE);
    assert_true(RLSocketInvalidate(s));
    RLRelease(s);
    RLRunLoopTimerInvalidate(keep);
    RLRelease(keep);
}

/* Idle streams that answered through the ring hold no send buffer: 32
 * streams, each answering every byte it gets with a reply (100 bytes, then
 * 3,000), every reply read whole and in order by the peer. Then each
 * socket holds what it held after its first reply, no more (a chunk kept
 * by its queue would be the 3,000-byte one), and at most its rare part,
 * its queues and the queues' headers beyond what it held fresh; the chunks
 * its sends used wait in the thread's cache, 16 KiB of them at most. */
RL__HIDDEN size_t rl__socket_footprint(RLSocketRef s);
RL__HIDDEN size_t rl__txq_cached(void);
enum { NREPLY = 32, REPLY1 = 100, REPLY2 = 3000, REPLY_QUEUES_MAX = 300, TXQ_KEPT_MAX = 16384 / 160 };

typedef struct replier {
    size_t sent;  /* bytes of replies sent */
    size_t reply; /* the next reply's length */
    int failures;
} replier;

static void reply_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address;
    replier *r = info;
    if (type != kRLSocketDataCallBack || RLDataGetLength(data) == 0)
        return;
    for (RLIndex i = 0; i < RLDataGetLength(data); i++) {
        uint8_t *b = malloc(r->reply);
        assert_non_null(b);
        for (size_t k = 0; k < r->reply; k++)
            b[k] = (uint8_t)pat(r->sent + k);
        RLDataRef d = RLDataCreate(NULL, b, (RLIndex)r->reply);
        free(b);
        if (RLSocketSendData(s, NULL, d, 5) == kRLSocketSuccess)
            r->sent += r->reply;
        else
            r->failures++;
        RLRelease(d);
    }
}

/* Sends one byte to each stream, then runs the loop until each peer read
 * `upto` bytes of replies, checking them. */
static void reply_round(int (*sv)[2], replier *r, size_t *got, size_t upto) {
    for (int i = 0; i < NREPLY; i++)
        assert_int_equal(write(sv[i][1], "q", 1), 1);
    double end = rl_test_now() + 20;
    for (int left = NREPLY; left > 0 && rl_test_now() < end;) {
        RLRunLoopRunInMode(MODE, 0.01, false);
        left = 0;
        for (int i = 0; i < NREPLY; i++) {
            char buf[4096];
            ssize_t n;
            while (got[i] < upto && (n = read(sv[i][1], buf, sizeof buf)) > 0) {
                for (ssize_t k = 0; k < n; k++)
                    assert_int_equal(buf[k], pat(got[i] + (size_t)k));
                got[i] += (size_t)n;
            }
            left += got[i] < upto;
        }
    }
    for (int i = 0; i < NREPLY; i++) {
        assert_int_equal(got[i], upto);
        assert_int_equal(r[i].failures, 0);
    }
}

static void test_idle_streams_hold_no_send_buffer(void **state) {
    (void)state;
    static int sv[NREPLY][2];
    static replier r[NREPLY];
    RLSocketRef s[NREPLY];
    size_t fresh[NREPLY], first[NREPLY], got[NREPLY] = {0};
    RLRunLoopTimerRef keep = keep_mode();
    for (int i = 0; i < NREPLY; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        assert_int_equal(fcntl(sv[i][1], F_SETFL, O_NONBLOCK), 0);
        r[i] = (replier){.reply = REPLY1};
        s[i] = make_with(sv[i][0], reply_cb, &r[i]);
        fresh[i] = rl__socket_footprint(s[i]);
    }
    unsigned long before = ring_sends();
    bool ring_first = on_ring(); /* as run_plan's */
    reply_round(sv, r, got, REPLY1);
    for (int i = 0; i < NREPLY; i++) {
        first[i] = rl__socket_footprint(s[i]);
        assert_true(first[i] <= fresh[i] + REPLY_QUEUES_MAX);
        r[i].reply = REPLY2;
    }
    reply_round(sv, r, got, REPLY1 + REPLY2);
    for (int i = 0; i < NREPLY; i++)
        assert_int_equal(rl__socket_footprint(s[i]), first[i]);
    if (ring_first)
        assert_true(ring_sends() - before >= 2 * NREPLY);
    assert_true(rl__txq_cached() <= TXQ_KEPT_MAX);
    for (int i = 0; i < NREPLY; i++) {
        assert_true(RLSocketInvalidate(s[i]));
        RLRelease(s[i]);
        close(sv[i][1]);
    }
    RLRunLoopTimerInvalidate(keep);
    RLRelease(keep);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_writes_keep_their_order),
        cmocka_unit_test(test_large_writes_beyond_the_buffer_keep_their_order),
        cmocka_unit_test(test_short_send_is_continued),
        cmocka_unit_test(test_invalidated_with_sends_queued_loses_nothing),
        cmocka_unit_test(test_a_run_that_ends_leaves_no_bytes_queued),
        cmocka_unit_test(test_an_fd_taken_back_and_closed_loses_no_queued_bytes),
        cmocka_unit_test(test_send_error_is_reported),
        cmocka_unit_test(test_large_write_is_sent_from_its_data),
        cmocka_unit_test(test_idle_streams_hold_no_send_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
