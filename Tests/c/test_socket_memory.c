/* test_socket_memory.c — what an idle connection holds: an RLSocket with
 * Data callbacks that has received bytes keeps its own block and its fd
 * object's, nothing else (no read buffer, no RLData for its peer's
 * address, which each Data callback still gets, right, whatever the
 * callbacks keep); a loop's fd table holds no allocation per fd that has
 * one source, 16 bytes an entry. */
#include "testutil.h"

#include <crunloop/RLFileDescriptor.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

size_t rl__socket_footprint(RLSocketRef s);
size_t rl__fd_table_bytes(RLRunLoopRef rl, size_t *blocks);
size_t rl__source_footprint(RLRunLoopSourceRef s);
bool rl__span_room(void **tab, uint32_t *lo, uint32_t *n, size_t size, int fd); /* rl_span.h */
void rl__span_free(void *tab, uint32_t n, size_t size);
typedef struct rl__loop_mem {
    size_t modes, arrays, due, fds, stats;
} rl__loop_mem; /* RLRunLoopMode.h */
size_t rl__loop_held_bytes(RLRunLoopRef rl, rl__loop_mem *out);

#define MODE "MEM"

/* What the Data callbacks of one connection saw. */
typedef struct mem_conn {
    RLSocketRef s;
    int client; /* the other end */
    struct sockaddr_storage client_addr; /* what the callbacks' address must say */
    socklen_t client_len;
    size_t got;        /* bytes delivered */
    int calls;         /* Data callbacks */
    int bad_address;   /* callbacks whose address was not client_addr */
    RLDataRef kept;    /* the first callback's address, kept */
} mem_conn;

static void data_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s;
    mem_conn *c = info;
    if (type != kRLSocketDataCallBack)
        return;
    c->calls++;
    c->got += (size_t)RLDataGetLength(data);
    if (!address || (socklen_t)RLDataGetLength(address) != c->client_len ||
        memcmp(RLDataGetBytePtr(address), &c->client_addr, c->client_len) != 0)
        c->bad_address++;
    if (!c->kept && address)
        c->kept = RLRetain(address);
}

/* A Data socket on fd in MODE, reporting to c. */
static void conn_make(mem_conn *c, int fd, int client) {
    c->client = client;
    c->client_len = sizeof c->client_addr;
    assert_int_equal(getsockname(client, (struct sockaddr *)&c->client_addr, &c->client_len), 0);
    RLSocketContext ctx = {0, c, NULL, NULL, NULL};
    c->s = RLSocketCreateWithNative(NULL, fd, kRLSocketDataCallBack, data_cb, &ctx);
    assert_non_null(c->s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, c->s, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
}

static void conn_done(mem_conn *c) {
    assert_true(RLSocketInvalidate(c->s));
    RLRelease(c->s);
    close(c->client);
    if (c->kept)
        RLRelease(c->kept);
}

/* Runs until c got `want` bytes in all, at most 10 s. */
static void run_until_got(mem_conn *c, size_t want) {
    double end = rl_test_now() + 10;
    while (c->got < want && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    assert_int_equal(c->got, want);
}

static void send_all(int fd, const void *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        assert_true(w > 0);
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

/* A TCP connection over the loopback of `family`: *server the accepted
 * end, *client the connecting one. False: no such loopback here. */
static bool tcp_pair(int family, int *server, int *client) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *sin;
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_addr = in6addr_loopback;
        len = sizeof *sin6;
    }
    int l = socket(family, SOCK_STREAM, 0);
    if (l < 0)
        return false;
    if (bind(l, (struct sockaddr *)&ss, len) != 0 || listen(l, 4) != 0) {
        close(l);
        return false;
    }
    assert_int_equal(getsockname(l, (struct sockaddr *)&ss, &len), 0);
    *client = socket(family, SOCK_STREAM, 0);
    assert_true(*client >= 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&ss, len), 0);
    *server = accept(l, NULL, NULL);
    assert_true(*server >= 0);
    close(l);
    return true;
}

/* Without the pool (PLAIN=1), malloc's rounding and header. */
#if defined(RL_PLAIN) && RL_PLAIN
#define MALLOC_SLACK 16
#else
#define MALLOC_SLACK 0
#endif

/* An RLSocket and its run-loop source (which carries the fd state the
 * loops read: there is no fd object) are one block: in the pool, 224
 * bytes (before: 240, with a serial, the ring's queue and a 24-byte peer
 * address in the socket; 160 for the socket and its fd object and 128
 * for the source; 176, 192, 208, 224, 240, before that 160 and 128 bytes, and
 * before that 192 and 192, and a 128-byte RLData for the peer's address
 * besides). A program's context without callbacks, an IP peer address
 * and a socket that is not a resting listener need no other block. */
