/* test_socket_port_hostile.c — socket ports (RLSocketPort.h) against peers
 * that misbehave: a receiver that closes (FIN) or resets (RST) the
 * connection while its listener stays open, and senders of messages with
 * very many components (the per-port component cap, and the decoding of a
 * large message in time linear in its size). */
#include "netutil.h"
#include "testutil.h"

#include <crunloop/RLSocketPort.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static RLAbsoluteTime in_seconds(double s) { return RLAbsoluteTimeGetCurrent() + s; }

/* Waits (at most 10 s) for a connection on a non-blocking listener. */
static int accept_one(int lfd) {
    struct pollfd p = {lfd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 10000), 1);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

/* Whether a connection waits on the listener (no waiting). */
static bool has_pending(int lfd) {
    struct pollfd p = {lfd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

static int inval_calls;
static void on_invalid(RLSocketPortRef port, void *info) { inval_calls++; }

/* The receiver ends the connection (reset: with RST rather than FIN) while
 * its listener stays open: the sends that follow fail with
 * kRLErrorInvalidState (at most a send or two may still reach the kernel
 * before the close is seen), the port becomes invalid, the callback runs
 * once, and no new connection is made behind the caller's back. */
static void peer_ends_the_connection(bool reset) {
    uint16_t port;
    int lfd = rl_test_raw_listener(SOCK_NONBLOCK, 16, &port);
    RLSocketPortRef remote = RLSocketPortCreateRemote(NULL, "127.0.0.1", port);
    assert_non_null(remote);
    inval_calls = 0;
    assert_true(RLSocketPortSetInvalidationCallBack(remote, on_invalid));
    assert_true(RLSocketPortSendBeforeDate(remote, in_seconds(5), 1, NULL, 0, NULL));
    int cfd = accept_one(lfd);
    uint8_t buf[256];
    assert_true(recv(cfd, buf, sizeof buf, 0) > 0); /* the first message is in */
    if (reset) {
        struct linger lg = {1, 0};
        assert_int_equal(setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    }
    assert_int_equal(close(cfd), 0);
    bool sent = true;
    int sends = 0;
    for (; sends < 50 && sent; sends++) {
        sent = RLSocketPortSendBeforeDate(remote, in_seconds(5), 2, NULL, 0, NULL);
        if (sent)
            usleep(20000);
    }
    assert_false(sent);
    assert_rl_error(kRLErrorInvalidState);
    assert_true(sends <= 3);
    assert_false(RLSocketPortIsValid(remote));
    assert_int_equal(inval_calls, 1);
    /* later sends fail as on any invalid port; the callback does not run again */
    for (int i = 0; i < 3; i++) {
        assert_false(RLSocketPortSendBeforeDate(remote, in_seconds(5), 3, NULL, 0, NULL));
        assert_rl_error(kRLErrorInvalidObject);
    }
    assert_true(RLSocketPortInvalidate(remote));
    assert_int_equal(inval_calls, 1);
    /* it did not reconnect to the listener that stayed open */
    assert_false(has_pending(lfd));
    /* a new remote port for the address connects afresh */
    RLSocketPortRef fresh = RLSocketPortCreateRemote(NULL, "127.0.0.1", port);
    assert_ptr_not_equal(fresh, remote);
    assert_true(RLSocketPortSendBeforeDate(fresh, in_seconds(5), 4, NULL, 0, NULL));
    close(accept_one(lfd));
    RLRelease(fresh);
    RLRelease(remote);
    assert_int_equal(inval_calls, 1);
    close(lfd);
}

static void test_peer_fin_invalidates_the_remote(void **state) { peer_ends_the_connection(false); }

static void test_peer_rst_invalidates_the_remote(void **state) { peer_ends_the_connection(true); }

/* ---- many components ---- */

/* A one-way frame (rl_wire.h) with an empty reply port and n port
 * components "127.0.0.1:<first + i>" (ports wrap within 1..65535), built
 * by hand as a hostile sender would. Sets *len; free() it. */
static uint8_t *many_ports_frame(uint32_t n, uint32_t first, size_t *len) {
    size_t cap = 24 + 8 + (size_t)n * (8 + 16);
    uint8_t *f = malloc(cap);
    assert_non_null(f);
    size_t off = 24;
    f[off] = 2;
    f[off + 1] = f[off + 2] = f[off + 3] = 0;
    rl_test_put32(f + off + 4, 0);
    off += 8;
    for (uint32_t i = 0; i < n; i++) {
        char t[24];
        int tl = snprintf(t, sizeof t, "127.0.0.1:%u", (unsigned)((first + i - 1) % 65535 + 1));
        f[off] = 2;
        f[off + 1] = f[off + 2] = f[off + 3] = 0;
        rl_test_put32(f + off + 4, (uint32_t)tl);
        memcpy(f + off + 8, t, (size_t)tl);
        off += 8 + (size_t)tl;
    }
    memcpy(f, "RLPM", 4);
    f[4] = 1;
    f[5] = 1;
    f[6] = f[7] = 0;
    rl_test_put32(f + 8, 7);
    rl_test_put32(f + 12, 0);
    rl_test_put32(f + 16, n + 1);
    rl_test_put32(f + 20, (uint32_t)(off - 24));
    *len = off;
    return f;
}

/* Writes all of buf to a blocking socket. */
static void write_all(int fd, const uint8_t *buf, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n > 0);
        off += (size_t)n;
    }
}

typedef struct inbox {
    int n;
    RLIndex last_count;
    bool bad;
} inbox;

static void inbox_handler(RLSocketPortRef local, uint32_t msgid, const RLTypeRef *comps, RLIndex count,
                          RLSocketPortRef sendPort, void *info) {
    inbox *b = info;
    b->n++;
    b->last_count = count;
    /* the components are remote ports, in order, for the ports the frame named */
    for (RLIndex i = 0; i < count; i++)
        if (!RLSocketPortIsRemote((RLSocketPortRef)comps[i]) ||
            RLSocketPortGetPort((RLSocketPortRef)comps[i]) != (uint16_t)((1000 + i - 1) % 65535 + 1)) {
            b->bad = true;
            break;
        }
}

static void run_until(bool (*done)(void *), void *arg, double seconds) {
    double end = rl_test_now() + seconds;
    while (!done(arg) && rl_test_now() < end)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, true);
}

