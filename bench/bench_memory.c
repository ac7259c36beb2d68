/*
 * bench_memory.c — the memory table: what one more timer, one more
 * sleeping loop thread and one more idle connection cost, as growth of the
 * process's resident set (RSS, exact: rssutil.h), ours against
 * CoreFoundation's run loop (Swift toolchain), libuv, GLib and a raw epoll
 * server. Every measurement is a fresh process (this program run again
 * with --one ROW PEER), so no peer inherits another's heap; each is run
 * BM_ROUNDS times (default 3, peers interleaved) and the table shows
 * medians, and ours against the lightest of the library peers.
 *
 *   timer   N = 100,000 one-shot timers, an hour away, added to one loop
 *   thread  N = 200 threads (64 KB stacks), each asleep in its loop with
 *           one timer
 *   thread-ur the same, ours with its loops on the io_uring backend
 *           (RL_BACKEND=io_uring in its child), against CF's: the ring's
 *           queues (a page each to start, rl_poll_uring.c) and its
 *           eventfd's registration; "refused" where the kernel refuses
 *           io_uring
 *   conn    N = 4,000 connections to an echo server (ours and CF:
 *           bench_echo's; libuv and raw epoll: here) that each echoed one
 *           byte and wait
 *   shipped the same with ours being the shipped crunloop-echo-server
 *           (examples/c/echo_server.c, bench_memory_example.c): the
 *           library's part and the server's own (CF has no such server)
 *   conn-ur the conn row's server of ours with its loop on the io_uring
 *           backend (RL_BACKEND=io_uring in its child: its streams read
 *           through the ring), against libuv's; "refused" where the
 *           kernel refuses io_uring. 259 B against the conn row's 238
 *           on epoll (2026-12-06; 303 and 263 the day before; since
 *           2026-12-07 the conn row's server loop moves to io_uring on
 *           the default backend too: 257 B, 238 with RL_BACKEND=epoll): the ring's
 *           registration of the fd, 20 B, is the difference; an idle stream holds no read-ahead queue (the
 *           ring's queues hold its chunks only while bytes wait, rl_rxq.h).
 *           368 B before, with a queue of each stream's (48 B with
 *           malloc's header) and a 56-B registration
 *
 * Each child first makes a few of the same (libraries, first slabs and
 * arenas are not counted), reads a byte of every page of the code every
 * peer maps (rl_rss_prefault_code: no code page first run meanwhile is
 * counted), reads its RSS from the page tables (not statm's approximate
 * count), makes N more, reads it again and prints
 * (after - before) / N. The connection row needs about N + 100
 * descriptors: the soft limit is raised to the hard one, and a lower hard
 * limit shrinks N (said on stderr).
 *
 *   BM_ROUNDS=1 bench_memory    BM_QUICK=1: N / 10
 *   BM_ONLY=timer,conn          BM_PEERS=ours,libuv
 *
 * Built by `make bench-memory` (mk/bench-memory.mk).
 */
#include <errno.h>
#include <glib.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <crunloop/RLRunLoop.h>

#include "bench_echo.h"
#include "bench_memory.h"
#include "bench_results.h"
#include "../Tests/c/support/rssutil.h"

enum { P_RL, P_CF, P_UV, P_GLIB, P_EPOLL, NPEERS };
static const char *peer_names[NPEERS] = {"ours", "CF", "libuv", "GLib", "epoll"};
enum { R_TIMER, R_THREAD, R_THREAD_UR, R_CONN, R_SHIPPED, R_CONN_UR, NROWS };
static const char *row_names[NROWS] = {"timer", "thread", "thread-ur", "conn", "shipped", "conn-ur"};
static const char *row_labels[NROWS] = {
    "per timer, 100,000 in one loop (B)",
    "per sleeping loop thread, one timer, 64 KB stack (B)",
    "the same thread, ours on the io_uring backend (B)",
    "per idle connection that echoed 1 byte, 4,000 (B)",
    "the same, ours: the shipped crunloop-echo-server (B)",
    "the same, ours on the io_uring backend (B)",
};
static const long row_n[NROWS] = {100000, 200, 200, 4000, 4000, 4000};
/* A child's exit status: its row's backend is refused here (thread-ur, conn-ur). */
#define BM_REFUSED 3
#define BM_STACK (64 * 1024)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- libuv and GLib: timers and loop threads -------------------------- */

static void uv_nothing(uv_timer_t *t) { (void)t; }

