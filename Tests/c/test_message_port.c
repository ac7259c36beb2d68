/* test_message_port.c — named message ports (RLMessagePort.h): requests and
 * replies between threads and between processes, every result code, the
 * name rules, bad peers and other users. */
#include "stale.h"
#include "datautil.h"
#include "testutil.h"

#include <crunloop/RLMessagePort.h>

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MSG_ECHO = 1, MSG_UPPER = 2, MSG_SLOW = 3, MSG_COUNT = 4, MSG_STOP = 5, MSG_INVALIDATE = 6 };

/* A port name no other test run can be using. */
static void unique_name(char *buf, size_t n, const char *what) {
    static int k;
    snprintf(buf, n, "test.%d.%s.%d", (int)getpid(), what, k++);
}

typedef struct server {
    char name[128];
    sem_t ready;
    RLRunLoopRef loop;
    RLMessagePortRef port;
    _Atomic int oneway; /* MSG_COUNT messages seen */
    _Atomic bool stop;
    pthread_t thread;
    double slow_seconds;
} server;

static RLDataRef serve(RLMessagePortRef local, int32_t msgid, RLDataRef data, void *info) {
    server *s = info;
    switch (msgid) {
    case MSG_ECHO:
        return data ? (RLDataRef)RLRetain(data) : NULL;
    case MSG_UPPER: {
        RLIndex n = RLDataGetLength(data);
        uint8_t *b = malloc((size_t)n + 1);
        memcpy(b, RLDataGetBytePtr(data), (size_t)n);
        for (RLIndex i = 0; i < n; i++)
            if (b[i] >= 'a' && b[i] <= 'z')
                b[i] = (uint8_t)(b[i] - 32);
        RLDataRef r = RLDataCreate(NULL, b, n);
        free(b);
        return r;
    }
    case MSG_SLOW:
        usleep((useconds_t)(s->slow_seconds * 1e6));
        return RLDataCreate(NULL, (const uint8_t *)"late", 4);
    case MSG_COUNT:
        s->oneway++;
        return NULL;
    case MSG_STOP:
        RLRunLoopStop(RLRunLoopGetCurrent());
        return NULL;
    case MSG_INVALIDATE:
        RLMessagePortInvalidate(local);
        return NULL;
    }
    return NULL;
}

static void *server_main(void *arg) {
    server *s = arg;
    RLMessagePortContext ctx = {0, s, NULL, NULL, NULL};
    bool free_info = false;
    s->port = RLMessagePortCreateLocal(NULL, s->name, serve, &ctx, &free_info);
    assert_non_null(s->port);
    assert_false(free_info);
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, s->port, 0);
    assert_non_null(src);
    s->loop = RLRunLoopGetCurrent();
    RLRunLoopAddSource(s->loop, src, kRLRunLoopDefaultMode);
    RLRelease(src);
    /* The loop outlives the port (a test may invalidate it) until stopped. */
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    sem_post(&s->ready);
    while (!s->stop)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 30, false);
    rl_test_unkeep(keep);
    return NULL;
}

static void server_start(server *s, const char *what) {
    memset(s, 0, sizeof *s);
    unique_name(s->name, sizeof s->name, what);
    sem_init(&s->ready, 0, 0);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
    sem_wait(&s->ready);
}

static void server_stop(server *s) {
    s->stop = true;
    RLRunLoopStop(s->loop);
    pthread_join(s->thread, NULL);
    RLMessagePortInvalidate(s->port);
    RLRelease(s->port);
    sem_destroy(&s->ready);
}

static void test_request_reply_between_threads(void **state) {
    server s;
    server_start(&s, "rr");
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, s.name);
    assert_non_null(remote);
    assert_true(RLMessagePortIsRemote(remote));
    assert_false(RLMessagePortIsRemote(s.port));
    assert_string_equal(RLMessagePortGetName(remote), s.name);
    RLDataRef in = rl_test_text("hello, port"), out = NULL;
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_UPPER, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "HELLO, PORT");
    RLRelease(out);
    /* an empty request, an empty reply (empty data, as CF) */
    out = NULL;
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, NULL, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_non_null(out);
    assert_int_equal(RLDataGetLength(out), 0);
    RLRelease(out);
    /* many one-way messages arrive in order and exactly once */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(RLMessagePortSendRequest(remote, MSG_COUNT, in, 5, 0, NULL, NULL), kRLMessagePortSuccess);
    /* a request after them is answered after them: the count is complete */
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    RLRelease(out);
    assert_int_equal(s.oneway, 1000);
    /* a second remote for the same name is the same object, as with CF */
    RLMessagePortRef again = RLMessagePortCreateRemote(NULL, s.name);
    assert_ptr_equal(again, remote);
    RLRelease(again);
    RLRelease(in);
    RLMessagePortInvalidate(remote);
    RLRelease(remote);
    server_stop(&s);
}