typedef struct drop_wait {
    RLSocketPortRef port;
    size_t want;
    inbox *b;
    int want_n;
} drop_wait;

static bool dropped_and_served(void *arg) {
    drop_wait *w = arg;
    return rl_test_dropped_of(w->port) >= w->want && w->b->n >= w->want_n;
}

static RLSocketPortRef serving_port(inbox *b, RLRunLoopSourceRef *src) {
    RLSocketPortContext ctx = {0, b, NULL, NULL, NULL};
    RLSocketPortRef local = RLSocketPortCreateLocal(NULL, AF_INET, "127.0.0.1", 0, inbox_handler, &ctx);
    assert_non_null(local);
    *src = RLSocketPortCreateRunLoopSource(NULL, local, 0);
    assert_non_null(*src);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), *src, kRLRunLoopDefaultMode);
    return local;
}

static void stop_serving(RLSocketPortRef local, RLRunLoopSourceRef src) {
    RLSocketPortInvalidate(local);
    RLRelease(src);
    RLRelease(local);
}

/* A message with more components than the port accepts loses its
 * connection (counted, with the reason, in the description) before its
 * handler sees anything; the port serves the next sender, and a message
 * right at the cap is delivered. */
static void test_over_the_component_cap_is_dropped(void **state) {
    inbox b = {0};
    RLRunLoopSourceRef src;
    RLSocketPortRef local = serving_port(&b, &src);
    assert_true(RLSocketPortSetMaxComponents(local, 100));
    uint16_t port = RLSocketPortGetPort(local);
    size_t len;
    uint8_t *over = many_ports_frame(101, 1000, &len);
    int bad = rl_test_raw_connect(port);
    write_all(bad, over, len);
    free(over);
    uint8_t *at_cap = many_ports_frame(100, 1000, &len);
    int good = rl_test_raw_connect(port);
    write_all(good, at_cap, len);
    free(at_cap);
    drop_wait w = {local, 1, &b, 1};
    run_until(dropped_and_served, &w, 20);
    assert_int_equal(rl_test_dropped_of(local), 1);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.last_count, 100);
    assert_false(b.bad);
    char *d = RLCopyDescription(local);
    assert_non_null(strstr(d, "more components than the receiver accepts"));
    free(d);
    /* the dropped sender sees its connection closed; the other is kept */
    char c;
    assert_true(read(bad, &c, 1) <= 0);
    close(bad);
    assert_true(RLSocketPortIsValid(local));
    /* the good connection is still served */
    uint8_t *again = many_ports_frame(3, 1000, &len);
    write_all(good, again, len);
    free(again);
    drop_wait w2 = {local, 1, &b, 2};
    run_until(dropped_and_served, &w2, 20);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.last_count, 3);
    /* a frame whose header came in under the cap, lowered before its body
     * did, is refused whole too */
    uint8_t *six = many_ports_frame(6, 1000, &len);
    write_all(good, six, 24);
    drop_wait header_in = {local, 2, &b, 3};
    run_until(dropped_and_served, &header_in, 0.3); /* the port reads the header */
    assert_true(RLSocketPortSetMaxComponents(local, 5));
    write_all(good, six + 24, len - 24);
    free(six);
    drop_wait w3 = {local, 2, &b, 2};
    run_until(dropped_and_served, &w3, 20);
    assert_int_equal(rl_test_dropped_of(local), 2);
    assert_int_equal(b.n, 2);
    d = RLCopyDescription(local);
    assert_non_null(strstr(d, "a message of 6 components exceeds the port's limit of 5"));
    free(d);
    close(good);
    stop_serving(local, src);
}