#define IDLE_MAX (224 + MALLOC_SLACK)
static void check_idle_connection(int family) {
    int server, client;
    if (!tcp_pair(family, &server, &client)) {
        assert_int_equal(family, AF_INET6); /* IPv4 loopback is always there */
        return;
    }
    mem_conn c = {0};
    conn_make(&c, server, client);
    size_t fresh = rl__socket_footprint(c.s);
    assert_true(fresh <= IDLE_MAX);
    send_all(client, "x", 1);
    run_until_got(&c, 1);
    /* Nothing more, on either backend: a loop that reads through a ring
     * (io_uring) keeps what it read of the stream in its own read-ahead
     * queues only while the bytes wait (before: a 40-byte queue of the
     * socket's, 48 with malloc's header, kept for its life); the chunks its
     * receives used go back to the thread, not to the socket (checked
     * after the bursts below). */
    assert_int_equal(rl__socket_footprint(c.s), fresh);
    /* Bursts, long and short, all delivered; nothing stays with the
     * connection after them. */
    static char burst[300000];
    memset(burst, 'b', sizeof burst);
    size_t want = 1;
    for (size_t n = 1; n <= sizeof burst; n *= 7) {
        send_all(client, burst, n);
        want += n;
        run_until_got(&c, want);
    }
    assert_int_equal(rl__socket_footprint(c.s), fresh);
    assert_int_equal(c.bad_address, 0);
    /* The address the first callback kept still says the same. */
    assert_non_null(c.kept);
    assert_int_equal(RLDataGetLength(c.kept), c.client_len);
    assert_memory_equal(RLDataGetBytePtr(c.kept), &c.client_addr, c.client_len);
    conn_done(&c);
}

static void test_idle_ipv4_connection_holds_its_block(void **state) {
    (void)state;
    check_idle_connection(AF_INET);
}

static void test_idle_ipv6_connection_holds_its_block(void **state) {
    (void)state;
    check_idle_connection(AF_INET6);
}

/* Connections read in turn, each callback keeping its first address:
 * every callback still gets its own peer's. */
static void test_each_callback_gets_its_own_peer(void **state) {
    (void)state;
    enum { N = 4 };
    mem_conn c[N];
    memset(c, 0, sizeof c);
    for (int i = 0; i < N; i++) {
        int server, client;
        assert_true(tcp_pair(AF_INET, &server, &client));
        conn_make(&c[i], server, client);
    }
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < N; i++)
            send_all(c[i].client, "abc", 3);
        for (int i = 0; i < N; i++)
            run_until_got(&c[i], 3u * (size_t)round);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(c[i].bad_address, 0);
        assert_true(c[i].calls >= 3);
        assert_memory_equal(RLDataGetBytePtr(c[i].kept), &c[i].client_addr, c[i].client_len);
        conn_done(&c[i]);
    }
}

/* A callback that runs the loop nested, in which another connection's
 * callback comes: each gets its own peer's address, and the outer one's
 * is unchanged after the nested run. */
static mem_conn *nest_other;
static int nest_bad;
static void nesting_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    mem_conn *c = info;
    data_cb(s, type, address, data, info);
    if (type != kRLSocketDataCallBack || !nest_other)
        return;
    mem_conn *other = nest_other;
    nest_other = NULL;
    size_t want = other->got + 1;
    send_all(other->client, "n", 1);
    double end = rl_test_now() + 10;
    while (other->got < want && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    if (!address || (socklen_t)RLDataGetLength(address) != c->client_len ||
        memcmp(RLDataGetBytePtr(address), &c->client_addr, c->client_len) != 0)
        nest_bad++;
}

/* A socket made in the block of a freed one whose peer's address the
 * thread keeps for the callbacks (the last Data callback was the freed
 * one's) gets its own peer's address, not the freed one's. The freed
 * block comes back once RL_QUARANTINE (64) more of its class were freed
 * after it (under ASan, 1024: not waited for there). */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
static void bare_conn(mem_conn *c) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    c->client = sv[1];
    c->client_len = sizeof c->client_addr;
    assert_int_equal(getsockname(c->client, (struct sockaddr *)&c->client_addr, &c->client_len), 0);
    RLSocketContext ctx = {0, c, NULL, NULL, NULL};
    c->s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, data_cb, &ctx);
    assert_non_null(c->s);
}

