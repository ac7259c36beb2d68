/* test_socket_cf.c — RLSocket where CFSocket's semantics decide: a stream
 * with a Data callback that reaches its end (or fails) gets one empty data
 * and is then invalidated, as CFSocket is (its fd closed if
 * kRLSocketCloseOnInvalidate, its context released once), also on the
 * loop's kept path; a Read callback at the end and an empty datagram leave
 * the socket valid. (The same against CF itself:
 * Tests/diff/scenarios/socket_eof.c.) */
#include "fdutil.h"
#include "testutil.h"
#include "trace.h"

#include "internal.h" /* RL_TRICK_KEPT */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

RL__HIDDEN unsigned long rl__fd_kept_calls(RLRunLoopRef rl);

#define MODE "SOCKCF"

/* ---- a socket whose context counts its retains and releases ---- */

typedef struct probe {
    const char *name;
    int retains, releases;
    bool valid_in_last_call; /* RLSocketIsValid inside the last callback */
    int native_in_last_call;
    int calls;
    /* What the callback does when it sees the end (an empty data). */
    bool invalidate_at_end, release_at_end;
    RLSocketRef self; /* release_at_end: the reference it drops */
} probe;

static const void *probe_retain(const void *info) {
    ((probe *)info)->retains++;
    return info;
}

static void probe_release(const void *info) { ((probe *)info)->releases++; }

static void probe_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address;
    probe *p = info;
    p->calls++;
    p->valid_in_last_call = RLSocketIsValid(s);
    p->native_in_last_call = RLSocketGetNative(s);
    if (type == kRLSocketDataCallBack) {
        RLIndex n = RLDataGetLength(data);
        rl_trace_addf("%s:data%ld", p->name, (long)n);
        if (n == 0 && p->invalidate_at_end)
            assert_true(RLSocketInvalidate(s));
        if (n == 0 && p->release_at_end) {
            RLSocketRef mine = p->self;
            p->self = NULL;
            RLRelease(mine);
        }
    } else if (type == kRLSocketReadCallBack) {
        char buf[16];
        ssize_t n = read(RLSocketGetNative(s), buf, sizeof buf);
        rl_trace_addf("%s:read%ld", p->name, (long)n);
    } else {
        rl_trace_addf("%s:type%lu", p->name, (unsigned long)type);
    }
}

/* A socket on fd with probe p as its context, its source in MODE (the
 * source reference returned in *src when src is not NULL). */
static RLSocketRef probed(int fd, RLOptionFlags types, probe *p, RLRunLoopSourceRef *src) {
    RLSocketContext c = {0, p, probe_retain, probe_release, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, fd, types, probe_cb, &c);
    assert_non_null(s);
    assert_int_equal(p->retains, 1);
    RLRunLoopSourceRef rs = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(rs);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), rs, MODE));
    if (src)
        *src = rs;
    else
        RLRelease(rs);
    return s;
}

/* Runs MODE until the trace has `want` entries (at most 10 s). */
static int trace_entries(void) {
    const char *t = rl_trace_get();
    int n = *t ? 1 : 0;
    for (; *t; t++)
        n += *t == ' ';
    return n;
}