/* A frame whose header announces more components than the port takes is
 * refused on its header: the connection is dropped at once, without
 * waiting for a body of the announced size (here it never comes; the
 * stall timeout, a minute, would drop it only much later). */
static void test_over_the_cap_is_refused_on_the_header(void **state) {
    inbox b = {0};
    RLRunLoopSourceRef src;
    RLSocketPortRef local = serving_port(&b, &src);
    assert_true(RLSocketPortSetStallTimeout(local, 60));
    assert_true(RLSocketPortSetMaxComponents(local, 10));
    size_t len;
    uint8_t *over = many_ports_frame(11, 1000, &len);
    int fd = rl_test_raw_connect(RLSocketPortGetPort(local));
    write_all(fd, over, 24); /* the header only */
    free(over);
    drop_wait w = {local, 1, &b, 0};
    run_until(dropped_and_served, &w, 10);
    assert_int_equal(rl_test_dropped_of(local), 1);
    assert_int_equal(b.n, 0);
    char *d = RLCopyDescription(local);
    assert_non_null(strstr(d, "more components than the receiver accepts"));
    free(d);
    char c;
    assert_true(read(fd, &c, 1) <= 0);
    close(fd);
    /* a raised cap applies to connections already open */
    fd = rl_test_raw_connect(RLSocketPortGetPort(local));
    drop_wait idle = {local, 1, &b, 0};
    run_until(dropped_and_served, &idle, 0.3); /* the port takes the connection */
    assert_true(RLSocketPortSetMaxComponents(local, 11));
    over = many_ports_frame(11, 1000, &len);
    write_all(fd, over, len);
    free(over);
    drop_wait got = {local, 1, &b, 1};
    run_until(dropped_and_served, &got, 20);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.last_count, 11);
    close(fd);
    stop_serving(local, src);
}