static void test_socket_in_a_freed_ones_block_gets_its_own_peer(void **state) {
    (void)state;
    enum { HELD = 80, TRIES = 80 };
    static mem_conn held[HELD], tried[TRIES];
    memset(held, 0, sizeof held);
    memset(tried, 0, sizeof tried);
    for (int i = 0; i < HELD; i++)
        bare_conn(&held[i]);
    int server, client;
    mem_conn a = {0};
    assert_true(tcp_pair(AF_INET, &server, &client));
    conn_make(&a, server, client);
    send_all(a.client, "a", 1);
    run_until_got(&a, 1);
    uintptr_t was = (uintptr_t)a.s;
    conn_done(&a);
    RLRunLoopRunInMode(MODE, 0, true);
    for (int i = 0; i < HELD; i++) /* a's block leaves quarantine */
        conn_done(&held[i]);
    int n = 0, at = -1;
    while (n < TRIES && at < 0) {
        bare_conn(&tried[n]);
        if ((uintptr_t)tried[n].s == was)
            at = n;
        n++;
    }
#if !(defined(RL_PLAIN) && RL_PLAIN) && !defined(__SANITIZE_ADDRESS__) && !__has_feature(address_sanitizer)
    assert_true(at >= 0); /* the pool gave a's block again */
#endif
    if (at >= 0) {
        RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, tried[at].s, 0);
        assert_non_null(src);
        assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
        RLRelease(src);
        send_all(tried[at].client, "b", 1);
        run_until_got(&tried[at], 1);
        assert_int_equal(tried[at].bad_address, 0); /* its own (unnamed) peer's, not a's IPv4 one */
    }
    for (int i = 0; i < n; i++)
        conn_done(&tried[i]);
    RLRunLoopRunInMode(MODE, 0, true);
}

static void test_nested_callbacks_get_their_own_peers(void **state) {
    (void)state;
    mem_conn a = {0}, b = {0};
    int server, client;
    assert_true(tcp_pair(AF_INET, &server, &client));
    a.client = client;
    a.client_len = sizeof a.client_addr;
    assert_int_equal(getsockname(client, (struct sockaddr *)&a.client_addr, &a.client_len), 0);
    RLSocketContext ctx = {0, &a, NULL, NULL, NULL};
    a.s = RLSocketCreateWithNative(NULL, server, kRLSocketDataCallBack, nesting_cb, &ctx);
    assert_non_null(a.s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, a.s, 0);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    assert_true(tcp_pair(AF_INET, &server, &client));
    conn_make(&b, server, client);
    /* b's callback first, so that the thread's address data is b's. */
    send_all(b.client, "b", 1);
    run_until_got(&b, 1);
    nest_other = &b;
    nest_bad = 0;
    send_all(a.client, "a", 1);
    run_until_got(&a, 1);
    assert_int_equal(b.got, 2);
    assert_int_equal(nest_bad, 0);
    assert_int_equal(a.bad_address, 0);
    assert_int_equal(b.bad_address, 0);
    /* And again, both in turn, after it. */
    send_all(a.client, "a", 1);
    run_until_got(&a, 2);
    send_all(b.client, "b", 1);
    run_until_got(&b, 3);
    assert_int_equal(a.bad_address + b.bad_address, 0);
    conn_done(&a);
    conn_done(&b);
}

/* A peer address longer than a socket keeps in itself (a Unix socket
 * bound to a long path) comes in full, kept in an RLData. */
static void test_long_peer_address(void **state) {
    (void)state;
    char dir[] = "/tmp/rl-sockmem-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct sockaddr_un la = {.sun_family = AF_UNIX}, ca = {.sun_family = AF_UNIX};
    snprintf(la.sun_path, sizeof la.sun_path, "%s/listener-with-a-long-name", dir);
    snprintf(ca.sun_path, sizeof ca.sun_path, "%s/client-with-a-long-name-too", dir);
    int l = socket(AF_UNIX, SOCK_STREAM, 0), client = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(l >= 0 && client >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&la, sizeof la), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(bind(client, (struct sockaddr *)&ca, sizeof ca), 0);
    assert_int_equal(connect(client, (struct sockaddr *)&la, sizeof la), 0);
    int server = accept(l, NULL, NULL);
    assert_true(server >= 0);
    mem_conn c = {0};
    conn_make(&c, server, client);
    assert_true(c.client_len > 28);
    send_all(client, "hi", 2);
    run_until_got(&c, 2);
    send_all(client, "there", 5);
    run_until_got(&c, 7);
    assert_int_equal(c.bad_address, 0);
    /* Its own block, and the RLData. */
    assert_true(rl__socket_footprint(c.s) > IDLE_MAX);
    conn_done(&c);
    close(l);
    unlink(la.sun_path);
    unlink(ca.sun_path);
    assert_int_equal(rmdir(dir), 0);
}