static void run_until(int want) {
    double end = rl_test_now() + 10;
    while (trace_entries() < want && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
}

/* A run of MODE that delivers nothing more (the mode kept from being empty
 * by the caller) and sleeps rather than spins. */
static void assert_quiet(void) {
    int before = trace_entries();
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes(MODE, &wakes);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.2, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(trace_entries(), before);
    rl_test_uncount_wakes(o);
}

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

/* What CF does once the callback returned: invalid, no native fd, the fd
 * closed, the source gone from the loop, the context released once. */
static void assert_invalidated_at_end(RLSocketRef s, RLRunLoopSourceRef src, int fd, const probe *p) {
    assert_false(RLSocketIsValid(s));
    assert_int_equal(RLSocketGetNative(s), -1);
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(fd_open(fd));
    if (src)
        assert_false(RLRunLoopSourceIsValid(src));
    assert_int_equal(p->retains, 1);
    assert_int_equal(p->releases, 1);
}

/* ---- end of stream with a Data callback ---- */

static void test_data_at_end_of_stream_invalidates_after_the_callback(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    probe p = {.name = "S"};
    RLRunLoopSourceRef src;
    RLSocketRef s = probed(sv[0], kRLSocketDataCallBack, &p, &src);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(write(sv[1], "hi", 2), 2);
    run_until(1);
    assert_trace("S:data2");
    assert_true(RLSocketIsValid(s));
    close(sv[1]);
    run_until(2);
    assert_trace("S:data2 S:data0");
    /* Valid during the callback (CF invalidates after it returns)... */
    assert_true(p.valid_in_last_call);
    assert_int_equal(p.native_in_last_call, sv[0]);
    /* ...invalid after it. */
    assert_invalidated_at_end(s, src, sv[0], &p);
    assert_quiet();
    /* Invalidating again changes nothing; nothing is released twice. */
    assert_true(RLSocketInvalidate(s));
    assert_int_equal(p.releases, 1);
    assert_null(RLSocketCreateRunLoopSource(NULL, s, 0));
    assert_rl_error(kRLErrorInvalidObject);
    RLRelease(s);
    RLRelease(src);
    rl_test_unkeep(keep);
}

/* The bytes before the end come first, in the same or the next wake; the
 * end still comes once and invalidates. */
static void test_data_then_end_queued_together(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    probe p = {.name = "S"};
    RLSocketRef s = probed(sv[0], kRLSocketDataCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(write(sv[1], "abc", 3), 3);
    close(sv[1]);
    run_until(2);
    assert_trace("S:data3 S:data0");
    assert_invalidated_at_end(s, NULL, sv[0], &p);
    assert_quiet();
    RLRelease(s);
    rl_test_unkeep(keep);
}

/* A read error (the peer reset the connection) is an end too: one empty
 * data, then the socket is invalidated. */
static void test_data_read_error_invalidates(void **state) {
    (void)state;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 4), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    int srv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(srv >= 0);
    close(l);
    probe p = {.name = "S"};
    RLSocketRef s = probed(srv, kRLSocketDataCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    /* Closing with a zero linger time resets the connection. */
    struct linger lg = {1, 0};
    assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(c);
    run_until(1);
    assert_trace("S:data0");
    assert_invalidated_at_end(s, NULL, srv, &p);
    assert_quiet();
    RLRelease(s);
    rl_test_unkeep(keep);
}

/* Without kRLSocketCloseOnInvalidate the end invalidates the socket but
 * leaves its fd open: it is the caller's. */
static void test_end_without_close_on_invalidate_keeps_the_fd(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    probe p = {.name = "S"};
    RLSocketRef s = probed(sv[0], kRLSocketDataCallBack, &p, NULL);
    assert_true(RLSocketSetSocketFlags(s, kRLSocketAutomaticallyReenableDataCallBack));
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    close(sv[1]);
    run_until(1);
    assert_trace("S:data0");
    assert_false(RLSocketIsValid(s));
    assert_true(fd_open(sv[0]));
    assert_int_equal(p.releases, 1);
    close(sv[0]);
    RLRelease(s);
    rl_test_unkeep(keep);
}

/* The callback invalidates the socket itself at the end, or releases its
 * last reference too (what ported code does): the library's own
 * invalidation after it changes nothing, the context is released once,
 * nothing is used after it is freed (ASan). */
static void test_callback_invalidates_or_releases_at_the_end(void **state) {
    (void)state;
    for (int release = 0; release <= 1; release++) {
        rl_trace_clear();
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        probe p = {.name = "S", .invalidate_at_end = true, .release_at_end = release};
        RLSocketRef s = probed(sv[0], kRLSocketDataCallBack, &p, NULL);
        p.self = s;
        RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
        close(sv[1]);
        run_until(1);
        assert_trace("S:data0");
        assert_false(fd_open(sv[0]));
        assert_int_equal(p.retains, 1);
        assert_int_equal(p.releases, 1);
        if (!release) {
            assert_false(RLSocketIsValid(s));
            RLRelease(s);
        } else {
            assert_null(p.self);
        }
        assert_quiet();
        rl_test_unkeep(keep);
    }
}

/* Data muted when the peer closes (no auto-re-enable): nothing until
 * enabled, then the end, then invalid. */
static void test_end_waits_while_data_is_disabled(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    probe p = {.name = "S"};
    RLSocketRef s = probed(sv[0], kRLSocketDataCallBack, &p, NULL);
    assert_true(RLSocketSetSocketFlags(s, kRLSocketCloseOnInvalidate));
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(write(sv[1], "x", 1), 1);
    run_until(1);
    close(sv[1]);
    assert_quiet();
    assert_true(RLSocketIsValid(s));
    assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
    run_until(2);
    assert_trace("S:data1 S:data0");
    assert_invalidated_at_end(s, NULL, sv[0], &p);
    RLRelease(s);
    rl_test_unkeep(keep);
}

/* On the loop's kept path (Data left enabled across wakes after a
 * warm-up): the end still invalidates, once, and the loop then sleeps. */
static void test_end_on_the_kept_path(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    probe p = {.name = "S"};
    RLRunLoopSourceRef src;
    RLSocketRef s = probed(sv[0], kRLSocketDataCallBack | kRLSocketWriteCallBack, &p, &src);
    assert_true(RLSocketDisableCallBacks(s, kRLSocketWriteCallBack));
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    unsigned long before = rl__fd_kept_calls(rl);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(write(sv[1], "k", 1), 1);
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    }
    if (RL_TRICK_KEPT)
        assert_true(rl__fd_kept_calls(rl) - before >= 8);
    rl_trace_clear();
    /* The Write callback wanted in the same wake as the end: it does not
     * come after the invalidation. */
    assert_true(RLSocketEnableCallBacks(s, kRLSocketWriteCallBack));
    close(sv[1]);
    run_until(1);
    assert_trace("S:data0");
    assert_invalidated_at_end(s, src, sv[0], &p);
    assert_quiet();
    RLRelease(s);
    RLRelease(src);
    rl_test_unkeep(keep);
}

/* ---- what stays valid, as in CF ---- */

/* A Read callback at the end: the callback reads 0; the socket stays
 * valid (the caller decides). */
static void test_read_callback_at_end_stays_valid(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    probe p = {.name = "S"};
    RLSocketRef s = probed(sv[0], kRLSocketReadCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    close(sv[1]);
    run_until(1);
    assert_trace("S:read0");
    assert_true(RLSocketIsValid(s));
    assert_int_equal(RLSocketGetNative(s), sv[0]);
    assert_int_equal(p.releases, 0);
    assert_true(RLSocketInvalidate(s));
    assert_int_equal(p.releases, 1);
    assert_false(fd_open(sv[0]));
    RLRelease(s);
    rl_test_unkeep(keep);
}

/* An empty datagram is not an end: an empty data, the socket valid. */
static void test_empty_datagram_keeps_the_socket_valid(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    probe p = {.name = "D"};
    RLSocketRef s = probed(sv[0], kRLSocketDataCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(send(sv[1], "", 0, 0), 0);
    run_until(1);
    assert_int_equal(send(sv[1], "z", 1, 0), 1);
    run_until(2);
    assert_trace("D:data0 D:data1");
    assert_true(RLSocketIsValid(s));
    assert_int_equal(p.releases, 0);
    assert_true(RLSocketInvalidate(s));
    assert_int_equal(p.releases, 1);
    RLRelease(s);
    close(sv[1]);
    rl_test_unkeep(keep);
}

/* A datagram socket's error (here ECONNREFUSED, from the ICMP port
 * unreachable that answered a send) is an empty data, as in CF, and the
 * socket stays valid: the error is cleared by the read. */
static void test_datagram_error_is_an_empty_data(void **state) {
    (void)state;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int gone = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(gone, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(gone, (struct sockaddr *)&a, &len), 0);
    close(gone); /* nobody listens there now */
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(u, (struct sockaddr *)&a, sizeof a), 0);
    probe p = {.name = "U"};
    RLSocketRef s = probed(u, kRLSocketDataCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(send(u, "x", 1, 0), 1);
    run_until(1);
    assert_trace("U:data0");
    assert_true(RLSocketIsValid(s));
    assert_quiet();
    assert_true(RLSocketInvalidate(s));
    assert_int_equal(p.releases, 1);
    RLRelease(s);
    rl_test_unkeep(keep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_data_at_end_of_stream_invalidates_after_the_callback, rl_trace_setup),
        cmocka_unit_test_setup(test_data_then_end_queued_together, rl_trace_setup),
        cmocka_unit_test_setup(test_data_read_error_invalidates, rl_trace_setup),
        cmocka_unit_test_setup(test_end_without_close_on_invalidate_keeps_the_fd, rl_trace_setup),
        cmocka_unit_test_setup(test_callback_invalidates_or_releases_at_the_end, rl_trace_setup),
        cmocka_unit_test_setup(test_end_waits_while_data_is_disabled, rl_trace_setup),
        cmocka_unit_test_setup(test_end_on_the_kept_path, rl_trace_setup),
        cmocka_unit_test_setup(test_read_callback_at_end_stays_valid, rl_trace_setup),
        cmocka_unit_test_setup(test_empty_datagram_keeps_the_socket_valid, rl_trace_setup),
        cmocka_unit_test_setup(test_datagram_error_is_an_empty_data, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