static void test_large_message_and_limit(void **state) {
    server s;
    server_start(&s, "big");
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, s.name);
    size_t n = 8 << 20;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 7);
    RLDataRef in = RLDataCreate(NULL, b, (RLIndex)n), out = NULL;
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 10, 10, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_int_equal(RLDataGetLength(out), n);
    assert_memory_equal(RLDataGetBytePtr(out), b, n);
    RLRelease(out);
    /* over the sender's limit: refused before anything is sent */
    assert_true(RLMessagePortSetMessageLimit(remote, 1024));
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 1, 1, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortTransportError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLMessagePortIsValid(remote));
    /* over the receiver's limit: the receiver drops the connection */
    assert_true(RLMessagePortSetMessageLimit(remote, 64 << 20));
    assert_true(RLMessagePortSetMessageLimit(s.port, 4096));
    assert_int_not_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                         kRLMessagePortSuccess);
    assert_false(RLMessagePortIsValid(remote));
    RLRelease(remote);
    char *d = RLCopyDescription(s.port);
    assert_non_null(strstr(d, "dropped 1 connection"));
    assert_non_null(strstr(d, "limit"));
    free(d);
    /* and keeps serving everyone else */
    remote = RLMessagePortCreateRemote(NULL, s.name);
    RLDataRef small = rl_test_text("ok");
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, small, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "ok");
    RLRelease(out);
    RLRelease(small);
    RLRelease(in);
    free(b);
    RLRelease(remote);
    server_stop(&s);
}

static void test_receive_timeout_then_late_reply_is_dropped(void **state) {
    server s;
    server_start(&s, "slow");
    s.slow_seconds = 0.3;
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, s.name);
    RLDataRef out = NULL, in = rl_test_text("x");
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_SLOW, NULL, 5, 0.05, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortReceiveTimeout);
    assert_rl_error(kRLErrorTimedOut);
    assert_null(out);
    /* the next request gets its own answer, not the late one */
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "x");
    RLRelease(out);
    /* rcvTimeout 0 with a reply mode: sent, not waited for */
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_COUNT, in, 5, 0, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortReceiveTimeout);
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "x");
    assert_int_equal(s.oneway, 1);
    RLRelease(out);
    RLRelease(in);
    RLRelease(remote);
    server_stop(&s);
}

static int inval_calls;
static void on_invalid(RLMessagePortRef p, void *info) { inval_calls++; }

static void test_invalidation_and_name_reuse(void **state) {
    server s;
    server_start(&s, "inval");
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, s.name);
    inval_calls = 0;
    assert_true(RLMessagePortSetInvalidationCallBack(remote, on_invalid));
    assert_ptr_equal(RLMessagePortGetInvalidationCallBack(remote), on_invalid);
    /* the local port invalidates itself from its own callout */
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_INVALIDATE, NULL, 5, 0, NULL, NULL), kRLMessagePortSuccess);
    /* the remote hears it through this thread's run loop */
    for (int i = 0; i < 100 && inval_calls == 0; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, true);
    assert_int_equal(inval_calls, 1);
    assert_false(RLMessagePortIsValid(remote));
    assert_false(RLMessagePortIsValid(s.port));
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, NULL, 1, 1, kRLRunLoopDefaultMode, NULL),
                     kRLMessagePortIsInvalid);
    /* setting a callback on an invalid port calls it at once */
    assert_true(RLMessagePortSetInvalidationCallBack(remote, on_invalid));
    assert_int_equal(inval_calls, 2);
    RLRelease(remote);
    /* the name is free at once */
    RLMessagePortRef again = RLMessagePortCreateLocal(NULL, s.name, serve, NULL, NULL);
    assert_non_null(again);
    assert_ptr_not_equal(again, s.port);
    RLMessagePortInvalidate(again);
    RLRelease(again);
    /* and a remote for a name nobody listens on is refused */
    assert_rl_fails(RLMessagePortCreateRemote(NULL, s.name), kRLErrorNotFound);
    server_stop(&s);
}