static int fd_calls;
static void fd_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)types, (void)info;
    fd_calls++;
    (void)RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
}

static RLFileDescriptorRef watch(int fd) {
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, fd, false, fd_cb, NULL);
    assert_non_null(f);
    RLRunLoopSourceRef src = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    return f;
}

/* One source on each of many fds: the table's entries, no block for any
 * of them; a second source on one fd makes one, its leaving keeps it,
 * the last leaving frees it; both sources are served meanwhile. */
static void test_fd_table_holds_no_block_for_one_source(void **state) {
    (void)state;
    enum { N = 40 };
    int p[N][2];
    RLFileDescriptorRef f[N];
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    for (int i = 0; i < N; i++) {
        assert_int_equal(pipe(p[i]), 0);
        f[i] = watch(p[i][0]);
    }
    size_t blocks;
    size_t bytes = rl__fd_table_bytes(rl, &blocks);
    assert_int_equal(blocks, 0);
    /* 16 bytes an entry (before: 24, and 32 before that), entries for a
     * power-of-two span of fd numbers (16 at least) within 0 to the
     * highest watched. */
    size_t span = 16;
    while (span < (size_t)p[N - 1][0] + 1)
        span *= 2;
    assert_true(bytes <= 16 * span);

    RLFileDescriptorRef g = watch(p[0][0]), h = watch(p[0][0]);
    (void)rl__fd_table_bytes(rl, &blocks);
    assert_int_equal(blocks, 1);
    assert_int_equal(write(p[0][1], "x", 1), 1);
    fd_calls = 0;
    double end = rl_test_now() + 10;
    while (fd_calls < 3 && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    assert_true(fd_calls >= 3); /* f[0], g and h */
    assert_true(RLFileDescriptorInvalidate(g));
    RLRelease(g);
    assert_true(RLFileDescriptorInvalidate(h));
    RLRelease(h);
    (void)rl__fd_table_bytes(rl, &blocks);
    assert_int_equal(blocks, 1); /* f[0] is still there */
    assert_true(RLFileDescriptorInvalidate(f[0]));
    (void)rl__fd_table_bytes(rl, &blocks);
    assert_int_equal(blocks, 0);
    for (int i = 0; i < N; i++) {
        if (i)
            assert_true(RLFileDescriptorInvalidate(f[i]));
        RLRelease(f[i]);
        close(p[i][0]);
        close(p[i][1]);
    }
}

/* A connection's run-loop source in one mode takes no block of its own:
 * it is in its socket's (counted there), its first membership inside it,
 * and it copies no context (it has none) (before: a block of 128 bytes;
 * 144, with the perform pointer and the bucket link an fd source never
 * uses; 160, with the membership's loop pointer and a two-pointer list
 * head; before that a 192-byte source and a 112-byte malloc'd
 * membership). A second mode's membership is a block of its own, given
 * back when the source leaves that mode. A program's source keeps its
 * context (RLRunLoopSourceGetContext), and an fd source reads as having
 * none. */
#define SOURCE_MAX 0

static void test_idle_connection_source_is_one_block(void **state) {
    (void)state;
    int server, client;
    assert_true(tcp_pair(AF_INET, &server, &client));
    mem_conn c = {0};
    conn_make(&c, server, client);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, c.s, 0); /* the one conn_make added */
    assert_non_null(src);
    size_t one = rl__source_footprint(src);
    assert_true(one <= SOURCE_MAX);
    assert_true(one + rl__socket_footprint(c.s) <= IDLE_MAX + SOURCE_MAX);
    RLRunLoopSourceContext ctx;
    memset(&ctx, 0xAB, sizeof ctx);
    assert_true(RLRunLoopSourceGetContext(src, &ctx));
    RLRunLoopSourceContext zero = {0};
    assert_memory_equal(&ctx, &zero, sizeof ctx);
    send_all(client, "x", 1);
    run_until_got(&c, 1);
    assert_int_equal(rl__source_footprint(src), one);
    /* A second mode: one more membership, served there too, given back. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopAddSource(rl, src, "MEM2"));
    assert_true(rl__source_footprint(src) > one);
    send_all(client, "y", 1);
    double end = rl_test_now() + 10;
    while (c.got < 2 && rl_test_now() < end)
        RLRunLoopRunInMode("MEM2", 0.05, true);
    assert_int_equal(c.got, 2);
    /* Leaving the first mode frees the inline one: the source is in MEM2 only. */
    assert_true(RLRunLoopRemoveSource(rl, src, MODE));
    assert_false(RLRunLoopContainsSource(rl, src, MODE));
    assert_true(RLRunLoopContainsSource(rl, src, "MEM2"));
    assert_true(RLRunLoopAddSource(rl, src, MODE)); /* back into the inline slot */
    assert_true(RLRunLoopRemoveSource(rl, src, "MEM2"));
    assert_int_equal(rl__source_footprint(src), one);
    send_all(client, "z", 1);
    run_until_got(&c, 3);
    RLRelease(src);
    conn_done(&c);
}