static int uv_add_timers(uv_loop_t *loop, long n) {
    for (long i = 0; i < n; i++) {
        uv_timer_t *t = malloc(sizeof *t);
        if (!t || uv_timer_init(loop, t) != 0 || uv_timer_start(t, uv_nothing, 3600 * 1000 + (uint64_t)i, 0) != 0)
            return -1;
    }
    return 0;
}

static int uv_timers(long n) {
    static uv_loop_t loop;
    static bool init;
    if (!init && uv_loop_init(&loop) != 0)
        return -1;
    init = true;
    return uv_add_timers(&loop, n);
}

static void *uv_thread_main(void *arg) {
    uv_loop_t *loop = malloc(sizeof *loop);
    if (!loop || uv_loop_init(loop) != 0 || uv_add_timers(loop, 1) != 0)
        return NULL;
    atomic_fetch_add((atomic_long *)arg, 1);
    uv_run(loop, UV_RUN_DEFAULT);
    return NULL;
}

static gboolean glib_nothing(gpointer p) { (void)p; return G_SOURCE_CONTINUE; }

static int glib_add_timers(GMainContext *ctx, long n) {
    for (long i = 0; i < n; i++) {
        GSource *s = g_timeout_source_new((guint)(3600 * 1000 + i));
        g_source_set_callback(s, glib_nothing, NULL, NULL);
        g_source_attach(s, ctx);
        g_source_unref(s);
    }
    return 0;
}

static int glib_timers(long n) {
    static GMainContext *ctx;
    if (!ctx) ctx = g_main_context_new();
    return glib_add_timers(ctx, n);
}

static void *glib_thread_main(void *arg) {
    GMainContext *ctx = g_main_context_new();
    g_main_context_push_thread_default(ctx);
    glib_add_timers(ctx, 1);
    GMainLoop *ml = g_main_loop_new(ctx, FALSE);
    atomic_fetch_add((atomic_long *)arg, 1);
    g_main_loop_run(ml);
    return NULL;
}

static int start_thread(void *(*fn)(void *), size_t stack, atomic_long *ready) {
    pthread_attr_t a;
    pthread_t th;
    if (pthread_attr_init(&a) != 0)
        return -1;
    int rc = pthread_attr_setstacksize(&a, stack);
    if (rc == 0) rc = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (rc == 0) rc = pthread_create(&th, &a, fn, ready);
    pthread_attr_destroy(&a);
    return rc == 0 ? 0 : -1;
}

static int uv_thread(size_t stack, atomic_long *ready) { return start_thread(uv_thread_main, stack, ready); }
static int glib_thread(size_t stack, atomic_long *ready) { return start_thread(glib_thread_main, stack, ready); }

static const bm_peer bm_peer_uv = {"libuv", uv_timers, uv_thread};
static const bm_peer bm_peer_glib = {"GLib", glib_timers, glib_thread};

/* ---- raw epoll echo server --------------------------------------------- */

typedef struct { int fd; } ep_conn;

static void *ep_main(void *arg) {
    int lfd = *(int *)arg, ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, evs[64];
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
        return NULL;
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            ep_conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    ep_conn *nc = malloc(sizeof *nc);
                    if (!nc) { close(fd); continue; }
                    nc->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = nc};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) { close(fd); free(nc); }
                }
                continue;
            }
            char buf[4096];
            ssize_t r = read(c->fd, buf, sizeof buf);
            if (r > 0) {
                if (write(c->fd, buf, (size_t)r) < 0) {}
            } else if (r == 0 || errno != EAGAIN) {
                close(c->fd);
                free(c);
            }
        }
    }
    return NULL;
}

static int ep_start(unsigned *port) {
    static int lfd;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(lfd, 1024) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &len) != 0)
        return -1;
    *port = ntohs(sin.sin_port);
    pthread_t th;
    return pthread_create(&th, NULL, ep_main, &lfd) == 0 ? 0 : -1;
}

/* ---- a lean libuv echo server ------------------------------------------ */
/* bench_echo_uv.c's server keeps a read buffer in every connection (for
 * throughput); libuv's own idiom, measured here, is one buffer the loop
 * lends to each read: a connection is its uv_tcp_t. */

static char lu_buf[64 * 1024];

static void lu_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h, (void)suggested;
    *buf = uv_buf_init(lu_buf, sizeof lu_buf);
}

static void lu_free(uv_handle_t *h) { free(h); }

