/* test_socket_cf.c — RLSocket where CFSocket's semantics decide: a stream
 * with a Data callback that reaches its end (or fails) gets one empty data
 * and is then invalidated, as CFSocket is (its fd closed if
 * kRLSocketCloseOnInvalidate, its context released once), also on the
 * loop's kept path; a Read callback at the end and an empty datagram leave
 * the socket valid; a datagram socket's error is an empty data. Socket
 * signatures: sockets bound or connected as a signature says (each kind
 * of timeout, refusal, no answer in time, misuse) and a stream pair to a
 * signature's address. (The same against CF itself:
 * Tests/diff/scenarios/socket_eof.c and socket_signature.c.) */
#include "fdutil.h"
#include "testutil.h"
#include "trace.h"

#include "internal.h" /* RL_TRICK_KEPT */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

RL__HIDDEN unsigned long rl__fd_kept_calls(RLRunLoopRef rl);
RL__HIDDEN extern _Atomic unsigned long rl__socket_eof_asks;

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
        if (n < 0)
            rl_trace_addf("%s:read-1:%s", p->name, errno == ECONNRESET ? "ECONNRESET" : strerror(errno));
        else
            rl_trace_addf("%s:read%ld", p->name, (long)n);
    } else {
        rl_trace_addf("%s:type%lu", p->name, (unsigned long)type);
    }
}

/* s's source, made and added to the current loop in MODE. */
static RLRunLoopSourceRef scheduled(RLSocketRef s) {
    RLRunLoopSourceRef rs = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(rs);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), rs, MODE));
    return rs;
}

/* A socket on fd with probe p as its context, its source in MODE (the
 * source reference returned in *src when src is not NULL). */
static RLSocketRef probed(int fd, RLOptionFlags types, probe *p, RLRunLoopSourceRef *src) {
    RLSocketContext c = {0, p, probe_retain, probe_release, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, fd, types, probe_cb, &c);
    assert_non_null(s);
    assert_int_equal(p->retains, 1);
    RLRunLoopSourceRef rs = scheduled(s);
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
static void assert_quiet(void) { rl_test_assert_quiet(MODE, trace_entries); }

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

/* A loopback TCP socket listening with the given backlog on a port of
 * the system's choice, its address in *a. */
static int tcp_listening(int backlog, struct sockaddr_in *a) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    *a = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(l, (struct sockaddr *)a, sizeof *a), 0);
    assert_int_equal(listen(l, backlog), 0);
    socklen_t len = sizeof *a;
    assert_int_equal(getsockname(l, (struct sockaddr *)a, &len), 0);
    return l;
}

/* A connected loopback TCP pair: *srv the accepted end, *cli the other. */
static void tcp_pair(int *srv, int *cli) {
    struct sockaddr_in a;
    int l = tcp_listening(4, &a);
    *cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(*cli >= 0);
    assert_int_equal(connect(*cli, (struct sockaddr *)&a, sizeof a), 0);
    *srv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(*srv >= 0);
    close(l);
}

