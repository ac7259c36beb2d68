/* test_echo.c — the echo examples (examples/c/echo_server.c and
 * echo_client.c, included here unchanged) run in this process, so that the
 * sanitizer builds check them and the library under them:
 *   - 1,000 concurrent loopback connections to the server (all open at
 *     once), every byte echoed and checked, every connection closed after
 *     its client's end;
 *   - back-pressure: a client that sends without reading is stopped by the
 *     kernel (the server pauses reading instead of buffering without end),
 *     while another client is served meanwhile;
 *   - SIGINT and SIGTERM stop the server cleanly, closing live connections;
 *   - the client with a pipe, a regular file and an empty input, against
 *     the server; a refused connection, an unknown host and a server that
 *     closes early are reported with status 1.
 * The scripts run the built programs as well (scripts/run-examples.sh,
 * scripts/check-install.sh). */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define main echo_server_main
#include "../../examples/c/echo_server.c"
#undef main
#define main echo_client_main
#include "../../examples/c/echo_client.c"
#undef main

/* ---- the server on a thread of its own ---------------------------------- */

typedef struct server_thread {
    pthread_t thread;
    int out_fd;   /* the write end of the pipe the server prints to */
    FILE *lines;  /* its read end */
    unsigned port;
    int status;
    char summary[512]; /* the "stopping on ..." line */
} server_thread;

static void *server_main(void *arg) {
    server_thread *s = arg;
    FILE *out = fdopen(s->out_fd, "w");
    if (!out) {
        close(s->out_fd);
        s->status = 99;
        return NULL;
    }
    s->status = echo_server_run("127.0.0.1", 0, false, out);
    fclose(out);
    return NULL;
}

/* Starts the server and reads its first line for the port. */
static void server_start(server_thread *s) {
    memset(s, 0, sizeof *s);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    s->out_fd = p[1];
    s->lines = fdopen(p[0], "r");
    assert_non_null(s->lines);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
    char line[256];
    assert_non_null(fgets(line, sizeof line, s->lines));
    assert_int_equal(sscanf(line, "listening on %u", &s->port), 1);
    assert_true(s->port > 0 && s->port < 65536);
}

/* Stops it with signum (blocked in every thread of this program, so the
 * server's signal source takes it) and collects its last line. */
static void server_stop(server_thread *s, int signum) {
    assert_int_equal(kill(getpid(), signum), 0);
    assert_int_equal(pthread_join(s->thread, NULL), 0);
    char line[512];
    while (fgets(line, sizeof line, s->lines))
        if (strncmp(line, "stopping on ", 12) == 0)
            snprintf(s->summary, sizeof s->summary, "%s", line);
    fclose(s->lines);
    assert_int_equal(s->status, 0);
    if (!s->summary[0])
        fail_msg("the server printed no summary line");
}

static int open_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 65536; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

/* ---- raw clients (the test's own, without the library) ------------------ */

static int connect_loopback(unsigned port, bool nonblocking) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    assert_true(fd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int r = connect(fd, (struct sockaddr *)&sin, sizeof sin);
    assert_true(r == 0 || (nonblocking && errno == EINPROGRESS));
    return fd;
}

/* Byte k of connection i's data: depends on both, so bytes that went to the
 * wrong client, or were lost, duplicated or reordered, show. */
static uint8_t pattern(unsigned i, size_t k) { return (uint8_t)(k * 31u + (k >> 8) * 7u + i * 101u + (i >> 8)); }

typedef struct raw_conn {
    int fd;
    unsigned id;
    size_t size, sent, received;
    bool connected, shut, ended;
} raw_conn;

/* Sends what raw_conn may send now (up to `limit` bytes of its data). */
static void raw_send(raw_conn *c, size_t limit) {
    uint8_t buf[16384];
    while (c->sent < limit) {
        size_t n = limit - c->sent < sizeof buf ? limit - c->sent : sizeof buf;
        for (size_t k = 0; k < n; k++)
            buf[k] = pattern(c->id, c->sent + k);
        ssize_t r = send(c->fd, buf, n, MSG_NOSIGNAL);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        assert_true(r > 0);
        c->sent += (size_t)r;
    }
}