static void test_same_name_in_process_and_in_another(void **state) {
    char name[128];
    unique_name(name, sizeof name, "dup");
    bool free_info = false;
    RLMessagePortRef a = RLMessagePortCreateLocal(NULL, name, serve, NULL, &free_info);
    assert_non_null(a);
    assert_false(free_info);
    /* this process: the existing port, and the caller keeps its info */
    RLMessagePortRef b = RLMessagePortCreateLocal(NULL, name, serve, NULL, &free_info);
    assert_ptr_equal(a, b);
    assert_true(free_info);
    RLRelease(b);
    /* another process: refused */
    pid_t pid = fork();
    if (pid == 0) {
        bool f = false;
        RLMessagePortRef c = RLMessagePortCreateLocal(NULL, name, serve, NULL, &f);
        rl_test_child_exit(c == NULL && f && RLErrorGetLast().code == kRLErrorExists ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    RLMessagePortInvalidate(a);
    RLRelease(a);
}

static void test_between_processes(void **state) {
    server s;
    server_start(&s, "proc");
    pid_t pid = fork();
    if (pid == 0) {
        RLMessagePortRef r = RLMessagePortCreateRemote(NULL, s.name);
        if (!r)
            _exit(2);
        RLDataRef in = RLDataCreate(NULL, (const uint8_t *)"from child", 10), out = NULL;
        int32_t rc = RLMessagePortSendRequest(r, MSG_UPPER, in, 5, 5, kRLRunLoopDefaultMode, &out);
        bool ok = rc == kRLMessagePortSuccess && out && RLDataGetLength(out) == 10 &&
                  memcmp(RLDataGetBytePtr(out), "FROM CHILD", 10) == 0;
        for (int i = 0; i < 100; i++)
            ok = ok && RLMessagePortSendRequest(r, MSG_COUNT, in, 5, 0, NULL, NULL) == kRLMessagePortSuccess;
        ok = ok && RLMessagePortSendRequest(r, MSG_ECHO, NULL, 5, 5, kRLRunLoopDefaultMode, NULL) == 0;
        RLRelease(in);
        if (out)
            RLRelease(out);
        RLRelease(r);
        rl_test_child_exit(ok ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(s.oneway, 100);
    server_stop(&s);
}

/* Connects a raw socket to a port's address, as a buggy or hostile peer. */
static int raw_connect(const char *name) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "crunloop.%u.%s", (unsigned)geteuid(), name);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)), 0);
    return fd;
}

/* ---- a fake local port: a raw listening socket that speaks the wire
 * format (Sources/CRunLoop/ports/rl_wire.h) and answers a request with a reply
 * frame chosen by the test ---- */

typedef struct fake_port {
    char name[128];
    int lfd;
    uint8_t kind;  /* the answer's kind (3: a reply) */
    uint8_t ctype; /* its one component's type (1: data, 2: port) */
    pthread_t thread;
    bool answered, saw_close; /* read after the join */
} fake_port;

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (uint8_t *)buf + got, n - got);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

/* Accepts connections (the remote's watch connection and its request
 * connection); answers the first request with the chosen frame, then waits
 * for the sender to drop that connection (at most 5 s). */
static void *fake_port_run(void *arg) {
    fake_port *f = arg;
    struct pollfd p[8] = {{f->lfd, POLLIN, 0}};
    int n = 1;
    while (!f->answered && n < 8 && poll(p, (nfds_t)n, 5000) > 0) {
        if (p[0].revents & POLLIN) {
            int c = accept(f->lfd, NULL, NULL);
            if (c >= 0)
                p[n++] = (struct pollfd){c, POLLIN, 0};
        }
        for (int i = 1; i < n && !f->answered; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            uint8_t h[24], body[256];
            if (!read_full(p[i].fd, h, sizeof h) || get32(h + 20) > sizeof body ||
                !read_full(p[i].fd, body, get32(h + 20))) {
                p[i].events = 0; /* gone: ignore it */
                continue;
            }
            if (h[5] != 2) /* not a request (the watch connection's hello) */
                continue;
            uint8_t out[24 + 8 + 4] = {'R', 'L', 'P', 'M', 1, f->kind};
            memcpy(out + 8, h + 8, 8); /* the request's msgid and seq */
            put32(out + 16, 1);
            put32(out + 20, 8 + 4);
            out[24] = f->ctype;
            put32(out + 28, 4);
            memcpy(out + 32, "name", 4);
            f->answered = write(p[i].fd, out, sizeof out) == (ssize_t)sizeof out;
            struct timeval tv = {5, 0};
            setsockopt(p[i].fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            char b;
            f->saw_close = f->answered && read(p[i].fd, &b, 1) == 0;
        }
    }
    for (int i = 1; i < n; i++)
        close(p[i].fd);
    return NULL;
}

static void fake_port_start(fake_port *f, uint8_t kind, uint8_t ctype) {
    *f = (fake_port){.kind = kind, .ctype = ctype};
    unique_name(f->name, sizeof f->name, "fake");
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "crunloop.%u.%s", (unsigned)geteuid(), f->name);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->lfd >= 0);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)),
                     0);
    assert_int_equal(listen(f->lfd, 8), 0);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_port_run, f), 0);
}