/* Closes fd with a zero linger time, which resets the connection. */
static void close_with_reset(int fd) {
    struct linger lg = {1, 0};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(fd);
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
    int srv, c;
    tcp_pair(&srv, &c);
    probe p = {.name = "S"};
    RLSocketRef s = probed(srv, kRLSocketDataCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    close_with_reset(c);
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

/* The peer resets the connection under a Read callback: the callback's
 * own read gets the error (ECONNRESET), as with CFSocket, which reads
 * nothing before a Read callback; kRLSocketLeaveErrors or not changes
 * nothing here. The read that took the error leaves the end: one more
 * callback reads 0, then nothing; the socket stays valid. */
static void test_read_callback_sees_the_reset(void **state) {
    (void)state;
    for (int leave = 0; leave <= 1; leave++) {
        rl_trace_clear();
        int srv, c;
        tcp_pair(&srv, &c);
        probe p = {.name = "S"};
        RLSocketRef s = probed(srv, kRLSocketReadCallBack, &p, NULL);
        if (leave)
            assert_true(RLSocketSetSocketFlags(s, RLSocketGetSocketFlags(s) | kRLSocketLeaveErrors));
        RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
        close_with_reset(c);
        run_until(2);
        assert_trace("S:read-1:ECONNRESET S:read0");
        assert_quiet();
        assert_true(RLSocketIsValid(s));
        assert_true(RLSocketInvalidate(s));
        assert_false(fd_open(srv));
        RLRelease(s);
        rl_test_unkeep(keep);
    }
}

/* Bytes then a reset: the bytes are read first, then the error, then the
 * end. */
static void test_read_callback_bytes_then_reset(void **state) {
    (void)state;
    int srv, c;
    tcp_pair(&srv, &c);
    probe p = {.name = "S"};
    RLSocketRef s = probed(srv, kRLSocketReadCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(write(c, "abc", 3), 3);
    run_until(1);
    assert_trace("S:read3");
    close_with_reset(c);
    run_until(3);
    assert_trace("S:read3 S:read-1:ECONNRESET S:read0");
    assert_quiet();
    assert_true(RLSocketInvalidate(s));
    RLRelease(s);
    rl_test_unkeep(keep);
}

/* A Read callback costs no system call of the socket's own: whether the
 * stream ended is asked of the kernel only when the loop's report says
 * the peer may have hung up. Bytes and the end queued together: the
 * bytes first, then the end, then nothing. */
static void test_read_callback_asks_for_the_end_only_at_a_hang_up(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    probe p = {.name = "S"};
    RLSocketRef s = probed(sv[0], kRLSocketReadCallBack, &p, NULL);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    unsigned long asks = rl__socket_eof_asks;
    for (int i = 1; i <= 20; i++) {
        assert_int_equal(write(sv[1], "x", 1), 1);
        run_until(i);
    }
    assert_int_equal(p.calls, 20);
    assert_int_equal(rl__socket_eof_asks - asks, 0);
    rl_trace_clear();
    assert_int_equal(write(sv[1], "abc", 3), 3);
    assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
    run_until(2);
    assert_trace("S:read3 S:read0");
    assert_quiet();
    assert_true(rl__socket_eof_asks - asks >= 1);
    assert_true(RLSocketIsValid(s));
    assert_true(RLSocketInvalidate(s));
    RLRelease(s);
    close(sv[1]);
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

/* ---- socket signatures ---- */

static RLDataRef loopback(uint16_t port) {
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return RLDataCreate(NULL, (const uint8_t *)&sin, sizeof sin);
}

static uint16_t port_of(RLDataRef address) {
    struct sockaddr_in sin;
    memcpy(&sin, RLDataGetBytePtr(address), sizeof sin);
    return ntohs(sin.sin_port);
}

/* A loopback port nobody listens on (bound, read, closed). */
static RLDataRef closed_port(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(t, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(t, (struct sockaddr *)&a, &len), 0);
    close(t);
    return RLDataCreate(NULL, (const uint8_t *)&a, sizeof a);
}

static int open_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 4096; fd++)
        n += fd_open(fd);
    return n;
}

static RLSocketRef tcp_listener(probe *p, RLRunLoopSourceRef *src) {
    RLDataRef any = loopback(0);
    RLSocketSignature sig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, any};
    RLSocketContext c = {0, p, probe_retain, probe_release, NULL};
    RLSocketRef l = RLSocketCreateWithSocketSignature(NULL, &sig, kRLSocketAcceptCallBack, probe_cb, &c);
    RLRelease(any);
    assert_non_null(l);
    *src = scheduled(l);
    return l;
}

/* CreateWithSocketSignature binds and, for a stream, listens: a plain
 * connect to its address is accepted. */
static void test_create_with_signature_listens(void **state) {
    (void)state;
    probe p = {.name = "L"};
    RLRunLoopSourceRef src;
    RLSocketRef l = tcp_listener(&p, &src);
    RLDataRef addr = RLSocketCopyAddress(l);
    assert_non_null(addr);
    assert_true(port_of(addr) != 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(c, (const struct sockaddr *)RLDataGetBytePtr(addr), (socklen_t)RLDataGetLength(addr)), 0);
    run_until(1);
    assert_trace("L:type2");
    close(c);
    RLRelease(addr);
    assert_true(RLSocketInvalidate(l));
    assert_int_equal(p.releases, 1);
    RLRelease(l);
    RLRelease(src);
}

/* A datagram signature binds (no listen): datagrams sent to the address
 * come to its Data callback. */
static void test_create_with_signature_datagram_binds(void **state) {
    (void)state;
    RLDataRef any = loopback(0);
    RLSocketSignature sig = {PF_INET, SOCK_DGRAM, 0, any};
    probe p = {.name = "D"};
    RLSocketContext c = {0, &p, probe_retain, probe_release, NULL};
    RLSocketRef d = RLSocketCreateWithSocketSignature(NULL, &sig, kRLSocketDataCallBack, probe_cb, &c);
    RLRelease(any);
    assert_non_null(d);
    RLRunLoopSourceRef rs = scheduled(d);
    RLDataRef addr = RLSocketCopyAddress(d);
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_int_equal(sendto(u, "abc", 3, 0, (const struct sockaddr *)RLDataGetBytePtr(addr),
                            (socklen_t)RLDataGetLength(addr)),
                     3);
    run_until(1);
    assert_trace("D:data3");
    close(u);
    RLRelease(addr);
    assert_true(RLSocketInvalidate(d));
    RLRelease(d);
    RLRelease(rs);
}

/* CreateConnectedToSocketSignature with each kind of timeout: > 0 and 0
 * return a connected socket; < 0 returns at once and the Connect callback
 * reports the result. */
static void test_connected_to_signature_with_each_timeout(void **state) {
    (void)state;
    probe lp = {.name = "L"};
    RLRunLoopSourceRef lsrc;
    RLSocketRef l = tcp_listener(&lp, &lsrc);
    RLDataRef addr = RLSocketCopyAddress(l);
    RLSocketSignature sig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, addr};
    const double timeouts[] = {5.0, 0.0};
    for (size_t i = 0; i < 2; i++) {
        probe p = {.name = "C"};
        RLSocketContext c = {0, &p, probe_retain, probe_release, NULL};
        RLSocketRef s = RLSocketCreateConnectedToSocketSignature(NULL, &sig, kRLSocketDataCallBack, probe_cb, &c,
                                                                 timeouts[i]);
        assert_non_null(s);
        assert_true(RLSocketIsValid(s));
        RLDataRef peer = RLSocketCopyPeerAddress(s);
        assert_non_null(peer);
        assert_true(RLDataEqual(peer, addr));
        RLRelease(peer);
        assert_true(RLSocketInvalidate(s));
        assert_int_equal(p.retains, 1);
        assert_int_equal(p.releases, 1);
        RLRelease(s);
    }
    /* In the background: the Connect callback says it is done. */
    probe p = {.name = "B"};
    RLSocketContext c = {0, &p, probe_retain, probe_release, NULL};
    RLSocketRef s = RLSocketCreateConnectedToSocketSignature(NULL, &sig, kRLSocketConnectCallBack, probe_cb, &c, -1);
    assert_non_null(s);
    RLRunLoopSourceRef rs = scheduled(s);
    double end = rl_test_now() + 10; /* the listener's accepts come too */
    while (!strstr(rl_trace_get(), "B:type4") && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    assert_non_null(strstr(rl_trace_get(), "B:type4"));
    RLDataRef peer = RLSocketCopyPeerAddress(s);
    assert_non_null(peer);
    assert_true(RLDataEqual(peer, addr));
    RLRelease(peer);
    assert_true(RLSocketInvalidate(s));
    RLRelease(s);
    RLRelease(rs);
    RLRelease(addr);
    assert_true(RLSocketInvalidate(l));
    RLRelease(l);
    RLRelease(lsrc);
}

static int connect_error;
static void connect_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)address, (void)info;
    if (type == kRLSocketConnectCallBack) {
        connect_error = data ? *(const int32_t *)data : 0;
        rl_trace_add("connect");
    }
}