/* Reads what is there and checks it; returns false on a mismatch. */
static bool raw_receive(raw_conn *c) {
    uint8_t buf[16384];
    for (;;) {
        ssize_t r = recv(c->fd, buf, sizeof buf, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (r < 0) {
            print_error("connection %u: recv: %s\n", c->id, strerror(errno));
            return false;
        }
        if (r == 0) {
            c->ended = true;
            return true;
        }
        for (ssize_t k = 0; k < r; k++) {
            if (buf[k] != pattern(c->id, c->received + (size_t)k)) {
                print_error("connection %u: byte %zu is %u, expected %u\n", c->id, c->received + (size_t)k, buf[k],
                            pattern(c->id, c->received + (size_t)k));
                return false;
            }
        }
        c->received += (size_t)r;
        if (c->received > c->size) {
            print_error("connection %u: %zu bytes back for %zu sent\n", c->id, c->received, c->size);
            return false;
        }
    }
}

/* Drives the connections with epoll until `done` says so (or a generous
 * deadline, to fail rather than hang). phase_limit(c) is how much c may
 * send now; a connection whose data is all sent shuts its side down if
 * `shut` is set. */
static void drive(raw_conn *conns, unsigned n, size_t (*phase_limit)(const raw_conn *), bool shut,
                  bool (*done)(const raw_conn *, unsigned)) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    assert_true(ep >= 0);
    for (unsigned i = 0; i < n; i++) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = i};
        assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev), 0);
    }
    double deadline = rl_test_now() + 300;
    struct epoll_event evs[256];
    while (!done(conns, n)) {
        if (rl_test_now() > deadline)
            fail_msg("the connections did not finish within 300 s");
        int k = epoll_wait(ep, evs, 256, 100);
        assert_true(k >= 0 || errno == EINTR);
        for (int j = 0; j < k; j++) {
            raw_conn *c = &conns[evs[j].data.u32];
            if (!c->connected && (evs[j].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                int err = 0;
                socklen_t len = sizeof err;
                assert_int_equal(getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
                if (err)
                    fail_msg("connection %u: connect failed: %s", c->id, strerror(err));
                c->connected = true;
            }
            if (!c->connected)
                continue;
            if (evs[j].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (!raw_receive(c))
                    fail_msg("connection %u: wrong bytes came back", c->id);
            }
            size_t limit = phase_limit(c);
            if (evs[j].events & EPOLLOUT)
                raw_send(c, limit);
            uint32_t want = EPOLLIN;
            if (c->sent < limit)
                want |= EPOLLOUT;
            else if (shut && c->sent == c->size && !c->shut) {
                assert_int_equal(shutdown(c->fd, SHUT_WR), 0);
                c->shut = true;
            }
            if (c->ended)
                want = 0;
            struct epoll_event ev = {.events = want, .data.u32 = evs[j].data.u32};
            assert_int_equal(epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev), 0);
        }
    }
    close(ep);
}

#define HELLO 16 /* bytes each connection sends first, before any sends the rest */

static size_t limit_hello(const raw_conn *c) { return c->size < HELLO ? c->size : HELLO; }
static size_t limit_all(const raw_conn *c) { return c->size; }

static bool all_said_hello(const raw_conn *c, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        if (c[i].received < limit_hello(&c[i]))
            return false;
    return true;
}

static bool all_ended(const raw_conn *c, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        if (!c[i].ended)
            return false;
    return true;
}

/* ---- 1,000 concurrent connections --------------------------------------- */

#define WANTED_CONNECTIONS 1000u
/* The server's and the test's descriptor for each connection, and a margin
 * for the loops, the pipes and the runtime. */
#define FDS_PER_CONNECTION 2u
#define FD_MARGIN 100u

