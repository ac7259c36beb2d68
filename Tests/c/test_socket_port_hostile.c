/* test_socket_port_hostile.c — socket ports (RLSocketPort.h) against peers
 * that misbehave: a receiver that closes (FIN) or resets (RST) the
 * connection while its listener stays open, and senders of messages with
 * very many components (the per-port component cap, and the decoding of a
 * large message in time linear in its size). */
#include "testutil.h"

#include <crunloop/RLSocketPort.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static RLAbsoluteTime in_seconds(double s) { return RLAbsoluteTimeGetCurrent() + s; }

static int raw_listener(uint16_t *port) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 16), 0);
    socklen_t alen = sizeof a;
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return lfd;
}

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
    int lfd = raw_listener(&port);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_fin_invalidates_the_remote),
        cmocka_unit_test(test_peer_rst_invalidates_the_remote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