static void lu_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    if (nread > 0) {
        uv_buf_t b = uv_buf_init(buf->base, (unsigned)nread);
        if (uv_try_write(s, &b, 1) != nread) uv_close((uv_handle_t *)s, lu_free);
    } else if (nread < 0) {
        uv_close((uv_handle_t *)s, lu_free);
    }
}

static void lu_conn(uv_stream_t *l, int status) {
    uv_tcp_t *c = malloc(sizeof *c);
    if (status < 0 || !c) { free(c); return; }
    uv_tcp_init(l->loop, c);
    if (uv_accept(l, (uv_stream_t *)c) != 0 || uv_read_start((uv_stream_t *)c, lu_alloc, lu_read) != 0)
        uv_close((uv_handle_t *)c, lu_free);
}

static void *lu_main(void *arg) {
    uv_run(arg, UV_RUN_DEFAULT);
    return NULL;
}

static int lu_start(unsigned *port) {
    static uv_loop_t loop;
    static uv_tcp_t server;
    struct sockaddr_in sin;
    int len = sizeof sin;
    uv_ip4_addr("127.0.0.1", 0, &sin);
    if (uv_loop_init(&loop) != 0 || uv_tcp_init(&loop, &server) != 0 ||
        uv_tcp_bind(&server, (struct sockaddr *)&sin, 0) != 0 || uv_listen((uv_stream_t *)&server, 1024, lu_conn) != 0 ||
        uv_tcp_getsockname(&server, (struct sockaddr *)&sin, &len) != 0)
        return -1;
    *port = ntohs(sin.sin_port);
    pthread_t th;
    return pthread_create(&th, NULL, lu_main, &loop) == 0 ? 0 : -1;
}

/* ---- the measurements (one child each) -------------------------------- */

static const bm_peer *loop_peer(int p) {
    switch (p) {
    case P_RL: return &bm_peer_rl;
    case P_CF: return &bm_peer_cf;
    case P_UV: return &bm_peer_uv;
    case P_GLIB: return &bm_peer_glib;
    default: return NULL;
    }
}

static const bec_peer *echo_peer(int p) {
    switch (p) {
    case P_RL: return &bec_peer_rl;
    case P_CF: return &bec_peer_cf;
    default: return NULL;
    }
}

static int measure_timers(const bm_peer *pe, long n, double *out) {
    if (pe->timers(1000) != 0)
        return -1;
    rl_rss_prefault_code();
    long r0 = rl_rss_bytes();
    if (pe->timers(n) != 0)
        return -1;
    *out = (double)(rl_rss_bytes() - r0) / (double)n;
    return 0;
}

static int wait_ready(atomic_long *ready, long want) {
    for (int i = 0; i < 20000 && atomic_load(ready) < want; i++) sleep_ms(1);
    if (atomic_load(ready) < want)
        return -1;
    sleep_ms(200); /* into their waits */
    return 0;
}

static int measure_threads(const bm_peer *pe, long n, double *out) {
    static atomic_long ready;
    for (int i = 0; i < 4; i++)
        if (pe->thread(BM_STACK, &ready) != 0)
            return -1;
    if (wait_ready(&ready, 4) != 0)
        return -1;
    rl_rss_prefault_code();
    long r0 = rl_rss_bytes();
    for (long i = 0; i < n; i++)
        if (pe->thread(BM_STACK, &ready) != 0)
            return -1;
    if (wait_ready(&ready, 4 + n) != 0)
        return -1;
    *out = (double)(rl_rss_bytes() - r0) / (double)n;
    return 0;
}

/* The client process: for each count read from cmd, that many blocking
 * connections that each send a byte and read it back, kept open; then the
 * count (or -1) written to ack. Plain system calls only (forked from a
 * threaded process). */
static void client_main(unsigned port, int cmd, int ack) {
    long n;
    while (read(cmd, &n, sizeof n) == (ssize_t)sizeof n) {
        long ok = n;
        for (long i = 0; i < n; i++) {
            int fd = bec_connect(port, false);
            char c = 'x';
            if (fd < 0 || write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1) {
                ok = -1;
                break;
            }
        }
        if (write(ack, &ok, sizeof ok) != (ssize_t)sizeof ok)
            _exit(1);
    }
    _exit(0);
}

static int connect_n(int cmd, int ack, long n) {
    long got;
    if (write(cmd, &n, sizeof n) != (ssize_t)sizeof n || read(ack, &got, sizeof got) != (ssize_t)sizeof got)
        return -1;
    return got == n ? 0 : -1;
}