/* A socket keeps the context's callbacks a program gives, in a block of
 * their own: GetContext gives them back, the release comes once, at the
 * invalidation; a context of info alone needs no such block. */
static int sock_retains, sock_releases;
static const void *sock_ctx_retain(const void *p) { sock_retains++; return p; }
static void sock_ctx_release(const void *p) { (void)p; sock_releases++; }
static char *sock_ctx_describe(const void *p) { (void)p; return strdup("described"); }

static void test_socket_context_callbacks_kept_aside(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketContext plain = {0, &sock_retains, NULL, NULL, NULL};
    RLSocketRef a = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, data_cb, &plain);
    assert_non_null(a);
    RLSocketContext in = {0, &sock_releases, sock_ctx_retain, sock_ctx_release, sock_ctx_describe};
    RLSocketRef b = RLSocketCreateWithNative(NULL, sv[1], kRLSocketDataCallBack, data_cb, &in);
    assert_non_null(b);
    assert_int_equal(sock_retains, 1);
    assert_true(rl__socket_footprint(b) > rl__socket_footprint(a));
    RLSocketContext got;
    memset(&got, 0xAB, sizeof got);
    assert_true(RLSocketGetContext(a, &got));
    assert_memory_equal(&got, &plain, sizeof got);
    memset(&got, 0xAB, sizeof got);
    assert_true(RLSocketGetContext(b, &got));
    assert_memory_equal(&got, &in, sizeof got);
    assert_int_equal(sock_releases, 0);
    assert_true(RLSocketInvalidate(b));
    assert_int_equal(sock_releases, 1);
    RLRelease(b);
    assert_true(RLSocketInvalidate(a));
    RLRelease(a);
    assert_int_equal(sock_releases, 1);
    assert_int_equal(sock_retains, 1);
}

/* The socket and its fd object share a block, each keeping its own
 * lifetime: the socket's source (which holds the fd object) may outlive
 * the socket, or go first; a socket released while valid lives on (its
 * fd object holds it) until invalidated, through its source too. Under
 * ASan a block given back early would show here. */
static void shared_block_case(int order) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    mem_conn c = {0};
    RLSocketContext ctx = {0, &c, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, data_cb, &ctx);
    assert_non_null(s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(src);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopAddSource(rl, src, MODE));
    assert_int_equal(write(sv[1], "ab", 2), 2);
    double end = rl_test_now() + 10;
    while (c.got < 2 && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    assert_int_equal(c.got, 2);
    switch (order) {
    case 0: /* the socket goes first; its source lives on, invalid */
        assert_true(RLSocketInvalidate(s));
        assert_true(RLRelease(s));
        assert_false(RLRunLoopSourceIsValid(src));
        assert_false(RLRunLoopContainsSource(rl, src, MODE));
        assert_true(RLRelease(src));
        break;
    case 1: /* the source goes first, still in the mode */
        assert_true(RLRelease(src));
        assert_true(RLSocketIsValid(s));
        assert_true(RLSocketInvalidate(s));
        assert_true(RLRelease(s));
        break;
    default: /* released while valid: it lives on, until its source's invalidation */
        assert_true(RLRelease(s));
        assert_true(RLSocketIsValid(s));
        assert_true(RLRunLoopSourceIsValid(src));
        assert_true(RLSocketInvalidate(s));
        assert_false(RLRunLoopSourceIsValid(src));
        assert_true(RLRelease(src));
        break;
    }
    RLRunLoopRunInMode(MODE, 0, true);
    close(sv[1]);
}

static void test_socket_and_fd_object_share_a_block(void **state) {
    (void)state;
    for (int order = 0; order < 3; order++)
        shared_block_case(order);
}