static void test_thousand_concurrent_connections(void **state) {
    (void)state;
    /* Raise the soft limit as far as the hard one allows, and use what
     * that gives, saying so when it is less than asked. */
    struct rlimit lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
    if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    }
    unsigned n = WANTED_CONNECTIONS;
    rlim_t need = (rlim_t)WANTED_CONNECTIONS * FDS_PER_CONNECTION + FD_MARGIN;
    bool reduced = lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need;
    if (reduced) {
        n = lim.rlim_cur > FD_MARGIN + 2 * FDS_PER_CONNECTION
                ? (unsigned)((lim.rlim_cur - FD_MARGIN) / FDS_PER_CONNECTION)
                : 1;
        print_message("NOTE: RLIMIT_NOFILE hard limit is %llu, below the %llu descriptors that %u connections need "
                      "(2 per connection + %u); running %u connections instead, and reporting this test as skipped\n",
                      (unsigned long long)lim.rlim_cur, (unsigned long long)need, WANTED_CONNECTIONS, FD_MARGIN, n);
    }
    int fds_before = open_fds();
    server_thread server;
    server_start(&server);

    raw_conn *conns = calloc(n, sizeof *conns);
    assert_non_null(conns);
    size_t total = 0;
    size_t mean = (size_t)rl_test_iters(8192);
    for (unsigned i = 0; i < n; i++) {
        conns[i].id = i;
        /* from HELLO bytes up to about twice the mean, spread over the connections */
        conns[i].size = HELLO + (size_t)((i * 7919u) % (unsigned)(2 * mean));
        conns[i].fd = connect_loopback(server.port, true);
        total += conns[i].size;
    }
    /* Every connection is answered before any sends the rest: all n are
     * open in the server at once. */
    drive(conns, n, limit_hello, false, all_said_hello);
    drive(conns, n, limit_all, true, all_ended);

    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(conns[i].received, conns[i].size);
        close(conns[i].fd);
    }
    free(conns);
    server_stop(&server, SIGTERM);
    char expect[256];
    snprintf(expect, sizeof expect, "stopping on SIGTERM: %u connections served (at most %u at once), %zu bytes echoed,",
             n, n, total);
    if (strncmp(server.summary, expect, strlen(expect)) != 0)
        fail_msg("summary \"%s\", expected it to start \"%s\"", server.summary, expect);
    assert_int_equal(open_fds(), fds_before);
    if (reduced)
        skip(); /* ran, but with fewer connections than the test is about */
}

/* ---- back-pressure ------------------------------------------------------- */