/* The rows of ours on io_uring: RL_BACKEND is read as each loop is made
 * (before any thread of the child runs); this thread's loop says whether
 * the kernel lets loops have a ring. 0, or BM_REFUSED (said on stderr). */
static int use_uring(int r) {
    setenv("RL_BACKEND", "io_uring", 1);
    const char *b = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    if (b && strcmp(b, "io_uring") == 0)
        return 0;
    fprintf(stderr, "bench_memory: io_uring refused here (loops on %s): no %s row\n", b ? b : "no backend",
            row_names[r]);
    return BM_REFUSED;
}

static int measure_conns(int r, int p, long n, double *out) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 128) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {}
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 128) {
            if (rl.rlim_cur < 228) {
                fprintf(stderr, "bench_memory: descriptor limit %ld is too low for the connection row\n",
                        (long)rl.rlim_cur);
                return -1;
            }
            fprintf(stderr, "bench_memory: descriptor limit %ld: %ld connections instead of %ld\n",
                    (long)rl.rlim_cur, (long)rl.rlim_cur - 128, n);
            n = (long)rl.rlim_cur - 128;
        }
    }
    unsigned port = 0;
    char note[256] = "";
    if (p == P_EPOLL || p == P_UV) {
        if ((p == P_EPOLL ? ep_start(&port) : lu_start(&port)) != 0)
            return -1;
    } else if (r == R_SHIPPED) {
        if (bm_example_start(&port) != 0) {
            fprintf(stderr, "bench_memory: the shipped echo server did not start\n");
            return -1;
        }
    } else {
        if (r == R_CONN_UR && use_uring(r) != 0)
            return BM_REFUSED;
        const bec_peer *pe = echo_peer(p);
        if (!pe || !pe->start(&port, note)) {
            fprintf(stderr, "bench_memory: %s server: %s\n", peer_names[p], note);
            return -1;
        }
    }
    int cmd[2], ack[2];
    if (pipe(cmd) != 0 || pipe(ack) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(cmd[1]);
        close(ack[0]);
        client_main(port, cmd[0], ack[1]);
    }
    close(cmd[0]);
    close(ack[1]);
    int rc = -1;
    if (connect_n(cmd[1], ack[0], 16) == 0) {
        sleep_ms(100);
        rl_rss_prefault_code();
        long r0 = rl_rss_bytes();
        if (connect_n(cmd[1], ack[0], n) == 0) {
            sleep_ms(200);
            *out = (double)(rl_rss_bytes() - r0) / (double)n;
            rc = 0;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return rc;
}

static int child(const char *row, const char *peer, long n) {
    int r = -1, p = -1;
    for (int i = 0; i < NROWS; i++) if (!strcmp(row, row_names[i])) r = i;
    for (int i = 0; i < NPEERS; i++) if (!strcmp(peer, peer_names[i])) p = i;
    if (r < 0 || p < 0)
        return 2;
    alarm(120);
    double v = NAN;
    int rc = -1;
    if (r == R_CONN || r == R_SHIPPED || r == R_CONN_UR) {
        rc = measure_conns(r, p, n, &v);
        if (rc == BM_REFUSED)
            _exit(BM_REFUSED);
    } else if (r == R_THREAD_UR && p == P_RL && use_uring(r) != 0) {
        _exit(BM_REFUSED);
    } else if (loop_peer(p)) {
        rc = r == R_TIMER ? measure_timers(loop_peer(p), n, &v) : measure_threads(loop_peer(p), n, &v);
    }
    if (rc == 0)
        printf("%.1f\n", v);
    fflush(stdout);
    _exit(rc == 0 ? 0 : 1); /* threads still run: no exit handlers */
}

/* ---- the driver ------------------------------------------------------- */

static bool applies(int r, int p) {
    if (r == R_CONN) return p != P_GLIB;
    if (r == R_SHIPPED) return p == P_RL || p == P_UV || p == P_EPOLL;
    if (r == R_CONN_UR) return p == P_RL || p == P_UV;
    if (r == R_THREAD_UR) return p == P_RL || p == P_CF; /* the lightest peer of the thread row */
    return p != P_EPOLL;
}

static bool listed(const char *env, const char *name) {
    const char *s = getenv(env);
    if (!s || !*s) return true;
    size_t len = strlen(name);
    for (const char *q = s; (q = strcasestr(q, name)); q += len)
        if ((q == s || q[-1] == ',') && (q[len] == ',' || q[len] == 0)) return true;
    return false;
}

/* Set by run_child: a child found its row's backend refused. */
static bool bm_refused;

/* One fresh process: this program with --one; NaN if it failed (or was
 * refused: bm_refused). */
static double run_child(const char *self, int r, int p, long n) {
    int fds[2];
    if (pipe(fds) != 0)
        return NAN;
    char nbuf[32];
    snprintf(nbuf, sizeof nbuf, "%ld", n);
    pid_t pid = fork();
    if (pid < 0)
        return NAN;
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(self, self, "--one", row_names[r], peer_names[p], nbuf, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    ssize_t got = 0, k;
    while (got < (ssize_t)sizeof buf - 1 && (k = read(fds[0], buf + got, sizeof buf - 1 - (size_t)got)) > 0) got += k;
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == BM_REFUSED)
        bm_refused = true;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || got == 0)
        return NAN;
    return strtod(buf, NULL);
}