/* Nobody listens at the address: with a wait, NULL and the connect's
 * errno, nothing left open, the context released again; in the
 * background, a socket whose Connect callback reports the refusal. */
static void test_connected_to_signature_refused(void **state) {
    (void)state;
    RLDataRef addr = closed_port();
    RLSocketSignature sig = {PF_INET, SOCK_STREAM, 0, addr};
    int fds = open_fds();
    const double timeouts[] = {5.0, 0.0};
    for (size_t i = 0; i < 2; i++) {
        probe p = {.name = "C"};
        RLSocketContext c = {0, &p, probe_retain, probe_release, NULL};
        assert_null(RLSocketCreateConnectedToSocketSignature(NULL, &sig, kRLSocketDataCallBack, probe_cb, &c,
                                                             timeouts[i]));
        RLError e = RLErrorGetLast();
        assert_int_equal(e.code, kRLErrorSystem);
        assert_int_equal(e.systemErrno, ECONNREFUSED);
        assert_int_equal(p.retains, 1);
        assert_int_equal(p.releases, 1);
        assert_int_equal(open_fds(), fds);
    }
    RLSocketRef s = RLSocketCreateConnectedToSocketSignature(NULL, &sig, kRLSocketConnectCallBack, connect_cb, NULL, -1);
    assert_non_null(s);
    RLRunLoopSourceRef rs = scheduled(s);
    connect_error = 0;
    run_until(1);
    assert_trace("connect");
    assert_int_equal(connect_error, ECONNREFUSED);
    assert_true(RLSocketInvalidate(s));
    RLRelease(s);
    RLRelease(rs);
    RLRelease(addr);
    assert_int_equal(open_fds(), fds);
}