static void fake_port_stop(fake_port *f) {
    assert_int_equal(pthread_join(f->thread, NULL), 0);
    close(f->lfd);
}

/* A reply must be a reply frame whose one component, if any, is data, as
 * the request side demands of a request: a port component (a name, not
 * reply bytes) or another kind is a transport error, the connection is
 * dropped and the remote port invalidated; *returnData gets nothing. */
static void test_malformed_reply_is_a_transport_error(void **state) {
    (void)state;
    static const uint8_t bad[][2] = {
        {3, 2}, /* a reply with a port component */
        {1, 1}, /* a one-way message instead of the reply */
        {2, 1}, /* a request instead of the reply */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fake_port f;
        fake_port_start(&f, bad[i][0], bad[i][1]);
        RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, f.name);
        assert_non_null(remote);
        RLDataRef in = rl_test_text("question"), out = NULL;
        assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                         kRLMessagePortTransportError);
        assert_rl_error(kRLErrorInvalidState);
        assert_null(out);
        assert_false(RLMessagePortIsValid(remote));
        fake_port_stop(&f);
        assert_true(f.answered);
        assert_true(f.saw_close);
        RLRelease(in);
        RLRelease(remote);
    }
}

/* The fake port's well-formed reply is taken: the test above fails for
 * what it sends, not for how. */
static void test_fake_port_reply_is_taken(void **state) {
    (void)state;
    fake_port f;
    fake_port_start(&f, 3, 1);
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, f.name);
    assert_non_null(remote);
    RLDataRef in = rl_test_text("question"), out = NULL;
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "name");
    RLRelease(out);
    assert_true(RLMessagePortIsValid(remote));
    RLMessagePortInvalidate(remote); /* the fake port waits for the close */
    fake_port_stop(&f);
    assert_true(f.answered);
    RLRelease(in);
    RLRelease(remote);
}

static void test_bad_peers_are_dropped_and_others_served(void **state) {
    server s;
    server_start(&s, "bad");
    assert_true(RLMessagePortSetStallTimeout(s.port, 0.3));
    int garbage = raw_connect(s.name);
    assert_int_equal(write(garbage, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    int silent = raw_connect(s.name); /* connects and never sends */
    int half = raw_connect(s.name);   /* dies mid-frame */
    assert_int_equal(write(half, "RLPM\x01\x02\0\0", 8), 8);
    close(half);
    int stall = raw_connect(s.name); /* begins a frame and stops */
    assert_int_equal(write(stall, "RLPM\x01\x02\0\0\1\0\0\0", 12), 12);
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, s.name);
    RLDataRef in = rl_test_text("still here"), out = NULL;
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "still here");
    RLRelease(out);
    /* the garbage sender was cut off */
    char b[8];
    struct timeval tv = {5, 0};
    setsockopt(garbage, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(read(garbage, b, sizeof b), 0);
    /* the staller is cut off once its time is up; the silent one stays */
    setsockopt(stall, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(read(stall, b, sizeof b), 0);
    char *d = RLCopyDescription(s.port);
    assert_non_null(strstr(d, "dropped 3 connection"));
    assert_non_null(strstr(d, "stalled mid-frame"));
    free(d);
    struct timeval quick = {0, 200000};
    setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &quick, sizeof quick);
    assert_int_equal(read(silent, b, sizeof b), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    close(garbage);
    close(silent);
    close(stall);
    RLRelease(in);
    RLRelease(remote);
    server_stop(&s);
}

/* A source made with an order other than 0: the port's listening socket and
 * connections are watched in that order, and requests are served. */
static void *ask_echo(void *arg) {
    RLMessagePortRef r = RLMessagePortCreateRemote(NULL, arg);
    RLDataRef in = rl_test_text("ordered"), out = NULL;
    int32_t rc = r ? RLMessagePortSendRequest(r, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out) : -99;
    bool ok = rc == kRLMessagePortSuccess && out && RLDataGetLength(out) == 7;
    if (out)
        RLRelease(out);
    RLRelease(in);
    if (r) {
        RLMessagePortInvalidate(r);
        RLRelease(r);
    }
    RLRunLoopStop(RLRunLoopGetMain());
    return ok ? arg : NULL;
}

static void test_source_with_an_order_serves(void **state) {
    char name[128];
    unique_name(name, sizeof name, "ordered");
    RLMessagePortRef local = RLMessagePortCreateLocal(NULL, name, serve, NULL, NULL);
    assert_non_null(local);
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, local, 7);
    assert_non_null(src);
    assert_int_equal(RLRunLoopSourceGetOrder(src), 7);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopAddSource(rl, src, kRLRunLoopDefaultMode);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, ask_echo, name), 0);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, false); /* until the asker is done */
    void *ok = NULL;
    pthread_join(th, &ok);
    assert_non_null(ok);
    RLRunLoopRemoveSource(rl, src, kRLRunLoopDefaultMode);
    RLRelease(src);
    RLMessagePortInvalidate(local);
    RLRelease(local);
}