/* A program's source keeps its whole context. */
static int ctx_performs;
static void ctx_perform(void *info) { ctx_performs += info == &ctx_performs; }
static bool ctx_equal(const void *a, const void *b) { return a == b; }
static RLHashCode ctx_hash(const void *info) { return (RLHashCode)(uintptr_t)info; }

static void test_program_source_keeps_its_context(void **state) {
    (void)state;
    RLRunLoopSourceContext in = {0};
    in.info = &ctx_performs;
    in.perform = ctx_perform;
    in.equal = ctx_equal;
    in.hash = ctx_hash;
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 3, &in);
    assert_non_null(s);
    RLRunLoopSourceContext out;
    memset(&out, 0xAB, sizeof out);
    assert_true(RLRunLoopSourceGetContext(s, &out));
    assert_memory_equal(&out, &in, sizeof in);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopAddSource(rl, s, MODE));
    assert_true(RLRunLoopAddSource(rl, s, "MEM2"));
    ctx_performs = 0;
    assert_true(RLRunLoopSourceSignal(s));
    RLRunLoopRunInMode("MEM2", 0, true);
    assert_int_equal(ctx_performs, 1);
    RLRunLoopSourceInvalidate(s);
    assert_false(RLRunLoopContainsSource(rl, s, MODE));
    RLRelease(s);
}

/* A mode's equality buckets for its sources: 2 bytes a source (4 a
 * bucket; before: 8 bytes, one a bucket), each source still found, added
 * once, removed. */
static void nothing_perform(void *info) { (void)info; }

static void test_mode_buckets_two_bytes_a_source(void **state) {
    (void)state;
    enum { N = 512 };
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef s[N];
    rl__loop_mem before, after;
    (void)rl__loop_held_bytes(rl, &before);
    for (int i = 0; i < N; i++) {
        RLRunLoopSourceContext ctx = {0};
        ctx.info = &s[i];
        ctx.perform = nothing_perform;
        s[i] = RLRunLoopSourceCreate(NULL, i % 3, &ctx);
        assert_non_null(s[i]);
        assert_true(RLRunLoopAddSource(rl, s[i], "MEMB"));
    }
    (void)rl__loop_held_bytes(rl, &after);
    /* The new mode itself (its record and name) and its buckets. */
    assert_true(after.modes - before.modes <= 1024 + N * 2);
    for (int i = 0; i < N; i++) {
        assert_true(RLRunLoopContainsSource(rl, s[i], "MEMB"));
        assert_true(RLRunLoopAddSource(rl, s[i], "MEMB")); /* already there: nothing */
    }
    for (int i = 0; i < N; i += 2)
        assert_true(RLRunLoopRemoveSource(rl, s[i], "MEMB"));
    for (int i = 0; i < N; i++)
        assert_int_equal(RLRunLoopContainsSource(rl, s[i], "MEMB"), i % 2 == 1);
    for (int i = 0; i < N; i++) {
        RLRunLoopSourceInvalidate(s[i]);
        assert_false(RLRunLoopContainsSource(rl, s[i], "MEMB"));
        RLRelease(s[i]);
    }
}

/* fd sources, each equal to itself only, are in no bucket: a mode of
 * hundreds of them holds no bucket bytes for them; each is still found,
 * added once, removed. */