/* A listener whose queue is full drops new connection requests: a connect
 * with a timeout gives up (kRLErrorTimedOut), nothing left open. */
static void test_connected_to_signature_times_out(void **state) {
    (void)state;
    struct sockaddr_in a;
    int l = tcp_listening(0, &a);
    /* Fill its queue (never accepted). */
    int filler[4];
    for (int i = 0; i < 4; i++) {
        filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int r = connect(filler[i], (struct sockaddr *)&a, sizeof a);
        assert_true(r == 0 || errno == EINPROGRESS);
    }
    usleep(50 * 1000);
    RLDataRef addr = RLDataCreate(NULL, (const uint8_t *)&a, sizeof a);
    RLSocketSignature sig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, addr};
    int fds = open_fds();
    probe p = {.name = "C"};
    RLSocketContext c = {0, &p, probe_retain, probe_release, NULL};
    double t0 = rl_test_now();
    assert_null(RLSocketCreateConnectedToSocketSignature(NULL, &sig, kRLSocketDataCallBack, probe_cb, &c, 0.3));
    assert_rl_error(kRLErrorTimedOut);
    assert_true(rl_test_now() - t0 < 10); /* an upper bound against a hang only */
    assert_int_equal(p.retains, 1);
    assert_int_equal(p.releases, 1);
    assert_int_equal(open_fds(), fds);
    RLRelease(addr);
    for (int i = 0; i < 4; i++)
        close(filler[i]);
    close(l);
}

static void test_signature_misuse(void **state) {
    (void)state;
    int fds = open_fds();
    RLDataRef any = loopback(0);
    RLSocketSignature ok = {PF_INET, SOCK_STREAM, IPPROTO_TCP, any};
    probe p = {.name = "M"};
    RLSocketContext c = {0, &p, probe_retain, probe_release, NULL};
    for (int connected = 0; connected <= 1; connected++) {
#define CREATE(sig, types, ctx)                                                                          \
    (connected ? RLSocketCreateConnectedToSocketSignature(NULL, (sig), (types), probe_cb, (ctx), 1.0)     \
               : RLSocketCreateWithSocketSignature(NULL, (sig), (types), probe_cb, (ctx)))
        assert_rl_fails(CREATE(NULL, kRLSocketDataCallBack, &c), kRLErrorInvalidArgument);
        RLSocketSignature no_address = {PF_INET, SOCK_STREAM, 0, NULL};
        assert_rl_fails(CREATE(&no_address, kRLSocketDataCallBack, &c), kRLErrorInvalidArgument);
        RLStringRef str = RLStringCreateWithCString(NULL, "127.0.0.1", kRLStringEncodingUTF8);
        RLSocketSignature not_data = {PF_INET, SOCK_STREAM, 0, (RLDataRef)str};
        assert_rl_fails(CREATE(&not_data, kRLSocketDataCallBack, &c), kRLErrorInvalidObject);
        RLRelease(str);
        RLDataRef tiny = RLDataCreate(NULL, (const uint8_t *)"x", 1);
        RLSocketSignature short_address = {PF_INET, SOCK_STREAM, 0, tiny};
        assert_rl_fails(CREATE(&short_address, kRLSocketDataCallBack, &c), kRLErrorInvalidArgument);
        RLRelease(tiny);
        assert_rl_fails(CREATE(&ok, 0x40, &c), kRLErrorInvalidArgument);
        RLSocketContext v1 = {1, &p, probe_retain, probe_release, NULL};
        assert_rl_fails(CREATE(&ok, kRLSocketDataCallBack, &v1), kRLErrorInvalidArgument);
        /* No such family: socket(2) refuses it. */
        RLSocketSignature bad_family = {12345, SOCK_STREAM, 0, any};
        assert_null(CREATE(&bad_family, kRLSocketDataCallBack, &c));
        RLError e = RLErrorGetLast();
        assert_int_equal(e.code, kRLErrorSystem);
        assert_int_equal(e.systemErrno, EAFNOSUPPORT);
        /* An IPv6 socket for an IPv4 address. */
        RLSocketSignature mismatch = {PF_INET6, SOCK_STREAM, 0, any};
        assert_null(CREATE(&mismatch, kRLSocketDataCallBack, &c));
        assert_int_equal(RLErrorGetLast().code, kRLErrorSystem);
#undef CREATE
    }
    assert_rl_fails(RLSocketCreateConnectedToSocketSignature(NULL, &ok, 0, NULL, NULL, NAN), kRLErrorInvalidArgument);
    /* The address is taken: bind fails, nothing is left open. */
    probe lp = {.name = "L"};
    RLRunLoopSourceRef lsrc;
    RLSocketRef l = tcp_listener(&lp, &lsrc);
    RLDataRef taken = RLSocketCopyAddress(l);
    RLSocketSignature in_use = {PF_INET, SOCK_STREAM, 0, taken};
    int before = open_fds();
    assert_null(RLSocketCreateWithSocketSignature(NULL, &in_use, kRLSocketAcceptCallBack, probe_cb, &c));
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorSystem);
    assert_int_equal(e.systemErrno, EADDRINUSE);
    assert_int_equal(open_fds(), before);
    RLRelease(taken);
    assert_true(RLSocketInvalidate(l));
    RLRelease(l);
    RLRelease(lsrc);
    RLRelease(any);
    /* Every socket made for a signature that failed took the context and
     * gave it back. */
    assert_int_equal(p.retains, p.releases);
    assert_int_equal(open_fds(), fds);
}