/* The stall timeout is a timer of the loop serving the port (the port has
 * no timer of its own), there only while a client is mid-frame. */
static void test_stall_timer_is_in_the_loop_only_while_a_client_is_mid_frame(void **state) {
    char name[128];
    unique_name(name, sizeof name, "stalltimer");
    RLMessagePortRef local = RLMessagePortCreateLocal(NULL, name, serve, NULL, NULL);
    assert_non_null(local);
    assert_true(RLMessagePortSetStallTimeout(local, 0.3));
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, local, 0);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopAddSource(rl, src, kRLRunLoopDefaultMode);
    assert_true(RLRunLoopGetNextTimerFireDate(rl, kRLRunLoopDefaultMode) == 0);
    int stall = raw_connect(name); /* begins a frame and stops */
    assert_int_equal(write(stall, "RLPM\x01\x02\0\0\1\0\0\0", 12), 12);
    double t0 = RLAbsoluteTimeGetCurrent();
    for (int i = 0; i < 50 && RLRunLoopGetNextTimerFireDate(rl, kRLRunLoopDefaultMode) == 0; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, true); /* accepts it, reads the half frame */
    RLAbsoluteTime due = RLRunLoopGetNextTimerFireDate(rl, kRLRunLoopDefaultMode);
    assert_true(due > t0 && due < t0 + 5); /* a stall check, not a far-off date */
    char b[8];
    struct timeval tv = {0, 50000};
    setsockopt(stall, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t r = -1;
    for (int i = 0; i < 100 && r != 0; i++) { /* until the port cuts it off */
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false);
        r = read(stall, b, sizeof b);
    }
    assert_int_equal(r, 0);
    assert_true(RLRunLoopGetNextTimerFireDate(rl, kRLRunLoopDefaultMode) == 0); /* no one is mid-frame */
    close(stall);
    RLRunLoopRemoveSource(rl, src, kRLRunLoopDefaultMode);
    RLRelease(src);
    RLMessagePortInvalidate(local);
    RLRelease(local);
}

static void test_many_clients_at_once(void **state) {
    server s;
    server_start(&s, "many");
    enum { N = 200 };
    static RLMessagePortRef r[N];
    /* Separate processes would share one remote per name; connections from
     * one process come from raw sockets speaking the protocol instead. */
    int fds[N];
    for (int i = 0; i < N; i++)
        fds[i] = raw_connect(s.name);
    uint8_t frame[24 + 8 + 4];
    for (int i = 0; i < N; i++) {
        /* a one-way MSG_COUNT with 4 bytes */
        uint8_t h[] = {'R', 'L', 'P', 'M', 1, 1, 0, 0, MSG_COUNT, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 12, 0, 0, 0,
                       1, 0, 0, 0, 4, 0, 0, 0, 'a', 'b', 'c', 'd'};
        memcpy(frame, h, sizeof h);
        assert_int_equal(write(fds[i], frame, sizeof frame), sizeof frame);
    }
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, s.name);
    for (int tries = 0; tries < 500 && s.oneway < N; tries++)
        usleep(10000);
    assert_int_equal(s.oneway, N);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    (void)r;
    RLRelease(remote);
    server_stop(&s);
}

static bool allow_all(RLMessagePortRef p, uid_t uid, gid_t gid, pid_t pid, void *info) { return true; }

/* As root: a client of another user is refused unless the policy admits
 * it, and a port another user set up under our name is never talked to. */