static void test_fd_sources_take_no_buckets(void **state) {
    (void)state;
    enum { N = 256 };
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLFileDescriptorRef f[N];
    RLRunLoopSourceRef s[N];
    rl__loop_mem before, after;
    RLRunLoopSourceContext ctx = {0};
    ctx.perform = nothing_perform;
    RLRunLoopSourceRef prog = RLRunLoopSourceCreate(NULL, 0, &ctx);
    assert_true(RLRunLoopAddSource(rl, prog, "MEMF")); /* the mode, with its first buckets */
    (void)rl__loop_held_bytes(rl, &before);
    for (int i = 0; i < N; i++) {
        f[i] = RLFileDescriptorCreate(NULL, p[0], false, fd_cb, NULL);
        assert_non_null(f[i]);
        s[i] = RLFileDescriptorCreateRunLoopSource(NULL, f[i], i % 3);
        assert_non_null(s[i]);
        assert_true(RLRunLoopAddSource(rl, s[i], "MEMF"));
    }
    (void)rl__loop_held_bytes(rl, &after);
    assert_int_equal(after.modes, before.modes);
    for (int i = 0; i < N; i++) {
        assert_true(RLRunLoopContainsSource(rl, s[i], "MEMF"));
        assert_true(RLRunLoopAddSource(rl, s[i], "MEMF"));
        assert_true(RLRunLoopAddSource(rl, s[i], "MEMF2")); /* a second membership, malloc'd */
    }
    for (int i = 0; i < N; i += 2) {
        assert_true(RLRunLoopRemoveSource(rl, s[i], "MEMF"));
        assert_true(RLRunLoopRemoveSource(rl, s[i], "MEMF2"));
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(RLRunLoopContainsSource(rl, s[i], "MEMF"), i % 2 == 1);
        assert_int_equal(RLRunLoopContainsSource(rl, s[i], "MEMF2"), i % 2 == 1);
    }
    assert_true(RLRunLoopContainsSource(rl, prog, "MEMF"));
    for (int i = 0; i < N; i++) {
        assert_true(RLFileDescriptorInvalidate(f[i]));
        assert_false(RLRunLoopContainsSource(rl, s[i], "MEMF"));
        assert_false(RLRunLoopContainsSource(rl, s[i], "MEMF2"));
        RLRelease(s[i]);
        RLRelease(f[i]);
    }
    RLRunLoopSourceInvalidate(prog);
    RLRelease(prog);
    close(p[0]);
    close(p[1]);
}

/* A socket keeps its callout as a number in the process's table of
 * callouts (a byte, not a pointer): a program with more distinct callouts
 * than the table holds still has each socket call its own, those past the
 * table keeping theirs in a block aside; a callout already in the table
 * takes its number again. */
enum { NMANY = 300 };
static int many_calls[NMANY];
static void many_hit(int n, RLSocketCallBackType type, const void *data) {
    if (type == kRLSocketDataCallBack && RLDataGetLength(data) == 1)
        many_calls[n]++;
}
#define MANY_CB3(a, b, c)                                                                                           \
    static void many_cb_##a##b##c(RLSocketRef s, RLSocketCallBackType t, RLDataRef ad, const void *d, void *in) {    \
        (void)s, (void)ad, (void)in;                                                                                  \
        many_hit(a * 100 + b * 10 + c, t, d);                                                                         \
    }
#define MANY_CB2(a, b) MANY_CB3(a, b, 0) MANY_CB3(a, b, 1) MANY_CB3(a, b, 2) MANY_CB3(a, b, 3) MANY_CB3(a, b, 4) \
    MANY_CB3(a, b, 5) MANY_CB3(a, b, 6) MANY_CB3(a, b, 7) MANY_CB3(a, b, 8) MANY_CB3(a, b, 9)
#define MANY_CB1(a) MANY_CB2(a, 0) MANY_CB2(a, 1) MANY_CB2(a, 2) MANY_CB2(a, 3) MANY_CB2(a, 4) MANY_CB2(a, 5) \
    MANY_CB2(a, 6) MANY_CB2(a, 7) MANY_CB2(a, 8) MANY_CB2(a, 9)
MANY_CB1(0) MANY_CB1(1) MANY_CB1(2)
#define MANY_P3(a, b, c) many_cb_##a##b##c,
#define MANY_P2(a, b) MANY_P3(a, b, 0) MANY_P3(a, b, 1) MANY_P3(a, b, 2) MANY_P3(a, b, 3) MANY_P3(a, b, 4) \
    MANY_P3(a, b, 5) MANY_P3(a, b, 6) MANY_P3(a, b, 7) MANY_P3(a, b, 8) MANY_P3(a, b, 9)
#define MANY_P1(a) MANY_P2(a, 0) MANY_P2(a, 1) MANY_P2(a, 2) MANY_P2(a, 3) MANY_P2(a, 4) MANY_P2(a, 5) \
    MANY_P2(a, 6) MANY_P2(a, 7) MANY_P2(a, 8) MANY_P2(a, 9)
static const RLSocketCallBack many_cbs[NMANY] = {MANY_P1(0) MANY_P1(1) MANY_P1(2)};

static int many_total(void) {
    int n = 0;
    for (int i = 0; i < NMANY; i++)
        n += many_calls[i];
    return n;
}