/* ---- a stream pair to a peer's socket signature ---- */

static void test_stream_pair_with_peer_signature(void **state) {
    (void)state;
    int fds = open_fds();
    struct sockaddr_in a;
    int l = tcp_listening(4, &a);
    RLDataRef addr = RLDataCreate(NULL, (const uint8_t *)&a, sizeof a);
    RLSocketSignature sig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, addr};
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreatePairWithPeerSocketSignature(NULL, &sig, &r, &w));
    RLRelease(addr); /* copied */
    RLTypeRef close_it = RLReadStreamCopyProperty(r, kRLStreamPropertyShouldCloseNativeSocket);
    assert_true(close_it == (RLTypeRef)kRLBooleanTrue);
    RLRelease(close_it);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusNotOpen);
    assert_true(RLReadStreamOpen(r));
    assert_true(RLWriteStreamOpen(w));
    /* Write waits for the connection, as on any opening socket stream. */
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"ping", 4), 4);
    int srv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(srv >= 0);
    char buf[8];
    size_t got = 0;
    while (got < 4) {
        ssize_t n = read(srv, buf + got, 4 - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_memory_equal(buf, "ping", 4);
    RLDataRef native = RLReadStreamCopyProperty(r, kRLStreamPropertySocketNativeHandle);
    assert_non_null(native);
    int fd;
    memcpy(&fd, RLDataGetBytePtr(native), sizeof fd);
    RLRelease(native);
    assert_int_equal(write(srv, "pong", 4), 4);
    close(srv);
    uint8_t in[8];
    RLIndex n, total = 0;
    while ((n = RLReadStreamRead(r, in + total, (RLIndex)sizeof in - total)) > 0)
        total += n;
    assert_int_equal(n, 0);
    assert_int_equal(total, 4);
    assert_memory_equal(in, "pong", 4);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    assert_true(fd_open(fd));
    RLRelease(r);
    RLRelease(w);
    assert_false(fd_open(fd)); /* the library's socket, closed with the streams */
    close(l);
    assert_int_equal(open_fds(), fds);
}

static void test_stream_pair_with_peer_signature_errors(void **state) {
    (void)state;
    /* Nobody listens: Open succeeds, then the stream fails with the
     * connect's errno. */
    RLDataRef addr = closed_port();
    RLSocketSignature sig = {PF_INET, SOCK_STREAM, 0, addr};
    RLReadStreamRef r = NULL;
    assert_true(RLStreamCreatePairWithPeerSocketSignature(NULL, &sig, &r, NULL));
    assert_true(RLReadStreamOpen(r));
    uint8_t b[4];
    assert_int_equal(RLReadStreamRead(r, b, sizeof b), -1);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusError);
    RLStreamError e = RLReadStreamGetError(r);
    assert_int_equal(e.domain, kRLStreamErrorDomainPOSIX);
    assert_int_equal(e.error, ECONNREFUSED);
    RLRelease(r);
    /* No such family: the socket cannot be made, which Open's outcome says. */
    RLSocketSignature bad_family = {12345, SOCK_STREAM, 0, addr};
    RLWriteStreamRef w = NULL;
    assert_true(RLStreamCreatePairWithPeerSocketSignature(NULL, &bad_family, NULL, &w));
    assert_true(RLWriteStreamOpen(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"x", 1), -1);
    e = RLWriteStreamGetError(w);
    assert_int_equal(e.domain, kRLStreamErrorDomainPOSIX);
    assert_int_equal(e.error, EAFNOSUPPORT);
    RLRelease(w);

    /* Misuse: false, both outputs NULL, nothing made. */
    r = (RLReadStreamRef)1;
    w = (RLWriteStreamRef)1;
    assert_rl_fails(RLStreamCreatePairWithPeerSocketSignature(NULL, NULL, &r, &w), kRLErrorInvalidArgument);
    assert_null(r);
    assert_null(w);
    RLSocketSignature no_address = {PF_INET, SOCK_STREAM, 0, NULL};
    assert_rl_fails(RLStreamCreatePairWithPeerSocketSignature(NULL, &no_address, &r, &w), kRLErrorInvalidArgument);
    RLSocketSignature dgram = {PF_INET, SOCK_DGRAM, 0, addr};
    assert_rl_fails(RLStreamCreatePairWithPeerSocketSignature(NULL, &dgram, &r, &w), kRLErrorInvalidArgument);
    assert_rl_fails(RLStreamCreatePairWithPeerSocketSignature(NULL, &sig, NULL, NULL), kRLErrorInvalidArgument);
    RLDataRef tiny = RLDataCreate(NULL, (const uint8_t *)"x", 1);
    RLSocketSignature short_address = {PF_INET, SOCK_STREAM, 0, tiny};
    assert_rl_fails(RLStreamCreatePairWithPeerSocketSignature(NULL, &short_address, &r, &w), kRLErrorInvalidArgument);
    RLRelease(tiny);
    RLStringRef str = RLStringCreateWithCString(NULL, "127.0.0.1", kRLStringEncodingUTF8);
    RLSocketSignature not_data = {PF_INET, SOCK_STREAM, 0, (RLDataRef)str};
    assert_rl_fails(RLStreamCreatePairWithPeerSocketSignature(NULL, &not_data, &r, &w), kRLErrorInvalidObject);
    RLRelease(str);
    RLRelease(addr);
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
        cmocka_unit_test_setup(test_read_callback_sees_the_reset, rl_trace_setup),
        cmocka_unit_test_setup(test_read_callback_bytes_then_reset, rl_trace_setup),
        cmocka_unit_test_setup(test_read_callback_asks_for_the_end_only_at_a_hang_up, rl_trace_setup),
        cmocka_unit_test_setup(test_empty_datagram_keeps_the_socket_valid, rl_trace_setup),
        cmocka_unit_test_setup(test_datagram_error_is_an_empty_data, rl_trace_setup),
        cmocka_unit_test_setup(test_create_with_signature_listens, rl_trace_setup),
        cmocka_unit_test_setup(test_create_with_signature_datagram_binds, rl_trace_setup),
        cmocka_unit_test_setup(test_connected_to_signature_with_each_timeout, rl_trace_setup),
        cmocka_unit_test_setup(test_connected_to_signature_refused, rl_trace_setup),
        cmocka_unit_test_setup(test_connected_to_signature_times_out, rl_trace_setup),
        cmocka_unit_test_setup(test_signature_misuse, rl_trace_setup),
        cmocka_unit_test_setup(test_stream_pair_with_peer_signature, rl_trace_setup),
        cmocka_unit_test_setup(test_stream_pair_with_peer_signature_errors, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