static void test_other_users(void **state) {
    if (geteuid() != 0) {
        /* Not root: another user cannot be made here; the same-user checks
         * run in every other test. Reported, not counted as a pass. */
        print_message("test_other_users: needs root to switch users; not run\n");
        skip();
    }
    server s;
    server_start(&s, "users");
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) || setuid(65534))
            _exit(3);
        /* the server refuses: the remote's first request finds it gone */
        int fd;
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "crunloop.0.%s", s.name);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)))
            _exit(4);
        char c;
        ssize_t got = read(fd, &c, 1); /* closed by the server */
        rl_test_child_exit(got == 0 ? 0 : 5);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char *d = RLCopyDescription(s.port);
    assert_non_null(strstr(d, "uid 65534 refused"));
    free(d);
    /* with a policy that admits others, the same client is served */
    assert_true(RLMessagePortSetAccessPolicy(s.port, allow_all));
    pid = fork();
    if (pid == 0) {
        if (setgid(65534) || setuid(65534))
            _exit(3);
        int fd;
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "crunloop.0.%s", s.name);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)))
            _exit(4);
        uint8_t h[] = {'R', 'L', 'P', 'M', 1, 2, 0, 0, MSG_ECHO, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        if (write(fd, h, sizeof h) != (ssize_t)sizeof h)
            _exit(6);
        uint8_t reply[24];
        ssize_t got = read(fd, reply, sizeof reply);
        _exit(got == 24 && reply[5] == 3 && reply[12] == 9 ? 0 : 7);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    server_stop(&s);

    /* another user squats our name first: our remote refuses to talk to it */
    char name[128];
    unique_name(name, sizeof name, "squat");
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid = fork();
    if (pid == 0) {
        if (setgid(65534) || setuid(65534))
            _exit(3);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "crunloop.0.%s", name);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
            listen(fd, 4))
            _exit(4);
        (void)!write(pipefd[1], "r", 1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(pipefd[0], &c, 1), 1);
    assert_rl_fails(RLMessagePortCreateRemote(NULL, name), kRLErrorPermission);
    /* and cannot create the local port either: denied, not hijacked */
    assert_rl_fails(RLMessagePortCreateLocal(NULL, name, serve, NULL, NULL), kRLErrorExists);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(pipefd[0]);
    close(pipefd[1]);
}

static void test_set_name_renames_a_local_port(void **state) {
    server s;
    server_start(&s, "rename");
    char renamed[128], alias[128];
    unique_name(renamed, sizeof renamed, "renamed");
    unique_name(alias, sizeof alias, "alias");
    const char *before = RLMessagePortGetName(s.port);
    assert_true(RLMessagePortSetName(s.port, s.name)); /* its name already */
    assert_true(RLMessagePortSetName(s.port, renamed));
    assert_string_equal(RLMessagePortGetName(s.port), renamed);
    assert_string_equal(before, s.name); /* a name handed out stays readable */

    /* served under the new name, by the same loop */
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, renamed);
    assert_non_null(remote);
    RLDataRef in = rl_test_text("renamed"), out = NULL;
    assert_int_equal(RLMessagePortSendRequest(remote, MSG_UPPER, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "RENAMED");
    RLRelease(out);
    RLRelease(in);
    /* the process finds it under its new name (CF returns the same port) */
    RLMessagePortRef same = RLMessagePortCreateLocal(NULL, renamed, serve, NULL, NULL);
    assert_ptr_equal(same, s.port);
    RLRelease(same);

    /* the old name is free at once */
    assert_rl_fails(RLMessagePortCreateRemote(NULL, s.name), kRLErrorNotFound);
    RLMessagePortRef other = RLMessagePortCreateLocal(NULL, s.name, serve, NULL, NULL);
    assert_non_null(other);
    assert_ptr_not_equal(other, s.port);

    /* names other ports have: refused, nothing changed */
    assert_rl_fails(RLMessagePortSetName(s.port, s.name), kRLErrorExists);
    assert_true(RLMessagePortNameServerRegisterPort(other, alias));
    assert_rl_fails(RLMessagePortSetName(s.port, alias), kRLErrorExists);
    assert_string_equal(RLMessagePortGetName(s.port), renamed);
    RLMessagePortRef again = RLMessagePortCreateRemote(NULL, renamed); /* still connected */
    assert_ptr_equal(again, remote);
    RLRelease(again);

    /* a remote port cannot be renamed; an invalidated one neither */
    assert_rl_fails(RLMessagePortSetName(remote, alias), kRLErrorInvalidState);
    RLMessagePortInvalidate(remote);
    RLRelease(remote);
    assert_true(RLMessagePortInvalidate(other));
    assert_rl_fails(RLMessagePortSetName(other, "fresh.name"), kRLErrorInvalidObject);
    RLRelease(other);
    server_stop(&s);
}