static void test_callouts_past_the_table(void **state) {
    (void)state;
    RLSocketRef s[NMANY];
    int peer[NMANY];
    size_t first = 0;
    for (int i = 0; i < NMANY; i++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        peer[i] = sv[1];
        s[i] = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, many_cbs[i], NULL);
        assert_non_null(s[i]);
        if (i == NMANY - 1) /* before any callout (a ring's reads make a rare part too) */
            assert_true(rl__socket_footprint(s[NMANY - 1]) > (first = rl__socket_footprint(s[0])));
        RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s[i], 0);
        assert_non_null(src);
        assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "MANY"));
        RLRelease(src);
        send_all(peer[i], "x", 1);
    }
    double end = rl_test_now() + 10;
    while (many_total() < NMANY && rl_test_now() < end)
        RLRunLoopRunInMode("MANY", 0.05, true);
    for (int i = 0; i < NMANY; i++)
        assert_int_equal(many_calls[i], 1);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef again = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, many_cbs[0], NULL);
    assert_non_null(again);
    assert_int_equal(rl__socket_footprint(again), first); /* s[0]'s before its callout */
    assert_true(RLSocketInvalidate(again));
    RLRelease(again);
    close(sv[1]);
    for (int i = 0; i < NMANY; i++) {
        assert_true(RLSocketInvalidate(s[i]));
        RLRelease(s[i]);
        close(peer[i]);
    }
}

/* The resident pages of [p, p + len) (mincore). */
static size_t resident_pages(const void *p, size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1), end = (uintptr_t)p + len;
    size_t n = (end - a + page - 1) / page;
    unsigned char *v = malloc(n);
    assert_non_null(v);
    assert_int_equal(mincore((void *)a, end - a, v), 0);
    size_t in = 0;
    for (size_t i = 0; i < n; i++)
        in += v[i] & 1;
    free(v);
    return in;
}

typedef struct span_rec {
    uint64_t a, b, c; /* 24 bytes: between a loop's fd table entry (16) and the io_uring backend's record (40) */
} span_rec;

/* An fd-indexed table doubled to fit a far fd takes memory for the
 * records in use, not for the span (before: every record zeroed, so a
 * table stretched to fd 200,000 for two fds took 6 MB); records read
 * zero until written, keep their values through growth, and a lower fd
 * moves them up. */
static void test_fd_table_memory_follows_use(void **state) {
    (void)state;
    void *t = NULL;
    uint32_t lo = 0, n = 0;
    assert_true(rl__span_room(&t, &lo, &n, sizeof(span_rec), 300));
    assert_int_equal(lo, 300);
    span_rec *r = t;
    r[0] = (span_rec){1, 2, 3};
    assert_true(rl__span_room(&t, &lo, &n, sizeof(span_rec), 200000));
    r = t;
    assert_true(n >= 200000 - 300 + 1);
    assert_int_equal(r[0].a, 1);
    assert_int_equal(r[0].c, 3);
    r[200000 - 300] = (span_rec){4, 5, 6};
    size_t bytes = (size_t)n * sizeof(span_rec);
    /* Two records written: a handful of pages, not the ~1,500 of the span. */
    assert_true(resident_pages(t, bytes) <= 8);
    for (size_t i = 1; i < n; i += 997)
        if (i != 200000 - 300)
            assert_true(r[i].a == 0 && r[i].b == 0 && r[i].c == 0);
    /* A lower fd: the records move up, the new ones read zero. */
    assert_true(rl__span_room(&t, &lo, &n, sizeof(span_rec), 100));
    r = t;
    assert_int_equal(lo, 100);
    assert_int_equal(r[200].b, 2);
    assert_int_equal(r[200000 - 100].b, 5);
    assert_true(r[0].a == 0 && r[199].c == 0 && r[201].a == 0 && r[n - 1].c == 0);
    rl__span_free(t, n, sizeof(span_rec));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_ipv4_connection_holds_its_block),
        cmocka_unit_test(test_idle_ipv6_connection_holds_its_block),
        cmocka_unit_test(test_each_callback_gets_its_own_peer),
        cmocka_unit_test(test_nested_callbacks_get_their_own_peers),
        cmocka_unit_test(test_long_peer_address),
        cmocka_unit_test(test_fd_table_holds_no_block_for_one_source),
        cmocka_unit_test(test_idle_connection_source_is_one_block),
        cmocka_unit_test(test_program_source_keeps_its_context),
        cmocka_unit_test(test_socket_context_callbacks_kept_aside),
        cmocka_unit_test(test_socket_and_fd_object_share_a_block),
        cmocka_unit_test(test_mode_buckets_two_bytes_a_source),
        cmocka_unit_test(test_fd_sources_take_no_buckets),
        cmocka_unit_test(test_callouts_past_the_table),
        cmocka_unit_test(test_fd_table_memory_follows_use),
        cmocka_unit_test(test_socket_in_a_freed_ones_block_gets_its_own_peer), /* last: it opens fds */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