static void test_back_pressure_pauses_reading_not_the_loop(void **state) {
    (void)state;
    server_thread server;
    server_start(&server);
    /* A client that sends and never reads: small buffers on its side, so
     * that the kernel stops it soon once the server stops reading. */
    int greedy = connect_loopback(server.port, false);
    int small = 16384;
    assert_int_equal(setsockopt(greedy, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    assert_int_equal(setsockopt(greedy, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    raw_conn g = {.fd = greedy, .id = 7, .size = 256u << 20, .connected = true};
    assert_int_equal(fcntl(greedy, F_SETFL, O_NONBLOCK), 0);
    /* Send until nothing moves for a while. A server that buffered whatever
     * came would take all 256 MB. */
    double quiet_since = rl_test_now();
    while (g.sent < g.size && rl_test_now() - quiet_since < 0.5) {
        size_t before = g.sent;
        raw_send(&g, g.sent + 65536 < g.size ? g.sent + 65536 : g.size);
        if (g.sent != before)
            quiet_since = rl_test_now();
        else
            usleep(1000);
    }
    assert_true(g.sent < g.size);
    /* Meanwhile another client is served. */
    int other = connect_loopback(server.port, false);
    assert_int_equal(send(other, "ping\n", 5, MSG_NOSIGNAL), 5);
    char back[8] = {0};
    size_t got = 0;
    while (got < 5) {
        ssize_t r = recv(other, back + got, 5 - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
    assert_string_equal(back, "ping\n");
    close(other);
    /* The greedy client reads now: everything it sent comes back, in order,
     * and the rest of its data goes through as well. */
    g.size = g.sent + (1u << 20);
    g.connected = true;
    drive(&g, 1, limit_all, true, all_ended);
    assert_int_equal(g.received, g.size);
    close(greedy);
    server_stop(&server, SIGINT);
    unsigned long pauses = 0;
    const char *p = strstr(server.summary, "bytes echoed, ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "bytes echoed, %lu pauses", &pauses), 1);
    assert_true(pauses >= 1);
}

/* ---- the end of a client's data while echoes still wait ------------------ */

/* A client sends more than the server's side of the connection can hold
 * back, then closes its sending side, and only then reads: the server
 * sees the end of the data while echoes still wait in its buffer. Its
 * reading socket is invalidated after that last Data callback (as a
 * CFSocket is); the rest must still come back, then the server closes.
 * The server's connection code runs on this thread's loop, over a socket
 * pair whose server end holds little (its send buffer is small). */
static void test_end_of_data_with_echoes_waiting(void **state) {
    (void)state;
    EchoServer server = {.loop = RLRunLoopGetCurrent(), .out = stderr};
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int small = 4096, big = 1 << 20;
    assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big), 0);
    enum { TOTAL = 100000 }; /* below ECHO_HIGH_WATER: the server never stops reading */
    static uint8_t out[TOTAL], back[TOTAL];
    for (size_t k = 0; k < TOTAL; k++)
        out[k] = pattern(3, k);
    assert_int_equal(send(sv[1], out, TOTAL, MSG_NOSIGNAL), TOTAL);
    assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
    server_accept(&server, sv[0], NULL);
    assert_int_equal(server.open, 1);
    /* The server reads it all and the end before anything is read back. */
    for (int i = 0; i < 4; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
    EchoConnection *c = server_record_of(server.slots[sv[0]]);
    assert_non_null(c);
    assert_true(c->input_ended);
    assert_true(c->len > 0);
    size_t got = 0;
    bool closed = false;
    double end = rl_test_now() + 30;
    while (!closed && rl_test_now() < end) {
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
        ssize_t r;
        char extra;
        while ((r = got < TOTAL ? recv(sv[1], back + got, TOTAL - got, MSG_DONTWAIT)
                                : recv(sv[1], &extra, 1, MSG_DONTWAIT)) > 0 &&
               got < TOTAL)
            got += (size_t)r;
        assert_true(r <= 0 || got < TOTAL); /* nothing after the echoes */
        closed = r == 0;
    }
    assert_true(closed);
    assert_int_equal(got, TOTAL);
    assert_memory_equal(back, out, TOTAL);
    assert_int_equal(server.open, 0);
    assert_int_equal(server.slots[sv[0]], 0);
    free(server.slots);
    close(sv[1]);
}

/* ---- what an idle connection costs the server ----------------------------- */

/* Bytes echoed in full leave nothing behind but the connection's socket in
 * its slot: no record (the memory bench's idle-connection row counts every
 * byte). A short send makes the record; with -v every connection has one,
 * for its log lines. Both are freed when the connection closes. */
static void test_an_idle_connection_keeps_no_record(void **state) {
    (void)state;
    for (int verbose = 0; verbose < 2; verbose++) {
        FILE *devnull = fopen("/dev/null", "w");
        assert_non_null(devnull);
        EchoServer server = {.loop = RLRunLoopGetCurrent(), .out = devnull, .verbose = verbose};
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        server_accept(&server, sv[0], NULL);
        assert_int_equal(server.open, 1);
        assert_true(server.slots[sv[0]] != 0);
        assert_int_equal(send(sv[1], "x", 1, MSG_NOSIGNAL), 1);
        char back = 0;
        double end = rl_test_now() + 30;
        ssize_t r = -1;
        while (r != 1 && rl_test_now() < end) {
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
            r = recv(sv[1], &back, 1, MSG_DONTWAIT);
        }
        assert_int_equal(r, 1);
        assert_int_equal(back, 'x');
        EchoConnection *c = server_record_of(server.slots[sv[0]]);
        if (verbose) {
            assert_non_null(c);
            assert_int_equal(c->id, 1);
            assert_int_equal(c->echoed, 1);
        } else {
            assert_null(c);
            assert_ptr_equal(server_socket_of(server.slots[sv[0]]), (RLSocketRef)server.slots[sv[0]]);
        }
        assert_int_equal(server.echoed, 1);
        /* The client leaves: the server closes its end and forgets it. */
        close(sv[1]);
        end = rl_test_now() + 30;
        while (server.open > 0 && rl_test_now() < end)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
        assert_int_equal(server.open, 0);
        assert_int_equal(server.slots[sv[0]], 0);
        free(server.slots);
        fclose(devnull);
    }
}

/* ---- stopping with clients connected ------------------------------------ */

static void test_signals_stop_the_server_and_close_connections(void **state) {
    (void)state;
    int signals[2] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        int fds_before = open_fds();
        server_thread server;
        server_start(&server);
        int idle = connect_loopback(server.port, false);
        /* An echo proves the server has the connection. */
        assert_int_equal(send(idle, "x", 1, MSG_NOSIGNAL), 1);
        char c;
        assert_int_equal(recv(idle, &c, 1, 0), 1);
        server_stop(&server, signals[i]);
        assert_non_null(strstr(server.summary, i == 0 ? "on SIGINT: 1 connections served" : "on SIGTERM: 1 connections served"));
        assert_int_equal(recv(idle, &c, 1, 0), 0); /* the server closed it */
        close(idle);
        assert_int_equal(open_fds(), fds_before);
    }
}

/* ---- the client ----------------------------------------------------------- */

typedef struct feeder {
    int fd;
    const uint8_t *bytes;
    size_t len;
} feeder;

/* Writes into the client's input pipe in uneven pieces, then closes it. */
static void *feed(void *arg) {
    feeder *f = arg;
    size_t off = 0, piece = 1;
    while (off < f->len) {
        size_t n = f->len - off < piece ? f->len - off : piece;
        ssize_t r = write(f->fd, f->bytes + off, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        off += (size_t)r;
        piece = piece * 3 + 1;
        if (piece > 100000)
            piece = 7;
    }
    close(f->fd);
    return NULL;
}

/* Runs the client with input from a pipe (fed by a thread), from a regular
 * file or from /dev/null; returns its status, its output in *out. */
enum input_kind { INPUT_PIPE, INPUT_FILE, INPUT_NULL };

static int run_client(const char *host, unsigned port, enum input_kind kind, const uint8_t *bytes, size_t len,
                      char **out, size_t *out_len, char **log, size_t *log_len) {
    int in = -1;
    pthread_t t;
    feeder f = {0};
    if (kind == INPUT_PIPE) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        in = p[0];
        f = (feeder){p[1], bytes, len};
        assert_int_equal(pthread_create(&t, NULL, feed, &f), 0);
    } else if (kind == INPUT_FILE) {
        FILE *tmp = tmpfile();
        assert_non_null(tmp);
        assert_int_equal(fwrite(bytes, 1, len, tmp), len);
        assert_int_equal(fflush(tmp), 0);
        in = dup(fileno(tmp));
        fclose(tmp);
        assert_true(in >= 0);
        assert_int_equal(lseek(in, 0, SEEK_SET), 0);
    } else {
        in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(in >= 0);
    }
    FILE *o = open_memstream(out, out_len);
    FILE *l = open_memstream(log, log_len);
    assert_non_null(o);
    assert_non_null(l);
    int status = echo_client_run(host, port, in, o, l, false);
    fclose(o);
    fclose(l);
    if (kind == INPUT_PIPE)
        assert_int_equal(pthread_join(t, NULL), 0);
    close(in);
    return status;
}

static void test_client_against_the_server(void **state) {
    (void)state;
    int fds_before = open_fds();
    server_thread server;
    server_start(&server);
    size_t len = (size_t)rl_test_iters(3 << 20);
    uint8_t *bytes = malloc(len);
    assert_non_null(bytes);
    for (size_t k = 0; k < len; k++)
        bytes[k] = (k % 61 == 60) ? '\n' : (uint8_t)('a' + (k * 7) % 26);
    const char *hosts[] = {"127.0.0.1", "localhost"};
    for (int kind = INPUT_PIPE; kind <= INPUT_NULL; kind++) {
        char *out, *log;
        size_t out_len, log_len;
        int status = run_client(hosts[kind % 2], server.port, (enum input_kind)kind, bytes, len, &out, &out_len,
                                &log, &log_len);
        if (status != 0)
            fail_msg("input kind %d: status %d, log: %s", kind, status, log);
        size_t want = kind == INPUT_NULL ? 0 : len;
        assert_int_equal(out_len, want);
        assert_memory_equal(out, bytes, want);
        assert_int_equal(log_len, 0);
        free(out);
        free(log);
    }
    free(bytes);
    server_stop(&server, SIGTERM);
    assert_non_null(strstr(server.summary, "3 connections served"));
    assert_int_equal(open_fds(), fds_before);
}

/* A listening socket that takes one connection, reads a little, closes. */
typedef struct early_closer {
    int fd;
    unsigned port;
} early_closer;

static void *close_early(void *arg) {
    early_closer *e = arg;
    int c = accept(e->fd, NULL, NULL);
    if (c >= 0) {
        char buf[4];
        (void)!recv(c, buf, sizeof buf, 0);
        close(c);
    }
    return NULL;
}

static void test_client_failures(void **state) {
    (void)state;
    int fds_before = open_fds();
    static const uint8_t line[] = "hello\n";
    char *out, *log;
    size_t out_len, log_len;

    /* Nobody listens on the port. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sin;
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
    unsigned unused = ntohs(sin.sin_port); /* bound, not listening: refused */
    assert_int_equal(run_client("127.0.0.1", unused, INPUT_PIPE, line, 6, &out, &out_len, &log, &log_len), 1);
    assert_non_null(strstr(log, "cannot connect to 127.0.0.1 port"));
    assert_non_null(strstr(log, strerror(ECONNREFUSED)));
    assert_int_equal(out_len, 0);
    free(out);
    free(log);
    /* Even with nothing to send, the connection must be made. */
    assert_int_equal(run_client("127.0.0.1", unused, INPUT_NULL, NULL, 0, &out, &out_len, &log, &log_len), 1);
    assert_non_null(strstr(log, "cannot connect"));
    free(out);
    free(log);
    close(fd);

    /* A name that does not resolve (.invalid is reserved: never resolves). */
    assert_int_equal(run_client("no-such-host.invalid", 7, INPUT_PIPE, line, 6, &out, &out_len, &log, &log_len), 1);
    assert_non_null(strstr(log, "cannot connect to no-such-host.invalid port 7"));
    free(out);
    free(log);

    /* A server that closes before echoing everything. */
    early_closer e = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    sin.sin_port = 0;
    sl = sizeof sin;
    assert_int_equal(bind(e.fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(e.fd, 1), 0);
    assert_int_equal(getsockname(e.fd, (struct sockaddr *)&sin, &sl), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, close_early, &e), 0);
    int status = run_client("127.0.0.1", ntohs(sin.sin_port), INPUT_PIPE, line, 6, &out, &out_len, &log, &log_len);
    assert_int_equal(pthread_join(t, NULL), 0);
    close(e.fd);
    assert_int_equal(status, 1);
    assert_true(strstr(log, "the server closed the connection after 0 of") != NULL || strstr(log, "receiving") != NULL ||
                strstr(log, "sending") != NULL);
    free(out);
    free(log);
    assert_int_equal(open_fds(), fds_before);
}

int main(void) {
    /* Every thread of this program blocks SIGINT and SIGTERM (threads
     * inherit the mask), so that a kill() of the process reaches the
     * server's signal sources and nothing else. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* When libdispatch is in the process (the TSan build links it), the
     * main loop's first wait in a common mode makes the main dispatch
     * queue's eventfd, which the process keeps from then on, as with CF:
     * made here, before any test counts the open fds. */
    (void)RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
    signal(SIGPIPE, SIG_IGN);
    /* This thread's loop exists before any test counts descriptors. */
    (void)RLRunLoopGetCurrent();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_against_the_server),
        cmocka_unit_test(test_client_failures),
        cmocka_unit_test(test_signals_stop_the_server_and_close_connections),
        cmocka_unit_test(test_back_pressure_pauses_reading_not_the_loop),
        cmocka_unit_test(test_end_of_data_with_echoes_waiting),
        cmocka_unit_test(test_an_idle_connection_keeps_no_record),
        cmocka_unit_test(test_thousand_concurrent_connections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