static bool stale_set_name(const void *port) { return !RLMessagePortSetName((RLMessagePortRef)port, "x"); }

static void test_set_name_misuse(void **state) {
    char name[128];
    unique_name(name, sizeof name, "setname");
    RLMessagePortRef local = RLMessagePortCreateLocal(NULL, name, serve, NULL, NULL);
    assert_non_null(local);
    assert_rl_fails(RLMessagePortSetName(NULL, "x"), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetName(local, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetName(local, ""), kRLErrorInvalidArgument);
    char long_name[300];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    assert_rl_fails(RLMessagePortSetName(local, long_name), kRLErrorInvalidArgument);
    RLDataRef d = rl_test_text("not a port");
    assert_rl_fails(RLMessagePortSetName((RLMessagePortRef)d, "x"), kRLErrorInvalidObject);
    RLRelease(d);
    assert_string_equal(RLMessagePortGetName(local), name);
    assert_true(RLMessagePortInvalidate(local));
    assert_true(RLRelease(local));
    rl_test_stale(stale_set_name, local);
}

static void test_misuse(void **state) {
    bool free_info = false;
    char long_name[300];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    assert_rl_fails(RLMessagePortCreateLocal(NULL, "", serve, NULL, &free_info), kRLErrorInvalidArgument);
    assert_true(free_info);
    assert_rl_fails(RLMessagePortCreateLocal(NULL, "", serve, NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortCreateLocal(NULL, long_name, serve, NULL, NULL), kRLErrorInvalidArgument);
    RLMessagePortContext bad = {1, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLMessagePortCreateLocal(NULL, "x", serve, &bad, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortCreateRemote(NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortCreateRemote(NULL, long_name), kRLErrorInvalidArgument);
    char name[128];
    unique_name(name, sizeof name, "none");
    assert_rl_fails(RLMessagePortCreateRemote(NULL, name), kRLErrorNotFound);

    assert_int_equal(RLMessagePortSendRequest(NULL, 1, NULL, 1, 1, NULL, NULL), kRLMessagePortIsInvalid);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLMessagePortIsValid(NULL));
    assert_false(RLMessagePortIsRemote(NULL));
    assert_null(RLMessagePortGetName(NULL));
    assert_rl_fails(RLMessagePortInvalidate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortCreateRunLoopSource(NULL, NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetInvalidationCallBack(NULL, on_invalid), kRLErrorInvalidArgument);
    assert_null(RLMessagePortGetInvalidationCallBack(NULL));
    assert_rl_fails(RLMessagePortSetAccessPolicy(NULL, allow_all), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetMessageLimit(NULL, 100), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetStallTimeout(NULL, 1), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortGetContext(NULL, NULL), kRLErrorInvalidArgument);

    /* a long name that the socket address cannot hold works (hashed) */
    char long_ok[256];
    memset(long_ok, 'L', 255);
    long_ok[255] = 0;
    RLMessagePortRef lp = RLMessagePortCreateLocal(NULL, long_ok, serve, NULL, NULL);
    assert_non_null(lp);
    RLMessagePortRef lr = RLMessagePortCreateRemote(NULL, long_ok);
    assert_non_null(lr);
    assert_string_equal(RLMessagePortGetName(lr), long_ok);
    RLRelease(lr);

    /* a local port sends nothing; a remote port has no source or policy */
    assert_int_equal(RLMessagePortSendRequest(lp, 1, NULL, 1, 1, NULL, NULL), kRLMessagePortIsInvalid);
    assert_rl_error(kRLErrorInvalidState);
    assert_rl_fails(RLMessagePortGetContext(lp, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetMessageLimit(lp, 10), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetMessageLimit(lp, (RLIndex)1 << 40), kRLErrorInvalidArgument);
    unique_name(name, sizeof name, "misuse");
    RLMessagePortRef l2 = RLMessagePortCreateLocal(NULL, name, serve, NULL, NULL);
    RLMessagePortRef r2 = RLMessagePortCreateRemote(NULL, name);
    assert_rl_fails(RLMessagePortCreateRunLoopSource(NULL, r2, 0), kRLErrorInvalidState);
    assert_rl_fails(RLMessagePortSetAccessPolicy(r2, allow_all), kRLErrorInvalidState);
    assert_rl_fails(RLMessagePortSetStallTimeout(r2, 1), kRLErrorInvalidState);
    assert_rl_fails(RLMessagePortSetStallTimeout(l2, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortSetStallTimeout(l2, 1.0 / 0.0), kRLErrorInvalidArgument);
    /* data that is not an RLData */
    long not_data[8] = {0};
    assert_int_equal(RLMessagePortSendRequest(r2, 1, (RLDataRef)not_data, 1, 1, NULL, NULL),
                     kRLMessagePortTransportError);
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(RLMessagePortSendRequest(r2, 1, NULL, 0.0 / 0.0, 1, NULL, NULL), kRLMessagePortTransportError);
    assert_rl_error(kRLErrorInvalidArgument);
    RLRelease(r2);
    RLMessagePortInvalidate(l2);
    assert_true(RLMessagePortInvalidate(l2)); /* idempotent */
    assert_rl_fails(RLMessagePortCreateRunLoopSource(NULL, l2, 0), kRLErrorInvalidObject);
    RLRelease(l2);
    RLMessagePortInvalidate(lp);
    RLRelease(lp);
}

static const void *count_retain(const void *info) {
    (*(int *)info)++;
    return info;
}
static void count_release(const void *info) { (*(int *)info)--; }

static void test_context_is_retained_and_released(void **state) {
    char name[128];
    unique_name(name, sizeof name, "ctx");
    int refs = 0;
    RLMessagePortContext ctx = {0, &refs, count_retain, count_release, NULL};
    RLMessagePortRef p = RLMessagePortCreateLocal(NULL, name, serve, &ctx, NULL);
    assert_int_equal(refs, 1);
    RLMessagePortContext got;
    assert_true(RLMessagePortGetContext(p, &got));
    assert_ptr_equal(got.info, &refs);
    RLRelease(p); /* the last release invalidates (the name is free again) and releases info */
    assert_int_equal(refs, 0);
    p = RLMessagePortCreateLocal(NULL, name, serve, NULL, NULL);
    assert_non_null(p);
    RLRelease(p);
}

static void test_data_misuse(void **state) {
    assert_rl_fails(RLDataCreate(NULL, NULL, 3), kRLErrorInvalidArgument);
    assert_rl_fails(RLDataCreate(NULL, (const uint8_t *)"x", -1), kRLErrorInvalidArgument);
    RLDataRef e = RLDataCreate(NULL, NULL, 0);
    assert_non_null(e);
    assert_int_equal(RLDataGetLength(e), 0);
    assert_non_null(RLDataGetBytePtr(e));
    RLDataRef d = rl_test_text("abcdef");
    uint8_t b[6];
    assert_true(RLDataGetBytes(d, RLRangeMake(2, 3), b));
    assert_memory_equal(b, "cde", 3);
    assert_rl_fails(RLDataGetBytes(d, RLRangeMake(4, 3), b), kRLErrorInvalidArgument);
    assert_rl_fails(RLDataGetBytes(d, RLRangeMake(-1, 1), b), kRLErrorInvalidArgument);
    assert_rl_fails(RLDataGetBytes(d, RLRangeMake(0, 1), NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLDataGetLength(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLDataGetBytePtr(NULL), kRLErrorInvalidArgument);
    RLDataRef d2 = rl_test_text("abcdef");
    assert_true(RLDataEqual(d, d2));
    assert_false(RLDataEqual(d, e));
    assert_rl_fails(RLDataEqual(d, NULL), kRLErrorInvalidArgument);
    char *desc = RLCopyDescription(d);
    assert_non_null(strstr(desc, "length = 6"));
    free(desc);
    RLRelease(d2);
    RLRelease(d);
    RLRelease(e);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_reply_between_threads),
        cmocka_unit_test(test_large_message_and_limit),
        cmocka_unit_test(test_receive_timeout_then_late_reply_is_dropped),
        cmocka_unit_test(test_invalidation_and_name_reuse),
        cmocka_unit_test(test_same_name_in_process_and_in_another),
        cmocka_unit_test(test_between_processes),
        cmocka_unit_test(test_bad_peers_are_dropped_and_others_served),
        cmocka_unit_test(test_source_with_an_order_serves),
        cmocka_unit_test(test_stall_timer_is_in_the_loop_only_while_a_client_is_mid_frame),
        cmocka_unit_test(test_many_clients_at_once),
        cmocka_unit_test(test_other_users),
        cmocka_unit_test(test_set_name_renames_a_local_port),
        cmocka_unit_test(test_set_name_misuse),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_context_is_retained_and_released),
        cmocka_unit_test(test_data_misuse),
        cmocka_unit_test(test_malformed_reply_is_a_transport_error),
        cmocka_unit_test(test_fake_port_reply_is_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