/* A remote port refuses to send more components than its cap, and says so. */
static void test_remote_refuses_to_send_over_its_cap(void **state) {
    inbox b = {0};
    RLRunLoopSourceRef src;
    RLSocketPortRef local = serving_port(&b, &src);
    RLSocketPortRef remote = RLSocketPortCreateRemote(NULL, "127.0.0.1", RLSocketPortGetPort(local));
    assert_non_null(remote);
    assert_true(RLSocketPortSetMaxComponents(remote, 2));
    RLDataRef d = RLDataCreate(NULL, (const uint8_t *)"x", 1);
    RLTypeRef three[3] = {d, d, d};
    assert_false(RLSocketPortSendBeforeDate(remote, in_seconds(5), 1, three, 3, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLSocketPortIsValid(remote));
    assert_true(RLSocketPortSendBeforeDate(remote, in_seconds(5), 1, three, 2, NULL));
    RLRelease(d);
    RLRelease(remote);
    stop_serving(local, src);
}

/* The default cap is documented (RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS):
 * one component over it is dropped, with no setter called. */
static void test_default_cap(void **state) {
    inbox b = {0};
    RLRunLoopSourceRef src;
    RLSocketPortRef local = serving_port(&b, &src);
    size_t len;
    uint8_t *over = many_ports_frame(RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS + 1, 1000, &len);
    int fd = rl_test_raw_connect(RLSocketPortGetPort(local));
    write_all(fd, over, len);
    free(over);
    drop_wait w = {local, 1, &b, 0};
    run_until(dropped_and_served, &w, 20);
    assert_int_equal(rl_test_dropped_of(local), 1);
    assert_int_equal(b.n, 0);
    close(fd);
    stop_serving(local, src);
}

typedef struct big_write {
    int fd;
    uint8_t *bytes;
    size_t len;
} big_write;

static void *write_in_thread(void *arg) {
    big_write *w = arg;
    write_all(w->fd, w->bytes, w->len);
    return NULL;
}

/* 60,000 port components, each a different address, under a raised cap:
 * delivered whole. Decoding is linear in the message: it takes well under
 * a second; it took one to three minutes when each component walked every
 * port decoded before it. The bound (30 s) is only there to tell the two
 * apart on a loaded machine, under sanitizers included. */
static void test_many_components_are_decoded(void **state) {
    enum { N = 60000 };
    inbox b = {0};
    RLRunLoopSourceRef src;
    RLSocketPortRef local = serving_port(&b, &src);
    assert_true(RLSocketPortSetMaxComponents(local, N));
    big_write bw = {rl_test_raw_connect(RLSocketPortGetPort(local)), NULL, 0};
    int fd = bw.fd;
    bw.bytes = many_ports_frame(N, 1000, &bw.len);
    pthread_t writer; /* the frame may be more than the socket buffers hold */
    assert_int_equal(pthread_create(&writer, NULL, write_in_thread, &bw), 0);
    double start = rl_test_now();
    drop_wait w = {local, 0, &b, 1};
    run_until(dropped_and_served, &w, 60);
    double took = rl_test_now() - start;
    assert_int_equal(pthread_join(writer, NULL), 0);
    free(bw.bytes);
    assert_int_equal(b.n, 1);
    if (took > 30)
        fail_msg("decoding one message of %d components took %.1f s", N, took);
    assert_int_equal(b.last_count, N);
    assert_false(b.bad);
    assert_int_equal(rl_test_dropped_of(local), 0);
    close(fd);
    stop_serving(local, src);
}

static void test_max_components_misuse(void **state) {
    assert_false(RLSocketPortSetMaxComponents(NULL, 10));
    assert_rl_error(kRLErrorInvalidArgument);
    RLDataRef d = RLDataCreate(NULL, (const uint8_t *)"x", 1);
    assert_false(RLSocketPortSetMaxComponents((RLSocketPortRef)d, 10));
    assert_rl_error(kRLErrorInvalidObject);
    RLRelease(d);
    RLSocketPortRef local = RLSocketPortCreateLocal(NULL, AF_INET, "127.0.0.1", 0, NULL, NULL);
    assert_non_null(local);
    assert_false(RLSocketPortSetMaxComponents(local, -1));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSocketPortSetMaxComponents(local, RL_SOCKET_PORT_MAX_COMPONENTS_LIMIT + 1));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLSocketPortSetMaxComponents(local, 0)); /* messages with no components only */
    assert_true(RLSocketPortSetMaxComponents(local, RL_SOCKET_PORT_MAX_COMPONENTS_LIMIT));
    RLSocketPortInvalidate(local);
    /* an invalid port takes it (it changes nothing) */
    assert_true(RLSocketPortSetMaxComponents(local, 5));
    RLRelease(local);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_fin_invalidates_the_remote),
        cmocka_unit_test(test_peer_rst_invalidates_the_remote),
        cmocka_unit_test(test_over_the_component_cap_is_dropped),
        cmocka_unit_test(test_over_the_cap_is_refused_on_the_header),
        cmocka_unit_test(test_remote_refuses_to_send_over_its_cap),
        cmocka_unit_test(test_default_cap),
        cmocka_unit_test(test_many_components_are_decoded),
        cmocka_unit_test(test_max_components_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