static double median(double *v, int n) {
    double w[64];
    int k = 0;
    for (int i = 0; i < n; i++) if (isfinite(v[i])) w[k++] = v[i];
    if (!k) return NAN;
    qsort(w, (size_t)k, sizeof w[0], bench_results_cmp);
    return k % 2 ? w[k / 2] : (w[k / 2 - 1] + w[k / 2]) / 2;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--one"))
        return child(argv[2], argv[3], atol(argv[4]));
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        perror("/proc/self/exe");
        return 1;
    }
    self[len] = 0;
    int rounds = getenv("BM_ROUNDS") ? atoi(getenv("BM_ROUNDS")) : 3;
    if (rounds < 1 || rounds > 64) rounds = 3;
    bool quick = getenv("BM_QUICK") && *getenv("BM_QUICK") && strcmp(getenv("BM_QUICK"), "0");
    FILE *csv = bench_results_open();
    printf("memory: RSS growth per item, median of %d fresh processes (bytes)\n", rounds);
    printf("%-54s %9s %9s %9s %9s %9s   %s\n", "", "ours", "CF", "libuv", "GLib", "epoll", "ours / lightest library");
    int failures = 0;
    for (int r = 0; r < NROWS; r++) {
        if (!listed("BM_ONLY", row_names[r]))
            continue;
        long n = quick ? row_n[r] / 10 : row_n[r];
        double v[NPEERS][64], med[NPEERS];
        bool on[NPEERS];
        for (int p = 0; p < NPEERS; p++) on[p] = p == P_RL || listed("BM_PEERS", peer_names[p]);
        bm_refused = false;
        for (int i = 0; i < rounds; i++)
            for (int k = 0; k < NPEERS; k++) {
                int p = (k + i) % NPEERS;
                v[p][i] = applies(r, p) && on[p] && !(p == P_RL && bm_refused) ? run_child(self, r, p, n) : NAN;
                if (applies(r, p) && on[p] && isnan(v[p][i]) && !(p == P_RL && bm_refused))
                    failures++;
            }
        printf("%-54s", row_labels[r]);
        int light = -1;
        for (int p = 0; p < NPEERS; p++) {
            med[p] = median(v[p], rounds);
            if (isnan(med[p])) printf(" %9s", !applies(r, p) ? "n/a" : p == P_RL && bm_refused ? "refused" : on[p] ? "failed" : "-");
            else printf(" %9.0f", med[p]);
            if (p != P_RL && p != P_EPOLL && isfinite(med[p]) && (light < 0 || med[p] < med[light])) light = p;
        }
        if (light >= 0 && isfinite(med[P_RL]))
            printf("   %.2fx %s\n", med[P_RL] / med[light], peer_names[light]);
        else
            printf("   n/a\n");
        for (int p = 1; p < NPEERS; p++) {
            if (!applies(r, p) || !on[p]) continue;
            double ratios[64];
            for (int i = 0; i < rounds; i++) ratios[i] = v[P_RL][i] / v[p][i];
            bench_results_row(csv, "memory", row_labels[r], peer_names[p], ratios, rounds, med[P_RL], med[p], "B");
        }
        fflush(stdout);
    }
    printf("[RSS growth of a fresh process over N more after a few; GLib has no echo server here; "
           "epoll: a raw epoll server with a malloc'd 4-byte record per connection;\n"
           " the io_uring rows: ours's loops on that backend, a connection's stream read through the ring]\n");
    bench_results_close(csv);
    return failures ? 1 : 0;
}
